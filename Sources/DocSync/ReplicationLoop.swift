import CouchProtocol
import DocStore
import Foundation

/// One direction of a replication (a push or a pull) being driven: it performs the actions of its
/// ``ReplicationStateMachine`` against the two peers and reports what happened back to it.
struct ReplicationLoop {
    let replicator: Replicator
    let source: any ReplicationPeer
    let target: any ReplicationPeer
    let flow: ReplicationFlow
    /// Whether the source is a local database (push filters apply to its documents).
    let sourceIsLocal: Bool
    let clock: any Clock<Duration>

    private var configuration: ReplicationConfiguration { replicator.configuration }
    private var machine: ReplicationStateMachine
    private var checkpointer: Checkpointer?
    private var checkpointID = ""
    private var feed: ChangeFeed?
    /// The error that made the machine wait, for the retry's log line.
    private var lastFailure: ReplicationError?
    /// The batch read last, waiting to be transferred.
    private var rows: [ChangesRow] = []
    /// Where the batch read last ends, and how it was read.
    private var lastRead: (sequence: JSON, mode: ReplicationStateMachine.ChangesMode) = (.integer(0), .normal)
    /// `rows`' revisions already fetched, when the batch came from ``prefetch``.
    private var fetched: FetchedBatch?
    /// The next batch being read and fetched while the current one is stored and checkpointed: the
    /// source's and the target's work then overlap instead of taking turns.
    private var prefetch: Prefetch?
    /// When the last checkpoint was written (or the replication connected), for
    /// ``ReplicationConfiguration/checkpointInterval``.
    private var lastCheckpoint = ContinuousClock.now

    init(replicator: Replicator, source: any ReplicationPeer, target: any ReplicationPeer, flow: ReplicationFlow,
         sourceIsLocal: Bool, clock: any Clock<Duration>) {
        self.replicator = replicator
        self.source = source
        self.target = target
        self.flow = flow
        self.sourceIsLocal = sourceIsLocal
        self.clock = clock
        let configuration = replicator.configuration
        machine = ReplicationStateMachine(settings: .init(continuous: configuration.continuous, batchSize: configuration.batchSize,
                                                          heartbeat: configuration.heartbeat, retry: configuration.retry))
    }

    private var route: String { configuration.route(of: flow) }

    /// Runs the direction to its end.
    /// - Throws: the ``ReplicationError`` it failed with, or `CancellationError` when stopped.
    mutating func run() async throws {
        defer {
            feed?.close()
            prefetch?.task.cancel()
        }
        var action = machine.handle(.start)
        while true {
            replicator.report(machine.activity, for: flow)
            let event: ReplicationStateMachine.Event
            switch action {
            case .connect:
                event = await outcome { try await $0.connect() }
            case .readChanges(let since, let mode):
                event = await outcome { try await $0.readChanges(since: since, mode: mode) }
            case .transfer:
                event = await outcome { try await $0.transfer() }
            case .saveCheckpoint(let sequence):
                configuration.logger.debug("\(route): checkpoint at \(sequence)")
                event = await outcome { try await $0.saveCheckpoint(sequence) }
            case .sleep(let delay):
                if let lastFailure {
                    configuration.logger.warning("\(route): retrying in \(delay) after \(lastFailure)")
                    replicator.retrying(after: lastFailure)
                }
                feed?.close()
                feed = nil
                do {
                    try await clock.sleep(for: delay)
                    event = .slept
                } catch {
                    event = .stopped
                }
            case .finish, .none:
                return
            case .fail(let error):
                throw error
            case .stop:
                throw CancellationError()
            }
            if case .failed(let error) = event { lastFailure = error } else if case .slept = event {} else { lastFailure = nil }
            action = machine.handle(Task.isCancelled ? .stopped : event)
        }
    }

