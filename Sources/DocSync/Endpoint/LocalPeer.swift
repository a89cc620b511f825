import DocStore
import Foundation

/// A replication peer over a database of this process.
struct LocalPeer: ReplicationPeer {
    let database: Database

    func identity() async throws -> String {
        "local:" + (try await database.info().uuid)
    }

    func prepare(create: Bool) async throws {
        if database.isClosed { throw ReplicationError(.databaseNotFound, "The local database \(database.name) is closed") }
    }

    func changes(since: JSON, limit: Int, filter: ChangesFilter, wait: Duration?) async throws -> (rows: [ChangeRow], last: JSON) {
        if filter.named != nil {
            throw ReplicationError(.invalidConfiguration, "Server filter functions need a remote source")
        }
        let start = sequenceNumber(since) ?? 0
        let commits = wait == nil ? nil : database.changeBatches()
        var result = try await collect(after: start, limit: limit, filter: filter)
        if result.rows.isEmpty, let commits, let wait {
            if await commits.waitForNext(timeout: wait) {
                result = try await collect(after: start, limit: limit, filter: filter)
            }
        }
        return result
    }

    private func collect(after start: Int64, limit: Int, filter: ChangesFilter) async throws -> (rows: [ChangeRow], last: JSON) {
        let needDocuments = filter.channels != nil || filter.selector != nil
        let documentIDs = filter.documentIDs.map { Set($0.map(ExactString.init)) }
        var cursor = start
        var rows: [ChangeRow] = []
        while rows.count < limit {
            let page = try await database.changes(since: cursor, limit: max(limit, 100), includeDocuments: needDocuments)
            for change in page.changes {
                cursor = change.sequence
                if let ids = documentIDs, !ids.contains(ExactString(change.id)) { continue }
                if let channels = filter.channels, !(change.document?.channels.contains(where: channels.contains) ?? false) { continue }
                if let selector = filter.selector {
                    guard let document = change.document, !document.isDeleted, selector.matches(document) else { continue }
                }
                rows.append(ChangeRow(sequence: .integer(Int(change.sequence)), id: change.id,
                                      revisions: change.leafRevisions, deleted: change.isDeleted))
                if rows.count >= limit { break }
            }
            if page.changes.count < max(limit, 100) { break }
        }
        return (rows, .integer(Int(cursor)))
    }

    /// Local sources wait on the database's commit signal instead.
    func openContinuousFeed(since: JSON, filter: ChangesFilter, heartbeat: Duration) async throws -> ChangeFeed? { nil }

    func missingRevisions(_ offered: [(id: String, revisions: [RevisionID])]) async throws -> [RevisionDifference] {
        try await database.missingRevisions(offered)
    }

    func fetch(_ requests: [(id: String, revision: RevisionID, attsSince: [RevisionID])]) async throws -> [Document] {
        var documents: [Document] = []
        let found = try await database.documentsWithHistory(requests.map { ($0.id, $0.revision) })
        for (request, document) in zip(requests, found) {
            guard var document else { continue }
            let history = [request.revision] + (document.revisionHistory ?? [])
            let known = request.attsSince.filter { history.contains($0) }.map(\.generation).max() ?? 0
            for (name, attachment) in document.attachments where (attachment.revpos ?? Int.max) > known {
                document.attachments[name] = try database.loadingContent(of: attachment)
            }
            documents.append(document)
        }
        return documents
    }

    func store(_ documents: [Document]) async throws -> [(id: String, reason: String)] {
        try await database.insertRevisions(documents, source: .replication).compactMap { result in
            result.error.map { (result.id, $0.reason) }
        }
    }

    func checkpoint(_ id: String) async throws -> (body: JSONObject, revision: String)? {
        try await database.localDocument(withID: id).map { ($0.body, $0.revision) }
    }

    func saveCheckpoint(_ id: String, body: JSONObject, revision: String?) async throws -> String {
        try await database.saveLocalDocument(withID: id, body: body, revision: revision)
    }
}
