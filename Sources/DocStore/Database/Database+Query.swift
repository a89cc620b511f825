extension Database {
    /// What the named indexes take in the index file: `file`, the bytes of their pages, and `active`,
    /// the bytes of those in use (CouchDB's view `sizes`). Unknown names count nothing.
    ///
    /// Read from the index file as it is committed, so it answers at once while an index builds.
    public func indexSizes(named names: [String]) async throws -> (file: Int, active: Int) {
        try ensureOpen()
        let ids = names.compactMap { indexWriter.publishedState(named: $0)?.id }
        // SQLite's `dbstat` reads every page of the tables: a long read.
        return try await running(on: .longReads) {
            try readIndex { try IndexRecords(connection: $0).sizes(ofIndexes: ids) }
        }
    }

    /// Compacts the index file: rewritten without its free and half-empty pages (CouchDB's
    /// `_compact/{ddoc}`, for every index of the database at once).
    public func compactIndexes() async throws {
        try ensureOpen()
        try await indexWriter.compact()
    }

    /// Adds a map/reduce index to the open database, as ``DatabaseConfiguration/indexes`` does at open:
    /// stored, built when first queried, rebuilt when its version changes.
    public func register(_ index: IndexDefinition) async throws {
        try ensureOpen()
        _ = try await indexWriter.register(index)
    }

    /// The definition of the registered index `name`, or `nil`.
    public func indexDefinition(named name: String) async throws -> IndexDefinition? {
        // The writer's published states answer without waiting while it builds an index.
        if let state = indexWriter.publishedState(named: name) { return state.definition }
        return try? await indexWriter.state(named: name).definition
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
        // A custom reduce is the app's code (a JavaScript one waits for the engine), and a reduce or a
        // map read without a small limit may read many rows: both off the pool.
        let reduce = query.reduce != false ? indexWriter.publishedState(named: indexName)?.definition.reduce : nil
        let threads: BlockingWorkThreads? = reduce?.customFunction != nil ? .userCode
            : .forReading(upTo: reduce != nil ? nil : query.limit.map { $0 + query.skip })
        let (output, mapErrors, current) = try await running(on: threads) {
            try await readIndex(named: indexName, stale: query.stale) { state, connection in
                var engine = QueryEngine(connection: connection, state: state, query: query)
                engine.documentsSchema = Self.attachedDocumentsSchema
                let output = try engine.run()
                return (output, try IndexSchema.mapErrors(connection, indexID: state.id), state)
            }
        }
        var rows: [QueryRow] = []
        rows.reserveCapacity(output.rows.count)
        for (position, row) in output.rows.enumerated() {
            var document: Document? = nil
            if query.includeDocuments, let documentID = row.documentID {
                if case .object(let object) = row.value, object["_id"]?.stringValue != nil || object["_rev"]?.stringValue != nil {
                    // A row may name another document (`_id`), or a revision (`_rev`), than the one that
                    // emitted it, as CouchDB's linked documents.
                    let linked = object["_id"]?.stringValue ?? documentID
                    let revision = object["_rev"]?.stringValue.flatMap(RevisionID.init)
                    document = try await self.document(withID: linked, revision: revision)
                } else if position < output.documents.count {
                    document = output.documents[position]
                } else {
                    document = try await self.document(withID: documentID)
                }
            }
            rows.append(QueryRow(key: row.key, value: row.value, documentID: row.documentID, document: document))
        }
        return QueryResult(rows: rows, totalRows: output.totalRows, offset: output.offset,
                           updateSequence: query.updateSeq ? current.lastSequence : nil, mapErrors: mapErrors)
    }

    /// Runs `body` on index `indexName` as `stale` says: after bringing the index up to date
    /// (`.updateBefore`: only documents changed since its last update are mapped again), as it is
    /// (`.ok`), or as it is and then updated in the background (`.updateAfter`). `body` is given the
    /// index's state and a consistent read of the index file (``readIndex(_:)``).
    func readIndex<T>(named indexName: String, stale: IndexQuery.Staleness,
                      _ body: (IndexState, SQLiteConnection) throws -> T) async throws -> T {
        var state = try await registeredState(named: indexName)
        if stale == .updateBefore, state.lastSequence < writer.notifier.committedSequence {
            state = try await indexWriter.update(indexName, documents: readers)
        }
        let published = state
        // The published state may be older than the snapshot the read sees (an update committed in
        // between): its counters are taken from that snapshot, so rows, totals and sequence agree.
        let result = try readIndex { connection in
            try body(try IndexRecords(connection: connection).withStoredProgress(published), connection)
        }
        if stale == .updateAfter {
            let writer = indexWriter, readers = readers
            Task { _ = try? await writer.update(indexName, documents: readers) }
        }
        return result
    }

    /// The state of the registered index `indexName`. A Mango index (``MangoIndex/indexName``) is
    /// registered when its design document is read; one asked for before that (in a database just
    /// opened) is looked for in the design documents first.
    func registeredState(named indexName: String) async throws -> IndexState {
        if let state = indexWriter.publishedState(named: indexName) { return state }
        do {
            return try await indexWriter.state(named: indexName)
        } catch let error as DocStoreError where error.code == .notFound && MangoIndex.indexNamePrefixes.contains(where: indexName.hasPrefix) {
            try await synchronizeMangoIndexes()
            return try await indexWriter.state(named: indexName)
        }
    }

    /// The schema name of the database's own file on the index file's reader connections, which
    /// attach it so that a query can join index rows to documents.
    static let attachedDocumentsSchema = "store"

    /// Runs a consistent read on the index file (with the database's file attached as
    /// ``attachedDocumentsSchema``).
    func readIndex<T>(_ body: (SQLiteConnection) throws -> T) throws -> T {
        try ensureOpen()
        do {
            return try indexReaders.readConsistently(body)
        } catch {
            throw Database.storageError(error)
        }
    }
}

extension Database {
    /// Unregisters index `name` and deletes its rows; an unknown name does nothing.
    public func deleteIndex(named name: String) async throws {
        try ensureOpen()
        try await indexWriter.drop(name)
    }
}
