import Foundation

/// A DocStore database: JSON documents with CouchDB revisions, stored in one SQLite file.
///
/// All methods are `async` and the object is safe to share between tasks. Writes are serialised
/// through one writer; reads run concurrently on a pool of WAL readers and never wait for writes.
///
/// ```swift
/// let db = try await Database.open(name: "notes", directory: folder)
/// var note: Document = ["title": "Groceries", "items": ["milk", "eggs"]]
/// note = try await db.save(note)                       // revision 1-…
/// note["items"] = ["milk", "eggs", "bread"]
/// note = try await db.save(note)                       // revision 2-…
/// let fetched = try await db.document(withID: note.id)
/// for change in try await db.changes(since: 0).changes { print(change.id, change.revision) }
/// await db.close()
/// ```
public final class Database: Sendable {
    /// The configuration the database was opened with.
    public let configuration: DatabaseConfiguration
    let writer: DatabaseWriter
    let readers: ReaderPool
    let notifier: ChangeNotifier
    let indexWriter: IndexWriter
    let indexReaders: ReaderPool
    /// The long work running now (``activeTasks``).
    let activeTaskList: ActiveTaskList
    private let state = Locked(State())
    /// The Mango indexes last read from the design documents, with those documents' revisions and the
    /// committed sequence they were checked at.
    /// The newest changes read, shared by the feeds that wake on the same commit (``ChangesTail``).
    let changesTail = ChangesTail()
    let mangoIndexCache = Locked<(sequence: Int64, revisions: [String: RevisionID?], indexes: [MangoIndex])?>(nil)
    /// The last counts of ``pendingChangeCount(since:)``, so that the next page's count starts from them.
    let pendingCounts = Locked<[PendingCount]>([])

    private struct State {
        var isClosed = false
        var delegate = WeakDelegate()
        var deliveryStarted = false
        var namedFilterResolver: NamedFilterResolver?
    }

    /// What turns a filter name (`design/name`, CouchDB's `_changes?filter=`) into a ``ChangesFilter``
    /// for this database: set by `DocStoreJavaScript`'s `enableJavaScript()`, or by you. A replication
    /// from this database with ``ChangesFilter``-less named filters (`filterName`) asks it.
    package var namedFilterResolver: NamedFilterResolver? {
        get { state.withLock { $0.namedFilterResolver } }
        set { state.withLock { $0.namedFilterResolver = newValue } }
    }

    /// The filter named `name` (`design/filter`) with `parameters`: a filter function of the
    /// database's design documents, once DocStoreJavaScript's `enableJavaScript()` has been called.
    /// - Throws: ``DocStoreError/Code/notFound`` when JavaScript is not enabled or there is no such
    ///   filter.
    public func changesFilter(named name: String, parameters: [String: String]) async throws -> ChangesFilter {
        guard let resolver = namedFilterResolver else {
            throw DocStoreError(.notFound, "The filter \(name) is unknown: no filter functions are enabled on \(self.name)")
        }
        return try await resolver(name, parameters)
    }

    private struct WeakDelegate {
        weak var value: (any DatabaseChangeDelegate)?
    }

    /// Open databases by file path: opening the same file again returns the same object. An open in
    /// progress (creating or migrating the file) is listed too, so that a second open of the same file
    /// awaits it rather than the lock being held through the migration.
    private static let registry = Locked(Registry())

    private struct Registry {
        var open: [String: Database] = [:]
        var opening: [String: (task: Task<Database, any Error>, configuration: DatabaseConfiguration)] = [:]
    }

    private init(configuration: DatabaseConfiguration) throws {
        self.configuration = configuration
        let notifier = ChangeNotifier()
        self.notifier = notifier
        let writer = try DatabaseWriter(configuration: configuration, notifier: notifier)
        self.writer = writer
        self.readers = ReaderPool(path: configuration.fileURL.path, maximumIdle: configuration.maximumIdleReaders)
        let indexFile = IndexSchema.fileURL(for: configuration.fileURL)
        let activeTaskList = ActiveTaskList(database: configuration.name)
        self.activeTaskList = activeTaskList
        do {
            self.indexWriter = try IndexWriter(fileURL: indexFile, definitions: configuration.indexes,
                                               maximumFileSize: configuration.maximumFileSize, tasks: activeTaskList)
        } catch {
            Task { await writer.close() }
            throw error
        }
        self.indexReaders = ReaderPool(path: indexFile.path, maximumIdle: configuration.maximumIdleReaders,
                                       attaching: (configuration.fileURL.path, Database.attachedDocumentsSchema),
                                       registersFullTextTokenizer: true)
        CommitWatch.shared.register(writer, notifier: notifier)
    }

