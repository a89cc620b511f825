/// CouchDB's JSON shapes for DocStore's results, shared by the command-line tool and the server.

extension SaveResult {
    /// One row of a `_bulk_docs` answer: `{"ok":true,"id":…,"rev":…}` or
    /// `{"id":…,"error":…,"reason":…}`.
    public var couchDBJSON: JSON {
        switch result {
        case .success(let document):
            return ["ok": true, "id": .string(document.id), "rev": JSON(document.revision?.description ?? "")]
        case .failure(let error):
            return ["id": .string(id), "error": .string(error.couchDBError), "reason": .string(error.reason)]
        }
    }
}

extension Document {
    /// The answer to a document write: `{"ok":true,"id":…,"rev":…}`.
    public var writeResultJSON: JSON {
        ["ok": true, "id": .string(id), "rev": JSON(revision?.description ?? "")]
    }
}

extension AllDocumentsRow {
    /// One `_all_docs` row: `{"id","key","value":{"rev","deleted"?},"doc"?}` or `{"key","error"}`.
    public func couchDBJSON(includeDocuments: Bool) -> JSON {
        if let error {
            return ["key": .string(id), "error": .string(error)]
        }
        var value: JSONObject = ["rev": JSON(revision?.description ?? "")]
        if isDeleted { value["deleted"] = true }
        var object: JSONObject = ["id": .string(id), "key": .string(id), "value": .object(value)]
        if includeDocuments { object["doc"] = document?.json() ?? .null }
        return .object(object)
    }
}

extension AllDocumentsResult {
    /// The `_all_docs` answer: `{"total_rows":…,"offset":…,"rows":[…]}`.
    public func couchDBJSON(includeDocuments: Bool) -> JSON {
        ["total_rows": .integer(totalRows), "offset": .integer(offset),
         "rows": .array(rows.map { $0.couchDBJSON(includeDocuments: includeDocuments) })]
    }
}

extension Change {
    /// One `_changes` row: `{"seq","id","changes":[{"rev"}],"deleted"?,"doc"?}`; with `allLeaves`
    /// (`style=all_docs`) every leaf revision is listed, otherwise only the winner.
    public func couchDBJSON(allLeaves: Bool) -> JSON {
        let revisions = allLeaves ? leafRevisions : [revision]
        var object: JSONObject = [
            "seq": .integer(Int(sequence)), "id": .string(id),
            "changes": .array(revisions.map { ["rev": .string($0.description)] }),
        ]
        if isDeleted { object["deleted"] = true }
        if let document { object["doc"] = document.json() }
        return .object(object)
    }
}

extension ChangesPage {
    /// The `_changes` answer: `{"results":[…],"last_seq":…,"pending":…}`.
    public func couchDBJSON(allLeaves: Bool, pending: Int64 = 0) -> JSON {
        ["results": .array(changes.map { $0.couchDBJSON(allLeaves: allLeaves) }),
         "last_seq": .integer(Int(lastSequence)), "pending": .integer(Int(pending))]
    }
}

extension DatabaseInfo {
    /// The `GET /db` answer.
    public var couchDBJSON: JSON {
        ["db_name": .string(name), "update_seq": .integer(Int(updateSequence)), "doc_count": .integer(documentCount),
         "doc_del_count": .integer(deletedDocumentCount), "sizes": ["file": .integer(fileSize)],
         "purge_seq": 0, "compact_running": false, "instance_start_time": "0", "uuid": .string(uuid)]
    }
}
