import Foundation

/// Settings, security, purge, WAL checkpoints and compaction, over the writer's transaction primitive.
extension DatabaseWriter {
    /// Sets and keeps the revision limit; it applies to every write from now on.
    nonisolated func setRevisionsLimit(_ limit: Int) throws {
        try plainTransaction { try Schema.storeRevisionsLimit($0, limit) }
        useRevisionsLimit(limit)
    }

    /// Keeps the purge-record limit.
    nonisolated func setPurgedInfosLimit(_ limit: Int) throws {
        try plainTransaction { try Schema.storePurgedInfosLimit($0, limit) }
    }

    /// Keeps a security object.
    nonisolated func setProperty(_ key: String, _ value: String) throws {
        try plainTransaction { try Schema.storeProperty($0, key, value) }
    }

    nonisolated func setSecurity(_ json: String) throws {
        try plainTransaction { try Schema.storeSecurity($0, json) }
    }

    /// Removes leaf revisions as CouchDB's `_purge` does (see ``RevisionTree/purge(leaves:)``): a
    /// document that loses every leaf is purged entirely; one that keeps some has its winner chosen
    /// again and moves to a new sequence. Each document's purge takes a sequence in the purge log (which
    /// indexes read). `nil` revisions purge every leaf: the whole document. Returns, per document, the
    /// revisions purged (those that were leaves).
    nonisolated func purge(revisions requests: [(id: String, revisions: [RevisionID]?)]) throws -> [(id: String, purged: [RevisionID])] {
        defer { notifier.committed(upTo: access.withLock { lastSequence }) }
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
    func checkpoint() async throws {
        try access.withLock { try ensureOpen() }
        try await checkpointer.checkpointNow()
    }

    /// Drops the bodies of non-leaf revisions, attachment contents nothing refers to and superseded
    /// entries of the changes log, then returns freed pages to the file system. Returns the number of
    /// revision bodies dropped. The work is listed in `tasks` while it runs, document by document.
    nonisolated func compact(listedIn tasks: ActiveTaskList) throws -> Int {
        let limit = revisionsLimit
        let dropped: Int = try transaction { records, _ in
            var dropped = 0
            // Trees longer than the revision limit (lowered since they grew) are stemmed to it.
            _ = try records.stemAllTrees(limit: limit)
            let ids = try records.idsWithStoredRevisions()
            let task = tasks.begin(.databaseCompaction, total: ids.count)
            defer { tasks.end(task) }
            for (done, id) in ids.enumerated() {
                if done % 256 == 0 { tasks.advance(task, to: done) }
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
            _ = try records.trimPurges(keeping: try Schema.storedPurgedInfosLimit(connection) ?? Database.defaultPurgedInfosLimit)
            return dropped
        }
        try access.withLock { try Schema.returnFreePages(connection) }
        return dropped
    }
}


#if DEBUG
extension DatabaseWriter {
    /// Overwrites a document's revision tree with garbage; lets tests check corruption handling.
    nonisolated func corruptTreeForTesting(id: String) throws {
        try ThreadRule.allowing(.testing) { try access.withLock { try DocumentRecords(connection: connection).overwriteForTesting(id: id, tree: [1, 200, 1, 0xFF]) } }
    }

    nonisolated func corruptBodyForTesting(id: String) throws {
        try ThreadRule.allowing(.testing) { try access.withLock { try DocumentRecords(connection: connection).overwriteForTesting(id: id, body: Array(#"{"a":"#.utf8)) } }
    }
}
#endif