    /// Runs one action and turns its result or error into the machine's event.
    private mutating func outcome(_ body: (inout ReplicationLoop) async throws -> ReplicationStateMachine.Event) async
        -> ReplicationStateMachine.Event {
        do {
            return try await body(&self)
        } catch {
            feed?.close()
            feed = nil
            discardPrefetch()
            return Task.isCancelled ? .stopped : .failed(ReplicationError.wrap(error))
        }
    }

    // MARK: The actions

    private mutating func connect() async throws -> ReplicationStateMachine.Event {
        discardPrefetch()
        if let selector = configuration.selector {
            // A selector that does not parse would otherwise filter nothing out.
            do {
                _ = try MangoSelector(selector).withoutText(for: "a replication's documents")
            } catch let error as DocStoreError {
                throw ReplicationError(.invalidConfiguration, "The replication's selector: \(error.reason)", cause: error)
            }
        }
        try await source.prepare(create: false)
        try await target.prepare(create: configuration.createTarget)
        let filter = replicator.changesFilter()
        // As CouchDB: a replication by a JavaScript filter checkpoints under the filter's code, so that
        // changing the function starts it again from the beginning.
        var filterCode: String?
        if let name = filter.named?.name, !name.hasPrefix("_") { filterCode = try await source.filterCode(name) }
        checkpointID = ReplicationID.make(source: try await source.identity(), target: try await target.identity(),
                                          filter: filter, filterCode: filterCode, startSequence: configuration.startSequence)
        var sourceRecord: Checkpointer.Record?
        var sourceIsWritable = true
        do {
            sourceRecord = try await source.checkpoint(checkpointID)
        } catch let error as ReplicationError where error.code == .forbidden || error.code == .unauthorized {
            sourceIsWritable = false
        }
        let targetRecord = try await target.checkpoint(checkpointID)
        // With a starting sequence the checkpoints (of a replication of their own) are read only when
        // they go further.
        let session = Checkpointer(sessionID: UUID().uuidString.lowercased(), startTime: Date.now.checkpointTimestamp,
                                   source: sourceRecord, sourceIsWritable: sourceIsWritable, target: targetRecord,
                                   startingAt: sourceRecord == nil && targetRecord == nil ? configuration.startSequence : nil)
        checkpointer = session
        lastCheckpoint = .now
        replicator.startPosition(flow, from: session.startSequence, after: session.earlier)
        return .connected(since: session.startSequence)
    }

    private mutating func readChanges(since: JSON, mode: ReplicationStateMachine.ChangesMode) async throws -> ReplicationStateMachine.Event {
        if let prefetch {
            self.prefetch = nil
            if mode == .normal, prefetch.since == since {
                let task = prefetch.task
                let next = try await withTaskCancellationHandler { try await task.value } onCancel: { task.cancel() }
                rows = next.rows
                fetched = next.fetched
                lastRead = (next.last, mode)
                replicator.changesRead(flow, count: next.rows.count, pending: next.pending)
                return .changesRead(rowCount: next.rows.count, last: next.last)
            }
            prefetch.task.cancel()
        }
        fetched = nil
        let filter = replicator.changesFilter()
        if mode == .feed {
            if feed == nil {
                feed = try await source.openContinuousFeed(since: since, filter: filter, heartbeat: configuration.heartbeat)
            }
            if let feed {
                guard let batch = try await feed.next(maximum: configuration.batchSize) else {
                    self.feed = nil
                    return .feedEnded
                }
                rows = batch
                lastRead = (batch.last?.sequence ?? since, mode)
                replicator.changesRead(flow, count: batch.count, pending: nil)
                return .changesRead(rowCount: batch.count, last: batch.last?.sequence ?? since)
            }
            // A source without a streamed feed (a local database) waits in a long poll instead.
        }
        let wait: Duration? = mode == .normal ? nil : configuration.heartbeat
        let (batch, last, pending) = try await source.changes(since: since, limit: configuration.batchSize, filter: filter, wait: wait)
        rows = batch
        lastRead = (last, mode)
        replicator.changesRead(flow, count: batch.count, pending: pending)
        return .changesRead(rowCount: batch.count, last: last)
    }

