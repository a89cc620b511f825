import DocStore

/// One direction of a replication as a pure state machine: the ``Replicator`` feeds it what happened
/// (``Event``) and does what it answers (``Action``). It does no I/O, so every path — batches,
/// catching up, the continuous feed, retries and their backoff, stopping — is tested without a network.
///
/// ```
///            start / slept                connected(since)
///   idle ─────────────────▶ connecting ──────────────────▶ reading ◀───────────────┐
///                              ▲                         │ changes                 │ checkpointSaved
///                              │ slept                   ▼ (rows)                  │ (more to read)
///                          backingOff ◀── failed ── transferring ── transferred ──▶ checkpointing
///                              │ (not transient,                                   │ (one-shot,
///                              ▼  attempts used)                                   ▼  caught up)
///                            failed                                             finished
/// ```
/// A batch transferred while the replication is still catching up, before the checkpoint interval
/// has passed, goes back to `reading` without checkpointing. Any state goes to `stopped` on
/// ``Event/stopped``.
struct ReplicationStateMachine: Sendable {
    /// What the machine needs to know of the configuration.
    struct Settings: Sendable {
        var continuous = false
        var batchSize = 100
        var heartbeat: Duration = .seconds(30)
        var retry = ReplicationConfiguration.RetryPolicy()
    }

    /// How to read the next changes.
    enum ChangesMode: Sendable, Equatable {
        /// One page of at most the batch size, answered at once.
        case normal
        /// One page, waiting up to the duration for a first change (continuous, polling).
        case longPoll(Duration)
        /// From the continuous feed (opened at `since` if it is not open yet).
        case feed
    }

    enum Event: Sendable {
        /// The replication begins.
        case start
        /// Both endpoints are ready and the checkpoints read: replicate after `since`.
        case connected(since: JSON)
        /// A read answered `rowCount` changes, the last of them (or the source's end) at `last`.
        case changesRead(rowCount: Int, last: JSON)
        /// The continuous feed ended (the server closed it).
        case feedEnded
        /// The batch of changes read last was transferred; `checkpointDue` when the checkpoint
        /// interval has passed since the last checkpoint was written (the loop keeps the time).
        case transferred(checkpointDue: Bool)
        /// The checkpoint was written on both sides.
        case checkpointSaved
        /// The action failed.
        case failed(ReplicationError)
        /// The backoff delay passed.
        case slept
        /// The replication was stopped (cancelled).
        case stopped
    }

    enum Action: Sendable, Equatable {
        /// Prepare both endpoints and read their checkpoints; answer ``Event/connected(since:)``.
        case connect
        /// Read changes after `since`; answer ``Event/changesRead(rowCount:last:)`` (or ``Event/feedEnded``).
        case readChanges(since: JSON, mode: ChangesMode)
        /// Move the batch just read to the target; answer ``Event/transferred``.
        case transfer
        /// Write a checkpoint recording `sequence`; answer ``Event/checkpointSaved``.
        case saveCheckpoint(JSON)
        /// Close the continuous feed if one is open, then wait; answer ``Event/slept``.
        case sleep(Duration)
        /// The replication is complete.
        case finish
        /// The replication failed for good.
        case fail(ReplicationError)
        /// The replication was stopped.
        case stop
        /// Nothing to do (an event that does not apply to the current state).
        case none
    }

    enum State: Sendable, Equatable {
        case idle
        case connecting
        case reading(ChangesMode)
        case transferring(upTo: JSON)
        case checkpointing(JSON, thenFinish: Bool)
        case backingOff(attempt: Int)
        case finished
        case stopped
        case failed(ReplicationError)
    }

