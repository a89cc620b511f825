import CSQLite
import Foundation
import Synchronization

/// An error reported by SQLite, with the extended result code, SQLite's message and the statement.
package struct SQLiteError: Error, Sendable, CustomStringConvertible {
    /// The extended result code (`SQLITE_BUSY`, `SQLITE_CONSTRAINT_UNIQUE`, …).
    public let code: Int32
    /// SQLite's own message.
    public let message: String
    /// The SQL being run, if any.
    public let sql: String?

    /// The primary result code (the low byte of ``code``).
    public var primaryCode: Int32 { code & 0xFF }

    /// Whether the statement was stopped by ``SQLiteConnection/interrupt()``.
    var isInterrupt: Bool { primaryCode == SQLITE_INTERRUPT }
    /// Whether a lock held by another connection stopped the statement (`SQLITE_BUSY`).
    var isBusy: Bool { primaryCode == SQLITE_BUSY }
    /// Whether the disk, or the file's page limit, had no room for the write (`SQLITE_FULL`).
    var isFull: Bool { primaryCode == SQLITE_FULL }

    public var description: String {
        let base = "SQLite error \(code): \(message)"
        return sql.map { "\(base) — in \($0)" } ?? base
    }
}

/// `SQLITE_TRANSIENT`: SQLite copies bound bytes before the bind call returns.
let sqliteTransient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

/// One SQLite connection with its cache of prepared statements.
///
/// Not thread-safe by itself. It is marked `@unchecked Sendable` so that it can be handed between
/// owners, and confinement is guaranteed by those owners: the document writer's connection is only
/// touched while holding the writer's `access` lock — by the ``DatabaseWriter`` actor for each
/// transaction, or by one point read that found the lock free (``DatabaseWriter/readIfIdle(_:)``); the
/// index writer's connection only inside the ``IndexWriter`` actor; a ``WALCheckpointer``'s own
/// connection only on its serial queue; and each reader connection by exactly one borrower at a
/// time, between ``ReaderPool/checkOut()`` and ``ReaderPool/checkIn(_:)`` (the pool's lock hands it out
/// once). SQLite itself is opened with `SQLITE_OPEN_NOMUTEX`, matching that single-owner use.
final class SQLiteConnection: @unchecked Sendable {
    let handle: OpaquePointer
    let path: String
    private var statements: [String: SQLiteStatement] = [:]
    /// The statements last prepared, each in the slot its SQL text's address picks: a statement whose
    /// text is a literal (the same bytes on every call) is found again without hashing the text, which
    /// ``statements`` does (a few per cent of a replication's CPU, Docs/Performance.md). An entry counts
    /// only when its text equals the one asked for — for the same literal a comparison of the two
    /// strings' references — so a text that another took the address of once is simply not found here.
    private var recent = [(sql: String, statement: SQLiteStatement)?](repeating: nil, count: SQLiteConnection.recentSlots)
    private static let recentSlots = 64
    private(set) var isClosed = false

    /// How long a statement waits for a lock another connection holds before failing with
    /// `SQLITE_BUSY`: 10 s unless set (the writer's is ``DatabaseConfiguration/lockTimeout``).
    /// Connections wait only on the writers' queues and the reader threads, never on the cooperative
    /// pool (Docs/Architecture.md); point reads turn the wait off (``withoutWaitingForLocks(_:)``).
    var busyTimeoutMilliseconds: Int32 = 10_000 {
        didSet { sqlite3_busy_timeout(handle, busyTimeoutMilliseconds) }
    }

    /// Runs `body` with the busy timeout off: a statement that meets a lock fails at once with
    /// `SQLITE_BUSY` instead of waiting.
    func withoutWaitingForLocks<T>(_ body: () throws -> T) rethrows -> T {
        sqlite3_busy_timeout(handle, 0)
        defer { sqlite3_busy_timeout(handle, busyTimeoutMilliseconds) }
        return try body()
    }

