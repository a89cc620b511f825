import DocStore

/// One row of a view or `_all_docs` answer: `{"id"?,"key","value","doc"?}`, or for a key of
/// `_all_docs` without a document `{"key","error"}`.
package struct ViewRow: Sendable, Hashable {
    /// The emitting document; absent from reduced rows and error rows.
    package var id: String?
    package var key: JSON
    package var value: JSON
    /// The document (`include_docs=true`); `.null` when it is included but there is none.
    package var document: JSON?
    /// `not_found` for an `_all_docs` key with no document; a reduce error (`reduce_overflow_error`).
    package var error: String?
    /// The reason of a reduce row's ``error``, written after it.
    package var reason: String?

    package init(id: String?, key: JSON, value: JSON, document: JSON? = nil, error: String? = nil) {
        self.id = id
        self.key = key
        self.value = value
        self.document = document
        self.error = error
    }

    /// An `_all_docs` row: the value is `{"rev","deleted"?}`.
    package init(_ row: AllDocumentsRow, includeDocuments: Bool) {
        if let error = row.error {
            self.init(id: nil, key: .string(row.id), value: .null, error: error)
            return
        }
        self.init(id: row.id, revision: row.revision?.description ?? "", deleted: row.isDeleted,
                  document: ViewRow.included(row.document, includeDocuments))
    }

    /// An `_all_docs` row of a document at `revision`.
    package init(id: String, revision: String, deleted: Bool = false, document: JSON? = nil) {
        var value: JSONObject = [Keys.rev: .string(revision)]
        if deleted { value[Keys.deleted] = true }
        self.init(id: id, key: .string(id), value: .object(value), document: document)
    }

    /// A row of an index query.
    package init(_ row: QueryRow, includeDocuments: Bool) {
        self.init(id: row.documentID, key: row.key, value: row.value,
                  document: ViewRow.included(row.document, includeDocuments))
    }

    /// The `doc` member: absent unless asked for, `null` when asked for and there is none. (Spelled out,
    /// since `nil` in a `JSON` context is `JSON.null`.)
    private static func included(_ document: Document?, _ include: Bool) -> JSON? {
        guard include else { return Optional<JSON>.none }
        return document?.json() ?? .null
    }

    package init(json: JSON) throws {
        guard case .object(let object) = json, let key = object[Keys.key] else {
            throw DocStoreError(.badRequest, "A view row needs a key: \(json.description.prefix(200))")
        }
        self.init(id: object[Keys.id]?.stringValue, key: key, value: object[Keys.value] ?? .null,
                  document: object[Keys.doc], error: object[Keys.error]?.stringValue)
    }

    package var json: JSON {
        if let error {
            if let reason { return [Keys.key: key, Keys.error: .string(error), "reason": .string(reason)] }
            return [Keys.key: key, Keys.error: .string(error)]
        }
        var object = JSONObject()
        if let id { object[Keys.id] = .string(id) }
        object[Keys.key] = key
        object[Keys.value] = value
        if let document { object[Keys.doc] = document }
        return .object(object)
    }

    /// Writes the row as ``json`` serializes, without building it.
    package func write(to writer: inout JSONWriter) throws {
        if let error {
            writer.append("{\"key\":")
            try writer.write(key)
            writer.append(",\"error\":")
            writer.writeString(error)
            if let reason {
                writer.append(",\"reason\":")
                writer.writeString(reason)
            }
            writer.append("}")
            return
        }
        if let id {
            writer.append("{\"id\":")
            writer.writeString(id)
            writer.append(",\"key\":")
        } else {
            writer.append("{\"key\":")
        }
        try writer.write(key)
        writer.append(",\"value\":")
        try writer.write(value)
        if let document {
            writer.append(",\"doc\":")
            try writer.write(document)
        }
        writer.append("}")
    }

    /// The revision of an `_all_docs` row.
    package var revision: String? { value[Keys.rev]?.stringValue }

    enum Keys {
        static let id = "id"
        static let key = "key"
        static let value = "value"
        static let doc = "doc"
        static let error = "error"
        static let rev = "rev"
        static let deleted = "deleted"
    }
}

