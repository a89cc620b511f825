import Foundation
import Synchronization

/// How a new edit treats an existing document.
enum WritePolicy: Sendable {
    /// Create, or update the revision the document names (`PUT` in CouchDB): an existing document
    /// saved without its revision is a conflict.
    case put
    /// Create, or update the revision the document names, or — when it names none — the current one
    /// (``Database/save(_:)``, the last writer wins).
    case upsert
    /// Create only; fails if a live document has the id.
    case add
    /// Update only; fails if no live document has the id.
    case update
}

/// The single writer of a database — the transaction shell: owns the write connection and the
/// sequence counter, runs every write in a `BEGIN IMMEDIATE` transaction (rolling back and restoring
/// the counter on failure, publishing the changes on success), and hands each document to a
/// ``RevisionWriter``.
///
/// Where writes run: on the writer's own serial executor (a dispatch queue of its own, off the
/// cooperative pool and off any event loop), through ``perform(_:)``, which callers await; a point write
/// (``ThreadRule/Exception/pointWrite``) runs where its caller is when no other write holds the
/// connection (``waitingForTheLock(of:pointWrite:_:)``). The write operations themselves are
/// synchronous and `nonisolated`: each takes the ``access`` lock for its transaction, and the mutable
/// state is touched only while that lock is held.
///
/// This file holds the transaction primitive and the document writes; the other jobs are extensions
/// over that primitive, each in a file of its own: streamed attachment contents
/// (`DatabaseWriter+Staging.swift`), `_local` documents (`+LocalDocuments`), and settings, security,
/// purge, WAL checkpoints and compaction (`+Maintenance`).
actor DatabaseWriter {
    /// The writer's own serial executor: every write that is not a point write runs there.
    nonisolated let executor = SerialQueueExecutor(label: "docstore.writer")
    nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    nonisolated let connection: SQLiteConnection
    nonisolated let notifier: ChangeNotifier
    /// How many generations each branch keeps: the limit set on the database, else the configuration's.
    nonisolated var revisionsLimit: Int { revisionsLimitValue.load(ordering: .relaxed) }
    private nonisolated let revisionsLimitValue: Atomic<Int>
    nonisolated let keepsAncestorBodies: Bool
    nonisolated let mergesPropertyHistory: Bool
    /// The highest sequence written (restored when a transaction rolls back). Read and written only
    /// while ``access`` is held; others read the committed sequence (``ChangeNotifier/committedSequence``).
    nonisolated(unsafe) var lastSequence: Int64
    /// Set by ``close()``. Read and written only while ``access`` is held.
    nonisolated(unsafe) var isClosed = false
    /// The writer connection's `PRAGMA data_version` when it last looked for other connections'
    /// commits (``catchUpWithOtherConnections()``). Read and written only while ``access`` is held.
    nonisolated(unsafe) var knownDataVersion: Int64 = 0
    /// How many times the file was asked whether another connection committed: every write asks
    /// once, and ``CommitWatch`` asks while someone waits for changes.
    nonisolated let otherConnectionChecks = Atomic<Int>(0)
    /// Copies the WAL back into the database file on another thread (``WALCheckpointer``).
    nonisolated let checkpointer: WALCheckpointer
    /// Held whenever `connection` is in use: by each transaction, and by a point read that borrows the
    /// idle connection (``readIfIdle(_:)``).
    nonisolated let access = NSLock()
    /// The database's write validator and the design documents it runs.
    nonisolated let validation = WriteValidation()
    /// How long a write waits for a write lock another connection holds (`waitingForTheLock(of:_:)`).
    nonisolated let lockTimeout: Duration
    /// The database file.
    nonisolated let path: String
    /// Whether every commit waits for `fsync` (``DatabaseConfiguration/Durability/full``): such writes
    /// run on threads of DocStore's own, since a sync may take milliseconds.
    nonisolated let syncsEachCommit: Bool

    /// A transaction found the file's write lock held by another connection (another process): nothing
    /// of it was done. `waitingForTheLock(of:_:)` waits for the lock off the cooperative pool and runs
    /// the write again.
    struct WriteLockHeld: Error {
        let cause: SQLiteError
    }

    init(configuration: DatabaseConfiguration, notifier: ChangeNotifier) throws {
        let connection = try SQLiteConnection(path: configuration.fileURL.path)
        // Opening (checks, migration) runs on a thread of DocStore's own and may wait for the lock.
        connection.busyTimeoutMilliseconds = DatabaseWriter.milliseconds(configuration.lockTimeout)
        self.lockTimeout = configuration.lockTimeout
        self.path = configuration.fileURL.path
        self.syncsEachCommit = configuration.durability == .full
        do {
            try Schema.checkIdentity(connection)
            let synchronous = configuration.durability == .full ? "FULL" : "NORMAL"
            try Schema.configureWriter(connection, synchronous: synchronous)
            if let limit = configuration.maximumFileSize { try connection.limitFileSize(to: limit) }
            let found = try Schema.version(connection)
            try Schema.migrate(connection, uuid: { UUID().uuidString.lowercased() })
            if found == 0 {
                configuration.logger.debug("created \(configuration.fileURL.path) (schema \(Schema.currentVersion))")
            } else if found < Schema.currentVersion {
                configuration.logger.info("migrated \(configuration.fileURL.path) from schema \(found) to \(Schema.currentVersion)")
            }
            // Contents a stopped process was streaming in: no document can refer to them.
            try connection.transaction(immediate: true) { try AttachmentRecords(connection: connection).discardAllStaged() }
            let last = try DocumentRecords(connection: connection).lastSequence()
            self.lastSequence = last
            self.knownDataVersion = try connection.scalarInt("PRAGMA data_version") ?? 0
            notifier.committed(upTo: last)
            self.checkpointer = try WALCheckpointer(writer: connection, synchronous: synchronous)
        } catch {
            connection.close()
            throw Database.storageError(error)
        }
        self.connection = connection
        self.notifier = notifier
        do {
            self.revisionsLimitValue = Atomic(try Schema.storedRevisionsLimit(connection) ?? configuration.revisionsLimit)
        } catch {
            connection.close()
            throw Database.storageError(error)
        }
        // From now on the writer's statements never wait for a lock: a point write runs where its
        // caller is, so a write that meets another process's lock fails at once (WriteLockHeld) and
        // waits for it on a thread of DocStore's own (`waitingForTheLock`).
        connection.busyTimeoutMilliseconds = 0
        self.keepsAncestorBodies = configuration.keepsAncestorBodies
        self.mergesPropertyHistory = configuration.mergesPropertyHistory
    }

    /// Sets the revision limit every write from now on applies (once stored).
    nonisolated func useRevisionsLimit(_ limit: Int) {
        revisionsLimitValue.store(limit, ordering: .relaxed)
    }

    func close() async {
        let first = access.withLock {
            defer { isClosed = true }
            return !isClosed
        }
        guard first else { return }
        await checkpointer.close()
        access.withLock {
            try? Schema.optimize(connection)
            connection.close()
        }
    }

    /// Runs `operation` (one of the writer's synchronous writes) on the writer's executor.
    func perform<T: Sendable>(_ operation: @Sendable () throws -> T) rethrows -> T {
        try operation()
    }

    /// A point write found the connection in use by another write; nothing of it was done.
    struct Busy: Error {}

    /// Set while a point write runs where its caller is: its transaction then takes the connection
    /// only if it is free (``Busy`` otherwise), never waiting for another write.
    @TaskLocal static var writesInline = false

    /// Runs a single-statement read on the writer's connection if no write is using it, or returns
    /// `nil` at once (the caller then reads from the pool): a read never waits for a write.
    ///
    /// The writer's page cache stays valid across its own commits, while every reader connection
    /// must drop its whole cache after any commit (SQLite WAL), so a document read here between
    /// writes costs no re-reads of the pages it needs — and a write of the same document that follows
    /// finds them cached too. A write that starts meanwhile waits only for this one read.
    nonisolated func readIfIdle<T>(_ body: (SQLiteConnection) throws -> T) throws -> T? {
        guard access.try() else { return nil }
        defer { access.unlock() }
        guard !connection.isClosed else { return nil }
        defer { connection.resetActiveStatements() }
        return try connection.withoutWaitingForLocks { try body(connection) }
    }

    /// - Precondition: ``access`` is held.
    nonisolated func ensureOpen() throws {
        if isClosed { throw DocStoreError(.databaseClosed, "The database is closed") }
    }

    /// Runs `body` in a write transaction; on failure rolls back (restoring the sequence counter) and
    /// rethrows; on success publishes the changes it produced.
    nonisolated func transaction<T>(_ body: (DocumentRecords, inout [DocumentChange]) throws -> T) throws -> T {
        var changes: [DocumentChange] = []
        let result = try plainTransaction { connection in
            let records = DocumentRecords(connection: connection, firstWrites: PendingFirstWrites())
            let result = try body(records, &changes)
            try records.flushFirstWrites()
            return result
        }
        notifier.publish(changes)
        return result
    }

    /// Runs `body` in a write transaction on the connection; on failure rolls back (restoring the
    /// sequence counter) and rethrows.
    nonisolated func plainTransaction<T>(_ body: (SQLiteConnection) throws -> T) throws -> T {
        if DatabaseWriter.writesInline {
            guard access.try() else { throw Busy() }
        } else {
            access.lock()
        }
        var external: (changes: [DocumentChange], last: Int64)?
        defer {
            access.unlock()
            if let external { publishOtherConnections(external) }
        }
        try ensureOpen()
        var startSequence = lastSequence
        do {
            return try connection.transaction(immediate: true) {
                // Holding the file's write lock: what other connections committed before is all there is.
                if let found = try catchUpWithOtherConnections() {
                    external = found
                    startSequence = lastSequence
                }
                return try body(connection)
            }
        } catch let error as SQLiteError where error.isBusy {
            lastSequence = startSequence
            throw WriteLockHeld(cause: error)
        } catch {
            lastSequence = startSequence
            throw Database.storageError(error)
        }
    }

    // MARK: Document writes

    /// Writes documents in one transaction. Each gets its own result: a document that fails
    /// validation or conflicts is reported and skipped, the others are committed. A storage failure
    /// rolls back the whole batch and throws.
    ///
    /// A large batch has its bodies checked and encoded on another thread, a few chunks ahead of the
    /// documents being stored (``BodyPipeline``).
    ///
    /// Each result carries the saved document's id, or the given one when the document failed (the
    /// saved document is moved into its result, never copied).
    nonisolated func write(_ documents: [Document], policy: WritePolicy, newEdits: Bool,
               source: DocumentChange.Source) throws -> [SaveResult] {
        try transaction { records, changes in
            let pipeline = BodyPipeline.isWorthwhile(for: documents.count) ? BodyPipeline(documents, newEdits: newEdits) : nil
            defer { pipeline?.finish() }
            var steps = RevisionWriter(records: records, owner: self, lastSequence: lastSequence, revisionsLimit: revisionsLimit,
                                       keepsAncestorBodies: keepsAncestorBodies,
                                       now: Date.now.timeIntervalSince1970, source: source, validation: validation)
            defer { lastSequence = steps.lastSequence }
            var results: [SaveResult] = []
            results.reserveCapacity(documents.count)
            for (position, document) in documents.enumerated() {
                do {
                    let prepared = try pipeline?.body(at: position)
                    let (saved, change) = newEdits
                        ? try steps.applyEdit(document, prepared: prepared, policy: policy)
                        : try steps.applyReplicated(document, prepared: prepared)
                    if let change { changes.append(change) }
                    results.append(SaveResult(id: saved.id, result: .success(saved)))
                } catch let error as DocStoreError where error.code != .storage {
                    results.append(SaveResult(id: document.id, result: .failure(error)))
                }
            }
            // A replicated revision may have made a conflict that the documents' histories resolve.
            if mergesPropertyHistory && !steps.conflicted.isEmpty {
                var seen = Set<ExactString>()
                for id in steps.conflicted where seen.insert(ExactString(id)).inserted {
                    changes += try steps.mergePropertyHistories(id: id)
                }
            }
            return results
        }
    }

    /// Writes documents as new edits in one transaction, all or nothing: the first document that
    /// fails rolls the whole batch back, and its error names it (``DocStoreError/itemIndex``).
    /// A large batch has its bodies prepared ahead as ``write(_:policy:newEdits:source:)`` does.
    nonisolated func writeAll(_ documents: [Document], policy: WritePolicy) throws -> [Document] {
        try revisionTransaction { steps, _, changes in
            let pipeline = BodyPipeline.isWorthwhile(for: documents.count) ? BodyPipeline(documents, newEdits: true) : nil
            defer { pipeline?.finish() }
            var saved: [Document] = []
            saved.reserveCapacity(documents.count)
            for (position, document) in documents.enumerated() {
                try Self.naming(position, document) {
                    let (written, change) = try steps.applyEdit(document, prepared: try pipeline?.body(at: position), policy: policy)
                    if let change { changes.append(change) }
                    saved.append(written)
                }
            }
            return saved
        }
    }

    /// Writes an import in one transaction, all or nothing: documents with a revision as replicated
    /// revisions (without merging property histories: the file's leaves are reproduced as they are),
    /// the others as new edits of the current revision. Returns the number of revisions written.
    nonisolated func importAll(_ documents: [Document], progress: (@Sendable (Int, Int) -> Void)? = nil) throws -> Int {
        try revisionTransaction { steps, records, changes in
            for (position, input) in documents.enumerated() {
                if position % 1000 == 0 { progress?(position, documents.count) }
                try Self.naming(position, input) {
                    let change: DocumentChange?
                    if input.revision != nil {
                        change = try steps.applyReplicated(input, prepared: nil).1
                    } else {
                        var document = input
                        if let existing = try records.fetch(id: document.id) { document.revision = existing.winner }
                        change = try steps.applyEdit(document, prepared: nil, policy: .put).1
                    }
                    if let change { changes.append(change) }
                }
            }
            progress?(documents.count, documents.count)
            return changes.count
        }
    }

    /// A write transaction with a ``RevisionWriter`` for local edits.
    nonisolated func revisionTransaction<T>(_ body: (inout RevisionWriter, DocumentRecords, inout [DocumentChange]) throws -> T) throws -> T {
        try transaction { records, changes in
            var steps = RevisionWriter(records: records, owner: self, lastSequence: lastSequence, revisionsLimit: revisionsLimit,
                                       keepsAncestorBodies: keepsAncestorBodies,
                                       now: Date.now.timeIntervalSince1970, source: .local, validation: validation)
            defer { lastSequence = steps.lastSequence }
            return try body(&steps, records, &changes)
        }
    }

    /// Runs one item of an all-or-nothing batch; its failure names it.
    private static func naming(_ position: Int, _ document: Document, _ body: () throws -> Void) throws {
        do {
            try body()
        } catch let error as DocStoreError where error.code != .storage {
            throw error.naming(item: position, id: document.hasID ? document.id : nil)
        }
    }

    // MARK: Other connections' commits

    /// Looks for commits another connection (another process) made to the file since the writer last
    /// looked: when the connection's `data_version` moved and the file's last sequence passed the
    /// writer's, takes that sequence as its own (the next write numbers on from it) and returns the
    /// documents those commits changed, to publish.
    /// - Precondition: ``access`` is held.
    nonisolated func catchUpWithOtherConnections() throws -> (changes: [DocumentChange], last: Int64)? {
        otherConnectionChecks.add(1, ordering: .relaxed)
        let version = try connection.scalarInt("PRAGMA data_version") ?? 0
        guard version != knownDataVersion else { return nil }
        knownDataVersion = version
        let records = DocumentRecords(connection: connection)
        let last = try records.lastSequence()
        guard last > lastSequence else { return nil }
        let changes = try records.latestChanges(after: lastSequence, through: last, source: .otherConnection)
        lastSequence = last
        return (changes, last)
    }

    /// Asks the file whether another connection committed, and publishes what it did (``CommitWatch``
    /// calls it while someone waits for changes). Waits for a write in progress: call it on a thread of
    /// DocStore's own.
    nonisolated func pollOtherConnections() {
        let found: (changes: [DocumentChange], last: Int64)? = access.withLock {
            guard !isClosed, !connection.isClosed else { return nil }
            return try? catchUpWithOtherConnections()
        }
        if let found { publishOtherConnections(found) }
    }

    private nonisolated func publishOtherConnections(_ found: (changes: [DocumentChange], last: Int64)) {
        notifier.publish(found.changes)
        notifier.committed(upTo: found.last)
    }

    // MARK: Another process's write lock

    /// Waits until the write lock of the file at `path` is free, for at most `timeout`; whether it was.
    /// The wait takes and releases the lock on a connection of its own, on one of ``lockWaits``' threads,
    /// in slices of at most ``lockWaitSlice``, so that any number of waiting writes share those threads
    /// and none waits behind another's whole timeout.
    static func waitForWriteLock(path: String, for timeout: Duration) async throws -> Bool {
        let slice = min(timeout, lockWaitSlice)
        return try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Bool, any Error>) in
            lockWaits.submit {
                continuation.resume(with: Result {
                    let probe = try SQLiteConnection(path: path)
                    defer { probe.close() }
                    probe.busyTimeoutMilliseconds = milliseconds(slice)
                    return try Schema.writeLockIsFree(probe)
                })
            }
        }
    }

    /// The threads on which writes wait for another connection's write lock: two, whatever the number
    /// of waiting writes or databases.
    static let lockWaits = DedicatedThreads(count: 2, name: "docstore.lock-waits")

    /// The longest a write waits for a lock on one of ``lockWaits``' threads before giving it up to the
    /// next waiting write (and trying its own again).
    static let lockWaitSlice = Duration.milliseconds(100)

    static func milliseconds(_ duration: Duration) -> Int32 {
        let parts = duration.components
        return Int32(clamping: max(0, parts.seconds * 1000 + parts.attoseconds / 1_000_000_000_000_000))
    }

    // MARK: Streamed attachment contents (DatabaseWriter+Staging.swift)

    /// Contents being read by ``AttachmentContent`` streams, which purge and compaction keep.
    nonisolated let pins = ContentPins()

    // Local documents: DatabaseWriter+LocalDocuments.swift; maintenance: DatabaseWriter+Maintenance.swift.
}