    /// Opens (creating if needed) the database file at `path`.
    init(path: String) throws {
        // Process-wide settings, made once before the first connection opens.
        SQLiteSettings.apply()
        ThreadRule.check("open \(path)")
        var db: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE
        let rc = sqlite3_open_v2(path, &db, flags, nil)
        guard rc == SQLITE_OK, let db else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "cannot open database"
            if let db { sqlite3_close_v2(db) }
            throw DocStoreError(.io, "Cannot open database file at \(path)",
                                cause: SQLiteError(code: rc, message: message, sql: nil))
        }
        self.handle = db
        self.path = path
        sqlite3_busy_timeout(db, 10_000)
        sqlite3_extended_result_codes(db, 1)
    }

    deinit {
        close()
    }

    /// Finalizes every cached statement and closes the connection.
    func close() {
        guard !isClosed else { return }
        isClosed = true
        statements.values.forEach { $0.finalize() }
        statements.removeAll()
        recent = Array(repeating: nil, count: Self.recentSlots)
        sqlite3_close_v2(handle)
    }

    /// Set by ``interrupt()``, read by the progress handler of ``enableInterrupts()``.
    private final class InterruptRequest: Sendable {
        let isSet = Atomic<Bool>(false)
    }

    private let interruptRequest = InterruptRequest()

    /// Lets ``interrupt()`` stop statements, also those that start after it: a progress handler,
    /// called every 50 000 virtual-machine steps (well under a millisecond; every 1 000 cost a long
    /// scan 10 %), fails them with `SQLITE_INTERRUPT` while the request stands. (`sqlite3_interrupt`
    /// alone is lost when it comes between two statements.)
    func enableInterrupts() {
        sqlite3_progress_handler(handle, 50_000, { context in
            Unmanaged<InterruptRequest>.fromOpaque(context!).takeUnretainedValue().isSet.load(ordering: .relaxed) ? 1 : 0
        }, Unmanaged.passUnretained(interruptRequest).toOpaque())
    }

    /// Makes the statements running on this connection, and those started until
    /// ``clearInterrupt()``, stop with `SQLITE_INTERRUPT`. Unlike every other method, callable from
    /// any thread (SQLite's `sqlite3_interrupt` is), as long as the connection is open.
    func interrupt() {
        interruptRequest.isSet.store(true, ordering: .relaxed)
        sqlite3_interrupt(handle)
    }

    /// Ends an ``interrupt()`` request.
    func clearInterrupt() {
        interruptRequest.isSet.store(false, ordering: .relaxed)
    }

    /// Limits the file this connection writes to `bytes` (rounded up to whole pages): SQLite's
    /// `max_page_count`, which fails a transaction that would pass it with `SQLITE_FULL`.
    func limitFileSize(to bytes: Int64) throws {
        let pageSize = max(1, try scalarInt("PRAGMA page_size") ?? 4096)
        try execute("PRAGMA max_page_count = \(max(1, (bytes + pageSize - 1) / pageSize))")
    }

    func error(_ rc: Int32, sql: String?) -> SQLiteError {
        SQLiteError(code: sqlite3_extended_errcode(handle), message: String(cString: sqlite3_errmsg(handle)), sql: sql)
    }

    /// Runs one or more SQL statements that return no rows.
    func execute(_ sql: String) throws {
        ThreadRule.check(sql)
        var message: UnsafeMutablePointer<CChar>?
        let rc = sqlite3_exec(handle, sql, nil, nil, &message)
        if rc != SQLITE_OK {
            let text = message.map { String(cString: $0) } ?? String(cString: sqlite3_errmsg(handle))
            sqlite3_free(message)
            throw SQLiteError(code: sqlite3_extended_errcode(handle), message: text, sql: sql)
        }
    }

    /// A prepared statement for `sql`, reset and with bindings cleared, from this connection's cache.
    func prepare(_ sql: String) throws -> SQLiteStatement {
        let slot = Self.recentSlot(of: sql)
        if let slot, let entry = recent[slot], entry.sql == sql {
            entry.statement.reset()
            return entry.statement
        }
        let statement: SQLiteStatement
        if let cached = statements[sql] {
            cached.reset()
            statement = cached
        } else {
            var stmt: OpaquePointer?
            let rc = sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &stmt, nil)
            guard rc == SQLITE_OK, let stmt else { throw error(rc, sql: sql) }
            statement = SQLiteStatement(stmt, connection: self, sql: sql)
            statements[sql] = statement
        }
        if let slot { recent[slot] = (sql, statement) }
        return statement
    }

    /// The slot of ``recent`` for `sql`, from the address of its UTF-8 bytes (`nil` for a text without
    /// contiguous bytes of its own).
    private static func recentSlot(of sql: String) -> Int? {
        sql.utf8.withContiguousStorageIfAvailable { bytes -> Int? in
            guard let address = bytes.baseAddress.map({ UInt(bitPattern: $0) }) else { return nil }
            return Int(truncatingIfNeeded: ((address >> 4) ^ (address >> 10)) % UInt(recentSlots))
        } ?? nil
    }

    /// Runs `body` in a transaction: `BEGIN IMMEDIATE` for writes, a deferred `BEGIN` for consistent
    /// multi-statement reads. Commits if `body` returns, rolls back and rethrows if it throws.
    ///
    /// `BEGIN` and `COMMIT` run as cached prepared statements: compiling them anew for every
    /// transaction cost more than a small transaction's own statements.
    func transaction<T>(immediate: Bool, _ body: () throws -> T) throws -> T {
        try run(immediate ? "BEGIN IMMEDIATE" : "BEGIN")
        do {
            let result = try body()
            resetActiveStatements()
            try run("COMMIT")
            return result
        } catch {
            resetActiveStatements()
            if sqlite3_get_autocommit(handle) == 0 { try? execute("ROLLBACK") }
            throw error
        }
    }

    /// Resets every statement still positioned on a row. A statement that has not run to completion
    /// keeps its read transaction open — on a WAL reader that pins an old snapshot — so every read and
    /// transaction ends with this.
    func resetActiveStatements() {
        var statement = sqlite3_next_stmt(handle, nil)
        while let current = statement {
            if sqlite3_stmt_busy(current) != 0 { sqlite3_reset(current) }
            statement = sqlite3_next_stmt(handle, current)
        }
    }

    /// Runs a query returning one integer (or nil when there is no row or the value is NULL).
    func scalarInt(_ sql: String, _ bindings: [SQLiteValue] = []) throws -> Int64? {
        let statement = try prepare(sql)
        defer { statement.reset() }
        try statement.bind(bindings)
        guard try statement.step() else { return nil }
        return statement.isNull(0) ? nil : statement.int64(0)
    }

    /// Runs a statement that returns no rows.
    func run(_ sql: String, _ bindings: [SQLiteValue] = []) throws {
        let statement = try prepare(sql)
        try statement.bind(bindings)
        while try statement.step() {}
    }

    /// Rows changed by the last statement.
    var changes: Int { Int(sqlite3_changes(handle)) }

    /// The rowid of the last row this connection inserted.
    var lastInsertedRow: Int64 { sqlite3_last_insert_rowid(handle) }
}

