import DocStore

/// The body of `POST /db/_index`: `{"index": {"fields": […], "partial_filter_selector"?: {…}},
/// "ddoc"?: "…", "name"?: "…", "type"?: "json"|"text", "partitioned"?: …, "w"?: …}`. A text index's
/// fields are `{"name": path, "type": "string"}` (or plain paths), and may be left out for every
/// string of each document.
package struct CreateIndexRequest: Sendable {
    package var fields: [SortField]
    package var partialFilter: JSON?
    package var type: MangoIndex.Kind = .json
    package var designDocument: String?
    package var name: String?
    /// `partitioned`: whether the index answers partition queries (`nil`: as its database).
    package var partitioned: Bool?

    private static let members: Set<String> = ["index", "ddoc", "name", "type", "partitioned", "w"]

    /// Reads the body, with CouchDB's error for each malformed part (`missing_required_key`,
    /// `invalid_key`, `invalid_string`, `invalid_index`, `invalid_sort_json`, `invalid_sort_field`, and the
    /// selector errors of a partial filter).
    package init(json: JSON) throws {
        guard case .object(let object) = json else { throw DocStoreError(.badRequest, "Request body must be a JSON object") }
        if let unknown = object.keys.first(where: { !Self.members.contains($0) }) {
            throw DocStoreError(.invalidKey, "Invalid key \(unknown) for this request.")
        }
        guard case .object(let index)? = object["index"] else {
            throw DocStoreError(.missingRequiredKey, "Missing required key: index")
        }
        func string(_ key: String) throws -> String? {
            switch object[key] {
            case nil: return nil
            case .string(let text)?: return text
            case let other?: throw DocStoreError(.invalidString, "Invalid string: \(other)")
            }
        }
        designDocument = try string("ddoc")
        name = try string("name")
        switch object["partitioned"] {
        case nil: partitioned = nil
        case .bool(let flag)?: partitioned = flag
        case let other?: throw DocStoreError(.badRequest, "Invalid value for partitioned: \(other)")
        }
        let typeName = try string("type") ?? "json"
        guard let type = MangoIndex.Kind(rawValue: typeName) else { throw DocStoreError(.invalidIndex, "Invalid type for index: \(typeName)") }
        self.type = type
        if type == .text {
            fields = try Self.textFields(index["fields"])
            partialFilter = index["partial_filter_selector"] ?? index["selector"]
        } else {
            guard let fieldList = index["fields"] else { throw DocStoreError(.missingRequiredKey, "Missing required key: fields") }
            fields = try SortField.list(from: fieldList)
            partialFilter = index["partial_filter_selector"]
        }
        if let partialFilter { _ = try MangoSelector(partialFilter).withoutText(for: "the documents of an index") }
    }

    /// A text index's fields: absent, `"all_fields"` or `[]` for every string; else each a path or
    /// `{"name": path, "type": "string"}`. DocStore's text indexes are full-text indexes of strings,
    /// so another type is refused.
    private static func textFields(_ json: JSON?) throws -> [SortField] {
        switch json {
        case nil, .string("all_fields")?: return []
        case .array(let entries)?:
            return try entries.map { entry in
                let path: String
                switch entry {
                case .string(let name): path = name
                case .object(let object) where object["name"]?.stringValue != nil:
                    let type = object["type"]?.stringValue ?? "string"
                    guard type == "string" else {
                        throw DocStoreError(.invalidIndex, "Text indexes index string fields; \(object["name"]!) is of type \(type)")
                    }
                    path = object["name"]!.stringValue!
                default:
                    throw DocStoreError(.invalidIndex, "Invalid field in a text index: \(entry)")
                }
                _ = try FieldPath(path)
                return SortField(path)
            }
        case let other?:
            throw DocStoreError(.invalidIndex, "Invalid fields for a text index: \(other)")
        }
    }

    /// Creates the index in `db`.
    package func create(in db: Database) async throws -> IndexCreation {
        switch type {
        case .json:
            try await db.createIndex(fields: fields, name: name, designDocument: designDocument, partialFilter: partialFilter)
        case .text:
            try await db.createTextIndex(fields: fields.map(\.path), name: name, designDocument: designDocument, partialFilter: partialFilter)
        }
    }

    /// The answer: `{"result": "created"|"exists", "id": "_design/…", "name": "…"}`.
    package static func answer(_ creation: IndexCreation) -> JSON {
        ["result": creation.created ? "created" : "exists", "id": .string(creation.designDocument), "name": .string(creation.name)]
    }
}

/// The answer of `GET /db/_index`: `{"total_rows": n, "indexes": [the special _all_docs index, …]}`,
/// `skip` and `limit` applied to the list as CouchDB does.
package enum IndexListResponse {
    /// The special index every database has, as CouchDB lists it.
    package static let allDocuments: JSON = ["ddoc": .null, "name": "_all_docs", "type": "special",
                                            "def": ["fields": [["_id": "asc"]]]]

    package static func json(_ indexes: [MangoIndex], skip: Int = 0, limit: Int? = nil) -> JSON {
        let all = [allDocuments] + indexes.map(\.listingJSON)
        let page = all.dropFirst(skip).prefix(limit ?? Int.max)
        return ["total_rows": .integer(all.count), "indexes": .array(Array(page))]
    }
}
