import CSQLite
import Foundation

/// The baseline: the same storage work done directly with the SQLite C API on a minimal schema,
/// with JSON kept as opaque bytes (no parsing, no revision trees).
final class RawSQLiteBaseline {
    let db: OpaquePointer
    let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    init(path: String) {
        var handle: OpaquePointer?
        precondition(sqlite3_open_v2(path, &handle, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nil) == SQLITE_OK)
        db = handle!
        exec("PRAGMA journal_mode = WAL")
        exec("PRAGMA synchronous = NORMAL")
        exec("CREATE TABLE IF NOT EXISTS docs (seq INTEGER PRIMARY KEY, id TEXT UNIQUE, rev TEXT, deleted INT, json BLOB)")
    }

    deinit { sqlite3_close_v2(db) }

    func exec(_ sql: String) {
        let rc = sqlite3_exec(db, sql, nil, nil, nil)
        precondition(rc == SQLITE_OK, "\(sql): \(String(cString: sqlite3_errmsg(db)))")
    }

    func prepare(_ sql: String) -> OpaquePointer {
        var statement: OpaquePointer?
        precondition(sqlite3_prepare_v2(db, sql, -1, &statement, nil) == SQLITE_OK, String(cString: sqlite3_errmsg(db)))
        return statement!
    }

    private func bindText(_ statement: OpaquePointer, _ index: Int32, _ text: String) {
        sqlite3_bind_text(statement, index, text, -1, transient)
    }

    private func bindBlob(_ statement: OpaquePointer, _ index: Int32, _ bytes: [UInt8]) {
        bytes.withUnsafeBytes { _ = sqlite3_bind_blob(statement, index, $0.baseAddress, Int32($0.count), transient) }
    }

    private func insert(_ statement: OpaquePointer, id: String, body: [UInt8]) {
        bindText(statement, 1, id)
        bindText(statement, 2, "1-0123456789abcdef0123456789abcdef")
        sqlite3_bind_int(statement, 3, 0)
        bindBlob(statement, 4, body)
        precondition(sqlite3_step(statement) == SQLITE_DONE)
        sqlite3_reset(statement)
    }

    func insertBulk(ids: [String], bodies: [[UInt8]]) {
        let statement = prepare("INSERT INTO docs (id, rev, deleted, json) VALUES (?, ?, ?, ?)")
        exec("BEGIN IMMEDIATE")
        for (id, body) in zip(ids, bodies) { insert(statement, id: id, body: body) }
        exec("COMMIT")
        sqlite3_finalize(statement)
    }

    func insertSingle(ids: [String], bodies: [[UInt8]]) {
        let statement = prepare("INSERT INTO docs (id, rev, deleted, json) VALUES (?, ?, ?, ?)")
        for (id, body) in zip(ids, bodies) {
            exec("BEGIN IMMEDIATE")
            insert(statement, id: id, body: body)
            exec("COMMIT")
        }
        sqlite3_finalize(statement)
    }

    /// Point reads, copying each body out (what any caller must do before the next step).
    func get(ids: [String]) -> Int {
        let statement = prepare("SELECT rev, json FROM docs WHERE id = ?")
        var bytes = 0
        for id in ids {
            bindText(statement, 1, id)
            if sqlite3_step(statement) == SQLITE_ROW {
                let count = Int(sqlite3_column_bytes(statement, 1))
                let body = Array(UnsafeRawBufferPointer(start: sqlite3_column_blob(statement, 1), count: count))
                bytes += body.count
            }
            sqlite3_reset(statement)
        }
        sqlite3_finalize(statement)
        return bytes
    }

    /// Read-modify-write of one document per transaction (the body is written back changed by one byte).
    func update(ids: [String]) {
        let select = prepare("SELECT rev, json FROM docs WHERE id = ?")
        let update = prepare("UPDATE docs SET rev = ?, json = ? WHERE id = ?")
        for id in ids {
            exec("BEGIN IMMEDIATE")
            bindText(select, 1, id)
            precondition(sqlite3_step(select) == SQLITE_ROW)
            var body = Array(UnsafeRawBufferPointer(start: sqlite3_column_blob(select, 1), count: Int(sqlite3_column_bytes(select, 1))))
            sqlite3_reset(select)
            body[body.count - 2] = body[body.count - 2] == 0x20 ? 0x21 : 0x20
            bindText(update, 1, "2-0123456789abcdef0123456789abcdef")
            bindBlob(update, 2, body)
            bindText(update, 3, id)
            precondition(sqlite3_step(update) == SQLITE_DONE)
            sqlite3_reset(update)
            exec("COMMIT")
        }
        sqlite3_finalize(select)
        sqlite3_finalize(update)
    }

    /// Steps `statement` to its end, copying out the body in `column` of each row; the rows with one.
    private func copyBodies(_ statement: OpaquePointer?, column: Int32) -> Int {
        var rows = 0
        while sqlite3_step(statement) == SQLITE_ROW {
            let body = Array(UnsafeRawBufferPointer(start: sqlite3_column_blob(statement, column), count: Int(sqlite3_column_bytes(statement, column))))
            rows += body.isEmpty ? 0 : 1
        }
        return rows
    }

    /// Every body, copied out, in sequence order.
    func scan() -> Int {
        let statement = prepare("SELECT seq, id, json FROM docs ORDER BY seq")
        let count = copyBodies(statement, column: 2)
        sqlite3_finalize(statement)
        return count
    }

