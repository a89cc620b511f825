import DocStore

/// The answer of a full-text view query (`GET /db/_design/{ddoc}/_view/{name}?full_text=…`, and
/// `docstore search`): `{"total_rows": n, "rows": [{"id", "score", "snippet"?, "value"?, "doc"?}]}` —
/// the snippet when asked for, the value when it is not `null`, the document with `include_docs`.
package enum SearchResponse {
    package static func json(_ result: SearchResult, includeDocuments: Bool) -> JSON {
        json(rows: result.rows, totalRows: result.totalRows, includeDocuments: includeDocuments)
    }

    package static func json(rows: [SearchRow], totalRows: Int, includeDocuments: Bool) -> JSON {
        let rows = rows.map { row -> JSON in
            var object: JSONObject = ["id": .string(row.documentID), "score": .double(row.score)]
            if let snippet = row.snippet { object["snippet"] = .string(snippet) }
            if row.value != .null { object["value"] = row.value }
            if includeDocuments { object["doc"] = row.document?.json() ?? .null }
            return .object(object)
        }
        return ["total_rows": .integer(totalRows), "rows": .array(rows)]
    }

    /// The `full_text` parameter: a JSON string (`full_text="green tea"`), as the other view
    /// parameters are JSON.
    package static func query(fromParameter value: String) throws -> String {
        guard case .string(let text)? = try? JSON(parsing: value) else {
            throw DocStoreError(.invalidQuery, "full_text must be a JSON string, such as \"\\\"green tea\\\" OR matcha\", not: \(value)")
        }
        return text
    }
}
