import DocStore
import Foundation
import Synchronization

/// What a replicator is doing.
public enum ReplicatorActivity: String, Sendable, Hashable {
    /// Not started, or finished.
    case idle
    /// Checking the endpoints and reading checkpoints.
    case connecting
    /// Moving documents.
    case busy
    /// Stopped by ``Replicator/stop()``.
    case stopped
    /// Waiting to retry while the peer is unreachable (continuous mode).
    case offline
    /// Failed; see ``ReplicatorStatus/error``.
    case error
}

/// A replicator's state and figures.
public struct ReplicatorStatus: Sendable {
    /// What it is doing.
    public var activity: ReplicatorActivity = .idle
    /// Changes examined so far.
    public var changesProcessed = 0
    /// Revisions written to a target.
    public var documentsWritten = 0
    /// Revisions a target refused.
    public var documentWriteFailures = 0
    /// The error that stopped it, if any.
    public var error: ReplicationError?
}

/// Which way a document moved.
public enum ReplicationFlow: String, Sendable { case push, pull }

/// One document revision that a replication moved (or failed to).
public struct ReplicatedDocument: Sendable {
    public let id: String
    public let revision: RevisionID?
    public let flow: ReplicationFlow
    /// Why the target refused it, if it did.
    public let error: String?
}

/// Told about a replicator's progress. Calls come from the replication task.
public protocol ReplicatorDelegate: AnyObject, Sendable {
    func replicationDidComplete(_ replicator: Replicator)
    func replicationIsSending(_ replicator: Replicator)
    func replicationIsReceiving(_ replicator: Replicator)
    func replicationFailed(_ replicator: Replicator, error: ReplicationError)
}

extension ReplicatorDelegate {
    public func replicationDidComplete(_ replicator: Replicator) {}
    public func replicationIsSending(_ replicator: Replicator) {}
    public func replicationIsReceiving(_ replicator: Replicator) {}
    public func replicationFailed(_ replicator: Replicator, error: ReplicationError) {}
}

/// Replicates documents between two endpoints with the CouchDB replication protocol.
///
/// ```swift
/// let replicator = Replicator(configuration: .oneTimeBidirectional(with: url, database: db))
/// let status = try await replicator.run()          // one-shot: returns when done
/// print(status.documentsWritten)
/// ```
///
/// Each direction reads the source's changes after the last checkpoint, asks the target which
/// revisions it lacks (`_revs_diff`), fetches them with their history and new attachments
/// (`_bulk_get`), stores them as they are (`_bulk_docs`, `new_edits=false`) and records a checkpoint on
/// both sides, batch after batch. A continuous replication then waits on the change feed until
/// stopped, and retries with exponential backoff while the peer is unreachable.
public final class Replicator: Sendable {
    /// The configuration.
    public let configuration: ReplicationConfiguration

    private struct State {
        var status = ReplicatorStatus()
        var task: Task<Void, Never>?
        var statusSubscribers: [Int: AsyncStream<ReplicatorStatus>.Continuation] = [:]
        var documentSubscribers: [Int: AsyncStream<[ReplicatedDocument]>.Continuation] = [:]
        var nextSubscriber = 0
        var delegate = WeakDelegate()
    }

    private struct WeakDelegate { weak var value: (any ReplicatorDelegate)? }

    private let state = Mutex(State())

    /// A replicator for `configuration`; nothing happens until ``start()``.
    public init(configuration: ReplicationConfiguration) {
        self.configuration = configuration
    }

    /// The delegate, held weakly.
    public var delegate: (any ReplicatorDelegate)? {
        get { state.withLock { $0.delegate.value } }
        set { state.withLock { $0.delegate.value = newValue } }
    }

    /// The current status.
    public var status: ReplicatorStatus { state.withLock { $0.status } }

    /// Every status change from now on; ends when the replication ends.
    public func statusChanges() -> AsyncStream<ReplicatorStatus> {
        let (stream, continuation) = AsyncStream<ReplicatorStatus>.makeStream()
        state.withLock { state in
            state.statusSubscribers[state.nextSubscriber] = continuation
            state.nextSubscriber += 1
        }
        return stream
    }

    /// Batches of replicated documents from now on; ends when the replication ends.
    public func replicatedDocuments() -> AsyncStream<[ReplicatedDocument]> {
        let (stream, continuation) = AsyncStream<[ReplicatedDocument]>.makeStream()
        state.withLock { state in
            state.documentSubscribers[state.nextSubscriber] = continuation
            state.nextSubscriber += 1
        }
        return stream
    }

