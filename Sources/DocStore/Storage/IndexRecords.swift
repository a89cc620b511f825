import Foundation

/// The statements on a database's index file (`<name>.sqlite-idx`, ``IndexSchema``) that register,
/// drop and measure indexes and record their progress; ``IndexRowWriter`` writes an index's rows and
/// ``IndexTextWriter`` its full-text fields. The ``IndexWriter`` actor owns the connection and decides
/// what to write; only this folder speaks SQL.
struct IndexRecords {
    let connection: SQLiteConnection

    /// Opens (creating or migrating) the index file at `url` as its writer's connection: WAL, `NORMAL`
    /// synchronous, a 16 MiB cache, and DocStore's FTS5 tokenizer — without FTS5 the file still opens,
    /// and `fullTextError` says why full-text indexes cannot be made.
    static func open(_ url: URL) throws -> (connection: SQLiteConnection, fullTextError: DocStoreError?) {
        let connection = try SQLiteConnection(path: url.path)
        do {
            _ = try connection.scalarInt("SELECT count(*) FROM sqlite_master")
            let mode = try connection.prepare("PRAGMA journal_mode = WAL")
            _ = try mode.step()
            connection.resetActiveStatements()
            try connection.execute("PRAGMA synchronous = NORMAL")
            try connection.execute("PRAGMA cache_size = -16384")
            try IndexSchema.prepare(connection)
            var fullTextError: DocStoreError?
            do {
                try FullTextTokenizer.register(on: connection)
            } catch let error as DocStoreError where error.code == .fullTextUnavailable {
                fullTextError = error
            }
            return (connection, fullTextError)
        } catch {
            connection.close()
            throw error
        }
    }

    /// What the indexes `ids` take in the file: the bytes of their tables' and their SQL indexes' pages
    /// (`file`), and of those the bytes in use (`active`), from SQLite's `dbstat`.
    func sizes(ofIndexes ids: [Int64]) throws -> (file: Int, active: Int) {
        guard !ids.isEmpty else { return (0, 0) }
        let tables = ids.map { "'\(IndexSchema.rowsTable($0))'" }
        let statement = try connection.prepare("""
            SELECT coalesce(sum(pgsize), 0), coalesce(sum(pgsize - unused), 0) FROM dbstat
            WHERE name IN (SELECT name FROM sqlite_schema WHERE tbl_name IN (\(tables.joined(separator: ", "))))
            """)
        defer { connection.resetActiveStatements() }
        guard try statement.step() else { return (0, 0) }
        return (statement.int(0), statement.int(1))
    }

    /// Rewrites the file without its free and half-empty pages.
    func vacuum() throws {
        try connection.execute("VACUUM")
    }

