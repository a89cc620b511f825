import CSQLite

/// Reader connections for one database file, opened on demand.
///
/// In WAL mode readers never wait for the writer. A read borrows an idle connection (opening one if
/// none is idle), runs its statements synchronously on the calling task and returns the connection.
/// At most
/// ``maximumIdle`` connections are kept; a burst beyond that opens short-lived extra ones instead of
/// blocking.
final class ReaderPool: Sendable {
    private struct State {
        var idle: [SQLiteConnection] = []
        var isClosed = false
    }

    let path: String
    let maximumIdle: Int
    /// Another database file each connection attaches, and the schema name it is attached as.
    let attached: (path: String, schema: String)?
    private let state = Locked(State())

    /// Each reader's page cache per file, in KiB (SQLite's default is 2 000). Up to eight idle readers
    /// per database keep theirs filled; a reader's cache is dropped whenever another connection has
    /// written, and the B-tree's inner pages that point reads reuse fit in a few hundred pages: halving
    /// it moved no read of the bench beyond its noise and lowered its peak resident memory by 24 MB
    /// (Docs/Performance.md).
    static let cacheKiB = 1024

    /// Whether each connection gets ``FullTextTokenizer`` (the index file's readers, which search).
    let registersFullTextTokenizer: Bool

    init(path: String, maximumIdle: Int, attaching attached: (path: String, schema: String)? = nil,
         registersFullTextTokenizer: Bool = false) {
        self.path = path
        self.maximumIdle = maximumIdle
        self.attached = attached
        self.registersFullTextTokenizer = registersFullTextTokenizer
    }

    /// Borrows a connection; give it back with ``checkIn(_:)``.
    func checkOut() throws -> SQLiteConnection {
        let reused: SQLiteConnection? = try state.withLock { state in
            if state.isClosed { throw DocStoreError(.databaseClosed, "The database is closed") }
            return state.idle.popLast()
        }
        if let reused { return reused }
        let connection = try SQLiteConnection(path: path)
        connection.enableInterrupts()
        if let attached {
            // Neither file is mapped into memory (`mmap_size`): mapped pages count in the process's
            // resident memory while the idle connection keeps them, and a query through an index that
            // reads documents at random would fault in the whole documents file (Docs/Performance.md).
            try connection.run("ATTACH DATABASE ? AS \(attached.schema)", [.text(attached.path)])
        }
        if registersFullTextTokenizer {
            // Without FTS5, only full-text searches fail: they find no tokenizer.
            try? FullTextTokenizer.register(on: connection)
        }
        try connection.execute("PRAGMA query_only = 1")
        try connection.execute("PRAGMA cache_size = -\(Self.cacheKiB)")
        if let attached { try connection.execute("PRAGMA \(attached.schema).cache_size = -\(Self.cacheKiB)") }
        return connection
    }

    /// Returns a borrowed connection to the pool (or closes it if the pool is full or closed).
    func checkIn(_ connection: SQLiteConnection) {
        let keep = state.withLock { state in
            guard !state.isClosed, state.idle.count < maximumIdle else { return false }
            state.idle.append(connection)
            return true
        }
        if !keep { connection.close() }
    }

    /// Runs `body` with a borrowed connection; without `waitingForLocks`, a statement that meets a
    /// lock fails with `SQLITE_BUSY` at once instead of waiting up to the busy timeout.
    func read<T>(waitingForLocks: Bool = true, _ body: (SQLiteConnection) throws -> T) throws -> T {
        let connection = try checkOut()
        defer {
            connection.resetActiveStatements()
            checkIn(connection)
        }
        return waitingForLocks ? try body(connection) : try connection.withoutWaitingForLocks { try body(connection) }
    }

    /// Runs `body` in a deferred read transaction, so that all its statements see one snapshot.
    func readConsistently<T>(_ body: (SQLiteConnection) throws -> T) throws -> T {
        try read { connection in try connection.transaction(immediate: false) { try body(connection) } }
    }

    /// Closes idle connections; borrowed ones are closed when returned.
    func close() {
        let idle = state.withLock { state in
            state.isClosed = true
            defer { state.idle = [] }
            return state.idle
        }
        idle.forEach { $0.close() }
    }
}
