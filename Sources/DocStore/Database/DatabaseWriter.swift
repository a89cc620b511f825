import Foundation

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
/// ``RevisionWriter``. Being an actor, it serialises writes; callers suspend (never block) while
/// another write runs.
actor DatabaseWriter {
    let connection: SQLiteConnection
    let notifier: ChangeNotifier
    /// How many generations each branch keeps: the limit set on the database, else the configuration's.
    private(set) var revsLimit: Int
    let keepsAncestorBodies: Bool
    let mergesPropertyHistory: Bool
    let idFactory: @Sendable () -> String
    private(set) var lastSequence: Int64
    private var isClosed = false
    /// Copies the WAL back into the database file on another thread (``WALCheckpointer``).
    private let checkpointer: WALCheckpointer
    /// Held whenever `connection` is in use: by the actor for each transaction, and by a point read
    /// that borrows the idle connection (``readIfIdle(_:)``).
    private let access = NSLock()
    /// The database's write validator and the design documents it runs.
    nonisolated let validation = WriteValidation()

    init(configuration: DatabaseConfiguration, notifier: ChangeNotifier) throws {
        let connection = try SQLiteConnection(path: configuration.fileURL.path)
        let timeout = configuration.lockTimeout.components
        connection.busyTimeoutMilliseconds = Int32(clamping: timeout.seconds * 1000 + timeout.attoseconds / 1_000_000_000_000_000)
        do {
            try Schema.checkIdentity(connection)
            let synchronous = configuration.durability == .full ? "FULL" : "NORMAL"
            try Schema.configureWriter(connection, synchronous: synchronous)
            let found = try connection.scalarInt("PRAGMA user_version") ?? 0
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
            notifier.committed(upTo: last)
            self.checkpointer = try WALCheckpointer(writer: connection, synchronous: synchronous)
        } catch {
            connection.close()
            throw Database.storageError(error)
        }
        self.connection = connection
        self.notifier = notifier
        do {
            self.revsLimit = try Schema.storedRevsLimit(connection) ?? configuration.revsLimit
        } catch {
            connection.close()
            throw Database.storageError(error)
        }
        self.keepsAncestorBodies = configuration.keepsAncestorBodies
        self.mergesPropertyHistory = configuration.mergesPropertyHistory
        self.idFactory = configuration.idFactory
    }

    func close() {
        guard !isClosed else { return }
        isClosed = true
        access.withLock {
            checkpointer.close()
            try? Schema.optimize(connection)
            connection.close()
        }
    }

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

    private func ensureOpen() throws {
        if isClosed { throw DocStoreError(.databaseClosed, "The database is closed") }
    }

    /// Runs `body` in a write transaction; on failure rolls back (restoring the sequence counter) and
    /// rethrows; on success publishes the changes it produced.
    private func transaction<T>(_ body: (DocumentRecords, inout [DocumentChange]) throws -> T) throws -> T {
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
    private func plainTransaction<T>(_ body: (SQLiteConnection) throws -> T) throws -> T {
        try ensureOpen()
        let startSequence = lastSequence
        do {
            access.lock()
            defer { access.unlock() }
            return try connection.transaction(immediate: true) { try body(connection) }
        } catch let error as SQLiteError where error.isBusy {
            lastSequence = startSequence
            throw DocStoreError(.databaseLocked, "Another connection held the write lock of \(connection.path) for more than "
                                + "\(Double(connection.busyTimeoutMilliseconds) / 1000) s; nothing was written", cause: error)
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
    func write(_ documents: [Document], policy: WritePolicy, newEdits: Bool,
               source: ChangeSource) throws -> [SaveResult] {
        try transaction { records, changes in
            let pipeline = BodyPipeline.isWorthwhile(for: documents.count) ? BodyPipeline(documents, newEdits: newEdits) : nil
            defer { pipeline?.finish() }
            var steps = RevisionWriter(records: records, owner: self, lastSequence: lastSequence, revsLimit: revsLimit,
                                       keepsAncestorBodies: keepsAncestorBodies, idFactory: idFactory,
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
                var seen = Set<String>()
                for id in steps.conflicted where seen.insert(id).inserted {
                    changes += try steps.mergePropertyHistories(id: id)
                }
            }
            return results
        }
    }

    /// Writes documents as new edits in one transaction, all or nothing: the first document that
    /// fails rolls the whole batch back, and its error names it (``DocStoreError/itemIndex``).
    func writeAll(_ documents: [Document], policy: WritePolicy) throws -> [Document] {
        try revisionTransaction { steps, _, changes in
            var saved: [Document] = []
            saved.reserveCapacity(documents.count)
            for (position, document) in documents.enumerated() {
                try Self.naming(position, document) {
                    let (written, change) = try steps.applyEdit(document, prepared: nil, policy: policy)
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
    func importAll(_ documents: [Document]) throws -> Int {
        try revisionTransaction { steps, records, changes in
            for (position, input) in documents.enumerated() {
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
            return changes.count
        }
    }

    /// A write transaction with a ``RevisionWriter`` for local edits.
    private func revisionTransaction<T>(_ body: (inout RevisionWriter, DocumentRecords, inout [DocumentChange]) throws -> T) throws -> T {
        try transaction { records, changes in
            var steps = RevisionWriter(records: records, owner: self, lastSequence: lastSequence, revsLimit: revsLimit,
                                       keepsAncestorBodies: keepsAncestorBodies, idFactory: idFactory,
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

    // MARK: Streamed attachment contents

    /// Contents being read by ``AttachmentContent`` streams, which purge and compaction keep.
    nonisolated let pins = ContentPins()

    /// Starts a content streamed in by an ``AttachmentWriter``; returns its row and token.
    func beginStaging(encoding: AttachmentEncoding) throws -> (key: Int64, token: String) {
        try plainTransaction { connection in
            let token = AttachmentStorage.stagingPrefix + UUID().uuidString.lowercased()
            return (try AttachmentRecords(connection: connection).beginStaging(token: token, encoding: encoding), token)
        }
    }

    /// Appends the next chunk of a streamed-in content, in a transaction of its own.
    func appendStagedChunk(to key: Int64, at position: Int, _ bytes: [UInt8]) throws {
        try plainTransaction { connection in
            try bytes.withUnsafeBytes { try AttachmentRecords(connection: connection).appendChunk(to: key, at: position, $0) }
        }
    }

    /// Deletes a streamed-in content no write adopted; does nothing once adopted, or when closed (the
    /// next open deletes it).
    func discardStaged(key: Int64, token: String) {
        guard !isClosed else { return }
        try? plainTransaction { connection in try AttachmentRecords(connection: connection).discard(key: key, token: token) }
    }

    // MARK: Local documents

    /// Creates or updates a `_local` document; `revision` must be the current one (`0-N`) when it
    /// exists. Returns the new revision.
    func putLocal(id: String, body: JSONObject, revision: String?) throws -> String {
        try plainTransaction { connection in
            let locals = LocalDocumentRecords(connection: connection)
            let current = try locals.currentRevision(id: id)
            if let current {
                guard revision == "0-\(current)" else { throw DocStoreError.conflict() }
            }
            try DocumentValidation.validateBody(body)
            let next = (current ?? 0) + 1
            try locals.put(id: id, revision: next, body: body)
            return "0-\(next)"
        }
    }

    /// Writes a `_local` document without a conflict check, as CouchDB 3 does: the new revision counts
    /// on from `counter` (the `N` of the `0-N` the writer gave; 0 without one). Returns it.
    func putLocal(id: String, body: JSONObject, following counter: Int64) throws -> String {
        try DocumentValidation.validateBody(body)
        let next = counter &+ 1
        try plainTransaction { try LocalDocumentRecords(connection: $0).put(id: id, revision: next, body: body) }
        return "0-\(next)"
    }

    /// Removes a `_local` document whatever its revision; false if there was none.
    func removeLocal(id: String) throws -> Bool {
        try plainTransaction { connection in
            let locals = LocalDocumentRecords(connection: connection)
            guard try locals.currentRevision(id: id) != nil else { return false }
            try locals.delete(id: id)
            return true
        }
    }

    /// Deletes a `_local` document at its current revision.
    func deleteLocal(id: String, revision: String?) throws {
        try plainTransaction { connection in
            let locals = LocalDocumentRecords(connection: connection)
            guard let current = try locals.currentRevision(id: id) else { throw DocStoreError.notFound("missing") }
            guard revision == "0-\(current)" else { throw DocStoreError.conflict() }
            try locals.delete(id: id)
        }
    }

    // MARK: Maintenance

    /// Sets and keeps the revision limit; it applies to every write from now on.
    func setRevsLimit(_ limit: Int) throws {
        try plainTransaction { try Schema.storeRevsLimit($0, limit) }
        revsLimit = limit
    }

    /// Keeps a security object.
    func setProperty(_ key: String, _ value: String) throws {
        try plainTransaction { try $0.run("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", [.text("property:" + key), .text(value)]) }
    }

    func setSecurity(_ json: String) throws {
        try plainTransaction { try Schema.storeSecurity($0, json) }
    }

    /// Removes leaf revisions as CouchDB's `_purge` does (see ``RevisionTree/purge(leaves:)``): a
    /// document that loses every leaf is purged entirely; one that keeps some has its winner chosen
    /// again and moves to a new sequence. Each document's purge takes a sequence in the purge log (which
    /// indexes read). `nil` revisions purge every leaf: the whole document. Returns, per document, the
    /// revisions purged (those that were leaves).
    func purge(revisions requests: [(id: String, revisions: [RevisionID]?)]) throws -> [(id: String, purged: [RevisionID])] {
        defer { notifier.committed(upTo: lastSequence) }
        return try transaction { records, changes in
            var answers: [(id: String, purged: [RevisionID])] = []
            for (id, revisions) in requests {
                guard let record = try records.fetch(id: id) else {
                    answers.append((id, []))
                    continue
                }
                let leaves = record.tree.leaves.map(\.revision)
                let targets = revisions.map { $0.filter(leaves.contains) } ?? leaves
                guard !targets.isEmpty else {
                    answers.append((id, []))
                    continue
                }
                var tree = record.tree
                let removed = tree.purge(leaves: Set(targets))
                lastSequence += 1
                try records.recordPurge(id: id, sequence: lastSequence)
                answers.append((id, targets))
                guard let winner = tree.winner else {
                    try records.delete(record)
                    try records.dropAllRevisions(id: id)
                    continue
                }
                for revision in removed where revision != record.winner {
                    try records.dropRevision(id: id, revision: revision)
                }
                var body = record.body
                if winner.revision != record.winner {
                    // The purged winner's body was in `docs`; the new winner's moves there from `revs`.
                    try records.dropAttachmentReferences(id: id, revision: record.winner)
                    guard let stored = try records.revisionBody(id: id, revision: winner.revision) else {
                        throw DocStoreError(.storage, "Missing body of leaf revision \(winner.revision) of \(id)")
                    }
                    body = stored.body
                    try records.removeRevisionBody(id: id, revision: winner.revision)
                }
                lastSequence += 1
                let updated = DocumentRecord(row: record.row, sequence: lastSequence, id: id, winner: winner.revision,
                                             isDeleted: winner.isDeleted, body: body, tree: tree, created: record.created,
                                             updated: Date.now.timeIntervalSince1970)
                try records.write(updated, replacing: record)
                changes.append(DocumentChange(id: id, revision: winner.revision, sequence: lastSequence,
                                              isDeleted: winner.isDeleted, source: .local))
            }
            try AttachmentRecords(connection: connection).collectUnreferenced(pinned: pins.keys)
            return answers
        }
    }

    /// Copies what the WAL holds into the database file now (``WALCheckpointer/checkpointNow()``).
    func checkpoint() throws {
        try ensureOpen()
        try checkpointer.checkpointNow()
    }

    /// Drops the bodies of non-leaf revisions, attachment contents nothing refers to and superseded
    /// entries of the changes log, then returns freed pages to the file system. Returns the number of
    /// revision bodies dropped.
    func compact() throws -> Int {
        let limit = revsLimit
        let dropped: Int = try transaction { records, _ in
            var dropped = 0
            // Trees longer than the revision limit (lowered since they grew) are stemmed to it.
            _ = try records.stemAllTrees(limit: limit)
            for id in try records.idsWithStoredRevisions() {
                guard let record = try records.fetch(id: id) else {
                    try records.dropAllRevisions(id: id)
                    continue
                }
                let leaves = Set(record.tree.leaves.map(\.revision))
                for revision in try records.storedRevisions(id: id) where !leaves.contains(revision) {
                    try records.dropRevision(id: id, revision: revision)
                    dropped += 1
                }
            }
            try AttachmentRecords(connection: connection).collectUnreferenced(pinned: pins.keys)
            _ = try records.pruneChangesLog()
            return dropped
        }
        try access.withLock { try Schema.returnFreePages(connection) }
        return dropped
    }
}

#if DEBUG
extension DatabaseWriter {
    /// Overwrites a document's revision tree with garbage; lets tests check corruption handling.
    func corruptTreeForTesting(id: String) throws {
        try access.withLock { try DocumentRecords(connection: connection).overwriteForTesting(id: id, tree: [1, 200, 1, 0xFF]) }
    }

    func corruptBodyForTesting(id: String) throws {
        try access.withLock { try DocumentRecords(connection: connection).overwriteForTesting(id: id, body: Array(#"{"a":"#.utf8)) }
    }
}
#endif
