import DocStore
import Foundation

/// Holds a map function on one document until a test has looked at the work in progress: the map calls
/// ``hold()`` (it runs on DocStore's index-writer thread, never on the cooperative pool, so waiting there
/// blocks only the build), the test awaits ``reached()``, looks, then calls ``release()``.
public final class MapHold: Sendable {
    private let arrivals: AsyncStream<Void>
    private let arrived: AsyncStream<Void>.Continuation
    private let gate = DispatchSemaphore(value: 0)
    private let released = Locked(false)

    public init() {
        (arrivals, arrived) = AsyncStream.makeStream()
    }

    /// In the map function: says it got here, then waits for ``release()``.
    public func hold() {
        arrived.yield()
        gate.wait()
    }

    /// Returns once a map function is held.
    public func reached() async {
        var waiting = arrivals.makeAsyncIterator()
        _ = await waiting.next()
    }

    /// Lets the held map function go on; calling it again does nothing (a test's `defer` may too).
    public func release() {
        let first = released.withLock { released in
            defer { released = true }
            return !released
        }
        if first { gate.signal() }
    }
}
