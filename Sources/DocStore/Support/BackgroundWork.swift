import Dispatch
import Synchronization

/// Work started on a Dispatch thread, whose result the starting thread takes with ``wait()``.
///
/// The work runs on Dispatch's global queue, never on the Swift concurrency pool, so a thread of the
/// pool (an actor's, or a reader's) may block waiting for it without starving it. Used to keep a second
/// core busy on CPU work — parsing, mapping, encoding — while the calling thread works with SQLite.
final class BackgroundWork<Value: Sendable>: Sendable {
    private let done = DispatchSemaphore(value: 0)
    private let result = Mutex<Result<Value, any Error>?>(nil)

    init(_ work: @escaping @Sendable () throws -> Value) {
        DispatchQueue.global().async { [self] in
            let outcome = Result { try work() }
            result.withLock { $0 = outcome }
            done.signal()
        }
    }

    /// Blocks until the work has finished; returns its value or rethrows its error. Call it once.
    func wait() throws -> Value {
        done.wait()
        return try result.withLock { $0! }.get()
    }
}
