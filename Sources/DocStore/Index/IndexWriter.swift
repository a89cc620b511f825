import Foundation
import Synchronization

/// The single writer of a database's index file: registers indexes, rebuilds them when their version
/// (or the ICU collator) changes, and brings them up to date from the changes feed.
///
/// It reads documents through the database's reader pool and writes only the index file, so document
/// writers never wait for indexing. Updates are incremental: only documents changed since the index's
/// last sequence are mapped again; deleted and purged documents lose their rows.
actor IndexWriter {
    /// Indexing (SQLite writes, and the map functions it runs: Swift closures or JavaScript) runs on a
    /// serial queue of its own, never on the cooperative pool (DESIGN.md §6): a map function is the
    /// app's code, and may take as long as it likes.
    nonisolated let executor = SerialQueueExecutor(label: "docstore.index-writer")
    nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }
    let connection: SQLiteConnection
    private var states: [String: IndexState] = [:] {
        didSet { published.withLock { $0 = states } }
    }
    /// A copy of `states`, readable without a hop to the writer's queue (``publishedState(named:)``):
    /// a query asks for its index's state every time, and the hop would cost it more than its read.
    private nonisolated let published = Mutex<[String: IndexState]>([:])
    private var isClosed = false
    /// Why full-text tables cannot be made here (a SQLite without FTS5), or `nil`.
    private var fullTextError: DocStoreError?
    /// Copies the index file's WAL back on another thread (``WALCheckpointer``).
    private let checkpointer: WALCheckpointer
    /// Documents read and mapped at a time.
    static let batchSize = 500
    /// Windows written per transaction: a large catch-up (a new or rebuilt index) commits every
    /// 10 000 documents rather than every window, since each commit rewrites every B-tree page the
    /// window touched — with random keys, most of the index.
    static let windowsPerTransaction = 20

    init(fileURL: URL, definitions: [IndexDefinition]) throws {
        let connection = try SQLiteConnection(path: fileURL.path)
        do {
            _ = try connection.scalarInt("SELECT count(*) FROM sqlite_master")
            let mode = try connection.prepare("PRAGMA journal_mode = WAL")
            _ = try mode.step()
            connection.resetActiveStatements()
            try connection.execute("PRAGMA synchronous = NORMAL")
            try connection.execute("PRAGMA cache_size = -16384")
            try IndexSchema.prepare(connection)
            // Without FTS5 the file still opens; only full-text indexes fail, naming why.
            do {
                try FullTextTokenizer.register(on: connection)
            } catch let error as DocStoreError where error.code == .fullTextUnavailable {
                fullTextError = error
            }
            var states: [String: IndexState] = [:]
            for definition in definitions {
                states[definition.name] = try IndexWriter.register(definition, on: connection)
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

    func close() {
        guard !isClosed else { return }
        isClosed = true
        published.withLock { $0 = [:] }
        checkpointer.close()
        connection.close()
    }

    /// What indexes `names` take in the index file: the bytes of their tables' and their SQL indexes'
    /// pages (`file`), and of those the bytes in use (`active`); known indexes only.
    func sizes(of names: [String]) throws -> (file: Int, active: Int) {
        try ensureOpen()
        let tables = names.compactMap { states[$0]?.id }.map { "'\(IndexSchema.rowsTable($0))'" }
        guard !tables.isEmpty else { return (0, 0) }
        let statement = try connection.prepare("""
            SELECT coalesce(sum(pgsize), 0), coalesce(sum(pgsize - unused), 0) FROM dbstat
            WHERE name IN (SELECT name FROM sqlite_schema WHERE tbl_name IN (\(tables.joined(separator: ", "))))
            """)
        defer { connection.resetActiveStatements() }
        guard try statement.step() else { return (0, 0) }
        return (statement.int(0), statement.int(1))
    }

    /// Rewrites the index file without its free and half-empty pages (SQLite's `VACUUM`): CouchDB's
    /// view compaction.
    func compact() throws {
        try ensureOpen()
        do {
            try connection.execute("VACUUM")
        } catch {
            throw Database.storageError(error)
        }
    }

    /// Copies what the index file's WAL holds into it now (``WALCheckpointer/checkpointNow()``).
    func checkpoint() throws {
        try ensureOpen()
        try checkpointer.checkpointNow()
    }

    private func ensureOpen() throws {
        if isClosed { throw DocStoreError(.databaseClosed, "The database is closed") }
    }

    /// Records `definition` in the index file, creating its rows table, or rebuilding it from scratch
    /// when the stored version, collation or ICU collator version differ.
    private static func register(_ definition: IndexDefinition, on connection: SQLiteConnection) throws -> IndexState {
        guard !definition.name.isEmpty else { throw DocStoreError(.badRequest, "Index name must not be empty") }
        guard definition.reduceChunkSize >= 2 else { throw DocStoreError(.badRequest, "reduceChunkSize must be at least 2") }
        let collatorVersion = (definition.collation == .unicode ? CollationKey.unicodeVersion : "raw") + "/" + CollationKey.documentIDEncoding
        return try connection.transaction(immediate: true) {
            let tokenizer = FullTextTokenizer.option(stemming: definition.fullTextStemming)
            let statement = try connection.prepare(
                "SELECT id, version, collation, collator_version, last_seq, row_count, int_sum, other_values, tokenizer, has_text FROM indexes WHERE name = ?")
            try statement.bind(definition.name, at: 1)
            if try statement.step() {
                let id = statement.int64(0)
                let unchanged = statement.text(1) == definition.version && statement.text(2) == definition.collation.rawValue
                    && statement.text(3) == collatorVersion && statement.text(8) == tokenizer
                var state = IndexState(id: id, definition: definition, lastSequence: statement.int64(4), rowCount: statement.int64(5))
                let aggregatesKnown = !statement.isNull(7)
                state.integerSum = statement.isNull(6) ? nil : statement.int64(6)
                state.otherValues = aggregatesKnown ? statement.int64(7) : 0
                state.hasText = statement.int64(9) != 0
                statement.reset()
                if unchanged {
                    if !aggregatesKnown { try computeAggregates(&state, on: connection) }
                    return state
                }
                try connection.execute("DROP TABLE IF EXISTS \(IndexSchema.rowsTable(id))")
                try connection.execute(IndexSchema.dropTextTables(id))
                try connection.execute(IndexSchema.createRowsTable(id))
                try connection.run("DELETE FROM map_errors WHERE index_id = ?", [.integer(id)])
                try connection.run(
                    "UPDATE indexes SET version = ?, collation = ?, collator_version = ?, last_seq = 0, row_count = 0, int_sum = 0, other_values = 0, tokenizer = ?, has_text = 0 WHERE id = ?",
                    [.text(definition.version), .text(definition.collation.rawValue), .text(collatorVersion), .text(tokenizer), .integer(id)])
                return IndexState(id: id, definition: definition, lastSequence: 0, rowCount: 0)
            }
            statement.reset()
            try connection.run(
                "INSERT INTO indexes (name, version, collation, collator_version, last_seq, row_count, int_sum, other_values, tokenizer) VALUES (?, ?, ?, ?, 0, 0, 0, 0, ?)",
                [.text(definition.name), .text(definition.version), .text(definition.collation.rawValue), .text(collatorVersion), .text(tokenizer)])
            let id = try connection.scalarInt("SELECT last_insert_rowid()")!
            try connection.execute(IndexSchema.createRowsTable(id))
            return IndexState(id: id, definition: definition, lastSequence: 0, rowCount: 0)
        }
    }

    /// Computes the whole-index aggregates of an index written before they were kept (one scan).
    private static func computeAggregates(_ state: inout IndexState, on connection: SQLiteConnection) throws {
        let table = state.table
        state.otherValues = try connection.scalarInt("SELECT count(*) FROM \(table) WHERE value_is_int = 0") ?? 0
        do {
            // SQLite's sum() of integers is exact and fails on overflow.
            state.integerSum = try connection.scalarInt(
                "SELECT coalesce(sum(CAST(value_json AS INTEGER)), 0) FROM \(table) WHERE value_is_int = 1")
        } catch {
            state.integerSum = nil
        }
        try connection.run("UPDATE indexes SET int_sum = ?, other_values = ? WHERE id = ?",
                           [state.integerSum.map { .integer($0) } ?? .null, .integer(state.otherValues), .integer(state.id)])
    }

    /// Registers (or re-registers) an index while the database is open.
    func register(_ definition: IndexDefinition) throws -> IndexState {
        try ensureOpen()
        do {
            let state = try IndexWriter.register(definition, on: connection)
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
            try connection.transaction(immediate: true) {
                try connection.execute("DROP TABLE IF EXISTS \(IndexSchema.rowsTable(state.id))")
                try connection.execute(IndexSchema.dropTextTables(state.id))
                try connection.run("DELETE FROM map_errors WHERE index_id = ?", [.integer(state.id)])
                try connection.run("DELETE FROM indexes WHERE id = ?", [.integer(state.id)])
            }
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
            let freshUpTo = state.lastSequence == 0 && state.rowCount == 0
                ? try documents.read { try DocumentRecords(connection: $0).lastChangeSequence() } : 0
            // The first window is read before taking the index file's write lock, so an index that is
            // current costs one read.
            var window = try IndexWriter.readAndMap(after: state.lastSequence, documents: documents, definition: definition)
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
            let statement = try connection.prepare(
                "SELECT d.seq, d.id, d.rev, d.deleted, d.body, d.created, d.updated, d.doc\(definition.includesConflicts ? ", d.tree" : "") FROM changes c JOIN docs d ON d.doc = c.doc AND d.seq = c.seq WHERE c.seq > ? ORDER BY c.seq LIMIT ?")
            try statement.bind(sequence, at: 1)
            try statement.bind(IndexWriter.batchSize, at: 2)
            while try statement.step() {
                let seq = statement.int64(0)
                let id = statement.text(1)
                var document: Document? = nil
                // Map functions that see `_conflicts` get the live document's.
                let conflicts = definition.includesConflicts && statement.int64(3) == 0
                    ? (try? statement.withBlob(8, RevisionTree.conflicts(decoding:))) ?? [] : []
                if definition.batchMap != nil, statement.int64(3) == 0, let revision = statement.revision(2) {
                    var raw = RawDocument(id: id, revision: revision, sequence: seq, body: statement.blob(4),
                                          created: statement.double(5), updated: statement.double(6))
                    raw.conflicts = conflicts
                    window.raw.append(raw)
                    document = Document(id: id, revision: revision)
                } else if statement.int64(3) == 0, let revision = statement.revision(2) {
                    document = try? statement.withBlob(4) { body in
                        try Database.makeDocument(id: id, revision: revision, isDeleted: false, body: body, sequence: seq,
                                                  created: statement.double(5), updated: statement.double(6))
                    }
                    document?.conflicts = conflicts
                }
                window.documents.append((seq, document, id, statement.int64(7)))
                window.upper = seq
            }
            let full = window.documents.count == IndexWriter.batchSize
            let purges = try connection.prepare(
                full ? "SELECT seq, id FROM purges WHERE seq > ? AND seq <= ? ORDER BY seq"
                     : "SELECT seq, id FROM purges WHERE seq > ? ORDER BY seq")
            try purges.bind(sequence, at: 1)
            if full { try purges.bind(window.upper, at: 2) }
            while try purges.step() {
                window.purged.append(purges.text(1))
                window.upper = max(window.upper, purges.int64(0))
            }
            return window
        }
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
            return MappedDocument(id: id, rows: rows, texts: texts, failure: nil)
        } catch let error as DocStoreError {
            return MappedDocument(id: id, rows: [], failure: error.reason)
        } catch {
            return MappedDocument(id: id, rows: [], failure: "map function threw: \(error)")
        }
    }

    /// Writes one window's rows, inside the caller's transaction.
    private func write(window: Window, state: inout IndexState, freshUpTo: Int64) throws {
        let table = state.table
        let indexID = state.id
        var updated = state
        do {
            // Removes a document's rows, taking their values out of the aggregates.
            let deleteRows = try connection.prepare("DELETE FROM \(table) WHERE doc_id = ? RETURNING value_is_int, value_json")
            // The first full-text key makes the index's full-text tables.
            if !updated.hasText, window.mapped.contains(where: { !$0.texts.isEmpty }) {
                if let fullTextError { throw fullTextError }
                try connection.execute(IndexSchema.createTextTables(indexID, tokenizer: FullTextTokenizer.option(stemming: updated.definition.fullTextStemming)))
                try connection.run("UPDATE indexes SET has_text = 1 WHERE id = ?", [.integer(indexID)])
                updated.hasText = true
            }
            let texts = updated.hasText ? try TextWriter(connection: connection, state: updated) : nil
            // The window's old fields go first, all at once: see TextWriter.remove(documentIDs:).
            try texts?.remove(documentIDs: Set(window.purged + window.documents.filter { $0.sequence > freshUpTo }.map(\.id)))
            func removeRows(of id: String) throws {
                deleteRows.reset()
                try deleteRows.bind(id, at: 1)
                while try deleteRows.step() {
                    updated.rowCount -= 1
                    if deleteRows.int64(0) == 0 {
                        updated.account(integer: nil, sign: -1)
                    } else if let integer = Int(deleteRows.text(1)) {
                        updated.account(integer: integer, sign: -1)
                    } else {
                        updated.integerSum = nil  // an integer row whose text does not read back: sum unknown
                    }
                }
            }
            for id in window.purged {
                try removeRows(of: id)
                try connection.run("DELETE FROM map_errors WHERE index_id = ? AND doc_id = ?", [.integer(indexID), .text(id)])
            }
            let insert = try connection.prepare(
                "INSERT INTO \(table) (key, doc_key, emit, doc_id, key_json, value_json, value_num, value_is_int, doc_row) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)")
            for (entry, document) in zip(window.documents, window.mapped) {
                let isNew = entry.sequence <= freshUpTo
                if !isNew { try removeRows(of: entry.id) }
                if let failure = document.failure {
                    try connection.run("INSERT OR REPLACE INTO map_errors (index_id, doc_id, message) VALUES (?, ?, ?)",
                                       [.integer(indexID), .text(entry.id), .text(failure)])
                } else if !isNew {
                    try connection.run("DELETE FROM map_errors WHERE index_id = ? AND doc_id = ?", [.integer(indexID), .text(entry.id)])
                }
                if let texts {
                    for (field, text) in document.texts.enumerated() {
                        try texts.insert(documentID: entry.id, documentRow: entry.row, field: field, text: text.text, valueJSON: text.valueJSON)
                    }
                }
                guard !document.rows.isEmpty else { continue }
                let documentKey = CollationKey.encodeDocumentID(entry.id, collation: state.definition.collation)
                for (counter, row) in document.rows.enumerated() {
                    insert.reset()
                    try insert.bind(blob: row.key, at: 1)
                    try insert.bind(blob: documentKey, at: 2)
                    try insert.bind(counter, at: 3)
                    try insert.bind(entry.id, at: 4)
                    try insert.bind(blob: row.keyJSON, at: 5)
                    try insert.bind(blob: row.valueJSON, at: 6)
                    if let number = row.valueNumber { try insert.bind(number, at: 7) } else { try insert.bindNull(at: 7) }
                    try insert.bind(row.valueInteger != nil ? 1 : 0, at: 8)
                    try insert.bind(entry.row, at: 9)
                    _ = try insert.step()
                    updated.rowCount += 1
                    updated.account(integer: row.valueInteger, sign: 1)
                }
            }
            updated.lastSequence = window.upper
            try connection.run("UPDATE indexes SET last_seq = ?, row_count = ?, int_sum = ?, other_values = ? WHERE id = ?",
                               [.integer(updated.lastSequence), .integer(updated.rowCount),
                                updated.integerSum.map { .integer($0) } ?? .null, .integer(updated.otherValues), .integer(indexID)])
        }
        state = updated
    }
}

/// Writes one window's fields to an index's full-text tables (``IndexSchema/createTextTables(_:tokenizer:)``),
/// keeping the FTS5 index in step with single-row statements only (see there why).
private final class TextWriter {
    private let connection: SQLiteConnection
    private let select, deleteText, insertText, indexText, unindexText: SQLiteStatement
    /// The next field's row: one past the largest when the window began.
    private var nextRow: Int64

    init(connection: SQLiteConnection, state: IndexState) throws {
        let text = state.textTable, fts = state.fullTextTable
        self.connection = connection
        select = try connection.prepare("SELECT row, text FROM \(text) WHERE doc_id = ?")
        deleteText = try connection.prepare("DELETE FROM \(text) WHERE row = ?")
        insertText = try connection.prepare("INSERT INTO \(text) (row, doc_id, doc_row, field, text, value_json) VALUES (?, ?, ?, ?, ?, ?)")
        indexText = try connection.prepare("INSERT INTO \(fts) (rowid, text) VALUES (?, ?)")
        unindexText = try connection.prepare("INSERT INTO \(fts) (\(fts), rowid, text) VALUES ('delete', ?, ?)")
        nextRow = (try connection.scalarInt("SELECT coalesce(max(row), 0) FROM \(text)") ?? 0) + 1
    }

    /// Removes the fields of the documents `documentIDs`, from the FTS5 index (which needs their text)
    /// and the text table, in the order of their rows. FTS5 keeps pending changes in rowid order and
    /// writes them out as a segment whenever a change comes for a lower rowid than the last: removing
    /// each document's old fields just before inserting its new ones (at the end) did that once per
    /// document, and updating an index was ten times slower than building it.
    func remove(documentIDs: Set<String>) throws {
        var fields: [(row: Int64, text: String)] = []
        for documentID in documentIDs {
            select.reset()
            try select.bind(documentID, at: 1)
            while try select.step() { fields.append((select.int64(0), select.text(1))) }
        }
        select.reset()
        fields.sort { $0.row < $1.row }
        for field in fields {
            unindexText.reset()
            try unindexText.bind(field.row, at: 1)
            try unindexText.bind(field.text, at: 2)
            _ = try unindexText.step()
            deleteText.reset()
            try deleteText.bind(field.row, at: 1)
            _ = try deleteText.step()
        }
    }

    func insert(documentID: String, documentRow: Int64, field: Int, text: String, valueJSON: [UInt8]) throws {
        let row = nextRow
        nextRow += 1
        insertText.reset()
        try insertText.bind(row, at: 1)
        try insertText.bind(documentID, at: 2)
        try insertText.bind(documentRow, at: 3)
        try insertText.bind(field, at: 4)
        try insertText.bind(text, at: 5)
        try insertText.bind(blob: valueJSON, at: 6)
        _ = try insertText.step()
        indexText.reset()
        try indexText.bind(row, at: 1)
        try indexText.bind(text, at: 2)
        _ = try indexText.step()
    }
}