/// A value bound to a statement parameter.
enum SQLiteValue {
    case null
    case integer(Int64)
    case double(Double)
    case text(String)
    case blob([UInt8])
}

/// A prepared statement. Owned by its connection's cache; confined like the connection.
final class SQLiteStatement {
    let handle: OpaquePointer
    unowned let connection: SQLiteConnection
    let sql: String

    init(_ handle: OpaquePointer, connection: SQLiteConnection, sql: String) {
        self.handle = handle
        self.connection = connection
        self.sql = sql
    }

    func finalize() { sqlite3_finalize(handle) }

    func reset() {
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
    }

    func check(_ rc: Int32) throws {
        if rc != SQLITE_OK { throw connection.error(rc, sql: sql) }
    }

    func bind(_ values: [SQLiteValue]) throws {
        for (offset, value) in values.enumerated() {
            let index = Int32(offset + 1)
            switch value {
            case .null: try check(sqlite3_bind_null(handle, index))
            case .integer(let v): try bind(v, at: index)
            case .double(let v): try check(sqlite3_bind_double(handle, index, v))
            case .text(let v): try bind(v, at: index)
            case .blob(let v): try bind(blob: v, at: index)
            }
        }
    }

    func bind(_ value: Int64, at index: Int32) throws {
        try check(sqlite3_bind_int64(handle, index, value))
    }

    func bind(_ value: Int, at index: Int32) throws {
        try check(sqlite3_bind_int64(handle, index, Int64(value)))
    }

    func bind(_ value: Double, at index: Int32) throws {
        try check(sqlite3_bind_double(handle, index, value))
    }

