import CouchProtocol
import DocStore
import DocSync
import Foundation
import Logging
import Synchronization

/// The replications the server runs, each driven by a DocSync ``Replicator``: transient ones started
/// by `POST /_replicate`, and persistent ones described by the documents of the `_replicator`
/// database (see `ReplicationScheduler+Documents.swift`). It answers `_active_tasks` and
/// `_scheduler/jobs`, counts replication metrics, and stops every job with the server.
///
/// A job that fails is `crashing`; one started by a document runs again after a backoff (5 s,
/// doubling up to 10 minutes), as CouchDB's scheduler retries it, while a transient one-shot job
/// reports its failure to the client that waits for it.
final class ReplicationScheduler: Sendable {
    /// A job's state, in CouchDB's words.
    enum State: String, Sendable {
        case initializing, running, crashing, error, completed, failed
    }

    /// A `_replicator` document that started a job.
    struct DocumentOrigin: Sendable, Hashable {
        let database: String
        let id: String
    }

    /// One replication being run.
    final class Job: Sendable {
        let id: String
        let request: ReplicationRequest
        let user: String?
        let document: DocumentOrigin?
        /// A serial number, shown as the job's `pid`.
        let serial: Int
        let startTime: Date
        /// The server's time of day, for the job's history.
        private let currentDate: @Sendable () -> Date
        private let progress: Locked<Progress>

        struct Progress {
            var replicator: Replicator?
            var driver: Task<ReplicatorStatus, Never>?
            /// Waiting to run again after a failure, or waiting for an unreachable peer.
            var crashing = false
            var errorCount = 0
            var lastError: String?
            var lastUpdated: Date
            var history: [(date: Date, type: String, reason: String?)] = []
        }

        init(id: String, request: ReplicationRequest, user: String?, document: DocumentOrigin?, serial: Int,
             currentDate: @escaping @Sendable () -> Date) {
            startTime = currentDate()
            self.currentDate = currentDate
            progress = Locked(Progress(lastUpdated: startTime))
            self.id = id
            self.request = request
            self.user = user
            self.document = document
            self.serial = serial
            record("added")
        }

        var replicator: Replicator? { progress.withLock { $0.replicator } }
        /// The task that runs the job.
        var driver: Task<ReplicatorStatus, Never>? { progress.withLock { $0.driver } }
        var status: ReplicatorStatus { replicator?.status ?? ReplicatorStatus() }
        var state: State {
            progress.withLock { $0.crashing ? .crashing : $0.replicator == nil ? .initializing : .running }
        }
        var errorCount: Int { progress.withLock { $0.errorCount } }
        var lastUpdated: Date { progress.withLock { $0.lastUpdated } }
        var lastError: String? { progress.withLock { $0.lastError } }

        fileprivate func record(_ type: String, reason: String? = nil) {
            let now = currentDate()
            progress.withLock {
                $0.history.insert((now, type, reason), at: 0)
                if $0.history.count > 20 { $0.history.removeLast() }
                $0.lastUpdated = now
            }
        }

        fileprivate func update(_ change: (inout Progress) -> Void) { progress.withLock { change(&$0) } }

        /// The job's figures, as CouchDB's going on from those its checkpoint recorded, across runs
        /// and restarts.
        var figures: ReplicationFigures {
            let status = status
            return status.positions.values.reduce(status.figures) { $0 + $1.earlier }
        }

        /// The position of the job's direction in its source's changes.
        private var position: ReplicationPosition? {
            let positions = status.positions
            return positions[.push] ?? positions[.pull]
        }

        /// The figures as a completed document's `_replication_stats` holds them (without its
        /// `start_time`).
        var statistics: JSONObject {
            let total = figures
            return [
                "revisions_checked": .integer(total.revisionsChecked), "missing_revisions_found": .integer(total.missingRevisionsFound),
                "docs_read": .integer(total.documentsRead), "docs_written": .integer(total.documentsWritten),
                "changes_pending": .null, "doc_write_failures": .integer(total.documentWriteFailures),
                "bulk_get_docs": .integer(total.bulkGetDocuments), "bulk_get_attempts": .integer(total.bulkGetAttempts),
                "checkpointed_source_seq": Job.sequence(position?.checkpointed),
            ]
        }

