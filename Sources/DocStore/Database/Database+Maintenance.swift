/// A `_local` document: not replicated, not in the changes feed, its revision a counter (`0-N`).
/// Replicators keep their checkpoints in these.
public struct LocalDocument: Sendable, Hashable {
    /// The id without the `_local/` prefix.
    public let id: String
    /// `0-N`, where N counts the writes: generation 0, which no replicated document's revision has.
    /// Pass it back to ``Database/saveLocalDocument(withID:body:revision:)`` or
    /// ``Database/deleteLocalDocument(withID:revision:)``.
    public let revision: RevisionID
    /// The body.
    public let body: JSONObject
}

extension Database {
    // MARK: Local documents

    static func localID(_ id: String) throws -> String {
        let bare = id.hasPrefix("_local/") ? String(id.dropFirst(7)) : id
        guard !bare.isEmpty else { throw DocStoreError(.invalidDocumentID, "Local document id must not be empty") }
        return bare
    }

    /// The `_local` document `id` (with or without the `_local/` prefix), or `nil`.
    public func localDocument(withID id: String) async throws -> LocalDocument? {
        let bare = try Database.localID(id)
        return try await readByKey { connection in
            try LocalDocumentRecords(connection: connection).fetch(id: bare).map {
                LocalDocument(id: bare, revision: RevisionID(localCounter: $0.revision), body: $0.body)
            }
        }
    }

    /// Every `_local` document, in id order (CouchDB's `_local_docs`).
    public func localDocuments() async throws -> [LocalDocument] {
        try await readApart { connection in
            try LocalDocumentRecords(connection: connection).all().map {
                LocalDocument(id: $0.id, revision: RevisionID(localCounter: $0.record.revision), body: $0.record.body)
            }
        }
    }

    /// Creates or updates a `_local` document. Updating needs the current `revision`.
    /// - Returns: the new revision, `0-N`.
    /// - Throws: ``DocStoreError/Code/conflict`` if `revision` is not the current one.
    @discardableResult
    public func saveLocalDocument(withID id: String, body: JSONObject, revision: RevisionID? = nil) async throws -> RevisionID {
        try ensureOpen()
        let counter = try Database.localCounter(revision)
        return RevisionID(localCounter: try await waitingForTheLock(of: writer, pointWrite: DatabaseWriter.isPointWrite(body: body)) {
            try writer.putLocal(id: try Database.localID(id), body: body, revision: counter)
        })
    }

    /// Deletes a `_local` document at its current `revision`.
    public func deleteLocalDocument(withID id: String, revision: RevisionID) async throws {
        try ensureOpen()
        let counter = try Database.localCounter(revision)
        try await waitingForTheLock(of: writer, pointWrite: true) { try writer.deleteLocal(id: try Database.localID(id), revision: counter) }
    }

    /// The write counter `revision` names; a revision that is not a local document's (`0-N`) is a
    /// conflict, as no local document has it.
    private static func localCounter(_ revision: RevisionID?) throws -> Int64? {
        guard let revision else { return nil }
        guard let counter = revision.localCounter else { throw DocStoreError.conflict() }
        return counter
    }

    /// Writes a `_local` document as CouchDB 3 writes them for its HTTP API: no conflict check (the last
    /// write wins), the new revision `0-(N+1)` counting on from the writer's `0-N` (`0-1` without).
    /// DocServer's `_local` writes; ``saveLocalDocument(withID:body:revision:)`` checks the revision.
    @discardableResult
    package func writeLocalDocument(withID id: String, body: JSONObject, following counter: Int64?) async throws -> String {
        try ensureOpen()
        return try await waitingForTheLock(of: writer, pointWrite: DatabaseWriter.isPointWrite(body: body)) {
            try writer.putLocal(id: try Database.localID(id), body: body, following: counter ?? 0)
        }
    }

    /// Removes a `_local` document whatever its revision, as CouchDB 3 does; false if there was none.
    package func removeLocalDocument(withID id: String) async throws -> Bool {
        try ensureOpen()
        return try await waitingForTheLock(of: writer, pointWrite: true) { try writer.removeLocal(id: try Database.localID(id)) }
    }

    // MARK: Maintenance

    /// Removes documents and their whole revision history, as if they had never existed (CouchDB
    /// `_purge`). Purged documents leave the changes feed and do not replicate.
    /// - Returns: the ids that existed and were purged.
    @discardableResult
    public func purge(documentIDs ids: [String]) async throws -> [String] {
        try ensureOpen()
        return try await waitingForTheLock(of: writer) { try writer.purge(revisions: ids.map { ($0, nil) }) }.filter { !$0.purged.isEmpty }.map(\.id)
    }

    /// How many generations of history each branch of a document keeps (CouchDB `_revs_limit`): the
    /// limit set with ``setRevisionsLimit(_:)``, else ``DatabaseConfiguration/revisionsLimit``.
    public var revisionsLimit: Int {
        get async { writer.revisionsLimit }
    }

