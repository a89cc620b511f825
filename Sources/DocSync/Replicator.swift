import CouchProtocol
import DocStore
import Foundation

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
    /// What this run checked, found, read and wrote, as CouchDB counts it.
    public var figures = ReplicationFigures()
    /// Where each running direction stands in its source's changes.
    public var positions: [ReplicationFlow: ReplicationPosition] = [:]
    /// The directions moving a batch of documents right now (empty between batches).
    public var transferring: Set<ReplicationFlow> = []
    /// The error that stopped it, if any.
    public var error: ReplicationError?
    /// While ``activity`` is `offline`: the error it waits out before trying again.
    public var retryingAfter: ReplicationError?

    /// The status of a replication that has done nothing yet.
    public init() {}

    init(activity: ReplicatorActivity) {
        self.activity = activity
    }

    /// The changes still to transfer in every direction, once each direction's source has said
    /// (``ReplicationPosition/remaining``); with ``changesProcessed``, how far a one-shot replication
    /// is. `nil` before the first page is read, and with a continuous feed.
    public var changesRemaining: Int? {
        let remaining = positions.values.map(\.remaining)
        guard !remaining.isEmpty, !remaining.contains(nil) else { return nil }
        return remaining.reduce(0) { $0 + ($1 ?? 0) }
    }

    /// Whether a batch is being sent to the remote side right now (the push direction is in
    /// ``transferring``).
    public var isSending: Bool { transferring.contains(.push) }
    /// Whether a batch is being received from the remote side right now (the pull direction is in
    /// ``transferring``).
    public var isReceiving: Bool { transferring.contains(.pull) }

    /// Revisions written to a target (``figures``' `documentsWritten`).
    public var documentsWritten: Int {
        get { figures.documentsWritten }
        set { figures.documentsWritten = newValue }
    }

    /// Revisions a target refused (``figures``' `documentWriteFailures`).
    public var documentWriteFailures: Int {
        get { figures.documentWriteFailures }
        set { figures.documentWriteFailures = newValue }
    }
}

/// Which way a document moved.
public enum ReplicationFlow: String, Sendable, Hashable {
    /// Source to target (``ReplicationDirection/push``).
    case push
    /// Target to source (``ReplicationDirection/pull``).
    case pull
}

/// CouchDB's figures of a replication, as `_active_tasks`, `_scheduler`, `_replicator` documents and
/// checkpoint histories show them.
public struct ReplicationFigures: Sendable, Hashable {
    /// Revisions offered to a target's `_revs_diff` (`revisions_checked`, `missing_checked`).
    public var revisionsChecked = 0
    /// Revisions a target lacked (`missing_revisions_found`, `missing_found`).
    public var missingRevisionsFound = 0
    /// Revisions read from a source (`docs_read`).
    public var documentsRead = 0
    /// Revisions written to a target (`docs_written`).
    public var documentsWritten = 0
    /// Revisions a target refused (`doc_write_failures`).
    public var documentWriteFailures = 0
    /// Revisions asked of a CouchDB-API source with `_bulk_get` (`bulk_get_attempts`).
    public var bulkGetAttempts = 0
    /// Revisions read from `_bulk_get` answers (`bulk_get_docs`); the others were read with
    /// `open_revs`, with their attachments.
    public var bulkGetDocuments = 0

    /// All figures zero.
    public init() {}

    /// The figures of two runs (or directions) added up.
    public static func + (left: ReplicationFigures, right: ReplicationFigures) -> ReplicationFigures {
        var sum = left
        sum += right
        return sum
    }

    /// Adds `right`'s figures to `left`'s.
    public static func += (left: inout ReplicationFigures, right: ReplicationFigures) {
        left.revisionsChecked += right.revisionsChecked
        left.missingRevisionsFound += right.missingRevisionsFound
        left.documentsRead += right.documentsRead
        left.documentsWritten += right.documentsWritten
        left.documentWriteFailures += right.documentWriteFailures
        left.bulkGetAttempts += right.bulkGetAttempts
        left.bulkGetDocuments += right.bulkGetDocuments
    }
}

