import Foundation

/// The single writer of a database's index file: registers indexes, rebuilds them when their version
/// (or the ICU collator) changes, and brings them up to date from the changes feed.
///
/// It reads documents through the database's reader pool and writes only the index file, so document
/// writers never wait for indexing. Updates are incremental: only documents changed since the index's
/// last sequence are mapped again; deleted and purged documents lose their rows.
actor IndexWriter {
    /// Indexing (SQLite writes, and the map functions it runs: Swift closures or JavaScript) runs on a
    /// serial queue of its own, never on the cooperative pool (Docs/Architecture.md): a map function is the
    /// app's code, and may take as long as it likes.
    nonisolated let executor = SerialQueueExecutor(label: "docstore.index-writer")
    nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }
    let connection: SQLiteConnection
    private var states: [String: IndexState] = [:] {
        didSet { published.withLock { $0 = states } }
    }
    /// A copy of `states`, readable without a hop to the writer's queue (``publishedState(named:)``):
    /// a query asks for its index's state every time, and the hop would cost it more than its read.
    private nonisolated let published = Locked<[String: IndexState]>([:])
    private var isClosed = false
    /// Why full-text tables cannot be made here (a SQLite without FTS5), or `nil`.
    private var fullTextError: DocStoreError?
    /// Copies the index file's WAL back on another thread (``WALCheckpointer``).
    private let checkpointer: WALCheckpointer
    /// Documents read and mapped at a time.
    static let batchSize = 500
    /// Windows written per transaction: a large catch-up (a new or rebuilt index) commits every
    /// 100 000 documents rather than every window, since each commit rewrites every B-tree page the
    /// windows touched — with random keys, most of the index, so that committing more often makes a
    /// build's writes grow with the square of its size.
    static let windowsPerTransaction = 200

    /// Where long builds and compactions are listed (``Database/activeTasks``).
    private let tasks: ActiveTaskList

    init(fileURL: URL, definitions: [IndexDefinition], maximumFileSize: Int64? = nil, tasks: ActiveTaskList) throws {
        self.tasks = tasks
        let connection: SQLiteConnection, fullTextError: DocStoreError?
        do {
            (connection, fullTextError) = try IndexRecords.open(fileURL)
            if let maximumFileSize { try connection.limitFileSize(to: maximumFileSize) }
        } catch {
            throw Database.storageError(error)
        }
        do {
            self.fullTextError = fullTextError
            var states: [String: IndexState] = [:]
            for definition in definitions {
                states[definition.name] = try IndexWriter.register(definition, in: IndexRecords(connection: connection))
            }
            self.states = states
            published.withLock { $0 = states }
            self.checkpointer = try WALCheckpointer(writer: connection, synchronous: "NORMAL")
        } catch {
            connection.close()
            throw Database.storageError(error)
        }
        self.connection = connection
    }

    /// The index file's statements, on the writer's connection.
    private var records: IndexRecords { IndexRecords(connection: connection) }

    func close() async {
        guard !isClosed else { return }
        isClosed = true
        published.withLock { $0 = [:] }
        await checkpointer.close()
        connection.close()
    }

    /// Rewrites the index file without its free and half-empty pages (SQLite's `VACUUM`): CouchDB's
    /// view compaction.
    func compact() throws {
        try ensureOpen()
        // SQLite rewrites the file in one step: the task reports the rows to copy, and nothing done
        // until it ends.
        let task = tasks.begin(.indexCompaction, total: Int(states.values.reduce(0) { $0 + $1.rowCount }))
        defer { tasks.end(task) }
        do {
            try records.vacuum()
        } catch {
            throw Database.storageError(error)
        }
    }

    /// Copies what the index file's WAL holds into it now (``WALCheckpointer/checkpointNow()``).
    func checkpoint() async throws {
        try ensureOpen()
        try await checkpointer.checkpointNow()
    }

    private func ensureOpen() throws {
        if isClosed { throw DocStoreError(.databaseClosed, "The database is closed") }
    }

    /// Records `definition` in the index file, creating its rows table, or rebuilding it from scratch
    /// when the stored version, collation, ICU collator version or tokenizer differ.
    private static func register(_ definition: IndexDefinition, in records: IndexRecords) throws -> IndexState {
        guard !definition.name.isEmpty else { throw DocStoreError(.badRequest, "Index name must not be empty") }
        guard definition.reduceChunkSize >= 2 else { throw DocStoreError(.badRequest, "reduceChunkSize must be at least 2") }
        let collatorVersion = (definition.collation == .unicode ? CollationKey.unicodeVersion : "raw") + "/" + CollationKey.documentIDEncoding
        return try records.register(definition, collatorVersion: collatorVersion,
                                    tokenizer: FullTextTokenizer.option(stemming: definition.fullTextStemming))
    }

    /// Registers (or re-registers) an index while the database is open.
    func register(_ definition: IndexDefinition) throws -> IndexState {
        try ensureOpen()
        do {
            let state = try IndexWriter.register(definition, in: records)
            states[definition.name] = state
            return state
        } catch {
            throw Database.storageError(error)
        }
    }

    /// Forgets the index `name` and deletes its rows (a Mango index whose design document went away).
    func drop(_ name: String) throws {
        try ensureOpen()
        guard let state = states.removeValue(forKey: name) else { return }
        do {
            try records.drop(indexID: state.id)
        } catch {
            throw Database.storageError(error)
        }
    }

    /// The registered index named `name`.
    /// The state of the index `name` as last published by the writer, without waiting for it; `nil`
    /// when there is no such index (or the writer is closed).
    nonisolated func publishedState(named name: String) -> IndexState? {
        published.withLock { $0[name] }
    }

    func state(named name: String) throws -> IndexState {
        try ensureOpen()
        guard let state = states[name] else {
            throw DocStoreError(.notFound, "No index named \"\(name)\" is registered")
        }
        return state
    }

    /// The names of the registered indexes.
    var names: [String] { states.keys.sorted() }

    // MARK: Updating

    private struct MappedDocument {
        let id: String
        let rows: [EncodedRow]
        /// The full-text keys emitted (``FullTextSearch/createKey(_:)``): each a field to search.
        var texts: [(text: String, valueJSON: [UInt8])] = []
        let failure: String?
    }

    private struct EncodedRow {
        let key: [UInt8]
        let keyJSON: [UInt8]
        let valueJSON: [UInt8]
        let valueNumber: Double?
        /// The value when it is an integer (exact, unlike ``valueNumber``).
        let valueInteger: Int?
    }

    private struct Window {
        /// Each changed document: its sequence, its current revision (`nil` when deleted), its id and
        /// its row in the database file.
        var documents: [(sequence: Int64, document: Document?, id: String, row: Int64)] = []
        /// For a ``IndexDefinition/batchMap``: the live documents unparsed (``documents`` then holds
        /// bodiless stand-ins for them).
        var raw: [RawDocument] = []
        /// What the map function emitted for each of ``documents``.
        var mapped: [MappedDocument] = []
        var purged: [String] = []
        var upper: Int64 = 0
        /// Compaction dropped purge records after the sequence asked for: nothing was read.
        var needsRebuild = false
    }

    /// Brings index `name` up to date with every document committed so far and returns its state.
    ///
    /// Windows are read, parsed and mapped on another thread while the window before is written, so
    /// a long catch-up keeps two cores busy, like CouchDB's separate mapper and writer processes.
    @discardableResult
    func update(_ name: String, documents: ReaderPool) throws -> IndexState {
        var state = try state(named: name)
        let definition = state.definition
        do {
            // From an empty index, a document at or below the database's current sequence is read
            // once in this catch-up, so deleting its previous rows can be skipped. A write during the
            // catch-up moves a document above that sequence, where it may be read a second time.
            func databaseSequence() throws -> Int64 { try documents.read { try DocumentRecords(connection: $0).lastChangeSequence() } }
            var freshUpTo = state.lastSequence == 0 && state.rowCount == 0 ? try databaseSequence() : 0
            // The first window is read before taking the index file's write lock, so an index that is
            // current costs one read.
            var window = try IndexWriter.readAndMap(after: state.lastSequence, documents: documents, definition: definition)
            if window.needsRebuild {
                // Compaction dropped purge records this index had not read: the rows of those
                // documents can no longer be found by id, so the index is built again.
                try drop(name)
                state = try register(definition)
                freshUpTo = try databaseSequence()
                window = try IndexWriter.readAndMap(after: state.lastSequence, documents: documents, definition: definition)
            }
            // A catch-up longer than one window is listed while it runs (``Database/activeTasks``),
            // with the documents changed since the index's last update as its total.
            var task: (id: Int, done: Int)? = nil
            defer { if let task { tasks.end(task.id) } }
            if window.documents.count == IndexWriter.batchSize {
                let after = window.upper
                let rest = try documents.read { try DocumentRecords(connection: $0).pendingCount(since: after) }
                task = (tasks.begin(.indexing(indexName: name), total: window.documents.count + rest), 0)
            }
            while window.upper > state.lastSequence {
                var committed = state
                var next = window
                // After a full window, the next is read and mapped by a helper while this one is written.
                let prefetch = HelpedMap<Int64, Window>(.indexPrefetch) { upper in
                    try IndexWriter.readAndMap(after: upper, documents: documents, definition: definition)
                }
                defer { prefetch.stop() }
                try connection.transaction(immediate: true) {
                    for written in 1...IndexWriter.windowsPerTransaction {
                        // A short window is the last one.
                        let more = next.documents.count == IndexWriter.batchSize
                        let ahead = more ? prefetch.submit(next.upper) : nil
                        try write(window: next, state: &committed, freshUpTo: freshUpTo)
                        if let current = task {
                            task?.done = current.done + next.documents.count
                            tasks.advance(current.id, to: current.done + next.documents.count)
                        }
                        guard let ahead else {
                            next = Window()
                            return
                        }
                        next = try prefetch.output(at: ahead)
                        if next.upper <= committed.lastSequence || written == IndexWriter.windowsPerTransaction { return }
                    }
                }
                state = committed
                states[name] = state
                window = next
            }
        } catch {
            throw Database.storageError(error)
        }
        return state
    }

    /// The next documents after `sequence` (their latest revisions), mapped, and the purges among them.
    private static func readAndMap(after sequence: Int64, documents: ReaderPool, definition: IndexDefinition) throws -> Window {
        var window = try documents.readConsistently { connection in
            var window = Window()
            if sequence > 0, try Schema.trimmedPurges(connection).through > sequence {
                window.needsRebuild = true
                return window
            }
            let records = DocumentRecords(connection: connection)
            try records.changedDocuments(after: sequence, limit: IndexWriter.batchSize, withTrees: definition.includesConflicts) { changed in
                let seq = changed.sequence
                let id = changed.id
                var document: Document? = nil
                // Map functions that see `_conflicts` get the live document's (and, in the raw form
                // design documents' views read, its `_deleted_conflicts`).
                let none: (conflicts: [RevisionID], deletedConflicts: [RevisionID]) = ([], [])
                let leaves = definition.includesConflicts && !changed.isDeleted ? (try? changed.otherLeaves()) ?? none : none
                let conflicts = leaves.conflicts
                if definition.batchMap != nil, !changed.isDeleted, let revision = changed.revision {
                    var raw = RawDocument(id: id, revision: revision, sequence: seq, body: changed.body,
                                          created: changed.created, updated: changed.updated)
                    raw.conflicts = conflicts
                    raw.deletedConflicts = leaves.deletedConflicts
                    window.raw.append(raw)
                    document = Document(id: id, revision: revision)
                } else if !changed.isDeleted, let revision = changed.revision {
                    document = try? changed.withBody { body in
                        try Database.makeDocument(id: id, revision: revision, isDeleted: false, body: body, sequence: seq,
                                                  created: changed.created, updated: changed.updated)
                    }
                    document?.conflicts = conflicts
                }
                window.documents.append((seq, document, id, changed.row))
                window.upper = seq
            }
            let full = window.documents.count == IndexWriter.batchSize
            for purge in try records.purges(after: sequence, through: full ? window.upper : nil) {
                window.purged.append(purge.id)
                window.upper = max(window.upper, purge.sequence)
            }
            return window
        }
        if window.needsRebuild { return window }
        if let batchMap = definition.batchMap {
            var results = batchMap(window.raw).makeIterator()
            window.mapped = window.documents.map { entry in
                guard entry.document != nil, let result = results.next() else { return MappedDocument(id: entry.id, rows: [], failure: nil) }
                return encode(result.map { $0.map { ($0.key, $0.value) } }, id: entry.id, definition: definition)
            }
        } else {
            window.mapped = window.documents.map { entry in map(entry.document, id: entry.id, definition: definition) }
        }
        return window
    }

    /// Runs the map function over one document, validating what it emits.
    private static func map(_ document: Document?, id: String, definition: IndexDefinition) -> MappedDocument {
        guard let document else { return MappedDocument(id: id, rows: [], failure: nil) }
        var emitted: [(JSON, JSON?)] = []
        let outcome = Result<[(JSON, JSON?)], any Error> {
            try definition.map(document) { key, value in emitted.append((key, value)) }
            return emitted
        }
        return encode(outcome, id: id, definition: definition)
    }

    /// A document's emitted rows, validated and encoded, or its failure.
    private static func encode(_ outcome: Result<[(JSON, JSON?)], any Error>, id: String, definition: IndexDefinition) -> MappedDocument {
        do {
            let emitted = try outcome.get()
            var rows: [EncodedRow] = []
            rows.reserveCapacity(emitted.count)
            var texts: [(text: String, valueJSON: [UInt8])] = []
            for (key, value) in emitted {
                let value = value ?? .null
                if let text = FullTextSearch.text(of: key) {
                    guard let valueJSON = try? value.serialized() else {
                        throw DocStoreError(.indexFailure, "map function emitted a value JSON cannot represent: \(value)")
                    }
                    texts.append((text, valueJSON))
                    continue
                }
                let keyJSON: [UInt8], valueJSON: [UInt8]
                do {
                    keyJSON = try key.serialized()
                    valueJSON = try value.serialized()
                } catch {
                    throw DocStoreError(.indexFailure, "map function emitted a value JSON cannot represent: \(key) → \(value)")
                }
                var integer: Int? = nil
                if case .integer(let n) = value { integer = n }
                rows.append(EncodedRow(key: CollationKey.encode(key, collation: definition.collation), keyJSON: keyJSON,
                                       valueJSON: valueJSON, valueNumber: value.doubleValue, valueInteger: integer))
            }
            return MappedDocument(id: id, rows: orderingDuplicates(rows), texts: texts, failure: nil)
        } catch let error as DocStoreError {
            return MappedDocument(id: id, rows: [], failure: error.reason)
        } catch {
            return MappedDocument(id: id, rows: [], failure: "map function threw: \(error)")
        }
    }

    /// The rows in the order their `emit` counters are given: rows a document emits under one key come
    /// in the order of their values, as CouchDB keeps them (Erlang's term order, in either direction of
    /// a query); the order of rows under different keys does not matter (their keys order them).
    private static func orderingDuplicates(_ rows: [EncodedRow]) -> [EncodedRow] {
        guard rows.count > 1 else { return rows }
        let repeatsAKey: Bool
        if rows.count <= 16 {
            // Pairwise, without allocating: most documents emit a few rows.
            repeatsAKey = rows.indices.contains { i in rows[(i + 1)...].contains { $0.keyJSON == rows[i].keyJSON } }
        } else {
            var seen = Set<[UInt8]>()
            repeatsAKey = rows.contains { !seen.insert($0.keyJSON).inserted }
        }
        guard repeatsAKey else { return rows }
        // Only the values are parsed back, and only for a document that repeats a key.
        let values = rows.map { (try? JSON(parsing: $0.valueJSON)) ?? .null }
        return rows.indices.sorted { a, b in
            if rows[a].keyJSON != rows[b].keyJSON { return a < b }
            if ErlangTermOrder.precedes(values[a], values[b]) { return true }
            if ErlangTermOrder.precedes(values[b], values[a]) { return false }
            return a < b
        }.map { rows[$0] }
    }

    /// Writes one window's rows, inside the caller's transaction.
    private func write(window: Window, state: inout IndexState, freshUpTo: Int64) throws {
        let indexID = state.id
        var updated = state
        let records = self.records
        // The first full-text key makes the index's full-text tables.
        if !updated.hasText, window.mapped.contains(where: { !$0.texts.isEmpty }) {
            if let fullTextError { throw fullTextError }
            try records.createTextTables(for: updated)
            updated.hasText = true
        }
        let rows = try IndexRowWriter(connection: connection, state: updated)
        let texts = updated.hasText ? try IndexTextWriter(connection: connection, state: updated) : nil
        // The window's old fields go first, all at once: see IndexTextWriter.remove(documentIDs:).
        try texts?.remove(documentIDs: Set((window.purged + window.documents.filter { $0.sequence > freshUpTo }.map(\.id)).map(ExactString.init)))
        for id in window.purged {
            try rows.removeRows(of: id, from: &updated)
            try records.setMapError(nil, indexID: indexID, documentID: id)
        }
        for (entry, document) in zip(window.documents, window.mapped) {
            let isNew = entry.sequence <= freshUpTo
            if !isNew { try rows.removeRows(of: entry.id, from: &updated) }
            if document.failure != nil || !isNew {
                try records.setMapError(document.failure, indexID: indexID, documentID: entry.id)
            }
            if let texts {
                for (field, text) in document.texts.enumerated() {
                    try texts.insert(documentID: entry.id, documentRow: entry.row, field: field, text: text.text, valueJSON: text.valueJSON)
                }
            }
            guard !document.rows.isEmpty else { continue }
            let documentKey = CollationKey.encodeDocumentID(entry.id, collation: state.definition.collation)
            for (counter, row) in document.rows.enumerated() {
                try rows.insertRow(key: row.key, documentKey: documentKey, emit: counter, documentID: entry.id, documentRow: entry.row,
                                   keyJSON: row.keyJSON, valueJSON: row.valueJSON, valueNumber: row.valueNumber,
                                   valueInteger: row.valueInteger, into: &updated)
            }
        }
        updated.lastSequence = window.upper
        try records.saveProgress(updated)
        state = updated
    }
}