    /// The database name.
    public var name: String { configuration.name }

    /// The highest sequence this process has committed to the database, without waiting for the
    /// writer: what a cache of documents compares to know that nothing was written since it read
    /// them here (another process's writes it does not see).
    package var committedSequence: Int64 { notifier.committedSequence }

    /// The SQLite file.
    public var fileURL: URL { configuration.fileURL }

    /// Whether ``close()`` has been called.
    public var isClosed: Bool { state.withLock { $0.isClosed } }

    // MARK: Opening and closing

    /// Opens (creating if needed) the database described by `configuration`.
    ///
    /// While it is open, opening the same file again with the same settings returns the same object;
    /// with different settings (durability, revision limit, ancestor bodies, date format, reader
    /// count or indexes) it fails rather than hand back an object configured otherwise.
    ///
    /// - Throws: ``DocStoreError`` — ``DocStoreError/Code/badRequest`` for an invalid name,
    ///   ``DocStoreError/Code/configurationMismatch`` if the file is open with other settings,
    ///   ``DocStoreError/Code/notADocStoreDatabase`` if the file is not a DocStore database,
    ///   ``DocStoreError/Code/incompatibleVersion`` if a newer DocStore wrote it,
    ///   ``DocStoreError/Code/io`` if the folder or file cannot be created.
    public static func open(_ configuration: DatabaseConfiguration) async throws -> Database {
        try await open(configuration, create: true)!
    }

    /// Opens the database described by `configuration` only if its file exists: `nil` when it does
    /// not (nothing is created). Otherwise as ``open(_:)``.
    ///
    /// ```swift
    /// guard let db = try await Database.openExisting(.default) else { return }   // never creates
    /// ```
    public static func openExisting(_ configuration: DatabaseConfiguration) async throws -> Database? {
        try await open(configuration, create: false)
    }

    private static func open(_ configuration: DatabaseConfiguration, create: Bool) async throws -> Database? {
        try DatabaseConfiguration.validate(name: configuration.name)
        precondition(configuration.revisionsLimit >= 1, "revisionsLimit must be at least 1")
        let key = registryKey(configuration.fileURL)
        func mismatch(_ existing: DatabaseConfiguration) -> DocStoreError? {
            existing.firstDifference(from: configuration).map {
                DocStoreError(.configurationMismatch, "\(configuration.name) is already open with \($0); close it before opening it otherwise")
            }
        }
        enum Found { case open(Database), opening(Task<Database, any Error>), absent }
        let found = try registry.withLock { state -> Found in
            if let existing = state.open[key] {
                if let error = mismatch(existing.configuration) { throw error }
                return .open(existing)
            }
            if let opening = state.opening[key] {
                if let error = mismatch(opening.configuration) { throw error }
                return .opening(opening.task)
            }
            if !create && !FileManager.default.fileExists(atPath: configuration.fileURL.path) { return .absent }
            // Creating or migrating the file is blocking I/O: it runs on a thread of DocStore's own
            // (BlockingWorkThreads.files), and the registry is not locked meanwhile.
            let task = Task(executorPreference: BlockingWorkThreads.files) { () throws -> Database in
                do {
                    do {
                        try FileManager.default.createDirectory(at: configuration.folderURL, withIntermediateDirectories: true)
                    } catch {
                        throw DocStoreError(.io, "Cannot create folder \(configuration.folderURL.path)", cause: error)
                    }
                    let database = try Database(configuration: configuration)
                    registry.withLock { registry in
                        registry.opening[key] = nil
                        registry.open[key] = database
                    }
                    configuration.logger.debug("opened \(configuration.fileURL.path)")
                    return database
                } catch {
                    registry.withLock { _ = $0.opening.removeValue(forKey: key) }
                    throw error
                }
            }
            state.opening[key] = (task, configuration)
            return .opening(task)
        }
        switch found {
        case .open(let database): return database
        case .opening(let task): return try await task.value
        case .absent: return nil
        }
    }

