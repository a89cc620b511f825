/// The one error type of the DocStore module.
///
/// Every failure carries a ``code`` that callers can switch on, a human ``reason``, and where one
/// exists the underlying ``cause`` (for example the SQLite error). The CouchDB error name
/// (``couchDBError``) and HTTP status (``httpStatus``) are derived from the code, so the server and the
/// replicator speak the same words as CouchDB (`not_found`, `conflict`, `bad_request`, …).
///
/// ```swift
/// do {
///     try await db.update(staleCopy)
/// } catch let error as DocStoreError where error.code == .conflict {
///     // fetch the current revision and merge
/// }
/// ```
public struct DocStoreError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong, as a value that can be extended without breaking `switch` statements.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        let name: String
        package let couchDB: String
        let status: Int

        private init(_ name: String, couchDB: String, status: Int) {
            self.name = name
            self.couchDB = couchDB
            self.status = status
        }

        /// The document, revision, attachment or database does not exist.
        public static let notFound = Code("notFound", couchDB: "not_found", status: 404)
        /// The write names a revision that is not the current leaf, or omits it for an existing document.
        public static let conflict = Code("conflict", couchDB: "conflict", status: 409)
        /// Text is not valid JSON; ``DocStoreError/byteOffset`` tells where.
        public static let invalidJSON = Code("invalidJSON", couchDB: "bad_request", status: 400)
        /// A document id is empty, reserved (begins with `_`) or not valid UTF-8 text.
        public static let invalidDocumentID = Code("invalidDocumentID", couchDB: "illegal_docid", status: 400)
        /// A revision id is not of the form `N-hash`, or a revision history is inconsistent.
        public static let invalidRevision = Code("invalidRevision", couchDB: "bad_request", status: 400)
        /// A document body is not acceptable (reserved `_` member, not an object, …).
        public static let invalidDocument = Code("invalidDocument", couchDB: "doc_validation", status: 400)
        /// An attachment is malformed (bad base64, invalid gzip data, a length that does not match).
        public static let invalidAttachment = Code("invalidAttachment", couchDB: "bad_request", status: 400)
        /// An attachment stub names no attachment of the revision the write is based on (or a different
        /// `revpos`), as CouchDB's `missing_stub`.
        public static let missingStub = Code("missingStub", couchDB: "missing_stub", status: 412)
        /// An attachment's bytes do not have the MD5 digest they were sent with.
        public static let digestMismatch = Code("digestMismatch", couchDB: "content_md5_mismatch", status: 400)
        /// A document's JSON is larger than the limit set for it.
        public static let documentTooLarge = Code("documentTooLarge", couchDB: "too_large", status: 413)
        /// An attachment is larger than the limit set for it.
        public static let attachmentTooLarge = Code("attachmentTooLarge", couchDB: "attachment_too_large", status: 413)
        /// A request argument is out of range or malformed.
        public static let badRequest = Code("badRequest", couchDB: "bad_request", status: 400)
        /// The database file is already open in this process with other settings (see
        /// ``Database/open(_:)``).
        public static let configurationMismatch = Code("configurationMismatch", couchDB: "bad_request", status: 400)
        /// The database has been closed.
        public static let databaseClosed = Code("databaseClosed", couchDB: "not_found", status: 404)
        /// The file is not a DocStore database (another SQLite database, or not SQLite at all).
        public static let notADocStoreDatabase = Code("notADocStoreDatabase", couchDB: "bad_request", status: 400)
        /// The file was written by a newer version of DocStore.
        public static let incompatibleVersion = Code("incompatibleVersion", couchDB: "bad_request", status: 400)
        /// Another connection (often another process) held the database file's write lock longer than
        /// the busy timeout (10 s), or a read met a lock it does not wait for; nothing was written.
        /// Worth retrying.
        public static let databaseLocked = Code("databaseLocked", couchDB: "service_unavailable", status: 503)
        /// SQLite reported an error; ``DocStoreError/cause`` holds it.
        public static let storage = Code("storage", couchDB: "internal_server_error", status: 500)
        /// The disk holding the database is full, or the file reached
        /// ``DatabaseConfiguration/maximumFileSize``. The write failed whole and nothing committed was
        /// lost; once there is room, the same database takes writes again.
        public static let diskFull = Code("diskFull", couchDB: "insufficient_storage", status: 507)
        /// A file could not be read or written.
        public static let io = Code("io", couchDB: "internal_server_error", status: 500)
        /// Query options that contradict each other or the index (CouchDB `query_parse_error`).
        public static let invalidQuery = Code("invalidQuery", couchDB: "query_parse_error", status: 400)
        /// A selector uses an operator that does not exist (CouchDB `invalid_operator`).
        public static let invalidOperator = Code("invalidOperator", couchDB: "invalid_operator", status: 400)
        /// A selector operator has an argument of the wrong kind (CouchDB `bad_arg`).
        public static let badArgument = Code("badArgument", couchDB: "bad_arg", status: 400)
        /// A selector condition has no field name (CouchDB `invalid_selector`).
        public static let invalidSelector = Code("invalidSelector", couchDB: "invalid_selector", status: 400)
        /// A selector is not a JSON object (CouchDB `invalid_selector_json`).
        public static let invalidSelectorJSON = Code("invalidSelectorJSON", couchDB: "invalid_selector_json", status: 400)
        /// A selector cannot be normalised, e.g. `$default` used as a field (CouchDB `bad_field`).
        public static let badField = Code("badField", couchDB: "bad_field", status: 400)
        /// A field path has an empty component, such as `"a..b"` (CouchDB `invalid_field_name`).
        public static let invalidFieldName = Code("invalidFieldName", couchDB: "invalid_field_name", status: 400)
        /// A selector uses an operator CouchDB knows but does not support (`$where`, `$near`, …; CouchDB
        /// `not_supported`).
        public static let unsupportedOperator = Code("unsupportedOperator", couchDB: "not_supported", status: 400)
        /// Sort fields (or a Mango index's fields) in both directions (CouchDB `unsupported_mixed_sort`).
        public static let unsupportedMixedSort = Code("unsupportedMixedSort", couchDB: "unsupported_mixed_sort", status: 400)
        /// A Mango index definition cannot be used (CouchDB `invalid_index`).
        public static let invalidIndex = Code("invalidIndex", couchDB: "invalid_index", status: 400)
        /// A sort (or index field list) is not an array (CouchDB `invalid_sort_json`).
        public static let invalidSortJSON = Code("invalidSortJSON", couchDB: "invalid_sort_json", status: 400)
        /// A sort entry is neither a path nor `{"path": "asc"|"desc"}` (CouchDB `invalid_sort_field`).
        public static let invalidSortField = Code("invalidSortField", couchDB: "invalid_sort_field", status: 400)
        /// A request lacks a member it needs (CouchDB `missing_required_key`).
        public static let missingRequiredKey = Code("missingRequiredKey", couchDB: "missing_required_key", status: 400)
        /// A request member that must be a string is not (CouchDB `invalid_string`).
        public static let invalidString = Code("invalidString", couchDB: "invalid_string", status: 400)
        /// A request has a member it does not take (CouchDB `invalid_key`).
        public static let invalidKey = Code("invalidKey", couchDB: "invalid_key", status: 400)
        /// No index can give a Mango query's sort (CouchDB `no_usable_index`).
        public static let noUsableIndex = Code("noUsableIndex", couchDB: "no_usable_index", status: 400)
        /// A Mango bookmark that this database did not hand out (CouchDB `invalid_bookmark`).
        public static let invalidBookmark = Code("invalidBookmark", couchDB: "invalid_bookmark", status: 400)
        /// A count that must be a non-negative integer is not (CouchDB `invalid_non_neg_integer`).
        public static let invalidNonNegativeInteger = Code("invalidNonNegativeInteger", couchDB: "invalid_non_neg_integer", status: 400)
        /// A count that must be a positive integer is not (CouchDB `invalid_pos_integer`, for `_find`'s `r`).
        public static let invalidPositiveInteger = Code("invalidPositiveInteger", couchDB: "invalid_pos_integer", status: 400)
        /// A flag that must be a boolean is not (CouchDB `invalid_boolean`).
        public static let invalidBoolean = Code("invalidBoolean", couchDB: "invalid_boolean", status: 400)
        /// `fields` is not an array (CouchDB `invalid_fields`).
        public static let invalidFields = Code("invalidFields", couchDB: "invalid_fields", status: 400)
        /// An entry of `fields` is not a string (CouchDB `invalid_field`).
        public static let invalidField = Code("invalidField", couchDB: "invalid_field", status: 400)
        /// A built-in reduce met values it cannot reduce, or a custom reduce function threw.
        public static let reduceFailure = Code("reduceFailure", couchDB: "builtin_reduce_error", status: 400)
        /// Full-text search was asked of a SQLite library built without FTS5 (checked when the index
        /// file opens; only full-text indexes and searches fail).
        public static let fullTextUnavailable = Code("fullTextUnavailable", couchDB: "index_service_unavailable", status: 503)
        /// A full-text search was asked of an index that holds no full-text keys, or of a Mango index that
        /// is not a text index.
        public static let notAFullTextIndex = Code("notAFullTextIndex", couchDB: "bad_request", status: 400)
        /// A document cannot be read as a ``Model`` type: it belongs to another collection, or a member
        /// does not decode (``DocStoreError/reason`` names the member).
        public static let invalidModel = Code("invalidModel", couchDB: "bad_request", status: 400)
        /// An import file is not valid: ``DocStoreError/reason`` names the line (NDJSON) or the element
        /// (JSON array) and ``DocStoreError/byteOffset`` the byte in the file.
        public static let invalidImport = Code("invalidImport", couchDB: "bad_request", status: 400)
        /// An index map function failed.
        public static let indexFailure = Code("indexFailure", couchDB: "index_failure", status: 500)
        /// A write was refused by a validation function (CouchDB's `validate_doc_update` throwing
        /// `{forbidden: …}`), or by the server's access rules.
        public static let forbidden = Code("forbidden", couchDB: "forbidden", status: 403)
        /// A write was refused by a validation function throwing `{unauthorized: …}`: the user must
        /// authenticate (or be someone else).
        public static let unauthorized = Code("unauthorized", couchDB: "unauthorized", status: 401)
        /// A design document's function does not compile (CouchDB `compilation_error`).
        public static let compilationError = Code("compilationError", couchDB: "compilation_error", status: 400)
        /// A design document's `require()` names a module that is not there (CouchDB `invalid_require_path`).
        public static let invalidRequirePath = Code("invalidRequirePath", couchDB: "invalid_require_path", status: 500)
        /// A design document's function failed when it ran (CouchDB `os_process_error`).
        public static let scriptFailure = Code("scriptFailure", couchDB: "os_process_error", status: 500)
        /// A design document's function ran over its time limit, or grew the memory past its bound,
        /// and was stopped (CouchDB answers `os_process_error` for its `os_process_timeout` and for a
        /// JavaScript process out of memory).
        public static let scriptTimeout = Code("scriptTimeout", couchDB: "os_process_error", status: 500)
        /// A show or list function provides no format the request's `Accept` takes (CouchDB
        /// `not_acceptable`, 406).
        public static let notAcceptable = Code("notAcceptable", couchDB: "not_acceptable", status: 406)
        /// A show or list function answered with something CouchDB cannot send (CouchDB `render_error`).
        public static let renderError = Code("renderError", couchDB: "render_error", status: 500)
        /// A validation function threw something other than `{forbidden}` or `{unauthorized}` (CouchDB
        /// `unknown_error`).
        public static let unknownError = Code("unknownError", couchDB: "unknown_error", status: 500)
        /// A design document is malformed: an unknown `language`, a view without `map`, a function that
        /// is not a string (CouchDB `invalid_design_doc`).
        public static let invalidDesignDocument = Code("invalidDesignDocument", couchDB: "invalid_design_doc", status: 400)
        /// A design document's functions are in a language no query server here runs (JavaScript is the
        /// only one); the reason is the language's name, as CouchDB's `unknown_query_language`.
        public static let unknownQueryLanguage = Code("unknownQueryLanguage", couchDB: "unknown_query_language", status: 500)

        public var description: String { name }
    }

    /// What went wrong.
    public var code: Code
    /// A sentence for humans.
    public var reason: String
    /// For ``Code/invalidJSON``: the byte offset of the first problem in the input.
    public var byteOffset: Int?
    /// The underlying error, if any (for example SQLite's error, with its result code).
    public var cause: (any Error)?
    /// For a failed all-or-nothing batch (the typed model operations, ``Database/importDocuments(from:progress:)``):
    /// the position of the item that failed, counted from 0; nothing of the batch was written.
    public var itemIndex: Int?
    /// For a failed all-or-nothing batch: the id of the document that failed, when it has one.
    public var documentID: String?

    /// Creates an error.
    public init(_ code: Code, _ reason: String, byteOffset: Int? = nil, cause: (any Error)? = nil) {
        self.code = code
        self.reason = reason
        self.byteOffset = byteOffset
        self.cause = cause
    }

    /// The CouchDB error name, e.g. `"not_found"` or `"conflict"`.
    public var couchDBError: String { errorName ?? code.couchDB }

    /// The CouchDB error name when it is not the code's: an error a design document's function
    /// raised itself (`["error", "name", "reason"]`, `throw({name: reason})`) keeps its name.
    package var errorName: String?

    /// The HTTP status CouchDB answers with for this error.
    public var httpStatus: Int { code.status }

    public var description: String {
        var text = "\(code): \(reason)"
        if let itemIndex { text += " [item \(itemIndex)" + (documentID.map { ", id \($0)" } ?? "") + "]" }
        if let cause { text += " (\(cause))" }
        return text
    }

    /// This error, naming the item of a batch it happened to.
    func naming(item index: Int, id: String?) -> DocStoreError {
        var error = self
        error.itemIndex = index
        error.documentID = id.flatMap { $0.isEmpty ? nil : $0 }
        return error
    }

    public static func == (lhs: DocStoreError, rhs: DocStoreError) -> Bool {
        lhs.code == rhs.code && lhs.reason == rhs.reason && lhs.byteOffset == rhs.byteOffset
            && lhs.itemIndex == rhs.itemIndex && lhs.documentID == rhs.documentID
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(code)
        hasher.combine(reason)
    }
}

extension DocStoreError {
    static func notFound(_ reason: String = "missing") -> DocStoreError { DocStoreError(.notFound, reason) }
    static func conflict(_ reason: String = "Document update conflict.") -> DocStoreError {
        DocStoreError(.conflict, reason)
    }
}
