import CouchProtocol
import DocStore
import DocSync
import Foundation

/// The `_replicator` database, as CouchDB 3.3's: each document describes a persistent replication
/// (the `_replicate` fields). Writing one starts its job, changing it restarts the job, deleting it
/// stops the job; the server starts them all again when it starts, and each resumes from its
/// checkpoint. CouchDB writes into a document only its terminal states: `completed` for a one-shot
/// replication that finished (`_replication_state`, `_replication_state_time`,
/// `_replication_stats`) and `failed` for a document that cannot run (`_replication_state_reason`);
/// the others (`initializing`, `running`, `crashing`, `error`) are shown by `_scheduler/docs`.
extension ReplicationScheduler {
    /// The name of the replicator database.
    static let databaseName = "_replicator"

    /// The security object the replicator database is created with: admins only, as CouchDB 3.3.
    static let adminOnly: JSONObject = ["members": ["roles": ["_admin"]], "admins": ["roles": ["_admin"]]]

    /// What is known of the `_replicator` documents.
    struct Documents: Sendable {
        var database: Database?
        var watcher: Task<Void, Never>?
        /// By document id, compared as bytes.
        var entries: [ExactString: Entry] = [:]
    }

    /// One `_replicator` document: its job, or the state it rests in.
    struct Entry: Sendable {
        var request: ReplicationRequest?
        var jobID: String?
        /// `completed`, `failed` or `error`, when it has no job.
        var state: State?
        var info: JSON = .null
        var errorCount = 0
        var startTime: String?
        var lastUpdated: String?
        var source: String?
        var target: String?
        /// When a document in `error` is looked at again: a reading of the scheduler's ``elapsed``.
        var retryAt: Duration?
    }

    // MARK: Following the database

    /// Starts following the changes of the replicator database (opened now, or again after it was
    /// deleted and created anew): every document present starts, and every later change updates, its job.
    func watchDocuments(_ database: Database) {
        let task = Task {
            var since: Int64 = 0
            while !Task.isCancelled {
                let page: ChangesPage
                do {
                    page = try await database.changes(since: since)
                } catch {
                    // Closed (deleted, or the server stopping): the end. Anything else is tried again.
                    if (error as? DocStoreError)?.code == .databaseClosed || Task.isCancelled { break }
                    logger.error("reading the changes of \(database.name) failed, trying again in 1 s: \(error)")
                    try? await clock.sleep(for: .seconds(1))
                    continue
                }
                for change in page.changes where !Task.isCancelled {
                    await process(change.id, in: database)
                }
                since = page.lastSequence
                // Documents in `error` are looked at again when their time comes, by this same loop.
                let now = elapsed.now()
                let due = documents.withLock { documents -> [String] in
                    let ids = documents.entries.compactMap { id, entry in entry.retryAt.flatMap { $0 <= now ? id : nil } }
                    for id in ids { documents.entries[id]?.retryAt = nil }
                    return ids.map(\.value)
                }
                for id in due.sorted() where !Task.isCancelled { await process(id, in: database) }
                let next = documents.withLock { $0.entries.values.compactMap(\.retryAt).min() }
                let wait = next.map { max(.milliseconds(10), min(.seconds(60), $0 - elapsed.now())) } ?? .seconds(60)
                _ = await database.waitForCommit(after: since, timeout: wait, clock: clock)
            }
        }
        let previous = documents.withLock { documents -> Task<Void, Never>? in
            defer {
                documents.database = database
                documents.watcher = task
            }
            return documents.watcher
        }
        previous?.cancel()
    }

    /// Stops following the replicator database (deleted, or the server stopping) and stops the jobs
    /// its documents started.
    func unwatchDocuments() async {
        // The watcher ends first, so that no document starts a job after the jobs are collected.
        let watcher = documents.withLock { $0.watcher }
        watcher?.cancel()
        await watcher?.value
        let entries = documents.withLock { documents in
            defer { documents = Documents() }
            return documents.entries
        }
        for jobID in entries.values.compactMap(\.jobID) { await stop(jobID) }
    }