    /// The database of `configuration`'s name and folder if it is open in this process, else `nil`
    /// (it never opens one).
    public static func openedWith(_ configuration: DatabaseConfiguration) -> Database? {
        registry.withLock { $0.open[registryKey(configuration.fileURL)] }
    }

    /// Opens the database `name` in `directory` with default settings.
    public static func open(name: String, directory: URL) async throws -> Database {
        try await open(DatabaseConfiguration(name: name, directory: directory))
    }

    private static func registryKey(_ url: URL) -> String {
        url.deletingLastPathComponent().standardizedFileURL.resolvingSymlinksInPath()
            .appendingPathComponent(url.lastPathComponent).path
    }

    /// Closes the database: waits for the write in progress, closes every connection, ends change
    /// streams. Later calls on this object throw ``DocStoreError/Code/databaseClosed``; opening the
    /// same configuration again gives a new object.
    public func close() async {
        let first = state.withLock { state -> Bool in
            defer { state.isClosed = true }
            return !state.isClosed
        }
        guard first else { return }
        let key = Database.registryKey(fileURL)
        Database.registry.withLock { registry in
            if registry.open[key] === self { registry.open[key] = nil }
        }
        // Readers first: the writer's close, as the last connection, checkpoints and removes the WAL.
        readers.close()
        indexReaders.close()
        await indexWriter.close()
        CommitWatch.shared.unregister(writer)
        await writer.close()
        notifier.finish()
        configuration.logger.debug("closed \(fileURL.path)")
    }

    /// Returns once the database is closed (by ``close()``, ``closeAll()`` or
    /// ``delete(name:directory:)``), or when the calling task is cancelled. Replications of the
    /// database (DocSync) use it to stop when it closes.
    public func waitUntilClosed() async {
        await notifier.waitUntilFinished()
    }

    /// The names of the databases in `directory`, those in subfolders (`team/notes`) included, sorted;
    /// hidden files and folders are skipped.
    /// - Throws: ``DocStoreError/Code/io`` if the folder cannot be listed.
    public static func allDatabaseNames(in directory: URL) throws -> [String] {
        guard let files = FileManager.default.enumerator(atPath: directory.path) else {
            throw DocStoreError(.io, "Cannot list the folder \(directory.path)")
        }
        var names: [String] = []
        while let path = files.nextObject() as? String {
            if path.hasPrefix(".") || path.contains("/.") { files.skipDescendants(); continue }
            guard path.hasSuffix(".sqlite") else { continue }
            let name = String(path.dropLast(".sqlite".count))
            if (try? DatabaseConfiguration.validate(name: name)) != nil { names.append(name) }
        }
        return names.sorted()
    }

    /// Closes every open database (for example before the process exits).
    public static func closeAll() async {
        let all = registry.withLock { Array($0.open.values) }
        for database in all { await database.close() }
    }

    /// Closes the database of `configuration`'s name and folder if open and deletes its files, as
    /// ``delete(name:directory:)``; nothing happens when there is no such database.
    public static func delete(_ configuration: DatabaseConfiguration) async throws {
        try await delete(name: configuration.name, directory: configuration.directory)
    }

    /// Closes the database if open and deletes its files (including the WAL and shared-memory files).
    /// - Throws: ``DocStoreError/Code/io`` if a file cannot be removed.
    public static func delete(name: String, directory: URL) async throws {
        try DatabaseConfiguration.validate(name: name)
        let url = DatabaseConfiguration(name: name, directory: directory).fileURL
        let key = registryKey(url)
        let opening = registry.withLock { $0.opening[key]?.task }
        _ = try? await opening?.value
        let open = registry.withLock { $0.open[key] }
        await open?.close()
        // File I/O: on a reader thread, off the cooperative pool.
        try await withTaskExecutorPreference(BlockingWorkThreads.files) {
            for suffix in ["", "-wal", "-shm", "-journal", "-idx", "-idx-wal", "-idx-shm", "-idx-journal"] {
                let file = URL(fileURLWithPath: url.path + suffix)
                guard FileManager.default.fileExists(atPath: file.path) else { continue }
                do {
                    try FileManager.default.removeItem(at: file)
                } catch {
                    throw DocStoreError(.io, "Cannot delete \(file.path)", cause: error)
                }
            }
        }
    }

