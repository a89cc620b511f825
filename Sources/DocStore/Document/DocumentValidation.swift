/// Rules for document ids and bodies, as CouchDB applies them.
package enum DocumentValidation {
    /// Checks an id: non-empty, and not beginning with `_` except `_design/` ids where allowed
    /// (replication may carry CouchDB design documents).
    package static func validateID(_ id: String, allowDesign: Bool) throws {
        guard !id.isEmpty else {
            throw DocStoreError(.invalidDocumentID, "Document id must not be empty")
        }
        if id.utf8.first == UInt8(ascii: "_") {
            if allowDesign && id.hasPrefix("_design/") && id.utf8.count > 8 { return }
            throw DocStoreError(.invalidDocumentID,
                                "Only reserved document ids may start with underscore.")
        }
    }

    /// The `_` members CouchDB accepts in any document: the state its replicator writes into
    /// `_replicator` documents (which replicate like any other).
    package static let replicationStateMembers: Set<String> = [
        "_replication_state", "_replication_state_time", "_replication_state_reason", "_replication_id", "_replication_stats",
    ]

    /// Checks that no body member name begins with `_` (reserved for CouchDB metadata), but for
    /// ``replicationStateMembers``.
    package static func validateBody(_ body: JSONObject) throws {
        // A body read from a database passed this check when it was stored.
        if body.storedJSON != nil { return }
        for (key, _) in body where key.utf8.first == UInt8(ascii: "_") && !replicationStateMembers.contains(key) {
            throw DocStoreError(.invalidDocument, "Bad special document member: \(key)")
        }
    }
}