    /// Starts replicating in the background (does nothing if already running).
    public func start() {
        state.withLock { state in
            guard state.task == nil else { return }
            state.status = ReplicatorStatus(activity: .connecting)
            state.task = Task { await self.runAll() }
        }
    }

    /// Stops the replication (also cancels a long one-shot) and waits until it has stopped.
    public func stop() async {
        let task = state.withLock { $0.task }
        task?.cancel()
        await task?.value
    }

    /// Runs a replication to its end (a one-shot one) and returns the final status.
    /// - Throws: ``ReplicationError`` if it failed.
    @discardableResult
    public func run() async throws -> ReplicatorStatus {
        start()
        let task = state.withLock { $0.task }
        await task?.value
        let final = status
        if let error = final.error { throw error }
        return final
    }

    // MARK: The replication

    private func runAll() async {
        let configuration = self.configuration
        var peers: [any ReplicationPeer] = []
        defer { peers.forEach { $0.close() } }
        do {
            let local = try await Replicator.peer(configuration.source, configuration)
            peers.append(local)
            let remote = try await Replicator.peer(configuration.target, configuration)
            peers.append(remote)
            try await withThrowingTaskGroup(of: Void.self) { group in
                if configuration.direction != .pull {
                    group.addTask { try await self.runWithRetries(source: local, target: remote, flow: .push, sourceIsLocal: configuration.source.isLocal) }
                }
                if configuration.direction != .push {
                    group.addTask { try await self.runWithRetries(source: remote, target: local, flow: .pull, sourceIsLocal: configuration.target.isLocal) }
                }
                try await group.waitForAll()
            }
            finish(error: nil)
        } catch {
            finish(error: Task.isCancelled ? nil : ReplicationError.wrap(error))
        }
    }

    private static func peer(_ endpoint: ReplicationEndpoint, _ configuration: ReplicationConfiguration) async throws -> any ReplicationPeer {
        switch endpoint {
        case .local(let database): return LocalPeer(database: database)
        case .remote(let url): return try await HTTPPeer.connect(url, configuration: configuration)
        }
    }

    private func finish(error: ReplicationError?) {
        let (statusSubscribers, documentSubscribers, delegate, final) = state.withLock { state in
            if let error {
                state.status.activity = .error
                state.status.error = error
            } else {
                state.status.activity = Task.isCancelled ? .stopped : .idle
            }
            defer {
                state.statusSubscribers = [:]
                state.documentSubscribers = [:]
            }
            return (Array(state.statusSubscribers.values), Array(state.documentSubscribers.values), state.delegate.value, state.status)
        }
        for subscriber in statusSubscribers {
            subscriber.yield(final)
            subscriber.finish()
        }
        documentSubscribers.forEach { $0.finish() }
        if let error { delegate?.replicationFailed(self, error: error) } else { delegate?.replicationDidComplete(self) }
    }

    private func update(_ change: (inout ReplicatorStatus) -> Void) {
        let (subscribers, status) = state.withLock { state in
            change(&state.status)
            return (Array(state.statusSubscribers.values), state.status)
        }
        subscribers.forEach { $0.yield(status) }
    }

    private func publish(_ documents: [ReplicatedDocument]) {
        guard !documents.isEmpty else { return }
        let subscribers = state.withLock { Array($0.documentSubscribers.values) }
        subscribers.forEach { $0.yield(documents) }
    }

    private var filter: ChangesFilter {
        var filter = ChangesFilter()
        filter.documentIDs = configuration.documentIDs
        filter.channels = configuration.limitToChannels
        filter.selector = configuration.selector.flatMap { try? Selector($0) }
        if let name = configuration.filterName { filter.named = (name, configuration.filterParameters) }
        return filter
    }

    /// One direction, retried after transient errors: a one-shot replication gives up after the policy's
    /// attempts; a continuous one goes offline and keeps trying until stopped.
    private func runWithRetries(source: any ReplicationPeer, target: any ReplicationPeer, flow: ReplicationFlow,
                                sourceIsLocal: Bool) async throws {
        var attempt = 0
        while true {
            do {
                try await replicate(source: source, target: target, flow: flow, sourceIsLocal: sourceIsLocal)
                return
            } catch {
                if Task.isCancelled { throw CancellationError() }
                let failure = ReplicationError.wrap(error)
                guard failure.isTransient, configuration.continuous || attempt + 1 < configuration.retry.maximumAttempts else {
                    throw failure
                }
                if configuration.continuous { update { $0.activity = .offline } }
                try await Task.sleep(for: configuration.retry.delay(forAttempt: attempt))
                attempt += 1
            }
        }
    }