    /// Whether a database file named `name` exists in `directory`.
    public static func exists(name: String, directory: URL) -> Bool {
        FileManager.default.fileExists(atPath: DatabaseConfiguration(name: name, directory: directory).fileURL.path)
    }

    func ensureOpen() throws {
        if isClosed { throw DocStoreError(.databaseClosed, "The database \(name) is closed") }
    }

    /// Runs a read on a pooled connection — in a read transaction with `consistent`, so that all its
    /// statements see one snapshot — and maps storage errors. Cancelling the task interrupts the read
    /// (`sqlite3_interrupt`), which then throws `CancellationError`: a long feed or scan stops at once.
    func read<T>(consistent: Bool = false, _ body: (SQLiteConnection) throws -> T) async throws -> T {
        try ensureOpen()
        try Task.checkCancellation()
        let running = InterruptibleRead()
        func interruptibly(_ connection: SQLiteConnection) throws -> T {
            running.begin(connection)
            defer { running.end() }
            return try body(connection)
        }
        do {
            return try await withTaskCancellationHandler {
                consistent ? try readers.readConsistently(interruptibly) : try readers.read(interruptibly)
            } onCancel: {
                running.cancel()
            }
        } catch let error as SQLiteError where error.isInterrupt {
            throw CancellationError()
        } catch {
            throw Database.storageError(error)
        }
    }

    /// ``read(consistent:_:)`` for a read by key of one row or a fixed few — a document, a setting, a
    /// count kept in a row — where the caller runs (``ThreadRule/Exception/pointRead``).
    func readByKey<T>(consistent: Bool = false, _ body: (SQLiteConnection) throws -> T) async throws -> T {
        try await ThreadRule.allowing(.pointRead) { try await read(consistent: consistent, body) }
    }

    /// ``read(consistent:_:)`` for a read whose length the caller does not bound (a range, a batch of
    /// keys, a count over rows), on the threads for long reads (``BlockingWorkThreads/longReads``).
    func readApart<T: Sendable>(consistent: Bool = false, _ body: (SQLiteConnection) throws -> T) async throws -> T {
        try await running(on: .longReads) { try await read(consistent: consistent, body) }
    }

    /// A short read for a caller that cannot wait asynchronously: one statement on a pooled
    /// connection, not interruptible, that never waits for a lock (as ``readPoint(_:)``; where SQLite
    /// would make it wait, it fails with ``DocStoreError/Code/databaseLocked``). Maps storage errors.
    func readNow<T>(_ body: (SQLiteConnection) throws -> T) throws -> T {
        try ensureOpen()
        do {
            return try ThreadRule.allowing(.pointRead) { try readers.read(waitingForLocks: false, body) }
        } catch {
            throw Database.storageError(error)
        }
    }

    /// Runs a single-statement read on the writer's connection when no write holds it (its page
    /// cache survives commits, see ``DatabaseWriter/readIfIdle(_:)``), else on a pooled connection —
    /// never waiting for a write. Maps storage errors.
    ///
    /// It never waits for a lock (its connection's busy timeout is off meanwhile): a WAL read takes
    /// none that a writer holds; in the rare states where SQLite makes a reader wait (another
    /// connection recovering the WAL after a crash, or one in exclusive locking mode), the read is
    /// done again as an ordinary read, which may wait.
    func readPoint<T>(_ body: (SQLiteConnection) throws -> T) async throws -> T {
        try ensureOpen()
        do {
            return try ThreadRule.allowing(.pointRead) {
                if let result = try writer.readIfIdle(body) { return result }
                return try readers.read(waitingForLocks: false, body)
            }
        } catch let error as SQLiteError where error.isBusy {
            // A read that may wait for a lock: on the threads for long reads.
            return try await withTaskExecutorPreference(BlockingWorkThreads.longReads) { try await read(body) }
        } catch {
            throw Database.storageError(error)
        }
    }

