import DocStore
import Foundation

/// The body of `POST /db/_find` and `POST /db/_explain`, read into a ``FindQuery`` with CouchDB's
/// error for each malformed member.
package enum FindRequest {
    private static let members: Set<String> = ["selector", "limit", "skip", "sort", "fields", "use_index", "conflicts", "r",
                                               "bookmark", "update", "stable", "stale", "execution_stats", "partition",
                                               "allow_fallback"]

    /// CouchDB's default `limit` over HTTP.
    package static let defaultLimit = 25

    package static func query(json: JSON) throws -> FindQuery {
        guard case .object(let object) = json else { throw DocStoreError(.badRequest, "Request body must be a JSON object") }
        if let unknown = object.keys.first(where: { !members.contains($0) }) {
            throw DocStoreError(.invalidKey, "Invalid key \(unknown) for this request.")
        }
        guard let selector = object["selector"] else { throw DocStoreError(.missingRequiredKey, "Missing required key: selector") }
        var query = FindQuery(selector: try MangoSelector(selector))
        func count(_ key: String) throws -> Int? {
            guard let value = object[key] else { return nil }
            guard case .integer(let number) = value, number >= 0 else {
                throw DocStoreError(.invalidNonNegativeInteger, "\(value) is not an integer greater than or equal to zero")
            }
            return number
        }
        func flag(_ key: String) throws -> Bool? {
            guard let value = object[key] else { return nil }
            guard case .bool(let flag) = value else { throw DocStoreError(.invalidBoolean, "Invalid boolean value: \(value)") }
            return flag
        }
        query.limit = try count("limit") ?? defaultLimit
        query.skip = try count("skip") ?? 0
        // The read quorum: meaningless on one node, but checked as CouchDB does.
        if let r = object["r"], !{ if case .integer(let n) = r { n > 0 } else { false } }() {
            throw DocStoreError(.invalidPositiveInteger, "\(r) is not an integer greater than zero")
        }
        if let sort = object["sort"] { query.sort = try SortField.list(from: sort) }
        if let fields = object["fields"] {
            guard case .array(let entries) = fields else {
                throw DocStoreError(.invalidFields, "Fields must be an array of strings, not: \(fields)")
            }
            query.fields = try entries.map { entry in
                guard case .string(let path) = entry else { throw DocStoreError(.invalidField, "Invalid JSON for field spec: \(entry)") }
                _ = try FieldPath(path)
                return path
            }
        }
        switch object["use_index"] {
        case nil: break
        case .string(let ddoc)?: query.useIndex = ddoc.isEmpty ? [] : [ddoc]
        case .array(let parts)? where parts.count <= 2 && parts.allSatisfy({ $0.stringValue != nil }):
            query.useIndex = parts.compactMap(\.stringValue)
        case let other?:
            // CouchDB answers 500 here; a 400 says what is wrong.
            throw DocStoreError(.badRequest, "use_index must be a design document name or [design document, index name], not: \(other)")
        }
        switch object["bookmark"] {
        case nil, .null?: break
        case .string(let bookmark)?: query.bookmark = bookmark == "nil" ? nil : bookmark
        case let other?: throw DocStoreError(.invalidBookmark, "Invalid bookmark value: \(other)")
        }
        query.conflicts = try flag("conflicts") ?? false
        query.executionStatistics = try flag("execution_stats") ?? false
        query.update = try flag("update") ?? true
        _ = try flag("stable")
        switch object["stale"] {
        case nil, .bool(false)?, .string("false")?: break
        case .string("ok")?: query.update = false
        // CouchDB answers 500 (`invalid_ok_or_false_value`); a 400 says what is wrong.
        case let other?: throw DocStoreError(.badRequest, "stale must be \"ok\" or false, not: \(other)")
        }
        return query
    }
}

/// The answers of `_find` and `_explain`.
package enum FindResponse {
    /// `{"docs": […], "bookmark": …, "execution_stats"?: {…}, "warning"?: …}`, in CouchDB's member order;
    /// the bookmark of an empty first page is `"nil"`, as CouchDB writes it.
    package static func json(_ result: FindResult) -> JSON {
        var object: JSONObject = ["docs": .array(result.projected ?? result.documents.map { $0.json() }), "bookmark": .string(result.bookmark ?? "nil")]
        if let statistics = result.executionStatistics {
            object["execution_stats"] = [
                "total_keys_examined": .integer(statistics.totalKeysExamined),
                "total_docs_examined": .integer(statistics.totalDocumentsExamined),
                "total_quorum_docs_examined": 0,
                "results_returned": .integer(statistics.resultsReturned),
                "execution_time_ms": .double(Double(statistics.executionTime.components.attoseconds) / 1e15
                    + Double(statistics.executionTime.components.seconds) * 1000),
            ]
        }
        if let warning = result.warning { object["warning"] = .string(warning) }
        return .object(object)
    }

    /// `_explain`'s answer, as CouchDB 3.3 writes it.
    package static func explain(_ explanation: FindExplanation, query: FindQuery, database: String) -> JSON {
        let index = explanation.index?.listingJSON ?? IndexListResponse.allDocuments
        let fields: JSON = query.fields.map { JSON($0) } ?? "all_fields"
        var sort = JSONObject()
        for field in query.sort { sort[field.path] = .string(field.descending ? "desc" : "asc") }
        let options: JSON = [
            "use_index": JSON(query.useIndex), "bookmark": .string(query.bookmark ?? "nil"), "limit": .integer(query.limit ?? FindRequest.defaultLimit),
            "skip": .integer(query.skip), "sort": .object(sort), "fields": fields, "partition": "", "r": [49],
            "conflicts": .bool(query.conflicts), "stale": false, "update": .bool(query.update), "stable": false,
            "execution_stats": .bool(query.executionStatistics),
        ]
        return [
            "dbname": .string(database), "index": index, "partitioned": false, "selector": explanation.selector, "opts": options,
            "limit": .integer(query.limit ?? FindRequest.defaultLimit), "skip": .integer(query.skip), "fields": fields,
            "mrargs": [
                "include_docs": true, "view_type": "map", "reduce": false, "partition": .null,
                "start_key": explanation.startKey, "end_key": explanation.endKey,
                "direction": explanation.descending ? "rev" : "fwd", "stable": false, "update": .bool(query.update),
                "conflicts": "undefined",
            ],
            "covering": .bool(explanation.coversSelector),
        ]
    }
}
