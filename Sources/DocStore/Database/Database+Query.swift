extension Database {
    /// Registers a map/reduce index while the database is open (indexes can also be given in
    /// ``DatabaseConfiguration/indexes``). Registering a definition with a new version rebuilds the index.
    public func register(_ index: IndexDefinition) async throws {
        try ensureOpen()
        _ = try await indexWriter.register(index)
    }

    /// The definition of the registered index `name`, or `nil`.
    public func indexDefinition(named name: String) async throws -> IndexDefinition? {
        try? await indexWriter.state(named: name).definition
    }

    /// The names of the registered indexes.
    public var indexNames: [String] {
        get async { await indexWriter.names }
    }

    /// Queries a map/reduce index with CouchDB's view options.
    ///
    /// By default the index is first brought up to date: only documents changed since its last update
    /// are mapped again. Rows come in CouchDB collation order of their keys, ties by document id.
    ///
    /// ```swift
    /// var query = IndexQuery()
    /// query.keys = ["red", "blue"]
    /// for row in try await db.query("by-colour", query) { print(row.key, row.documentID ?? "") }
    /// ```
    /// - Throws: ``DocStoreError`` — ``DocStoreError/Code/notFound`` for an unknown index,
    ///   ``DocStoreError/Code/invalidQuery`` for contradictory options (as CouchDB's
    ///   `query_parse_error`), ``DocStoreError/Code/reduceFailure`` if reducing fails.
    /// - Complexity: O(log n + rows) for map queries; reduce queries read the rows of the range.
    public func query(_ indexName: String, _ query: IndexQuery = IndexQuery()) async throws -> QueryResult {
        try ensureOpen()
        var state = try await indexWriter.state(named: indexName)
        if query.stale == .updateBefore, state.lastSequence < (await writer.lastSequence) {
            state = try await indexWriter.update(indexName, documents: readers)
        }
        let current = state
        let (output, mapErrors) = try readIndex { connection in
            let output = try QueryEngine(connection: connection, state: current, query: query).run()
            return (output, try IndexSchema.mapErrors(connection, indexID: current.id))
        }
        if query.stale == .updateAfter {
            let writer = indexWriter, readers = readers
            Task { _ = try? await writer.update(indexName, documents: readers) }
        }
        var rows: [QueryRow] = []
        rows.reserveCapacity(output.rows.count)
        for row in output.rows {
            var document: Document? = nil
            if query.includeDocuments, let documentID = row.documentID {
                document = try await linkedDocument(for: row.value, emittedBy: documentID)
            }
            rows.append(QueryRow(key: row.key, value: row.value, documentID: row.documentID, document: document))
        }
        return QueryResult(rows: rows, totalRows: output.totalRows, offset: output.offset,
                           updateSequence: query.updateSeq ? current.lastSequence : nil, mapErrors: mapErrors)
    }

    /// The document a row links to: the one named by `{"_id": …, "_rev"?: …}` in its value, or the
    /// document that emitted it.
    private func linkedDocument(for value: JSON, emittedBy documentID: String) async throws -> Document? {
        if case .object(let object) = value, case .string(let linked)? = object["_id"] {
            let revision = object["_rev"]?.stringValue.flatMap(RevisionID.init)
            return try await document(withID: linked, revision: revision)
        }
        return try await document(withID: documentID)
    }

    /// Runs a consistent read on the index file.
    func readIndex<T>(_ body: (SQLiteConnection) throws -> T) throws -> T {
        try ensureOpen()
        do {
            return try indexReaders.readConsistently(body)
        } catch {
            throw Database.storageError(error)
        }
    }
}