    /// Maps any error to a ``DocStoreError``: SQLite errors become ``DocStoreError/Code/storage``.
    static func storageError(_ error: any Error) -> DocStoreError {
        switch error {
        case let error as DocStoreError: return error
        case let error as SQLiteError where error.isBusy:
            return DocStoreError(.databaseLocked, "The database file is locked by another connection: \(error.message)", cause: error)
        case let error as SQLiteError where error.isFull:
            return DocStoreError(.diskFull, "No room left for the database: \(error.message)", cause: error)
        case let error as SQLiteError: return DocStoreError(.storage, error.message, cause: error)
        default: return DocStoreError(.io, "\(error)", cause: error)
        }
    }

    // MARK: Change notifications

    /// Batches of changes, one per committed write, from now until the database closes or the
    /// consumer stops iterating. Each batch lists the revisions that write stored, in order. The
    /// stream listens from the moment of this call, not of the first iteration: a write committed in
    /// between is delivered, buffered until read.
    ///
    /// ```swift
    /// for await batch in db.observeChanges() {
    ///     for change in batch where change.source == .replication { print("pulled", change.id) }
    /// }
    /// ```
    public func observeChanges() -> AsyncStream<[DocumentChange]> {
        notifier.subscribe()
    }

    /// ``observeChanges()`` for a listener that does not itself wait for news (a server's metrics):
    /// without `watchingOtherConnections`, other processes' commits reach it only when something else
    /// watches the database, or at this process's next write.
    package func observeChanges(watchingOtherConnections: Bool) -> AsyncStream<[DocumentChange]> {
        notifier.subscribe(watching: watchingOtherConnections)
    }

    /// Has the database watched for other processes' commits (``CommitWatch``) as a wait for its
    /// changes would, until the matching ``endWatchingOtherConnections()``: for a feed that waits on
    /// something else for this database's news (`_db_updates`).
    package func beginWatchingOtherConnections() {
        notifier.beginWatching()
    }

    /// Ends one ``beginWatchingOtherConnections()``.
    package func endWatchingOtherConnections() {
        notifier.endWatching()
    }

    /// Waits until a change after `sequence` is committed, at most `timeout`; returns whether one was
    /// (at once when one already is). For feeds that read up to a sequence and then wait for news:
    /// nothing is missed between the read and the wait, and nothing is consumed by waiting. The
    /// timeout passes on `clock` (a server's or a replication's, which tests give in virtual time).
    package func waitForCommit(after sequence: Int64, timeout: Duration,
                               clock: any Clock<Duration> = ContinuousClock()) async -> Bool {
        await notifier.waitForCommit(after: sequence, timeout: timeout, clock: clock)
    }

    /// The delegate told about every committed batch of changes. Held weakly.
    public var changeDelegate: (any DatabaseChangeDelegate)? {
        get { state.withLock { $0.delegate.value } }
        set {
            let startDelivery = state.withLock { state -> Bool in
                state.delegate.value = newValue
                defer { state.deliveryStarted = true }
                return newValue != nil && !state.deliveryStarted
            }
            guard startDelivery else { return }
            let batches = notifier.subscribe()
            Task { [weak self] in
                for await batch in batches {
                    guard let self else { return }
                    self.changeDelegate?.database(self, didChange: batch)
                }
            }
        }
    }
}

/// A read that task cancellation may interrupt: the connection it runs on, while it runs.
final class InterruptibleRead: Sendable {
    private struct State {
        /// Touched only under the mutex, and only to call `interrupt()`, which SQLite allows from any
        /// thread while the connection is open: it stays open at least until `end()`, which takes the
        /// same mutex.
        var connection: SQLiteConnection?
        var cancelled = false
    }

    private let state = Locked(State())

    /// The read starts on `connection`; interrupts it at once if the task was already cancelled.
    func begin(_ connection: SQLiteConnection) {
        state.withLock { state in
            state.connection = connection
            if state.cancelled { connection.interrupt() }
        }
    }

    /// The read is over: its connection goes back to the pool and is no longer interrupted.
    func end() {
        state.withLock { state in
            state.connection?.clearInterrupt()
            state.connection = nil
        }
    }

    func cancel() {
        state.withLock { state in
            state.cancelled = true
            state.connection?.interrupt()
        }
    }
}