    /// Brings a document's job in line with the document.
    private func process(_ id: String, in database: Database) async {
        guard !id.hasPrefix("_design/") else { return }
        let current: Document?
        do {
            current = try await database.document(withID: id)
        } catch {
            // Not a deletion: the job is left as it is, and the document looked at again in a second.
            logger.error("reading replication document \(id) failed: \(error)")
            documents.withLock { $0.entries[ExactString(id), default: Entry()].retryAt = elapsed.now() + .seconds(1) }
            return
        }
        let previous = documents.withLock { $0.entries[ExactString(id)] }
        guard let document = current, !document.isDeleted else {
            documents.withLock { _ = $0.entries.removeValue(forKey: ExactString(id)) }
            if let jobID = previous?.jobID { await stop(jobID) }
            return
        }
        let body = document.body
        switch body["_replication_state"]?.stringValue {
        case "completed", "failed":
            if let jobID = previous?.jobID, job(jobID)?.document?.id == id { await stop(jobID) }
            var entry = Entry(state: body["_replication_state"] == "completed" ? .completed : .failed)
            entry.lastUpdated = body["_replication_state_time"]?.stringValue
            if entry.state == .completed {
                entry.info = body["_replication_stats"] ?? .null
                entry.startTime = body["_replication_stats"]?["start_time"]?.stringValue
            } else {
                entry.errorCount = 1
                entry.info = body["_replication_state_reason"].map { ["error": $0] } ?? .null
            }
            let request = try? ReplicationRequest(body)
            entry.source = request?.source.description
            entry.target = request?.target.description
            documents.withLock { $0.entries[ExactString(id)] = entry }
            return
        case .some:
            // `triggered` or `error`, written by CouchDB before 2.1: cleared, and the document runs.
            await updateState(of: id, in: database, ["_replication_state": nil, "_replication_state_time": nil,
                                                     "_replication_state_reason": nil, "_replication_id": nil, "_replication_stats": nil])
            return
        case nil:
            break
        }
        let request: ReplicationRequest
        do {
            request = try ReplicationRequest(body)
        } catch {
            if let jobID = previous?.jobID { await stop(jobID) }
            await fail(id, in: database, body: body, reason: error.documentReason)
            return
        }
        let jobID = request.identifier(server: registry.serverUUID)
        if let previous, previous.jobID == jobID, previous.request == request, job(jobID) != nil { return }
        if let old = previous?.jobID { await stop(old) }
        if let origin = job(jobID)?.document {
            await fail(id, in: database, body: body, reason: "Replication `\(jobID)` specified by document `\(id)` already started, triggered by document `\(origin.id)` from db `\(origin.database)`")
            return
        }
        let owner = body["owner"]?.stringValue
        let added = add(request, id: jobID, user: owner, document: DocumentOrigin(database: ReplicationScheduler.databaseName, id: id),
                        retrying: true) { [weak database] job, final in
            guard let database, !job.request.continuous, final.error == nil else { return }
            var stats = job.statistics
            stats["start_time"] = .string(job.startTime.couchTimestamp)
            await self.updateState(of: id, in: database, ["_replication_state": "completed", "_replication_state_reason": nil,
                                                         "_replication_stats": .object(stats)], expecting: request)
            self.metrics.replicationDocumentState(completed: true)
        }
        guard let added else {
            // Only this loop adds document jobs: the one running is a transient `_replicate` job. As
            // CouchDB, a temporary error; the document is looked at again after 1 s, 2 s, … up to 10 minutes.
            var entry = Entry(request: request, state: .error)
            entry.info = ["error": .string("Replication `\(jobID)` specified by document `\(id)` already running as a transient replication, started via `_replicate` API endpoint")]
            entry.errorCount = (previous?.state == .error ? previous?.errorCount ?? 0 : 0) + 1
            entry.retryAt = elapsed.now() + .seconds(min(1 << min(entry.errorCount - 1, 10), 600))
            documents.withLock { $0.entries[ExactString(id)] = entry }
            return
        }
        documents.withLock { $0.entries[ExactString(id)] = Entry(request: request, jobID: added.id) }
    }

