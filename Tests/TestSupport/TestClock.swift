import DocStore

/// A clock in virtual time for tests of code that waits (retry backoff, request timeouts).
///
/// With `advancesOnSleep` (the default) every sleep returns at once, moving the clock to its deadline,
/// so a test of five retries takes no real time yet can check the delays asked for in ``sleeps``.
/// Without it, sleepers wait until ``advance(by:)`` passes their deadline or their task is cancelled.
/// ``init(advancing:)`` mixes the two: sleeps of the durations it selects (backoff delays) return at
/// once, the others (timeouts) wait for ``advance(by:)``.
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

        /// Moves the clock to `instant`; returns the sleepers it passes, to be resumed outside the lock.
        mutating func moveNow(to instant: Instant) -> [Sleeper] {
            now = instant
            let due = sleepers.filter { $0.value.deadline <= now }
            for key in due.keys { sleepers.removeValue(forKey: key) }
            return Array(due.values)
        }
    }

    private let state = Locked(State())
    private let advances: @Sendable (Duration) -> Bool

    public init(advancesOnSleep: Bool = true) {
        advances = { _ in advancesOnSleep }
    }

    /// A clock on which a sleep for a duration `advances` selects returns at once, moving the clock to
    /// its deadline (and waking the waiting sleepers it passes); any other sleep waits for ``advance(by:)``.
    public init(advancing advances: @escaping @Sendable (Duration) -> Bool) {
        self.advances = advances
    }

    public var now: Instant { state.withLock { $0.now } }
    public var minimumResolution: Duration { .zero }

    /// The durations slept so far, in order (those that waited included).
    public var sleeps: [Duration] { state.withLock { $0.sleeps } }

    /// How many sleepers wait for ``advance(by:)`` now.
    public var waitingSleepers: Int { state.withLock { $0.sleepers.count } }

    public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        try Task.checkCancellation()
        let passed = state.withLock { state -> [Sleeper]? in
            let duration = state.now.duration(to: deadline)
            guard advances(duration) else { return nil }
            state.sleeps.append(duration)
            return state.now < deadline ? state.moveNow(to: deadline) : []
        }
        if let passed {
            passed.forEach { $0.continuation.resume() }
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

    /// Moves the clock to the earliest deadline among the waiting sleepers, if any, and wakes those
    /// it reaches.
    public func advanceToNextDeadline() {
        let woken = state.withLock { state -> [Sleeper] in
            guard let next = state.sleepers.values.map(\.deadline).min(), state.now < next else { return [] }
            return state.moveNow(to: next)
        }
        woken.forEach { $0.continuation.resume() }
    }

    /// Moves the clock forward and wakes the sleepers whose deadline it passes.
    public func advance(by duration: Duration) {
        let woken = state.withLock { state in state.moveNow(to: state.now.advanced(by: duration)) }
        woken.forEach { $0.continuation.resume() }
    }
}