    func bind(_ value: String, at index: Int32) throws {
        var value = value
        let rc = value.withUTF8 { utf8 -> Int32 in
            guard let base = utf8.baseAddress, utf8.count > 0 else {
                return sqlite3_bind_text(handle, index, "", 0, sqliteTransient)
            }
            return base.withMemoryRebound(to: CChar.self, capacity: utf8.count) {
                sqlite3_bind_text(handle, index, $0, Int32(utf8.count), sqliteTransient)
            }
        }
        try check(rc)
    }

    /// Binds a revision id as its text `"N-hash"`.
    func bind(_ revision: RevisionID, at index: Int32) throws {
        let rc = revision.withDescriptionBytes { utf8 in
            sqlite3_bind_text(handle, index, utf8.baseAddress!.assumingMemoryBound(to: CChar.self), Int32(utf8.count),
                              sqliteTransient)
        }
        try check(rc)
    }

    func bind(blob: [UInt8], at index: Int32) throws {
        let rc = blob.withUnsafeBytes { raw -> Int32 in
            if raw.count == 0 { return sqlite3_bind_zeroblob(handle, index, 0) }
            return sqlite3_bind_blob(handle, index, raw.baseAddress, Int32(raw.count), sqliteTransient)
        }
        try check(rc)
    }

    func bind(blob: UnsafeRawBufferPointer, at index: Int32) throws {
        if blob.count == 0 {
            try check(sqlite3_bind_zeroblob(handle, index, 0))
        } else {
            try check(sqlite3_bind_blob(handle, index, blob.baseAddress, Int32(blob.count), sqliteTransient))
        }
    }

    /// Binds `blob` without SQLite copying it (`SQLITE_STATIC`) for the duration of `body`, which steps
    /// the statement; the binding is cleared before returning, so that the statement never refers to
    /// the bytes after they are gone. For large values (an attachment's chunk), where the copy costs.
    func bindingInPlace<T>(blob: UnsafeRawBufferPointer, at index: Int32, _ body: () throws -> T) throws -> T {
        guard blob.count > 0 else {
            try bind(blob: blob, at: index)
            return try body()
        }
        try check(sqlite3_bind_blob(handle, index, blob.baseAddress, Int32(blob.count), nil))
        defer {
            sqlite3_reset(handle)
            sqlite3_bind_null(handle, index)
        }
        return try body()
    }

    func bindNull(at index: Int32) throws {
        try check(sqlite3_bind_null(handle, index))
    }

    /// Advances to the next row; returns `false` when the statement is done.
    func step() throws -> Bool {
        ThreadRule.check(sql)
        let rc = sqlite3_step(handle)
        if rc == SQLITE_ROW { return true }
        if rc == SQLITE_DONE { return false }
        throw connection.error(rc, sql: sql)
    }

    func isNull(_ column: Int32) -> Bool { sqlite3_column_type(handle, column) == SQLITE_NULL }

    func int64(_ column: Int32) -> Int64 { sqlite3_column_int64(handle, column) }

    func int(_ column: Int32) -> Int { Int(sqlite3_column_int64(handle, column)) }

    func double(_ column: Int32) -> Double { sqlite3_column_double(handle, column) }

    func text(_ column: Int32) -> String {
        guard let pointer = sqlite3_column_text(handle, column) else { return "" }
        let count = Int(sqlite3_column_bytes(handle, column))
        return String(decoding: UnsafeBufferPointer(start: pointer, count: count), as: UTF8.self)
    }

    /// The column's text read as a revision id, `nil` if it is not one.
    func revision(_ column: Int32) -> RevisionID? {
        withBlob(column) { RevisionID(utf8: $0) }
    }

    /// Calls `body` with the column's bytes, valid only during the call.
    func withBlob<T>(_ column: Int32, _ body: (UnsafeRawBufferPointer) throws -> T) rethrows -> T {
        let pointer = sqlite3_column_blob(handle, column)
        let count = Int(sqlite3_column_bytes(handle, column))
        return try body(UnsafeRawBufferPointer(start: pointer, count: pointer == nil ? 0 : count))
    }

    func blob(_ column: Int32) -> [UInt8] {
        withBlob(column) { Array($0) }
    }
}