    /// Marks a document `failed` with `reason`, as CouchDB does with a document it cannot run.
    private func fail(_ id: String, in database: Database, body: JSONObject, reason: String) async {
        logger.error("Error processing replication doc `\(id)` from `\(database.name)`: \(reason)")
        // `_scheduler/docs` shows it failed from before the document does, so that the two never
        // disagree for a reader who saw the document (its change, processed later, writes the same).
        var entry = Entry(state: .failed)
        entry.errorCount = 1
        entry.info = ["error": .string(reason)]
        let request = try? ReplicationRequest(body)
        entry.source = request?.source.description
        entry.target = request?.target.description
        documents.withLock { $0.entries[ExactString(id)] = entry }
        await updateState(of: id, in: database, ["_replication_state": "failed", "_replication_stats": nil,
                                                 "_replication_state_reason": .string(reason)])
        metrics.replicationDocumentState(completed: false)
    }

    /// Writes state members into a document (`nil` removes one), stamping `_replication_state_time`
    /// when the state changes; retried on a conflict with a concurrent edit, and given up when the
    /// document was deleted — or, with `expecting`, no longer describes that replication.
    func updateState(of id: String, in database: Database, _ members: [String: JSON?], expecting: ReplicationRequest? = nil) async {
        for _ in 0..<5 {
            guard var document = try? await database.document(withID: id), !document.isDeleted else { return }
            if let expecting, (try? ReplicationRequest(document.body)) != expecting { return }
            var body = document.body
            for (key, value) in members.sorted(by: { $0.key < $1.key }) {
                guard let value else {
                    body.removeValue(forKey: key)
                    continue
                }
                let changesState = key == "_replication_state" && body[key] != value
                body[key] = value
                if changesState { body["_replication_state_time"] = .string(currentDate().couchTimestamp) }
            }
            guard body != document.body else { return }
            document.body = body
            do {
                _ = try await database.put(document)
                return
            } catch let error as DocStoreError where error.code == .conflict {
                continue
            } catch {
                logger.error("could not write the state of replication document \(id): \(error)")
                return
            }
        }
    }

    // MARK: Answers

    /// The `_replicator` documents as `_scheduler/docs` shows them, by document id.
    func schedulerDocuments() -> [JSON] {
        let entries = documents.withLock { $0.entries }
        return entries.sorted { $0.key.value < $1.key.value }.map { id, entry in
            var object: JSONObject = ["database": .string(ReplicationScheduler.databaseName), "doc_id": .string(id.value)]
            if let jobID = entry.jobID, let job = job(jobID) {
                object["id"] = .string(jobID)
                object["node"] = .string(node)
                object["source"] = .string(job.request.source.description)
                object["target"] = .string(job.request.target.description)
                object["state"] = .string(job.state.rawValue)
                object["info"] = job.state == .initializing ? .null : job.info
                object["error_count"] = .integer(job.errorCount)
                object["last_updated"] = .string(job.lastUpdated.couchTimestamp)
                object["start_time"] = .string(job.startTime.couchTimestamp)
                object["source_proxy"] = .null
                object["target_proxy"] = .null
                return .object(object)
            }
            object["id"] = .null
            object["source"] = (entry.source ?? entry.request?.source.description).map(JSON.string) ?? .null
            object["target"] = (entry.target ?? entry.request?.target.description).map(JSON.string) ?? .null
            object["state"] = .string((entry.state ?? .initializing).rawValue)
            object["error_count"] = .integer(entry.errorCount)
            object["info"] = entry.info
            object["start_time"] = entry.startTime.map(JSON.string) ?? .null
            object["last_updated"] = entry.lastUpdated.map(JSON.string) ?? .null
            return .object(object)
        }
    }
}