/// Where one direction of a replication stands in its source's changes. Sequences are the source's,
/// opaque (an integer from DocStore, a string from CouchDB).
public struct ReplicationPosition: Sendable, Hashable {
    /// The sequence this run started from: the checkpoint it resumed from (`0` without one).
    public var startedFrom: JSON
    /// The figures of the sessions before this run, as that checkpoint records them (zero without
    /// one). CouchDB's figures carry on from them: add them to ``ReplicatorStatus/figures``.
    public var earlier = ReplicationFigures()
    /// The sequence last saved in the checkpoints (`startedFrom` until the first save).
    public var checkpointed: JSON
    /// The sequence of the last change transferred.
    public var through: JSON
    /// The changes of the source after ``through`` still to transfer — the batch in hand and those the
    /// source counted after it (its `pending`; for a local source, its sequences after the page) when
    /// this direction last read a page; `nil` when the source does not say (a continuous feed).
    public var remaining: Int?
    /// The sessions the last checkpoint saved records, this run's first (empty before the first save):
    /// what CouchDB's `_replicate` answers as `history`.
    package var history: [ReplicationCheckpoint.Session] = []
}

/// One document revision that a replication moved (or failed to).
public struct ReplicatedDocument: Sendable {
    /// The document id.
    public let id: String
    /// The revision moved, when known.
    public let revision: RevisionID?
    /// Which way it moved.
    public let flow: ReplicationFlow
    /// Why the target refused it, if it did.
    public let error: String?
}

/// Told about a replicator's progress: an adapter over ``Replicator/statusChanges()``, for code that
/// prefers callbacks. Calls come one at a time from a task of the replicator's, in the order of the
/// status changes; ``Replicator/run()`` and ``Replicator/stop()`` return after the last one (so a call
/// must not await either of them: start a task for that).
public protocol ReplicatorDelegate: AnyObject, Sendable {
    /// The run ended without an error (or was stopped).
    func replicationDidComplete(_ replicator: Replicator)
    /// A push batch started moving (``ReplicatorStatus/transferring`` gained `.push`).
    func replicationIsSending(_ replicator: Replicator)
    /// A pull batch started moving (``ReplicatorStatus/transferring`` gained `.pull`).
    func replicationIsReceiving(_ replicator: Replicator)
    /// The run ended with `error`.
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
    /// The clock retries wait on and request timeouts are measured on.
    private let clock: any Clock<Duration>

    private struct State {
        var status = ReplicatorStatus()
        var task: Task<Void, Never>?
        /// A run has ended and no other has started.
        var hasEnded = false
        /// What each running direction is doing.
        var activities: [ReplicationFlow: ReplicatorActivity] = [:]
        var statusSubscribers: [Int: AsyncStream<ReplicatorStatus>.Continuation] = [:]
        var documentSubscribers: [Int: AsyncStream<[ReplicatedDocument]>.Continuation] = [:]
        var nextSubscriber = 0
        var delegate = WeakDelegate()
    }

    private struct WeakDelegate { weak var value: (any ReplicatorDelegate)? }

    private let state = Locked(State())

    /// A replicator for `configuration`; nothing happens until ``start()``.
    public convenience init(configuration: ReplicationConfiguration) {
        self.init(configuration: configuration, clock: ContinuousClock())
    }

    /// A replicator for `configuration` whose retries wait on `clock` and whose requests time out on
    /// it (a test clock makes backoff and timeouts happen in virtual time, observable and instantaneous).
    public init(configuration: ReplicationConfiguration, clock: some Clock<Duration>) {
        self.configuration = configuration
        self.clock = clock
    }

    /// The delegate, held weakly.
    public var delegate: (any ReplicatorDelegate)? {
        get { state.withLock { $0.delegate.value } }
        set { state.withLock { $0.delegate.value = newValue } }
    }

    /// The current status.
    public var status: ReplicatorStatus { state.withLock { $0.status } }

    /// Every status change from now on; ends when the replication ends.
    ///
    /// Taken before the first ``start()`` or during a run, it covers that run. Taken after a run has
    /// ended (and before another starts), it yields the final status and ends at once; to follow a
    /// second run, call ``start()`` first and take the stream then.
    public func statusChanges() -> AsyncStream<ReplicatorStatus> {
        let (stream, continuation) = AsyncStream<ReplicatorStatus>.makeStream()
        let final: ReplicatorStatus? = state.withLock { state in
            if state.hasEnded { return state.status }
            state.statusSubscribers[state.nextSubscriber] = continuation
            state.nextSubscriber += 1
            return nil
        }
        if let final {
            continuation.yield(final)
            continuation.finish()
        }
        return stream
    }