    let settings: Settings
    private(set) var state = State.idle
    /// The source sequence everything up to which has been replicated and checkpointed.
    private(set) var since: JSON = .integer(0)
    /// The source sequence everything up to which has been replicated: the next read starts there.
    /// Ahead of ``since`` while batches go by without a checkpoint.
    private(set) var position: JSON = .integer(0)
    /// Reading from the continuous feed: set once a continuous replication has caught up.
    private(set) var isStreaming = false
    /// Failed attempts since the last progress.
    private(set) var failedAttempts = 0
    /// Whether the last read found the source caught up (a continuous replication then idles).
    private var caughtUp = false

    init(settings: Settings) {
        self.settings = settings
    }

    /// Whether the machine has reached an end state.
    var hasEnded: Bool {
        switch state {
        case .finished, .stopped, .failed: return true
        default: return false
        }
    }

    /// What the replication looks like from outside in this state.
    var activity: ReplicatorActivity {
        switch state {
        case .idle, .finished: return .idle
        case .connecting: return .connecting
        case .reading(.feed): return .idle   // waiting on the continuous feed for news
        case .reading, .checkpointing: return caughtUp && settings.continuous ? .idle : .busy
        case .transferring: return .busy
        case .backingOff: return settings.continuous ? .offline : .connecting
        case .stopped: return .stopped
        case .failed: return .error
        }
    }

    mutating func handle(_ event: Event) -> Action {
        switch (state, event) {
        case (_, .stopped):
            guard !hasEnded else { return .none }
            state = .stopped
            return .stop

        case (.idle, .start):
            state = .connecting
            return .connect

        case (.connecting, .connected(let start)):
            since = start
            position = start
            isStreaming = false
            return read()

        case (.reading(let mode), .changesRead(let count, let last)):
            if settings.continuous, mode != .feed, count < settings.batchSize {
                isStreaming = true   // caught up: follow the feed from here
            }
            caughtUp = count == 0 || (mode != .feed && count < settings.batchSize)
            if count > 0 {
                state = .transferring(upTo: last)
                return .transfer
            }
            if last != since {
                state = .checkpointing(last, thenFinish: !settings.continuous)
                return .saveCheckpoint(last)
            }
            if !settings.continuous {
                state = .finished
                return .finish
            }
            return read()

        case (.reading(.feed), .feedEnded):
            isStreaming = false
            return read(afterFeed: true)

        case (.transferring(let last), .transferred(let checkpointDue)):
            // While catching up page by page, a checkpoint is written at the interval, as CouchDB's
            // replicator does; the page that catches up and each batch of the feed at once, so that
            // a replication that may now wait long has recorded where it is.
            guard checkpointDue || caughtUp || isStreaming else {
                position = last
                failedAttempts = 0
                return read()
            }
            state = .checkpointing(last, thenFinish: false)
            return .saveCheckpoint(last)

        case (.checkpointing(let sequence, let thenFinish), .checkpointSaved):
            since = sequence
            position = sequence
            failedAttempts = 0
            if thenFinish {
                state = .finished
                return .finish
            }
            return read()

        case (.connecting, .failed(let error)), (.reading, .failed(let error)),
             (.transferring, .failed(let error)), (.checkpointing, .failed(let error)):
            isStreaming = false
            guard error.isTransient, settings.continuous || failedAttempts + 1 < settings.retry.maximumAttempts else {
                state = .failed(error)
                return .fail(error)
            }
            let delay = settings.retry.delay(forAttempt: failedAttempts)
            state = .backingOff(attempt: failedAttempts)
            failedAttempts += 1
            return .sleep(delay)

        case (.backingOff, .slept):
            state = .connecting
            return .connect

        default:
            return .none
        }
    }

    /// The next read: pages answered at once while catching up (a continuous replication with nothing
    /// to do must not look busy for a heartbeat), the feed once caught up, and a long poll when a feed
    /// ended, so that a server closing feeds at once is not asked again in a loop.
    private mutating func read(afterFeed: Bool = false) -> Action {
        let mode: ChangesMode = isStreaming ? .feed : afterFeed ? .longPoll(settings.heartbeat) : .normal
        state = .reading(mode)
        return .readChanges(since: position, mode: mode)
    }
}
