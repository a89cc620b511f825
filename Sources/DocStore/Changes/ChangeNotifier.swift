import Synchronization

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
    }

    private let state = Mutex(State())

    /// Delivers a committed batch to every subscriber. Never blocks (streams buffer).
    func publish(_ batch: [DocumentChange]) {
        guard !batch.isEmpty else { return }
        let subscribers = state.withLock { Array($0.subscribers.values) }
        for subscriber in subscribers { subscriber.yield(batch) }
    }

    /// A new subscription that ends when the database closes or the consumer stops iterating.
    func subscribe() -> AsyncStream<[DocumentChange]> {
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
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.subscribers.removeValue(forKey: id) }
        }
        return stream
    }

    /// The number of live subscriptions (for tests and diagnostics).
    var subscriberCount: Int { state.withLock { $0.subscribers.count } }

    /// Ends every subscription.
    func finish() {
        let subscribers = state.withLock { state in
            state.isFinished = true
            defer { state.subscribers = [:] }
            return Array(state.subscribers.values)
        }
        subscribers.forEach { $0.finish() }
    }
}

extension AsyncStream where Element == [DocumentChange] {
    /// Waits until the next batch of changes arrives or `timeout` passes; returns whether a batch came.
    ///
    /// Subscribe (``Database/changeBatches()``) *before* reading the state you are waiting to see change,
    /// so that a commit in between is not missed.
    public func waitForNext(timeout: Duration) async -> Bool {
        await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                var iterator = self.makeAsyncIterator()
                return await iterator.next() != nil
            }
            group.addTask {
                try? await Task.sleep(for: timeout)
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
    }
}