    /// Batches of replicated documents from now on; ends when the replication ends (at once when
    /// taken after a run has ended).
    public func replicatedDocuments() -> AsyncStream<[ReplicatedDocument]> {
        let (stream, continuation) = AsyncStream<[ReplicatedDocument]>.makeStream()
        let ended = state.withLock { state in
            if state.hasEnded { return true }
            state.documentSubscribers[state.nextSubscriber] = continuation
            state.nextSubscriber += 1
            return false
        }
        if ended { continuation.finish() }
        return stream
    }

    /// Starts replicating in the background. Does nothing while a run is under way; after a run has
    /// ended, starts a new one from the checkpoints.
    public func start() {
        _ = startIfIdle()
    }

    private func startIfIdle() -> Task<Void, Never> {
        state.withLock { state in
            if let task = state.task { return task }
            state.status = ReplicatorStatus(activity: .connecting)
            state.hasEnded = false
            state.activities = [:]
            // The delegate hears of this run through a subscription of its own. Its task is not the
            // run's child, so that stopping the run does not cut the delivery of the final status.
            let (updates, delegateFeed) = AsyncStream<ReplicatorStatus>.makeStream()
            state.statusSubscribers[state.nextSubscriber] = delegateFeed
            state.nextSubscriber += 1
            let delivery = Task { await self.deliverToDelegate(updates) }
            // Yielding under the lock keeps every subscriber's order that of the changes
            // (`yield` only buffers; it never calls back into the replicator).
            for subscriber in state.statusSubscribers.values { subscriber.yield(state.status) }
            let task = Task {
                await self.runAll()
                await delivery.value
            }
            state.task = task
            return task
        }
    }

    /// Calls the delegate for the status changes of one run: a sending or receiving call when a
    /// direction starts a batch, a completion or failure call after the final status.
    private func deliverToDelegate(_ updates: AsyncStream<ReplicatorStatus>) async {
        var previous = ReplicatorStatus()
        for await status in updates {
            for flow in [ReplicationFlow.push, .pull] where status.transferring.contains(flow) && !previous.transferring.contains(flow) {
                if flow == .push { delegate?.replicationIsSending(self) } else { delegate?.replicationIsReceiving(self) }
            }
            previous = status
        }
        guard let delegate else { return }
        if let error = previous.error { delegate.replicationFailed(self, error: error) } else { delegate.replicationDidComplete(self) }
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
        await startIfIdle().value
        let final = status
        if let error = final.error { throw error }
        return final
    }

    // MARK: The replication

    private func runAll() async {
        let configuration = self.configuration
        var peers: [any ReplicationPeer] = []
        var failure: ReplicationError?
        var stoppedByClose = false
        // The local databases open when the run starts: closing one stops it. (One closed already is a
        // failure, as LocalPeer reports it.)
        let openLocalDatabases = [configuration.source, configuration.target].compactMap { endpoint -> Database? in
            if case .local(let database) = endpoint, !database.isClosed { return database }
            return nil
        }
        configuration.logger.debug("replication \(configuration.source.logDescription) → \(configuration.target.logDescription) starting",
                                   metadata: ["continuous": "\(configuration.continuous)"])
        do {
            let clock = self.clock
            let local = try await Replicator.peer(configuration.source, configuration, clock: clock)
            peers.append(local)
            let remote = try await Replicator.peer(configuration.target, configuration, clock: clock)
            peers.append(remote)
            // Each direction's task answers true when it ends; a watcher of a local database answers
            // false when that database closes, which stops the replication.
            stoppedByClose = try await withThrowingTaskGroup(of: Bool.self) { group in
                var directions = 0
                if configuration.direction != .pull {
                    directions += 1
                    group.addTask {
                        var push = ReplicationLoop(replicator: self, source: local, target: remote, flow: .push,
                                                        sourceIsLocal: configuration.source.isLocal, clock: clock)
                        try await push.run()
                        return true
                    }
                }
                if configuration.direction != .push {
                    directions += 1
                    group.addTask {
                        var pull = ReplicationLoop(replicator: self, source: remote, target: local, flow: .pull,
                                                        sourceIsLocal: configuration.target.isLocal, clock: clock)
                        try await pull.run()
                        return true
                    }
                }
                for database in openLocalDatabases {
                    group.addTask {
                        await database.waitUntilClosed()
                        return false
                    }
                }
                while directions > 0, let ended = try await group.next() {
                    guard ended else {
                        group.cancelAll()
                        return true
                    }
                    directions -= 1
                }
                group.cancelAll()
                return false
            }
        } catch {
            // A direction that failed because its local database was closed meanwhile was stopped.
            let localClosed = openLocalDatabases.contains { $0.isClosed }
            stoppedByClose = localClosed
            failure = Task.isCancelled || localClosed ? nil : ReplicationError.wrap(error)
        }
        peers.forEach { $0.close() }
        finish(error: failure, stopped: stoppedByClose)
        let final = status
        let summary = "\(final.changesProcessed) changes, \(final.documentsWritten) written, \(final.documentWriteFailures) refused"
        if let failure {
            configuration.logger.error("replication \(configuration.source.logDescription) → \(configuration.target.logDescription) failed after \(summary): \(failure)")
        } else {
            configuration.logger.debug("replication \(configuration.source.logDescription) → \(configuration.target.logDescription) ended: \(summary)")
        }
    }

