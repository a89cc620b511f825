extension Database {
    /// ``find(_:)`` for a selector with `$text`: the text index is searched (the one `use_index` names,
    /// else the first), each document found is matched against the rest of the selector, and the
    /// matches come by relevance — or, with a `sort`, in the order of the sort fields (documents
    /// without them left out, as with json indexes). A bookmark is the number of matches read so far.
    /// Without a text index, see ``textSearch(for:)``.
    func findText(_ query: FindQuery, index: MangoIndex, warning: String?, started: ContinuousClock.Instant) async throws -> FindResult {
        guard let text = try query.selector.textQuery() else { throw DocStoreError(.badRequest, "The selector has no top-level $text") }
        if Set(query.sort.map(\.descending)).count > 1 {
            throw DocStoreError(.unsupportedMixedSort, "Sorts currently only support a single direction for all fields.")
        }
        let fields = try query.fields.map { try $0.map(FieldPath.init) }
        let sortPaths = try query.sort.map { try FieldPath($0.path) }
        let start = try query.bookmark.map(TextBookmark.offset(encoded:)) ?? 0
        var search = SearchQuery(text)
        search.includeDocuments = !query.conflicts
        if !query.update { search.stale = .ok }
        let found = try await self.search(index: index.indexName, search)

        var statistics = FindResult.ExecutionStatistics()
        statistics.totalKeysExamined = found.rows.count
        var matches: [Document] = []
        for row in found.rows {
            let read = query.conflicts ? try await document(withID: row.documentID, includeConflicts: true) : row.document
            guard let document = read else { continue }
            statistics.totalDocumentsExamined += 1
            if let visible = query.visible, !visible(document) { continue }
            guard query.selector.matches(document) else { continue }
            matches.append(document)
        }
        if !sortPaths.isEmpty {
            // A stable sort: equal sort values keep their order of relevance.
            let keyed = matches.compactMap { document -> ([JSON], Document)? in
                var values: [JSON] = []
                for path in sortPaths {
                    guard case .found(let value) = path.lookup(in: document) else { return nil }
                    values.append(value)
                }
                return (values, document)
            }
            let descending = query.sort.first?.descending ?? false
            matches = keyed.enumerated().sorted { a, b in
                for (x, y) in zip(a.element.0, b.element.0) {
                    let order = JSONCollator.compare(x, y)
                    if order != 0 { return descending ? order > 0 : order < 0 }
                }
                return a.offset < b.offset
            }.map(\.element.1)
        }
        let from = min(matches.count, start + max(0, query.skip))
        let page = matches[from...].prefix(query.limit ?? Int.max)
        var documents: [Document] = []
        var projected: [JSON] = []
        for document in page {
            try FindProjection.append(document, fields: fields, to: &documents, projected: &projected)
        }
        statistics.resultsReturned = documents.count
        statistics.executionTime = ContinuousClock.now - started
        return FindResult(documents: documents, projected: fields == nil ? nil : projected,
                          bookmark: page.isEmpty ? query.bookmark : TextBookmark.encode(offset: from + page.count),
                          warning: warning, executionStatistics: query.executionStatistics ? statistics : nil)
    }

    /// The text index a selector with `$text` is searched with, or `nil` when the database has none:
    /// then, as CouchDB 3.3.3 answers (recorded with curl, and `mango_selector`'s matcher says so),
    /// `$text` holds for every document and the rest of the selector is planned as usual.
    /// - Throws: ``DocStoreError/Code/unsupportedOperator`` for a `$text` inside `$or`, `$nor` or
    ///   `$not` when there is a text index: it would have to be searched per document.
    func textSearch(for query: FindQuery) async throws -> (MangoIndex, String?)? {
        let (index, warning) = try await textIndex(for: query)
        guard let index else { return nil }
        guard !query.selector.texts.isEmpty, !query.selector.condition.containsText else {
            throw DocStoreError(.unsupportedOperator,
                                "A text index answers $text at the top level of a selector or in a top-level $and, not inside $or, $nor or $not")
        }
        return (index, warning)
    }

    /// The text index a `$text` query searches: the one `use_index` names (`[ddoc]` or `[ddoc, name]`),
    /// else the first; with a warning when `use_index` names none. `nil` when there is no text index.
    func textIndex(for query: FindQuery) async throws -> (MangoIndex?, String?) {
        let indexes = try await synchronizeMangoIndexes().filter { $0.type == .text }
        guard !query.useIndex.isEmpty else { return (indexes.first, nil) }
        if let index = indexes.first(where: { $0.isNamed(by: query.useIndex) }) { return (index, nil) }
        let shown = query.useIndex.joined(separator: ", ")
        return (indexes.first, "\(shown) was not used because it is not a valid index for this query.")
    }
}

/// Where a page of a `$text` find ended: how many matches were read, as URL-safe base64 of
/// `{"text_offset": n}`.
enum TextBookmark {
    static func encode(offset: Int) -> String {
        let json: JSON = ["text_offset": .integer(offset)]
        return Base64URL.encode(json.description.utf8)
    }

    static func offset(encoded text: String) throws -> Int {
        guard let data = Base64URL.decode(text), let json = try? JSON(parsing: data),
            case .integer(let offset)? = json["text_offset"], offset >= 0 else {
            throw DocStoreError(.invalidBookmark, "Invalid bookmark value: \(text)")
        }
        return offset
    }
}