        /// The figures with the run's position, as a job's `info` and `_active_tasks` show them.
        var report: JSONObject {
            var object = statistics
            let through = Job.sequence(position?.through)
            object["source_seq"] = through
            object["through_seq"] = through
            // As CouchDB's: the changes the source counted after the last page read (and not yet moved).
            object["changes_pending"] = position?.remaining.map { .integer($0) } ?? .null
            return object
        }

        /// A position as CouchDB shows it: where the run started, 0, until it has one.
        static func sequence(_ value: JSON?) -> JSON {
            guard let value, value != .null else { return 0 }
            return value
        }

        /// The job's `info` in `_scheduler`: its progress, or the error it is crashing with.
        var info: JSON {
            if state == .crashing, let error = lastError { return ["error": .string(error)] }
            return .object(report)
        }

        var historyJSON: JSON {
            .array(progress.withLock { $0.history }.map { entry in
                var object: JSONObject = ["timestamp": .string(entry.date.couchTimestamp), "type": .string(entry.type)]
                if let reason = entry.reason { object["reason"] = .string(reason) }
                return .object(object)
            })
        }

        /// How long to wait before the next run after `errorCount` failures.
        var backoff: Duration { .seconds(min(5 << min(errorCount - 1, 7), 600)) }
    }

    let registry: DatabaseRegistry
    let metrics: ServerMetrics
    let logger: Logger
    /// The node name jobs show, as CouchDB's `couchdb@127.0.0.1`.
    let node: String
    private let jobs = Locked<[String: Job]>([:])
    private let serials = Atomic<Int>(0)
    /// The `_replicator` documents and the task that follows that database.
    let documents = Locked<Documents>(Documents())
    /// What the jobs wait on (backoffs, and their replicators' waits), and the time of day they show.
    let clock: any Clock<Duration>
    /// ``clock`` read as the time since the scheduler was made: when documents in `error` are due.
    let elapsed: ElapsedClock
    let currentDate: @Sendable () -> Date

    init(registry: DatabaseRegistry, metrics: ServerMetrics, logger: Logger, host: String,
         clock: any Clock<Duration> = ContinuousClock(), currentDate: @escaping @Sendable () -> Date = { Date() }) {
        self.registry = registry
        self.metrics = metrics
        self.logger = logger
        self.node = "docstore@\(host)"
        self.clock = clock
        elapsed = ElapsedClock(clock)
        self.currentDate = currentDate
    }

    // MARK: Jobs

    func job(_ id: String) -> Job? { jobs.withLock { $0[id] } }

    var allJobs: [Job] { jobs.withLock { $0.values.sorted { $0.id < $1.id } } }

    /// Adds a job for `request` and starts running it; `nil` when a job with its id already runs.
    /// - Parameters:
    ///   - retrying: whether a failed run is tried again after a backoff (document jobs), or ends
    ///     the job (a transient one-shot job, whose client waits for the outcome).
    ///   - completion: called with the final status when the job ends by itself (not when stopped).
    func add(_ request: ReplicationRequest, id: String, user: String?, document: DocumentOrigin?, retrying: Bool,
             completion: @escaping @Sendable (Job, ReplicatorStatus) async -> Void = { _, _ in }) -> Job? {
        let job = Job(id: id, request: request, user: user, document: document,
                      serial: serials.wrappingAdd(1, ordering: .relaxed).newValue, currentDate: currentDate)
        // The driver exists before the job is listed (so whoever finds the job can wait for it or stop
        // it), and waits at the gate until it is.
        let (gate, open) = AsyncStream<Void>.makeStream()
        let driver = Task {
            for await _ in gate { break }
            let final = await self.drive(job, retrying: retrying)
            // Still listed while its completion runs, so that a server stop waits for it too.
            if !Task.isCancelled, self.job(id) === job { await completion(job, final) }
            self.jobs.withLock { jobs in if jobs[id] === job { jobs.removeValue(forKey: id) } }
            self.refreshGauges()
            return final
        }
        job.update { $0.driver = driver }
        let added = jobs.withLock { jobs -> Bool in
            guard jobs[id] == nil else { return false }
            jobs[id] = job
            return true
        }
        guard added else {
            driver.cancel()
            return nil
        }
        metrics.replicationJobAdded()
        refreshGauges()
        open.yield()
        open.finish()
        return job
    }

