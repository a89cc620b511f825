
/// Receives batches of changes after each committed write, in commit order.
///
/// Calls come from a delivery task of the database, never from inside the write; a slow delegate
/// delays only later notifications, not writers.
public protocol DatabaseChangeDelegate: AnyObject, Sendable {
    /// Called after a transaction that changed documents has committed.
    func database(_ database: Database, didChange changes: [DocumentChange])
}

/// Fans committed change batches out to subscribers. The writer publishes after each commit; this is
/// the one "new sequence committed" signal that change streams, delegates and (later) live queries
/// and continuous feeds listen to.
final class ChangeNotifier: Sendable {
    private struct State {
        var subscribers: [Int: AsyncStream<[DocumentChange]>.Continuation] = [:]
        var nextID = 0
        var isFinished = false
        /// The highest sequence committed.
        var committed: Int64 = 0
        /// Callers of ``waitForCommit(after:timeout:)`` waiting for a sequence above theirs.
        var waiters: [Int: (after: Int64, continuation: CheckedContinuation<Bool, Never>)] = [:]
        /// Callers of ``waitUntilFinished()``.
        var finishWaiters: [Int: CheckedContinuation<Void, Never>] = [:]
        /// Waits and subscriptions that want other connections' commits seen promptly (``watching``).
        var watching = 0
    }

    private let state = Locked(State())

    /// Called when the first wait or subscription that watches other connections begins: the database
    /// then has its file polled (``CommitWatch``) until the last one ends.
    let onFirstWatcher = Locked<(@Sendable () -> Void)?>(nil)

    /// Whether a wait or a subscription wants other connections' commits seen promptly.
    var isWatched: Bool { state.withLock { $0.watching > 0 } }

    func beginWatching() {
        let first = state.withLock { state -> Bool in
            state.watching += 1
            return state.watching == 1
        }
        if first { onFirstWatcher.withLock { $0 }?() }
    }

    func endWatching() {
        state.withLock { $0.watching -= 1 }
    }

    /// A database released without ``Database/close()`` ends its change streams and wakes its waiters
    /// all the same: a dropped continuation does not end its stream, and the task reading it would wait
    /// forever, keeping its memory (seen reading LeakSanitizer's reports, Docs/Reliability.md).
    deinit { finish() }

    /// Delivers a committed batch to every subscriber and wakes the waiters it concerns. Never blocks
    /// (streams buffer).
    /// The committed sequence moves first: a subscriber that reads ``committedSequence`` as it takes the
    /// batch (a live query deciding whether its index is behind) sees the batch's.
    func publish(_ batch: [DocumentChange]) {
        guard !batch.isEmpty else { return }
        committed(upTo: batch.map(\.sequence).max() ?? 0)
        let subscribers = state.withLock { Array($0.subscribers.values) }
        for subscriber in subscribers { subscriber.yield(batch) }
    }

    /// The highest sequence known to be committed.
    var committedSequence: Int64 { state.withLock { $0.committed } }

    /// Records that everything up to `sequence` is committed (at open, and after purges that publish
    /// no document change) and wakes the waiters below it.
    func committed(upTo sequence: Int64) {
        let woken = state.withLock { state -> [CheckedContinuation<Bool, Never>] in
            state.committed = max(state.committed, sequence)
            let due = state.waiters.filter { $0.value.after < state.committed }
            for key in due.keys { state.waiters.removeValue(forKey: key) }
            return due.values.map(\.continuation)
        }
        woken.forEach { $0.resume(returning: true) }
    }

    /// Waits until a sequence above `sequence` is committed, for at most `timeout`; returns whether
    /// one was (at once if one already is). Unlike a stream, waiting leaves nothing behind: call it
    /// again with the sequence read since, any number of times. Returns `false` when the database
    /// closes or the task is cancelled. The timeout passes on `clock`.
    func waitForCommit(after sequence: Int64, timeout: Duration, clock: any Clock<Duration>) async -> Bool {
        beginWatching()
        defer { endWatching() }
        let id = state.withLock { state in
            defer { state.nextID += 1 }
            return state.nextID
        }
        return await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                await withTaskCancellationHandler {
                    await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                        let answer: Bool? = self.state.withLock { state in
                            if state.committed > sequence { return true }
                            if state.isFinished || Task.isCancelled { return false }
                            state.waiters[id] = (sequence, continuation)
                            return nil
                        }
                        if let answer { continuation.resume(returning: answer) }
                    }
                } onCancel: {
                    let waiter = self.state.withLock { $0.waiters.removeValue(forKey: id) }
                    waiter?.continuation.resume(returning: false)
                }
            }
            group.addTask {
                try? await clock.sleep(for: timeout)
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
    }

    /// A new subscription that ends when the database closes or the consumer stops iterating. While it
    /// lasts, with `watching`, other connections' commits are looked for (``CommitWatch``).
    func subscribe(watching: Bool = true) -> AsyncStream<[DocumentChange]> {
        let (stream, continuation) = AsyncStream<[DocumentChange]>.makeStream(bufferingPolicy: .unbounded)
        let id: Int? = state.withLock { state in
            guard !state.isFinished else { return nil }
            defer { state.nextID += 1 }
            state.subscribers[state.nextID] = continuation
            return state.nextID
        }
        guard let id else {
            continuation.finish()
            return stream
        }
        if watching { beginWatching() }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.subscribers.removeValue(forKey: id) }
            if watching { self?.endWatching() }
        }
        return stream
    }

    /// The number of live subscriptions (for tests and diagnostics).
    var subscriberCount: Int { state.withLock { $0.subscribers.count } }

    /// Returns when ``finish()`` has been called (the database closed), or when the task is cancelled.
    func waitUntilFinished() async {
        let id = state.withLock { state in
            defer { state.nextID += 1 }
            return state.nextID
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let done = state.withLock { state -> Bool in
                    if state.isFinished || Task.isCancelled { return true }
                    state.finishWaiters[id] = continuation
                    return false
                }
                if done { continuation.resume() }
            }
        } onCancel: {
            state.withLock { $0.finishWaiters.removeValue(forKey: id) }?.resume()
        }
    }

    /// Ends every subscription.
    func finish() {
        let (subscribers, waiters, finishWaiters) = state.withLock { state in
            state.isFinished = true
            defer {
                state.subscribers = [:]
                state.waiters = [:]
                state.finishWaiters = [:]
            }
            return (Array(state.subscribers.values), state.waiters.values.map(\.continuation), Array(state.finishWaiters.values))
        }
        subscribers.forEach { $0.finish() }
        waiters.forEach { $0.resume(returning: false) }
        finishWaiters.forEach { $0.resume() }
    }
}
