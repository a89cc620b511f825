// The helpers every test target shares (temporary databases, error assertions) live in TestSupport.
@_exported import TestSupport