    /// Waits for a job to end and returns its final status.
    func outcome(of job: Job) async -> ReplicatorStatus {
        let driver = job.driver
        return await driver?.value ?? ReplicatorStatus()
    }

    /// Stops a job and forgets it; whether there was one.
    @discardableResult
    func stop(_ id: String) async -> Bool {
        guard let job = jobs.withLock({ $0.removeValue(forKey: id) }) else { return false }
        await halt(job)
        refreshGauges()
        return true
    }

    private func halt(_ job: Job) async {
        // The driver is cancelled first: a run it starts from now on stops at once (see `drive`).
        let driver = job.driver
        driver?.cancel()
        await job.replicator?.stop()
        _ = await driver?.value
        job.record("stopped")
    }

    /// Stops following `_replicator` and stops every job.
    func stopAll() async {
        await unwatchDocuments()
        let all = jobs.withLock { jobs in
            defer { jobs = [:] }
            return Array(jobs.values)
        }
        for job in all { await halt(job) }
        refreshGauges()
    }

    /// Runs a job: a run of its replicator, and while it fails and may retry, another after a backoff.
    private func drive(_ job: Job, retrying: Bool) async -> ReplicatorStatus {
        var final = ReplicatorStatus()
        while !Task.isCancelled {
            let replicator: Replicator
            do {
                replicator = try await self.replicator(for: job)
            } catch {
                let reason = (error as? CouchError)?.reason ?? "\(error)"
                final.activity = .error
                final.error = ReplicationError(.invalidConfiguration, reason)
                guard await crashed(job, reason: reason, retrying: retrying) else { break }
                continue
            }
            job.record("started")
            metrics.replicationStarted()
            replicator.start()
            if Task.isCancelled { await replicator.stop() }
            var previous = ReplicatorStatus()
            for await status in replicator.statusChanges() {
                metrics.replicated(from: previous, to: status)
                if let error = status.retryingAfter, previous.retryingAfter == nil {
                    // DocSync waits before trying again. For a continuous job that is CouchDB's crash
                    // (a lost peer); a one-shot job's run counts once, if it fails in the end.
                    let counts = job.request.continuous
                    job.update {
                        $0.crashing = true
                        $0.lastError = error.description
                        if counts { $0.errorCount += 1 }
                    }
                    if counts {
                        job.record("crashed", reason: error.description)
                        metrics.replicationCrashed()
                    }
                    refreshGauges()
                } else if status.retryingAfter == nil, previous.retryingAfter != nil || job.state == .crashing,
                    status.activity == .busy || status.activity == .idle {
                    // Healthy again: CouchDB's error count is of failures in a row.
                    job.update {
                        $0.crashing = false
                        $0.errorCount = 0
                    }
                    refreshGauges()
                }
                previous = status
            }
            final = previous
            if Task.isCancelled || final.activity == .stopped { break }
            guard let error = final.error else {
                job.update { $0.crashing = false }
                break
            }
            guard await crashed(job, reason: error.description, retrying: retrying) else { break }
        }
        return final
    }

    /// Records a failed run; waits for the backoff and returns `true` when the job runs again.
    private func crashed(_ job: Job, reason: String, retrying: Bool) async -> Bool {
        job.update {
            $0.crashing = true
            $0.errorCount += 1
            $0.lastError = reason
            // The next run resolves the endpoints again: a database deleted and created anew since,
            // or one that did not exist, is opened then.
            $0.replicator = nil
        }
        job.record("crashed", reason: reason)
        metrics.replicationCrashed()
        refreshGauges()
        logger.warning("replication \(job.id) crashed: \(reason)")
        guard retrying else { return false }
        do {
            try await clock.sleep(for: job.backoff)
        } catch {
            return false
        }
        refreshGauges()
        return true
    }