    /// The protocol, batch after batch, from the checkpoint on.
    private func replicate(source: any ReplicationPeer, target: any ReplicationPeer, flow: ReplicationFlow,
                           sourceIsLocal: Bool) async throws {
        update { if $0.activity != .busy { $0.activity = .connecting } }
        try await source.prepare(create: false)
        try await target.prepare(create: configuration.createTarget)
        let filter = self.filter
        let id = ReplicationID.make(source: try await source.identity(), target: try await target.identity(), filter: filter)
        let checkpointID = id
        var sourceCheckpointWritable = true
        var sourceRecord: (body: JSONObject, revision: String)?
        do {
            sourceRecord = try await source.checkpoint(checkpointID)
        } catch let error as ReplicationError where error.code == .forbidden || error.code == .unauthorized {
            sourceCheckpointWritable = false
        }
        var targetRecord = try await target.checkpoint(checkpointID)
        var since = Checkpoint.startSequence(source: sourceRecord.flatMap { Checkpoint($0.body) },
                                             target: targetRecord.flatMap { Checkpoint($0.body) })
        let sessionID = UUID().uuidString.lowercased()
        let startSequence = since
        let startTime = Date.now
        var history = sourceRecord.flatMap { Checkpoint($0.body)?.history } ?? targetRecord.flatMap { Checkpoint($0.body)?.history } ?? []
        var docsRead = 0, docsWritten = 0, failures = 0, missingChecked = 0, missingFound = 0

        func saveCheckpoint() async throws {
            let entry: JSON = ["session_id": .string(sessionID), "start_time": .string(startTime.description),
                               "end_time": .string(Date.now.description), "start_last_seq": startSequence,
                               "end_last_seq": since, "recorded_seq": since, "missing_checked": .integer(missingChecked),
                               "missing_found": .integer(missingFound), "docs_read": .integer(docsRead),
                               "docs_written": .integer(docsWritten), "doc_write_failures": .integer(failures)]
            let checkpoint = Checkpoint(sessionID: sessionID, sourceLastSequence: since,
                                        history: [entry] + history.filter { $0["session_id"]?.stringValue != sessionID })
            if sourceCheckpointWritable {
                do {
                    let revision = try await source.saveCheckpoint(checkpointID, body: checkpoint.body, revision: sourceRecord?.revision)
                    sourceRecord = (checkpoint.body, revision)
                } catch let error as ReplicationError where error.code == .forbidden || error.code == .unauthorized {
                    sourceCheckpointWritable = false
                }
            }
            let revision = try await target.saveCheckpoint(checkpointID, body: checkpoint.body, revision: targetRecord?.revision)
            targetRecord = (checkpoint.body, revision)
            history = checkpoint.history
        }

        var feed: ChangeFeed?
        defer { feed?.close() }
        while !Task.isCancelled {
            let rows: [ChangeRow], last: JSON
            if let current = feed {
                guard let batch = try await current.next(maximum: configuration.batchSize) else {
                    feed = nil   // the server ended the feed: read on from the checkpoint
                    continue
                }
                rows = batch
                last = batch.last?.sequence ?? since
            } else {
                let wait: Duration? = configuration.continuous ? configuration.heartbeat : nil
                (rows, last) = try await source.changes(since: since, limit: configuration.batchSize, filter: filter, wait: wait)
                // Caught up in continuous mode: stream further changes as they happen, where the source can.
                if configuration.continuous && rows.count < configuration.batchSize {
                    feed = try await source.openContinuousFeed(since: last, filter: filter, heartbeat: configuration.heartbeat)
                }
            }
            if rows.isEmpty {
                if last != since {
                    since = last
                    try await saveCheckpoint()
                }
                if !configuration.continuous { return }
                update { $0.activity = .idle }
                continue
            }
            update { $0.activity = .busy }
            let delegate = self.delegate
            if flow == .push { delegate?.replicationIsSending(self) } else { delegate?.replicationIsReceiving(self) }
            let offered = rows.map { (id: $0.id, revisions: $0.revisions) }
            missingChecked += offered.reduce(0) { $0 + $1.revisions.count }
            let differences = try await target.missingRevisions(offered)
            var requests: [FetchRequest] = []
            for difference in differences {
                for revision in difference.missing {
                    requests.append(FetchRequest(id: difference.id, revision: revision, possibleAncestors: difference.possibleAncestors))
                }
            }
            missingFound += requests.count
            // A pull into a local database streams attachments straight into it.
            let staging: Database? = if case .local(let database) = receivingEndpoint(flow) { database } else { nil }
            var documents = try await fetchInParallel(requests, from: source, stagingInto: staging)
            docsRead += documents.count
            if flow == .push, sourceIsLocal, let pushFilter = configuration.pushFilter {
                documents = documents.filter { pushFilter($0, configuration.filterParameters) }
            }
            var outcome = try await target.store(documents)
            if !outcome.missingStubs.isEmpty {
                // The target lacks an attachment a stub named (its leaves changed since _revs_diff, or a
                // possible ancestor was a deletion): send those revisions again with every attachment.
                let again = outcome.missingStubs.compactMap { document in
                    document.revision.map { FetchRequest(id: document.id, revision: $0, possibleAncestors: []) }
                }
                let retried = try await target.store(try await fetchInParallel(again, from: source, stagingInto: staging))
                outcome.failures += retried.failures
                outcome.failures += retried.missingStubs.map { ($0.id, $0.revision, "missing_stub: an attachment stub names no attachment") }
            }
            let refused = outcome.failures
            let refusedIDs = Dictionary(refused.map { (ExactString($0.id), $0.reason) }, uniquingKeysWith: { first, _ in first })
            failures += refused.count
            docsWritten += documents.count - refused.count
            publish(documents.map { ReplicatedDocument(id: $0.id, revision: $0.revision, flow: flow, error: refusedIDs[ExactString($0.id)]) })
            if let resolver = configuration.conflictResolver, case .local(let database) = receivingEndpoint(flow) {
                try await resolveConflicts(in: database, ids: Set(documents.map { ExactString($0.id) }), resolver: resolver)
            }
            since = last
            try await saveCheckpoint()
            let batch = (rows.count, documents.count - refused.count, refused.count)
            let streaming = feed != nil
            update {
                $0.changesProcessed += batch.0
                $0.documentsWritten += batch.1
                $0.documentWriteFailures += batch.2
                if streaming { $0.activity = .idle }
            }
        }
    }