    /// Records `definition`, creating its rows table, or emptying it when the stored version,
    /// collation, collator (`collatorVersion`) or tokenizer differ; in one transaction.
    func register(_ definition: IndexDefinition, collatorVersion: String, tokenizer: String) throws -> IndexState {
        try connection.transaction(immediate: true) {
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
                    if !aggregatesKnown { try computeAggregates(&state) }
                    return state
                }
                try dropTables(of: id)
                try connection.execute(IndexSchema.createRowsTable(id))
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
    private func computeAggregates(_ state: inout IndexState) throws {
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

    /// Drops an index's rows, full-text tables and map errors (its row in `indexes` stays).
    private func dropTables(of id: Int64) throws {
        try connection.execute("DROP TABLE IF EXISTS \(IndexSchema.rowsTable(id))")
        try connection.execute(IndexSchema.dropTextTables(id))
        try connection.run("DELETE FROM map_errors WHERE index_id = ?", [.integer(id)])
    }

    /// Deletes index `id` and everything it has, in one transaction.
    func drop(indexID id: Int64) throws {
        try connection.transaction(immediate: true) {
            try dropTables(of: id)
            try connection.run("DELETE FROM indexes WHERE id = ?", [.integer(id)])
        }
    }

    /// Makes the full-text tables of an index (at its first full-text key).
    func createTextTables(for state: IndexState) throws {
        try connection.execute(IndexSchema.createTextTables(state.id, tokenizer: FullTextTokenizer.option(stemming: state.definition.fullTextStemming)))
        try connection.run("UPDATE indexes SET has_text = 1 WHERE id = ?", [.integer(state.id)])
    }

    /// `state` with how far the index is, its row count and its aggregates as stored (in the
    /// connection's snapshot); aggregates not counted yet are left as `state` has them.
    func withStoredProgress(_ state: IndexState) throws -> IndexState {
        var current = state
        let statement = try connection.prepare("SELECT last_seq, row_count, int_sum, other_values FROM indexes WHERE id = ?")
        defer { statement.reset() }
        try statement.bind(state.id, at: 1)
        guard try statement.step() else { return state }
        current.lastSequence = statement.int64(0)
        current.rowCount = statement.int64(1)
        if !statement.isNull(3) {
            current.integerSum = statement.isNull(2) ? nil : statement.int64(2)
            current.otherValues = statement.int64(3)
        }
        return current
    }

    /// Records how far an index is, its row count and its aggregates.
    func saveProgress(_ state: IndexState) throws {
        try connection.run("UPDATE indexes SET last_seq = ?, row_count = ?, int_sum = ?, other_values = ? WHERE id = ?",
                           [.integer(state.lastSequence), .integer(state.rowCount),
                            state.integerSum.map { .integer($0) } ?? .null, .integer(state.otherValues), .integer(state.id)])
    }

    /// Records why the map function failed on document `documentID`, or (`nil`) that it no longer does.
    func setMapError(_ message: String?, indexID: Int64, documentID: String) throws {
        if let message {
            try connection.run("INSERT OR REPLACE INTO map_errors (index_id, doc_id, message) VALUES (?, ?, ?)",
                               [.integer(indexID), .text(documentID), .text(message)])
        } else {
            try connection.run("DELETE FROM map_errors WHERE index_id = ? AND doc_id = ?", [.integer(indexID), .text(documentID)])
        }
    }
}

/// Writes one index's rows during a window: removes a document's rows (taking their values out of the
/// index's aggregates) and inserts new ones, with statements prepared once per window.
struct IndexRowWriter {
    private let deleteRows, insert: SQLiteStatement

    init(connection: SQLiteConnection, state: IndexState) throws {
        let table = state.table
        deleteRows = try connection.prepare("DELETE FROM \(table) WHERE doc_id = ? RETURNING value_is_int, value_json")
        insert = try connection.prepare(
            "INSERT INTO \(table) (key, doc_key, emit, doc_id, key_json, value_json, value_num, value_is_int, doc_row) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)")
    }

    /// Removes the rows of document `id`, accounting for them in `state`.
    func removeRows(of id: String, from state: inout IndexState) throws {
        deleteRows.reset()
        try deleteRows.bind(id, at: 1)
        while try deleteRows.step() {
            state.rowCount -= 1
            if deleteRows.int64(0) == 0 {
                state.account(integer: nil, sign: -1)
            } else if let integer = Int(deleteRows.text(1)) {
                state.account(integer: integer, sign: -1)
            } else {
                state.integerSum = nil  // an integer row whose text does not read back: sum unknown
            }
        }
    }

    /// Inserts one emitted row of document `documentID` (its `emit`-th), accounting for it in `state`.
    func insertRow(key: [UInt8], documentKey: [UInt8], emit: Int, documentID: String, documentRow: Int64,
                   keyJSON: [UInt8], valueJSON: [UInt8], valueNumber: Double?, valueInteger: Int?,
                   into state: inout IndexState) throws {
        insert.reset()
        try insert.bind(blob: key, at: 1)
        try insert.bind(blob: documentKey, at: 2)
        try insert.bind(emit, at: 3)
        try insert.bind(documentID, at: 4)
        try insert.bind(blob: keyJSON, at: 5)
        try insert.bind(blob: valueJSON, at: 6)
        if let valueNumber { try insert.bind(valueNumber, at: 7) } else { try insert.bindNull(at: 7) }
        try insert.bind(valueInteger != nil ? 1 : 0, at: 8)
        try insert.bind(documentRow, at: 9)
        _ = try insert.step()
        state.rowCount += 1
        state.account(integer: valueInteger, sign: 1)
    }
}