    /// The job's replicator, made on its first run (its endpoints resolved then, so that a database
    /// missing at first is found on a later run).
    private func replicator(for job: Job) async throws -> Replicator {
        if let existing = job.replicator { return existing }
        let request = job.request
        var configuration = ReplicationConfiguration(source: try await endpoint(request.source, create: false),
                                                     target: try await endpoint(request.target, create: request.createTarget))
        configuration.createTarget = request.createTarget
        configuration.continuous = request.continuous
        configuration.logger = logger
        configuration.documentIDs = request.documentIDs
        configuration.startSequence = request.sinceSequence
        configuration.selector = request.selector
        configuration.filterName = request.filter
        configuration.filterParameters = request.queryParameters.mapValues(JSON.string)
        configuration.headers = request.headers
        configuration.checkpointInterval = .milliseconds(request.checkpointInterval ?? ReplicationRequest.defaultCheckpointInterval)
        configuration.batchSize = request.workerBatchSize ?? ReplicationRequest.defaultWorkerBatchSize
        if !request.continuous && job.document == nil {
            // Its client waits for the answer: an unreachable peer is tried twice, not for minutes.
            configuration.retry.maximumAttempts = 2
        }
        let replicator = Self.replicator(configuration, on: self.clock)
        job.update { $0.replicator = replicator }
        return replicator
    }

    /// A replicator waiting on `clock`: a generic function opens the configured clock's type, which
    /// `Replicator`'s initializer asks for.
    private static func replicator(_ configuration: ReplicationConfiguration, on clock: some Clock<Duration>) -> Replicator {
        Replicator(configuration: configuration, clock: clock)
    }

    /// A replication endpoint: a URL, or one of this server's databases.
    func endpoint(_ endpoint: ReplicationRequest.Endpoint, create: Bool) async throws -> ReplicationEndpoint {
        switch endpoint {
        case .remote(let url, _):
            return .remote(url)
        case .local(let name):
            if !registry.exists(name) {
                guard create else { throw CouchError(.notFound, "db_not_found", "could not open \(name)") }
                return .local(try await registry.open(name))
            }
            return .local(try await registry.database(named: name))
        }
    }

    private func refreshGauges() {
        let all = allJobs
        metrics.replicationJobs(total: all.count, running: all.filter { $0.state == .running }.count)
    }

    // MARK: Answers

    /// The running jobs, as CouchDB's `_active_tasks` lists replications.
    func activeTasks() -> [JSON] {
        let now = Int(currentDate().timeIntervalSince1970)
        return allJobs.filter { $0.state == .running }.map { job in
            var task = job.report
            task["type"] = "replication"
            task["replication_id"] = .string(job.id)
            task["continuous"] = .bool(job.request.continuous)
            task["source"] = .string(job.request.source.description)
            task["target"] = .string(job.request.target.description)
            task["database"] = job.document.map { .string($0.database) } ?? .null
            task["doc_id"] = job.document.map { .string($0.id) } ?? .null
            task["checkpoint_interval"] = .integer(job.request.checkpointInterval ?? ReplicationRequest.defaultCheckpointInterval)
            task["process_status"] = .string(job.status.activity == .busy ? "running" : "waiting")
            task["started_on"] = .integer(Int(job.startTime.timeIntervalSince1970))
            task["updated_on"] = .integer(now)
            task["user"] = job.user.map(JSON.string) ?? .null
            task["node"] = .string(node)
            task["pid"] = .string(job.pid)
            return .object(task)
        }
    }

    /// A job as `_scheduler/jobs` shows it.
    func schedulerJob(_ job: Job) -> JSON {
        [
            "database": job.document.map { .string($0.database) } ?? .null, "id": .string(job.id), "pid": .string(job.pid),
            "source": .string(job.request.source.description), "target": .string(job.request.target.description),
            "user": job.user.map(JSON.string) ?? .null, "doc_id": job.document.map { .string($0.id) } ?? .null,
            "info": job.info, "history": job.historyJSON, "node": .string(node), "start_time": .string(job.startTime.couchTimestamp),
        ]
    }
}

extension ReplicationScheduler.Job {
    /// The job's `pid`: CouchDB shows its Erlang process; this is the job's serial number in that form.
    var pid: String { "<0.\(serial).0>" }
}

extension Date {
    /// CouchDB's timestamps in `_scheduler` and `_replicator` documents: `2026-11-24T12:53:01Z`.
    var couchTimestamp: String { formatted(.iso8601) }
}