    /// Sets the revision limit and keeps it in the database file, where it outlasts the configuration's
    /// (CouchDB `PUT /db/_revs_limit`). Like CouchDB, it applies to documents as they are next written.
    /// - Throws: ``DocStoreError/Code/badRequest`` unless `limit` is at least 1.
    public func setRevisionsLimit(_ limit: Int) async throws {
        try ensureOpen()
        guard limit >= 1 else { throw DocStoreError(.badRequest, "The revision limit must be a positive integer") }
        try await waitingForTheLock(of: writer, pointWrite: true) { try writer.setRevisionsLimit(limit) }
    }

    /// The purge-record limit until one is set (CouchDB's default).
    static let defaultPurgedInfosLimit = 1000

    /// How many purge records the database keeps (CouchDB `_purged_infos_limit`, default 1000): the
    /// limit set with ``setPurgedInfosLimit(_:)``.
    ///
    /// A purge records the document's id at a sequence of its own; indexes read the records to drop
    /// the document's rows. ``compact()`` drops the records older than the newest `limit` ones, as
    /// CouchDB's compaction does; ``DatabaseInfo/purgeCount`` still counts every purge, and an index
    /// that had not caught up with a dropped record is rebuilt when next read.
    public var purgedInfosLimit: Int {
        get async throws { try await readByKey { try Schema.storedPurgedInfosLimit($0) } ?? Database.defaultPurgedInfosLimit }
    }

    /// Sets and keeps the purge-record limit (CouchDB `PUT /db/_purged_infos_limit`).
    /// - Throws: ``DocStoreError/Code/badRequest`` unless `limit` is at least 1.
    public func setPurgedInfosLimit(_ limit: Int) async throws {
        try ensureOpen()
        guard limit >= 1 else { throw DocStoreError(.badRequest, "`purge_infos_limit` must be positive integer") }
        try await waitingForTheLock(of: writer, pointWrite: true) { try writer.setPurgedInfosLimit(limit) }
    }

    /// The database's security object (CouchDB `_security`: `admins` and `members`, each with `names`
    /// and `roles`), `{}` when none was set. DocStore keeps it for a server to enforce; the embedded
    /// database itself does not.
    public func securityObject() async throws -> JSONObject {
        let text = try await readByKey { try Schema.storedSecurity($0) }
        guard let text, case .object(let object) = try JSON(parsing: text) else { return [:] }
        return object
    }

    /// Sets and keeps the security object. Like CouchDB's, it is not a document: it does not replicate.
    public func setSecurityObject(_ object: JSONObject) async throws {
        try ensureOpen()
        try await waitingForTheLock(of: writer) { try writer.setSecurity(try JSON.object(object).serializedString()) }
    }

    /// Purges revisions, as CouchDB's `_purge` does: each given leaf revision is removed with the part
    /// of its branch no other leaf shares, as if it had never existed (it does not replicate again
    /// from here); a document whose every leaf is purged is removed entirely, one that keeps leaves gets
    /// its winner chosen again. Revisions that are not leaves (or unknown) are ignored.
    ///
    /// ```swift
    /// let purged = try await db.purge(revisions: [("invoice-7", [conflict])])   // [("invoice-7", [conflict])]
    /// ```
    /// - Returns: per document, in order, the revisions purged.
    @discardableResult
    public func purge(revisions requests: [(id: String, revisions: [RevisionID])]) async throws -> [(id: String, purged: [RevisionID])] {
        try ensureOpen()
        return try await waitingForTheLock(of: writer) { try writer.purge(revisions: requests.map { ($0.id, $0.revisions) }) }
    }

    /// Copies every committed change from the write-ahead logs into the database file and the index
    /// file, and returns when they are there.
    ///
    /// The database does this by itself, on another thread, as the log grows; call it before copying
    /// the database file elsewhere (a backup), or to let that background work finish before
    /// measuring something else.
    /// - Throws: ``DocStoreError/Code/databaseClosed``; ``DocStoreError/Code/storage`` if SQLite
    ///   fails.
    public func flushWriteAheadLog() async throws {
        try ensureOpen()
        try await writer.checkpoint()
        try await indexWriter.checkpoint()
    }

    /// Compacts the database: drops the bodies of revisions that are no longer leaves, the
    /// attachment contents no remaining revision uses, the changes-log entries of superseded
    /// sequences and the purge records past ``purgedInfosLimit``, then returns the freed pages to the
    /// file system.
    /// Leaf revisions (winners, conflicts, tombstones) are always kept.
    /// - Returns: how many revision bodies were dropped.
    @discardableResult
    public func compact() async throws -> Int {
        try ensureOpen()
        let tasks = activeTaskList
        return try await waitingForTheLock(of: writer) { try writer.compact(listedIn: tasks) }
    }
}
