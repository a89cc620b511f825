import Synchronization

/// A clock in virtual time for tests of code that waits (retry backoff).
///
/// With `advancesOnSleep` (the default) every sleep returns at once, moving the clock to its deadline,
/// so a test of five retries takes no real time yet can check the delays asked for in ``sleeps``.
/// Without it, sleepers wait until ``advance(by:)`` passes their deadline or their task is cancelled.
public final class TestClock: Clock, Sendable {
    public struct Instant: InstantProtocol, Hashable, Sendable {
        public var offset: Duration
        public init(offset: Duration) { self.offset = offset }
        public func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
        public func duration(to other: Instant) -> Duration { other.offset - offset }
        public static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }
    }

    private struct Sleeper {
        let deadline: Instant
        let continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var now = Instant(offset: .zero)
        var sleeps: [Duration] = []
        var sleepers: [Int: Sleeper] = [:]
        var nextSleeper = 0
        var sleepWatchers: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []
    }

    private let state = Mutex(State())
    private let advancesOnSleep: Bool

    public init(advancesOnSleep: Bool = true) {
        self.advancesOnSleep = advancesOnSleep
    }

    public var now: Instant { state.withLock { $0.now } }
    public var minimumResolution: Duration { .zero }

    /// The durations slept so far, in order.
    public var sleeps: [Duration] { state.withLock { $0.sleeps } }

    public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        try Task.checkCancellation()
        if advancesOnSleep {
            state.withLock { state in
                state.sleeps.append(state.now.duration(to: deadline))
                if state.now < deadline { state.now = deadline }
            }
            return
        }
        let id = state.withLock { state in
            defer { state.nextSleeper += 1 }
            return state.nextSleeper
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let ready = state.withLock { state -> Bool in
                    state.sleeps.append(state.now.duration(to: deadline))
                    if deadline <= state.now { return true }
                    state.sleepers[id] = Sleeper(deadline: deadline, continuation: continuation)
                    return false
                }
                if ready { continuation.resume() }
                notifyWatchers()
            }
        } onCancel: {
            let sleeper = state.withLock { $0.sleepers.removeValue(forKey: id) }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Returns once `count` sleepers wait for ``advance(by:)`` (only for a clock that does not advance on sleep).
    public func waitForSleepers(_ count: Int = 1) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let ready = state.withLock { state -> Bool in
                if state.sleepers.count >= count { return true }
                state.sleepWatchers.append((count, continuation))
                return false
            }
            if ready { continuation.resume() }
        }
    }

    private func notifyWatchers() {
        let ready = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            let count = state.sleepers.count
            let due = state.sleepWatchers.filter { $0.count <= count }.map(\.continuation)
            state.sleepWatchers.removeAll { $0.count <= count }
            return due
        }
        ready.forEach { $0.resume() }
    }

    /// Moves the clock forward and wakes the sleepers whose deadline it passes.
    public func advance(by duration: Duration) {
        let woken = state.withLock { state -> [Sleeper] in
            state.now = state.now.advanced(by: duration)
            let due = state.sleepers.filter { $0.value.deadline <= state.now }
            for key in due.keys { state.sleepers.removeValue(forKey: key) }
            return Array(due.values)
        }
        woken.forEach { $0.continuation.resume() }
    }
}