/// Runs `operation` (one of `writer`'s synchronous writes) on the writer's executor — or, for a
/// `pointWrite` (``ThreadRule/Exception/pointWrite``) when no other write holds the connection, where
/// the caller is; when it finds the file's write lock held by another connection
/// (``DatabaseWriter/WriteLockHeld``), waits for that lock on a thread of DocStore's own — never on the
/// cooperative pool — and runs it again on the writer's executor, until the writer's
/// ``DatabaseWriter/lockTimeout`` has passed; then fails with ``DocStoreError/Code/databaseLocked``.
func waitingForTheLock<T: Sendable>(of writer: DatabaseWriter, pointWrite: Bool = false,
                                    _ operation: @Sendable () throws -> T) async throws -> T {
    // Validation that runs the app's code (JavaScript's waits for the engine) or a commit that waits
    // for fsync is never a point write.
    if pointWrite, !writer.validation.mayRunUserCode, !writer.syncsEachCommit {
        do {
            return try ThreadRule.allowing(.pointWrite) { try DatabaseWriter.$writesInline.withValue(true) { try operation() } }
        } catch is DatabaseWriter.Busy {
            // Another write holds the connection: this one queues behind it on the writer's executor.
        } catch is DatabaseWriter.WriteLockHeld {
            // Another process holds the file's lock: the wait and the retries run below.
        }
    }
    let deadline = ContinuousClock.now + writer.lockTimeout
    while true {
        do {
            return try await writer.perform(operation)
        } catch let held as DatabaseWriter.WriteLockHeld {
            let left = deadline - ContinuousClock.now
            guard left > .zero else {
                throw DocStoreError(.databaseLocked, "Another connection held the write lock of \(writer.path) for more than "
                                    + "\(writer.lockTimeout); nothing was written", cause: held.cause)
            }
            // Free or not after one slice, the write is tried again: the loop ends at the deadline.
            _ = try await DatabaseWriter.waitForWriteLock(path: writer.path, for: left)
        }
    }
}
