import CouchProtocol
import DocStore
import Foundation

/// A replication peer over a database of this process.
struct LocalPeer: ReplicationPeer {
    let database: Database
    /// The replication's clock, on which a continuous replication's wait for news passes.
    let clock: any Clock<Duration>

    func identity() async throws -> String {
        "local:" + (try await database.info().uuid)
    }

    func prepare(create: Bool) async throws {
        if database.isClosed { throw ReplicationError(.databaseNotFound, "The local database \(database.name) is closed") }
    }

    func changes(since: JSON, limit: Int, filter: SourceFilter, wait: Duration?) async throws -> (rows: [ChangesRow], last: JSON, pending: Int?) {
        let start = sequenceNumber(since) ?? 0
        var changesFilter = filter.changesFilter
        if let named = filter.named {
            // The database's own filter functions (its JavaScript design documents, when enabled).
            do {
                let function = try await database.changesFilter(named: named.name, parameters: named.parameters)
                changesFilter.predicate = function.predicate
                if let ids = function.documentIDs { changesFilter.documentIDs = ids }
                if let selector = function.selector { changesFilter.selector = selector }
                if let channels = function.channels { changesFilter.channels = channels }
            } catch let error as DocStoreError {
                throw ReplicationError(.invalidConfiguration, "Filter \(named.name) of the source: \(error.reason)")
            }
        }
        // Each leaf judged on its own, as a CouchDB source judges them for the replicator (`style=all_docs`).
        changesFilter = changesFilter.judgingEachLeaf
        var page = try await database.changes(since: start, limit: limit, filter: changesFilter)
        if page.changes.isEmpty, let wait, await database.waitForCommit(after: page.lastSequence, timeout: wait, clock: clock) {
            page = try await database.changes(since: page.lastSequence, limit: limit, filter: changesFilter)
        }
        // Every leaf, as the replicator asks a remote source for (`style=all_docs`).
        // What is left, for the replication's progress: the sequences after the page, read in O(1) —
        // counting the rows (`pendingChangeCount`) on every page would make a replication quadratic. Like
        // CouchDB's `pending` it ignores the filter; a document changed twice counts twice.
        let pending = max(0, Int(await database.updateSequence - page.lastSequence))
        return (page.changes.map { ChangesRow($0, allLeaves: true) }, .integer(Int(page.lastSequence)), pending)
    }

    /// Local sources wait on the database's commit signal instead.
    func openContinuousFeed(since: JSON, filter: SourceFilter, heartbeat: Duration) async throws -> ChangeFeed? { nil }

    func missingRevisions(_ offered: [(id: String, revisions: [RevisionID])]) async throws -> [RevisionDifference] {
        try await database.missingRevisions(offered)
    }

    /// The revisions read in one snapshot; an attachment the target cannot have on a revision's history
    /// is read from this database when the target stores or sends it, never copied here.
    func fetch(_ requests: [FetchRequest], stagingInto stagingDatabase: Database?) async throws -> [Document] {
        var documents: [Document] = []
        let found = try await database.documentsWithHistory(requests.map { ($0.id, $0.revision) })
        for (request, document) in zip(requests, found) {
            guard var document else { continue }
            if !document.attachments.isEmpty {
                let known = try await newestKnownAncestor(of: document, among: request.possibleAncestors)
                for (name, attachment) in document.attachments where (attachment.revpos ?? Int.max) > known {
                    document.attachments[name] = attachment.readingContent(from: database)
                }
            }
            documents.append(document)
        }
        return documents
    }

    /// The generation of the newest of the target's leaves on the document's history that is not a
    /// deletion (a tombstone carries no attachments), or -1: the target has every attachment added up
    /// to that generation, under the revpos this history gives it.
    private func newestKnownAncestor(of document: Document, among possibleAncestors: [RevisionID]) async throws -> Int {
        guard !possibleAncestors.isEmpty, let tree = try await database.revisionTree(ofDocumentWithID: document.id) else { return -1 }
        let history = document.revisionHistory ?? []
        return history.first { possibleAncestors.contains($0) && !tree.isDeleted($0) }?.generation ?? -1
    }

    func store(_ documents: [Document]) async throws -> StoreOutcome {
        var outcome = StoreOutcome()
        let results = try await database.insertRevisions(documents, source: .replication)
        for (document, result) in zip(documents, results) {
            guard let error = result.error else { continue }
            if error.code == .missingStub {
                outcome.missingStubs.append(document)
            } else {
                outcome.failures.append((result.id, document.revision, error.reason))
            }
        }
        return outcome
    }

    func filterCode(_ name: String) async throws -> String? {
        guard let (design, function) = designFunction(name) else { return nil }
        return try await database.document(withID: "_design/" + design)?["filters"]?[function]?.stringValue
    }

    func checkpoint(_ id: String) async throws -> Checkpointer.Record? {
        try await database.localDocument(withID: id).map {
            Checkpointer.Record(checkpoint: ReplicationCheckpoint(json: $0.body), revision: $0.revision.description)
        }
    }

    func saveCheckpoint(_ id: String, checkpoint: ReplicationCheckpoint, revision: String?) async throws -> String {
        let current = try revision.map { text in
            guard let parsed = RevisionID.local(text) else { throw DocStoreError(.conflict, "Document update conflict.") }
            return parsed
        }
        return try await database.saveLocalDocument(withID: id, body: checkpoint.json, revision: current).description
    }
}