    private static func peer(_ endpoint: ReplicationEndpoint, _ configuration: ReplicationConfiguration,
                             clock: any Clock<Duration>) async throws -> any ReplicationPeer {
        switch endpoint {
        case .local(let database): return LocalPeer(database: database, clock: clock)
        case .remote(let url): return try await HTTPPeer.connect(url, configuration: configuration, clock: clock)
        }
    }

    private func finish(error: ReplicationError?, stopped: Bool = false) {
        let cancelled = Task.isCancelled || stopped
        let (statusSubscribers, documentSubscribers, final) = state.withLock { state in
            if let error {
                state.status.activity = .error
                state.status.error = error
            } else {
                state.status.activity = cancelled ? .stopped : .idle
            }
            state.status.transferring = []
            defer {
                state.statusSubscribers = [:]
                state.documentSubscribers = [:]
                state.task = nil
                state.hasEnded = true
            }
            return (Array(state.statusSubscribers.values), Array(state.documentSubscribers.values), state.status)
        }
        for subscriber in statusSubscribers {
            subscriber.yield(final)
            subscriber.finish()
        }
        documentSubscribers.forEach { $0.finish() }
    }

    /// A direction reports its activity; the replicator's is the busiest of its directions'.
    func report(_ activity: ReplicatorActivity, for flow: ReplicationFlow) {
        update { status, activities in
            activities[flow] = activity
            let all = Set(activities.values)
            let combined: ReplicatorActivity = [.busy, .connecting, .offline].first(where: all.contains) ?? .idle
            guard status.activity != combined else { return false }
            status.activity = combined
            if combined != .offline { status.retryingAfter = nil }
            return true
        }
    }

    /// A direction waits before trying again after `error`.
    func retrying(after error: ReplicationError) {
        update { status, _ in
            status.retryingAfter = error
            return true
        }
    }

    /// A direction connected and resumes from `sequence` (its checkpoint, or `0`) after `earlier`.
    func startPosition(_ flow: ReplicationFlow, from sequence: JSON, after earlier: ReplicationFigures) {
        update { status, _ in
            status.positions[flow] = ReplicationPosition(startedFrom: sequence, earlier: earlier, checkpointed: sequence, through: sequence)
            return true
        }
    }

    /// A direction saved its checkpoints at `sequence`, with `history`.
    func checkpointed(_ flow: ReplicationFlow, at sequence: JSON, history: [ReplicationCheckpoint.Session]) {
        update { status, _ in
            status.positions[flow]?.checkpointed = sequence
            status.positions[flow]?.history = history
            return true
        }
    }

    /// A direction read `count` changes, and the source has `pending` more (when it says).
    func changesRead(_ flow: ReplicationFlow, count: Int, pending: Int?) {
        update { status, _ in
            let remaining = pending.map { $0 + count }
            guard status.positions[flow] != nil, status.positions[flow]?.remaining != remaining else { return false }
            status.positions[flow]?.remaining = remaining
            return true
        }
    }

    /// A direction starts moving a batch.
    func startTransfer(_ flow: ReplicationFlow) {
        update { status, _ in status.transferring.insert(flow).inserted }
    }