    private mutating func transfer() async throws -> ReplicationStateMachine.Event {
        replicator.startTransfer(flow)
        var figures = Replicator.TransferFigures()
        defer { replicator.endTransfer(flow, figures) }
        // A pull into a local database streams attachments straight into it.
        let staging: Database? = if case .local(let database) = receivingEndpoint { database } else { nil }
        let batchFetched = if let fetched { fetched } else {
            try await Self.fetch(rows, from: source, missingIn: target, stagingInto: staging, lanes: lanes)
        }
        var (documents, batch) = (batchFetched.documents, batchFetched.figures)
        fetched = nil
        startPrefetch(stagingInto: staging)
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
            let retried = try await target.store(try await Self.fetchInParallel(again, from: source, stagingInto: staging, lanes: lanes))
            outcome.failures += retried.failures
            outcome.failures += retried.missingStubs.map { ($0.id, $0.revision, "missing_stub: an attachment stub names no attachment") }
        }
        let refused = outcome.failures
        let refusedIDs = Dictionary(refused.map { (ExactString($0.id), $0.reason) }, uniquingKeysWith: { first, _ in first })
        batch.documentWriteFailures = refused.count
        batch.documentsWritten = documents.count - refused.count
        checkpointer?.statistics += batch
        figures = Replicator.TransferFigures(changes: rows.count, figures: batch, through: rows.last?.sequence)
        replicator.publish(documents.map {
            ReplicatedDocument(id: $0.id, revision: $0.revision, flow: flow, error: refusedIDs[ExactString($0.id)])
        })
        if let resolver = configuration.conflictResolver, case .local(let database) = receivingEndpoint {
            try await Replicator.resolveConflicts(in: database, ids: Set(documents.map { ExactString($0.id) }), resolver: resolver)
        }
        rows = []
        return .transferred(checkpointDue: ContinuousClock.now - lastCheckpoint >= configuration.checkpointInterval)
    }

    private mutating func saveCheckpoint(_ sequence: JSON) async throws -> ReplicationStateMachine.Event {
        guard let session = checkpointer else { return .checkpointSaved }
        let checkpoint = session.checkpoint(recording: sequence, endTime: Date.now.checkpointTimestamp)
        var sourceRevision: String?
        if session.sourceIsWritable {
            do {
                sourceRevision = try await save(checkpoint, to: source, replacing: session.source?.revision)
            } catch let error as ReplicationError where error.code == .forbidden || error.code == .unauthorized {
                sourceRevision = nil
            }
        }
        let targetRevision = try await save(checkpoint, to: target, replacing: session.target?.revision)
        checkpointer?.saved(checkpoint, sourceRevision: sourceRevision, targetRevision: targetRevision)
        lastCheckpoint = .now
        replicator.checkpointed(flow, at: sequence, history: checkpoint.history)
        return .checkpointSaved
    }

    /// Saves a checkpoint on one side; its new revision. When the save fails (a conflict, or an answer
    /// lost after the write) but the side holds exactly this checkpoint, the write happened: its
    /// revision is taken, as CouchDB's replicator does. That is also what lets a database replicate
    /// into itself, where the second save finds the first one's revision.
    private func save(_ checkpoint: ReplicationCheckpoint, to peer: any ReplicationPeer, replacing revision: String?) async throws -> String {
        do {
            return try await peer.saveCheckpoint(checkpointID, checkpoint: checkpoint, revision: revision)
        } catch {
            guard let stored = try? await peer.checkpoint(checkpointID), stored.checkpoint == checkpoint else { throw error }
            return stored.revision
        }
    }

    // MARK: Fetching

    /// A batch's missing revisions, read from the source.
    private struct FetchedBatch: Sendable {
        var documents: [Document]
        var figures: ReplicationFigures
    }

    /// The batch after the current one: the sequence it reads after and the task reading it.
    private struct Prefetch {
        let since: JSON
        let task: Task<(rows: [ChangesRow], last: JSON, pending: Int?, fetched: FetchedBatch), any Error>
    }

    private var lanes: Int { max(1, configuration.maximumRequestsInFlight) }

    /// Starts reading and fetching the batch after the one being transferred, when the next read is
    /// certain to be a page of the same kind: a continuous replication that caught up goes on with the
    /// feed instead. The target's `_revs_diff` for that batch may run before the current one is
    /// stored; only a document in both batches can see that, and its newer revision is then fetched
    /// with a few more attachments than needed — never fewer.
    private mutating func startPrefetch(stagingInto staging: Database?) {
        guard lastRead.mode == .normal, !configuration.continuous || rows.count >= configuration.batchSize else { return }
        let (since, source, target, lanes) = (lastRead.sequence, source, target, lanes)
        let (filter, limit) = (replicator.changesFilter(), configuration.batchSize)
        prefetch = Prefetch(since: since, task: Task {
            let (rows, last, pending) = try await source.changes(since: since, limit: limit, filter: filter, wait: nil)
            let fetched = try await Self.fetch(rows, from: source, missingIn: target, stagingInto: staging, lanes: lanes)
            return (rows, last, pending, fetched)
        })
    }

    private mutating func discardPrefetch() {
        prefetch?.task.cancel()
        prefetch = nil
        fetched = nil
    }

    /// Asks the target which revisions of `rows` it lacks and reads those from the source.
    private static func fetch(_ rows: [ChangesRow], from source: any ReplicationPeer, missingIn target: any ReplicationPeer,
                              stagingInto staging: Database?, lanes: Int) async throws -> FetchedBatch {
        var figures = ReplicationFigures()
        guard !rows.isEmpty else { return FetchedBatch(documents: [], figures: figures) }
        let offered = rows.map { (id: $0.id, revisions: $0.revisions) }
        figures.revisionsChecked = offered.reduce(0) { $0 + $1.revisions.count }
        let differences = try await target.missingRevisions(offered)
        var requests: [FetchRequest] = []
        for difference in differences {
            for revision in difference.missing {
                requests.append(FetchRequest(id: difference.id, revision: revision, possibleAncestors: difference.possibleAncestors))
            }
        }
        figures.missingRevisionsFound = requests.count
        let bulkGetsBefore = source.bulkGetFigures
        let documents = try await fetchInParallel(requests, from: source, stagingInto: staging, lanes: lanes)
        let bulkGetsAfter = source.bulkGetFigures
        figures.documentsRead = documents.count
        figures.bulkGetAttempts = bulkGetsAfter.attempts - bulkGetsBefore.attempts
        figures.bulkGetDocuments = bulkGetsAfter.documents - bulkGetsBefore.documents
        return FetchedBatch(documents: documents, figures: figures)
    }

    /// Fetches revisions in chunks, with up to `lanes` requests at once, keeping the order of `requests`.
    private static func fetchInParallel(_ requests: [FetchRequest], from source: any ReplicationPeer, stagingInto staging: Database?,
                                        lanes: Int) async throws -> [Document] {
        guard !requests.isEmpty else { return [] }
        let chunkSize = max(10, (requests.count + lanes - 1) / lanes)
        let chunks = stride(from: 0, to: requests.count, by: chunkSize).map { Array(requests[$0..<min($0 + chunkSize, requests.count)]) }
        if chunks.count == 1 { return try await source.fetch(chunks[0], stagingInto: staging) }
        return try await chunks.concurrentMap(limit: lanes) { try await source.fetch($0, stagingInto: staging) }.flatMap { $0 }
    }

    /// The endpoint this direction writes into: the target when pushing, the source when pulling.
    private var receivingEndpoint: ReplicationEndpoint {
        flow == .push ? configuration.target : configuration.source
    }
}