    /// Fetches revisions in chunks, with up to ``ReplicationConfiguration/maximumRequestsInFlight``
    /// requests at once, keeping the order of `requests`.
    private func fetchInParallel(_ requests: [FetchRequest], from source: any ReplicationPeer,
                                 stagingInto staging: Database?) async throws -> [Document] {
        guard !requests.isEmpty else { return [] }
        let lanes = max(1, configuration.maximumRequestsInFlight)
        let chunkSize = max(10, (requests.count + lanes - 1) / lanes)
        let chunks = stride(from: 0, to: requests.count, by: chunkSize).map { Array(requests[$0..<min($0 + chunkSize, requests.count)]) }
        if chunks.count == 1 { return try await source.fetch(chunks[0], stagingInto: staging) }
        return try await chunks.concurrentMap(limit: lanes) { try await source.fetch($0, stagingInto: staging) }.flatMap { $0 }
    }

    /// The endpoint a direction writes into: the target when pushing, the source when pulling.
    private func receivingEndpoint(_ flow: ReplicationFlow) -> ReplicationEndpoint {
        flow == .push ? configuration.target : configuration.source
    }

    /// Lets the resolver pick a revision among a document's live leaves, then deletes the others.
    private func resolveConflicts(in database: Database, ids: Set<ExactString>,
                                  resolver: @Sendable (Document, [Document]) -> Document?) async throws {
        for id in ids.map(\.value) {
            guard let winner = try await database.document(withID: id, includeConflicts: true), !winner.conflicts.isEmpty else { continue }
            var conflicts: [Document] = []
            for revision in winner.conflicts {
                if let document = try await database.document(withID: id, revision: revision) { conflicts.append(document) }
            }
            guard let chosen = resolver(winner, conflicts), let keep = chosen.revision else { continue }
            for leaf in [winner] + conflicts where leaf.revision != keep {
                _ = try? await database.delete(id: id, revision: leaf.revision!)
            }
        }
    }
}

extension ReplicationEndpoint {
    var isLocal: Bool { if case .local = self { return true } else { return false } }
}