/// A view or `_all_docs` answer: `{"total_rows","offset","rows":[…],"update_seq"?}` (reduced answers
/// have only `rows`).
package struct ViewResponse: Sendable, Hashable {
    package var totalRows: Int?
    package var offset: Int?
    package var rows: [ViewRow]
    package var updateSequence: JSON?

    package init(totalRows: Int?, offset: Int?, rows: [ViewRow], updateSequence: JSON? = nil) {
        self.totalRows = totalRows
        self.offset = offset
        self.rows = rows
        self.updateSequence = updateSequence
    }

    /// An `_all_docs` answer.
    package init(_ result: AllDocumentsResult, includeDocuments: Bool) {
        self.init(totalRows: result.totalRows, offset: result.offset,
                  rows: result.rows.map { ViewRow($0, includeDocuments: includeDocuments) })
    }

    /// An index query's answer.
    package init(_ result: QueryResult, includeDocuments: Bool) {
        self.init(totalRows: result.totalRows, offset: result.offset,
                  rows: result.rows.map { ViewRow($0, includeDocuments: includeDocuments) },
                  updateSequence: result.updateSequence.map { .integer(Int($0)) })
    }

    package init(json: JSON) throws {
        guard let rows = json[Keys.rows]?.arrayValue else {
            throw DocStoreError(.badRequest, "A view answer needs rows: \(json.description.prefix(200))")
        }
        self.init(totalRows: json[Keys.totalRows]?.intValue, offset: json[Keys.offset]?.intValue,
                  rows: try rows.map(ViewRow.init(json:)), updateSequence: json[Keys.updateSeq])
    }

    /// The answer as ``json`` serializes, without building it (`_all_docs` and view answers are
    /// written so); with `nonFiniteAsNull`, a NaN or infinite number is written as `null` (as
    /// `description` writes it) instead of throwing.
    package func serialized(nonFiniteAsNull: Bool = false) throws -> [UInt8] {
        var writer = JSONWriter(nonFiniteAsNull: nonFiniteAsNull, capacity: 64 + rows.count * 128)
        writer.append("{")
        var first = true
        func member(_ name: StaticString) {
            writer.append(first ? "\"" : ",\"")
            writer.append(name)
            writer.append("\":")
            first = false
        }
        if let totalRows {
            member("total_rows")
            writer.writeInteger(totalRows)
            member("offset")
            if let offset { writer.writeInteger(offset) } else { writer.append("null") }
        } else if let offset {
            member("offset")
            writer.writeInteger(offset)
        }
        if let updateSequence {
            member("update_seq")
            try writer.write(updateSequence)
        }
        member("rows")
        writer.append("[")
        for (index, row) in rows.enumerated() {
            if index > 0 { writer.append(",") }
            try row.write(to: &writer)
        }
        writer.append("]}")
        return writer.bytes
    }

    package var json: JSON {
        var object = JSONObject()
        if let totalRows {
            object[Keys.totalRows] = .integer(totalRows)
            // CouchDB writes `"offset": null` when there is none (a `keys` query); reduced answers have neither.
            object[Keys.offset] = offset.map(JSON.integer) ?? .null
        } else if let offset {
            object[Keys.offset] = .integer(offset)
        }
        // Before the rows, where CouchDB writes it.
        if let updateSequence { object[Keys.updateSeq] = updateSequence }
        object[Keys.rows] = .array(rows.map(\.json))
        return .object(object)
    }

    enum Keys {
        static let totalRows = "total_rows"
        static let offset = "offset"
        static let rows = "rows"
        static let updateSeq = "update_seq"
    }
}

extension DatabaseInfo {
    /// The `GET /db` answer, with CouchDB 3's sequence strings (``CouchSequence``).
    package var serverJSON: JSON {
        var json = couchDBJSON
        json["update_seq"] = CouchSequence.json(updateSequence)
        json["purge_seq"] = CouchSequence.json(Int64(purgeCount))
        // What a CouchDB 3.3 node says of its databases' layout: one copy in one "shard" (the SQLite
        // file), and its current file format, which clients may read as "a CouchDB 3 database".
        json["cluster"] = ["q": 1, "n": 1, "w": 1, "r": 1]
        json["disk_format_version"] = 8
        return json
    }

    /// The `GET /db` answer with plain sequence numbers, as the `docstore` command prints it.
    package var couchDBJSON: JSON {
        ["db_name": .string(name), "update_seq": .integer(Int(updateSequence)), "doc_count": .integer(documentCount),
         "doc_del_count": .integer(deletedDocumentCount), "sizes": ["file": .integer(fileSize)],
         "purge_seq": 0, "compact_running": false, "instance_start_time": "0", "uuid": .string(uuid)]
    }
}