    /// A direction stopped moving a batch: it finished (with its figures) or failed.
    func endTransfer(_ flow: ReplicationFlow, _ figures: TransferFigures) {
        if figures.changes > 0 {
            configuration.logger.debug("\(configuration.route(of: flow)): \(figures.changes) changes, \(figures.figures.documentsWritten) written, \(figures.figures.documentWriteFailures) refused")
        }
        update { status, _ in
            status.transferring.remove(flow)
            status.changesProcessed += figures.changes
            if let remaining = status.positions[flow]?.remaining { status.positions[flow]?.remaining = max(0, remaining - figures.changes) }
            status.figures += figures.figures
            if let through = figures.through { status.positions[flow]?.through = through }
            return true
        }
    }

    /// What one batch did (a batch that failed reports nothing).
    struct TransferFigures {
        var changes = 0
        var figures = ReplicationFigures()
        /// The source sequence of the batch's last change, once it is transferred.
        var through: JSON?
    }

    private func update(_ change: (inout ReplicatorStatus, inout [ReplicationFlow: ReplicatorActivity]) -> Bool) {
        state.withLock { state in
            guard change(&state.status, &state.activities) else { return }
            for subscriber in state.statusSubscribers.values { subscriber.yield(state.status) }
        }
    }

    func publish(_ documents: [ReplicatedDocument]) {
        guard !documents.isEmpty else { return }
        let subscribers = state.withLock { Array($0.documentSubscribers.values) }
        subscribers.forEach { $0.yield(documents) }
    }

    /// How the source's changes are filtered in one direction, from the configuration. Channels
    /// narrow both directions; an empty list is no narrowing (everything the user may see).
    func changesFilter() -> SourceFilter {
        var filter = SourceFilter()
        filter.documentIDs = configuration.documentIDs
        if let channels = configuration.limitToChannels, !channels.isEmpty { filter.channels = channels }
        filter.selector = configuration.selector.flatMap { try? MangoSelector($0) }
        if let name = configuration.filterName {
            filter.named = (name, configuration.filterParameters.mapValues(\.queryParameterText))
        }
        return filter
    }

    /// Lets the resolver pick or merge, then leaves one live leaf: a returned leaf revision whose body
    /// and attachments are unchanged is kept; anything else (a merged body, or a document without a
    /// revision) is saved as a child of the leaf it names, else of the winner. The other leaves are
    /// deleted.
    static func resolveConflicts(in database: Database, ids: Set<ExactString>,
                                 resolver: @Sendable (Document, [Document]) -> Document?) async throws {
        for id in ids.map(\.value) {
            guard let winner = try await database.document(withID: id, includeConflicts: true), !winner.conflicts.isEmpty else { continue }
            var conflicts: [Document] = []
            for revision in winner.conflicts {
                if let document = try await database.document(withID: id, revision: revision) { conflicts.append(document) }
            }
            let leaves = [winner] + conflicts
            guard let chosen = resolver(winner, conflicts) else { continue }
            let picked = leaves.first { $0.revision != nil && $0.revision == chosen.revision }
            let base = picked?.revision ?? winner.revision!
            var keep = base
            if picked.map({ $0.body != chosen.body || $0.attachments != chosen.attachments }) ?? true {
                // A merge: a new revision on top of the named leaf (or the winner) with the resolver's body.
                var merged = Document(id: id, revision: keep, body: chosen.body)
                merged.attachments = chosen.attachments
                do {
                    keep = try await database.put(merged).revision!
                } catch let error as DocStoreError where error.code == .conflict {
                    continue   // changed meanwhile: the next batch that touches it tries again
                }
            }
            for leaf in leaves where leaf.revision != keep && leaf.revision != base {
                _ = try? await database.delete(id: id, revision: leaf.revision!)
            }
        }
    }
}

extension ReplicationEndpoint {
    var isLocal: Bool { if case .local = self { return true } else { return false } }

    /// The endpoint in a log line or `_active_tasks`: the database's name, or the URL without credentials.
    package var logDescription: String {
        switch self {
        case .local(let database): return database.name
        case .remote(let url):
            guard var components = URLComponents(url: url, resolvingAgainstBaseURL: false) else { return "remote" }
            components.user = nil
            components.password = nil
            return components.string ?? "remote"
        }
    }
}

extension JSON {
    /// The value as a URL query parameter: a string as it is, anything else as its JSON text.
    var queryParameterText: String {
        if case .string(let text) = self { return text }
        return description
    }
}