    /// The changes feed: sequence, id, revision, deleted flag of every row.
    func changes() -> Int {
        let statement = prepare("SELECT seq, id, rev, deleted FROM docs ORDER BY seq")
        var count = 0
        while sqlite3_step(statement) == SQLITE_ROW {
            _ = String(cString: sqlite3_column_text(statement, 1))
            _ = String(cString: sqlite3_column_text(statement, 2))
            count += 1
        }
        sqlite3_finalize(statement)
        return count
    }

    /// An index on score holding name, built with SQLite's own JSON functions.
    func buildIndex() {
        exec("DROP TABLE IF EXISTS idx")
        exec("CREATE TABLE idx (key REAL, docid TEXT, value TEXT)")
        exec("CREATE INDEX idx_key ON idx (key, docid)")
        exec("BEGIN IMMEDIATE")
        exec("INSERT INTO idx SELECT json_extract(json, '$.score'), id, json_extract(json, '$.name') FROM docs")
        exec("COMMIT")
    }

    /// A two-field index (type, score) over the documents that have both, as a Mango json index holds.
    func buildTwoFieldIndex() {
        exec("DROP TABLE IF EXISTS idx2")
        exec("CREATE TABLE idx2 (k1 TEXT, k2 REAL, docid TEXT)")
        exec("CREATE INDEX idx2_key ON idx2 (k1, k2, docid)")
        exec("BEGIN IMMEDIATE")
        exec("""
            INSERT INTO idx2 SELECT json_extract(json, '$.type'), json_extract(json, '$.score'), id FROM docs
            WHERE json_type(json, '$.type') IS NOT NULL AND json_type(json, '$.score') IS NOT NULL
            """)
        exec("COMMIT")
    }

    /// The documents whose score is in each range, through the score index, bodies copied out.
    func findByScore(_ ranges: [(Int, Int)]) -> Int {
        let statement = prepare("""
            SELECT docs.id, docs.json FROM idx JOIN docs ON docs.id = idx.docid
            WHERE idx.key >= ? AND idx.key <= ? ORDER BY idx.key, idx.docid
            """)
        var rows = 0
        for (low, high) in ranges {
            sqlite3_bind_int64(statement, 1, Int64(low))
            sqlite3_bind_int64(statement, 2, Int64(high))
            rows += copyBodies(statement, column: 1)
            sqlite3_reset(statement)
        }
        sqlite3_finalize(statement)
        return rows
    }

    /// A full scan for the documents of one city, with SQLite's JSON functions.
    func scanForCity(_ city: String) -> Int {
        let statement = prepare("SELECT id, json FROM docs WHERE json_extract(json, '$.address.city') = ?")
        sqlite3_bind_text(statement, 1, city, -1, transient)
        let rows = copyBodies(statement, column: 1)
        sqlite3_finalize(statement)
        return rows
    }

    func rangeQueries(_ ranges: [(Int, Int)]) -> Int {
        let statement = prepare("SELECT key, docid, value FROM idx WHERE key >= ? AND key <= ? ORDER BY key, docid")
        var rows = 0
        for (low, high) in ranges {
            sqlite3_bind_int64(statement, 1, Int64(low))
            sqlite3_bind_int64(statement, 2, Int64(high))
            while sqlite3_step(statement) == SQLITE_ROW {
                _ = String(cString: sqlite3_column_text(statement, 1))
                _ = String(cString: sqlite3_column_text(statement, 2))
                rows += 1
            }
            sqlite3_reset(statement)
        }
        sqlite3_finalize(statement)
        return rows
    }

    /// Copies every row into a new file at `path`: read and insert in one transaction.
    func copy(to path: String, limit: Int = -1) -> Int {
        let target = RawSQLiteBaseline(path: path)
        let read = prepare("SELECT id, rev, deleted, json FROM docs ORDER BY seq LIMIT \(limit)")
        let insert = target.prepare("INSERT INTO docs (id, rev, deleted, json) VALUES (?, ?, ?, ?)")
        target.exec("BEGIN IMMEDIATE")
        var rows = 0
        while sqlite3_step(read) == SQLITE_ROW {
            for column in 0..<4 {
                let index = Int32(column + 1)
                switch sqlite3_column_type(read, Int32(column)) {
                case SQLITE_INTEGER: sqlite3_bind_int64(insert, index, sqlite3_column_int64(read, Int32(column)))
                case SQLITE_TEXT: sqlite3_bind_text(insert, index, sqlite3_column_text(read, Int32(column)), -1, transient)
                default: sqlite3_bind_blob(insert, index, sqlite3_column_blob(read, Int32(column)), sqlite3_column_bytes(read, Int32(column)), transient)
                }
            }
            precondition(sqlite3_step(insert) == SQLITE_DONE)
            sqlite3_reset(insert)
            rows += 1
        }
        target.exec("COMMIT")
        sqlite3_finalize(read)
        sqlite3_finalize(insert)
        return rows
    }

    func sum() -> Double {
        let statement = prepare("SELECT sum(key) FROM idx")
        precondition(sqlite3_step(statement) == SQLITE_ROW)
        let total = sqlite3_column_double(statement, 0)
        sqlite3_finalize(statement)
        return total
    }
}
