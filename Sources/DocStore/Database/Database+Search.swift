extension Database {
    /// Searches a full-text index — one whose map function emits ``FullTextSearch/createKey(_:)``, or
    /// a Mango text index (``MangoIndex/indexName``) — with a query in the PredixSDK's full-text syntax
    /// (``TextQuery``; Docs/Search.md).
    ///
    /// ```swift
    /// let result = try await db.search(index: "notes-text", query: "\"green tea\" OR matcha", snippets: true, limit: 10)
    /// for row in result.rows { print(row.documentID, row.score, row.snippet ?? "") }
    /// ```
    /// - Returns: the matching documents, the most relevant first (BM25, higher is better), after
    ///   `skip` and `limit`, and how many match in all.
    /// - Throws: ``DocStoreError`` — ``DocStoreError/Code/invalidQuery`` naming the position of a
    ///   malformed query, ``DocStoreError/Code/notFound`` for an unknown index,
    ///   ``DocStoreError/Code/notAFullTextIndex`` for an index that has rows but no full-text keys.
    public func search(index indexName: String, query: String, snippets: Bool = false, limit: Int? = nil,
                       skip: Int = 0) async throws -> SearchResult {
        var search = try SearchQuery(query)
        search.snippets = snippets
        search.limit = limit
        search.skip = skip
        return try await self.search(index: indexName, search)
    }

    /// Searches a full-text index with every option of ``SearchQuery``. The index is brought up to
    /// date first (only documents changed since its last update are mapped again) unless
    /// ``SearchQuery/stale`` says otherwise.
    public func search(index indexName: String, _ search: SearchQuery) async throws -> SearchResult {
        try ensureOpen()
        if let limit = search.limit, limit < 0 {
            throw DocStoreError(.invalidQuery, "limit must not be negative")
        }
        if search.skip < 0 { throw DocStoreError(.invalidQuery, "skip must not be negative") }
        // Ranking reads every match, however few are asked for: off the pool.
        let output = try await running(on: .longReads) { try await readIndex(named: indexName, stale: search.stale) { state, connection in
            if !state.hasText, state.rowCount > 0 {
                throw DocStoreError(.notAFullTextIndex, "The index \"\(indexName)\" holds no full-text keys (FullTextSearch.createKey)")
            }
            return try FullTextEngine(connection: connection, state: state, documentsSchema: Self.attachedDocumentsSchema).run(search)
        } }
        let rows = output.rows.map {
            SearchRow(documentID: $0.documentID, score: $0.score, snippet: $0.snippet, value: $0.value, document: $0.document)
        }
        return SearchResult(rows: rows, totalRows: output.total)
    }

    /// A live search: yields the result now, then again after every committed change that alters it
    /// (as ``observe(index:query:)`` does for map/reduce queries).
    ///
    /// ```swift
    /// for try await result in db.observe(index: "notes-text", search: try SearchQuery("tea")) {
    ///     render(result.rows)
    /// }
    /// ```
    public func observe(index indexName: String, search: SearchQuery) -> AsyncThrowingStream<SearchResult, any Error> {
        let (stream, continuation) = AsyncThrowingStream<SearchResult, any Error>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let task = Task {
            do {
                try await runLive({ try await self.search(index: indexName, search) }, changed: { $0 != $1 }) { continuation.yield($0) }
                continuation.finish()
            } catch {
                continuation.finish(throwing: error)
            }
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }
}
