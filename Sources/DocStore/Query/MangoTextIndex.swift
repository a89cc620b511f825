/// Mango `text` indexes: their design-document form (Cloudant Query's, which CouchDB writes when a
/// search service is installed) and the full-text index they define.
extension MangoIndex {
    /// The full-text index: for each document (design documents aside) that matches the partial
    /// filter, a full-text key per string at each field — each string of an array of them, each one a
    /// field of its own — emitted with the field's path as value. With no fields, every string in the
    /// document is indexed, except under the top-level members that start with `_`.
    var textDefinition: IndexDefinition {
        let paths = fields.map { field in ((try? FieldPath(field.path)) ?? FieldPath.root, JSON.string(field.path)) }
        let filter = partialFilter
        var version = JSONObject()
        version["type"] = "text"
        version["fields"] = .array(fields.map { .string($0.path) })
        version["partial_filter_selector"] = filter?.root ?? .null
        version["map"] = "text-v1"
        return IndexDefinition(name: indexName, version: JSON.object(version).description) { document, emit in
            if document.id.hasPrefix("_design/") { return }
            if let filter, !filter.matches(document) { return }
            if paths.isEmpty {
                for (key, value) in document.body where !key.hasPrefix("_") {
                    Self.emitStrings(in: value, path: key, emit)
                }
                return
            }
            for (path, name) in paths {
                guard case .found(let value) = path.lookup(in: document) else { continue }
                switch value {
                case .string(let text): emit(FullTextSearch.createKey(text), name)
                case .array(let elements):
                    for case .string(let text) in elements { emit(FullTextSearch.createKey(text), name) }
                default: continue
                }
            }
        }
    }

    /// Emits each string in `value` (at `path`), those in nested objects and arrays included.
    private static func emitStrings(in value: JSON, path: String, _ emit: Emit) {
        switch value {
        case .string(let text): emit(FullTextSearch.createKey(text), .string(path))
        case .array(let elements): for element in elements { emitStrings(in: element, path: path, emit) }
        case .object(let object): for (key, member) in object { emitStrings(in: member, path: path + "." + key, emit) }
        default: return
        }
    }

    /// The entry of the design document's `indexes` for this text index, as CouchDB writes it:
    /// `{"index": {"default_analyzer", "default_field", "selector", "partial_filter_selector", "fields":
    /// [{"name", "type": "string"}], "index_array_lengths"}, "analyzer": {…}}`.
    var textIndexJSON: JSON {
        var index = JSONObject()
        index["default_analyzer"] = "keyword"
        index["default_field"] = .object([:])
        index["selector"] = .object([:])
        index["partial_filter_selector"] = partialFilter?.root ?? .object([:])
        index["fields"] = .array(fields.map { ["name": .string($0.path), "type": "string"] })
        index["index_array_lengths"] = true
        let analyzer: JSON = ["name": "perfield", "default": "keyword", "fields": ["$default": "standard"]]
        return ["index": .object(index), "analyzer": analyzer]
    }

    /// The text index as `GET /db/_index` lists it: the definition with fields as `{"path": "string"}`
    /// and no empty partial filter, as CouchDB's `mango_idx_text:to_json` writes it.
    var textListingJSON: JSON {
        var definition = JSONObject()
        definition["default_analyzer"] = "keyword"
        definition["default_field"] = .object([:])
        definition["selector"] = .object([:])
        if let partialFilter { definition["partial_filter_selector"] = partialFilter.root }
        definition["fields"] = .array(fields.map { .object([$0.path: "string"]) })
        definition["index_array_lengths"] = true
        return ["ddoc": .string(designDocument), "name": .string(name), "type": "text", "partitioned": false,
                "def": .object(definition)]
    }

    /// The text indexes of a query design document's `indexes`. A field may be written
    /// `{"name": path, "type": "string"}` (as stored) or `{path: "string"}`; fields of another type
    /// (`number`, `boolean`) are not full-text and are left out. An entry that cannot be read (no
    /// `index` object, a malformed partial filter or path) is skipped.
    static func textIndexes(in document: Document) -> [MangoIndex] {
        guard case .object(let entries)? = document["indexes"] else { return [] }
        var result: [MangoIndex] = []
        for (name, entry) in entries {
            guard case .object(let definition)? = entry["index"] else { continue }
            var paths: [String] = []
            var readable = true
            if case .array(let fieldList)? = definition["fields"] {
                for field in fieldList {
                    guard case .object(let object) = field else {
                        readable = false
                        break
                    }
                    if case .string(let path)? = object["name"], case .string(let type)? = object["type"] {
                        if type == "string" { paths.append(path) }
                    } else if object.count == 1, case .string(let type) = object.values.first! {
                        if type == "string" { paths.append(object.keys.first!) }
                    } else {
                        readable = false
                    }
                }
            }
            guard readable, paths.allSatisfy({ (try? FieldPath($0)) != nil }) else { continue }
            var filter: MangoSelector?
            for member in ["partial_filter_selector", "selector"] {
                guard let selector = definition[member], selector != .object([:]) else { continue }
                guard let parsed = try? MangoSelector(selector), !parsed.usesText else {
                    readable = false
                    break
                }
                filter = parsed
                break
            }
            guard readable else { continue }
            result.append(MangoIndex(designDocument: document.id, name: name, fields: paths.map { SortField($0) },
                                     partialFilter: filter, type: .text))
        }
        return result
    }
}
