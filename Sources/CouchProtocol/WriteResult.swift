import DocStore

/// The outcome of one document write: the answer to `PUT /db/id` and each row of a `_bulk_docs`
/// answer, `{"ok":true,"id","rev"}` or `{"id","rev"?,"error","reason"}`.
package struct WriteResult: Sendable, Hashable {
    /// The document id; `nil` for a document that had none (written as `null`).
    package var id: String?
    /// The new revision, or for a refusal the revision that was refused when it is known.
    package var revision: String?
    /// Why the write was refused; `nil` when it succeeded.
    package var failure: ErrorBody?

    package var isSuccess: Bool { failure == nil }

    /// A successful write; `revision` is `nil` only for records without revisions (a user deleted
    /// from DocServer's `_users`).
    package init(id: String, revision: String?) {
        self.id = id
        self.revision = revision
    }

    /// A refused write.
    package init(id: String?, revision: String? = nil, failure: ErrorBody) {
        self.id = id
        self.revision = revision
        self.failure = failure
    }

    /// The written document's id and new revision.
    package init(written document: Document) {
        self.init(id: document.id, revision: document.revision?.description ?? "")
    }

    /// The outcome of one document of a bulk save.
    package init(_ result: SaveResult) {
        switch result.result {
        case .success(let document): self.init(written: document)
        case .failure(let error): self.init(id: result.id, failure: ErrorBody(error))
        }
    }

    /// Decodes a row; a row with neither `ok` nor `error` is malformed.
    package init(json: JSON) throws {
        guard case .object(let object) = json else { throw DocStoreError(.badRequest, "A write result must be an object") }
        id = object[Keys.id]?.stringValue
        revision = object[Keys.rev]?.stringValue
        if let failure = ErrorBody(json: json) {
            self.failure = failure
        } else if object[Keys.ok]?.boolValue != true {
            throw DocStoreError(.badRequest, "A write result needs \"ok\" or \"error\"")
        }
    }

    package var json: JSON {
        guard let failure else {
            var object: JSONObject = [Keys.ok: true, Keys.id: JSON(id)]
            if let revision { object[Keys.rev] = .string(revision) }
            return .object(object)
        }
        var object: JSONObject = [Keys.id: JSON(id)]
        if let revision { object[Keys.rev] = .string(revision) }
        for (key, value) in failure.members { object[key] = value }
        return .object(object)
    }

    enum Keys {
        static let ok = "ok"
        static let id = "id"
        static let rev = "rev"
    }
}

/// `POST /db/_bulk_docs`: `{"docs":[…],"new_edits":…}`.
package struct BulkDocsRequest: Sendable {
    /// The documents as sent; each is read by `Document(json:)` where it is stored.
    package var documents: [JSON]
    /// `false` stores revisions as they are (replication); `true` makes new ones.
    package var newEdits: Bool

    package init(documents: [JSON], newEdits: Bool) {
        self.documents = documents
        self.newEdits = newEdits
    }

    /// Decodes a request body with CouchDB's reasons for a malformed one.
    package init(json: JSON) throws {
        guard case .object(let object) = json else { throw DocStoreError(.badRequest, "Request body must be a JSON object") }
        guard let list = object[Keys.docs] else { throw DocStoreError(.badRequest, "POST body must include `docs` parameter.") }
        guard case .array(let documents) = list else { throw DocStoreError(.badRequest, "`docs` parameter must be an array.") }
        self.documents = documents
        switch object[Keys.newEdits] {
        case nil: newEdits = true
        case .bool(let value)?: newEdits = value
        case _?: throw DocStoreError(.badRequest, "`new_edits` parameter must be a boolean.")
        }
    }

    package var json: JSON { [Keys.docs: .array(documents), Keys.newEdits: .bool(newEdits)] }

    /// The answer: a row per document. With `new_edits=false` CouchDB lists only the refusals.
    package static func answer(_ rows: [WriteResult], newEdits: Bool) -> JSON {
        .array(rows.filter { newEdits || !$0.isSuccess }.map(\.json))
    }

    /// Decodes an answer.
    package static func decodeAnswer(_ json: JSON) throws -> [WriteResult] {
        guard let rows = json.arrayValue else { throw DocStoreError(.badRequest, "_bulk_docs answered \(json.description.prefix(200))") }
        return try rows.map(WriteResult.init(json:))
    }

    enum Keys {
        static let docs = "docs"
        static let newEdits = "new_edits"
    }
}
