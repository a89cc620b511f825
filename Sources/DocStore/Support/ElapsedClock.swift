/// A clock read as the time passed since it was given, so code holding one needs no generic parameter
/// and can subtract its readings: an `any Clock<Duration>`'s instants are of a type it does not know.
package struct ElapsedClock: Sendable {
    /// The time passed since this value was made.
    package let now: @Sendable () -> Duration
    private let sleepUntil: @Sendable (Duration) async throws -> Void

    package init<C: Clock<Duration>>(_ clock: C) {
        let origin = clock.now
        now = { origin.duration(to: clock.now) }
        sleepUntil = { try await clock.sleep(until: origin.advanced(by: $0), tolerance: nil) }
    }

    /// Sleeps until `deadline`, a reading of ``now``; throws when the task is cancelled.
    package func sleep(until deadline: Duration) async throws {
        try await sleepUntil(deadline)
    }
}
