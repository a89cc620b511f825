import DocStore
@testable import DocSync
import XCTest

/// The replication loop without I/O: events in, actions out.
final class ReplicationStateMachineTests: XCTestCase {
    private typealias Machine = ReplicationStateMachine
    private let transient = ReplicationError(.network, "connection reset")
    private let refusal = ReplicationError(.forbidden, "no", httpStatus: 403)

    private func machine(continuous: Bool = false, batchSize: Int = 10, attempts: Int = 3) -> Machine {
        var retry = ReplicationConfiguration.RetryPolicy()
        retry.initialDelay = .milliseconds(100)
        retry.maximumDelay = .milliseconds(350)
        retry.maximumAttempts = attempts
        return Machine(settings: .init(continuous: continuous, batchSize: batchSize, heartbeat: .seconds(5), retry: retry))
    }

    func testOneShotReadsTransfersCheckpointsUntilCaughtUp() {
        var m = machine()
        XCTAssertEqual(m.handle(.start), .connect)
        XCTAssertEqual(m.activity, .connecting)
        XCTAssertEqual(m.handle(.connected(since: 7)), .readChanges(since: 7, mode: .normal))
        XCTAssertEqual(m.handle(.changesRead(rowCount: 10, last: 20)), .transfer)
        XCTAssertEqual(m.activity, .busy)
        XCTAssertEqual(m.handle(.transferred(checkpointDue: true)), .saveCheckpoint(20))
        XCTAssertEqual(m.since, 7, "the sequence moves only once the checkpoint is written")
        XCTAssertEqual(m.handle(.checkpointSaved), .readChanges(since: 20, mode: .normal))
        XCTAssertEqual(m.since, 20)
        XCTAssertEqual(m.handle(.changesRead(rowCount: 3, last: 25)), .transfer)
        XCTAssertEqual(m.handle(.transferred(checkpointDue: true)), .saveCheckpoint(25))
        XCTAssertEqual(m.handle(.checkpointSaved), .readChanges(since: 25, mode: .normal))
        XCTAssertEqual(m.handle(.changesRead(rowCount: 0, last: 25)), .finish)
        XCTAssertEqual(m.state, .finished)
        XCTAssertTrue(m.hasEnded)
        XCTAssertEqual(m.activity, .idle)
    }

    /// Full pages before the checkpoint interval has passed go on without a checkpoint; the page
    /// that catches up is checkpointed whatever the interval, and so is an empty last page.
    func testPagesBeforeTheIntervalGoOnWithoutACheckpoint() {
        var m = machine()
        _ = m.handle(.start)
        XCTAssertEqual(m.handle(.connected(since: 0)), .readChanges(since: 0, mode: .normal))
        XCTAssertEqual(m.handle(.changesRead(rowCount: 10, last: 10)), .transfer)
        XCTAssertEqual(m.handle(.transferred(checkpointDue: false)), .readChanges(since: 10, mode: .normal))
        XCTAssertEqual(m.since, 0, "nothing was checkpointed")
        XCTAssertEqual(m.position, 10)
        XCTAssertEqual(m.handle(.changesRead(rowCount: 10, last: 20)), .transfer)
        XCTAssertEqual(m.handle(.transferred(checkpointDue: true)), .saveCheckpoint(20), "the interval passed")
        XCTAssertEqual(m.handle(.checkpointSaved), .readChanges(since: 20, mode: .normal))
        XCTAssertEqual(m.handle(.changesRead(rowCount: 10, last: 30)), .transfer)
        XCTAssertEqual(m.handle(.transferred(checkpointDue: false)), .readChanges(since: 30, mode: .normal))
        // The source ends exactly at a page's end: the empty page checkpoints what went by unrecorded.
        XCTAssertEqual(m.handle(.changesRead(rowCount: 0, last: 30)), .saveCheckpoint(30))
        XCTAssertEqual(m.handle(.checkpointSaved), .finish)
        XCTAssertEqual(m.since, 30)

        var short = machine()
        _ = short.handle(.start)
        _ = short.handle(.connected(since: 0))
        _ = short.handle(.changesRead(rowCount: 10, last: 10))
        _ = short.handle(.transferred(checkpointDue: false))
        XCTAssertEqual(short.handle(.changesRead(rowCount: 4, last: 14)), .transfer)
        XCTAssertEqual(short.handle(.transferred(checkpointDue: false)), .saveCheckpoint(14), "the page that catches up")
    }

    /// A failure after batches that went unrecorded starts again from the last checkpoint; and every
    /// batch of a continuous feed is checkpointed, so that a quiet feed has recorded where it is.
    func testUnrecordedBatchesAreReadAgainAfterAFailureAndFeedBatchesAreCheckpointed() {
        var m = machine(continuous: true)
        _ = m.handle(.start)
        _ = m.handle(.connected(since: 5))
        _ = m.handle(.changesRead(rowCount: 10, last: 15))
        XCTAssertEqual(m.handle(.transferred(checkpointDue: false)), .readChanges(since: 15, mode: .normal))
        XCTAssertEqual(m.handle(.failed(transient)), .sleep(.milliseconds(100)))
        XCTAssertEqual(m.handle(.slept), .connect)
        // The checkpoints still say 5: the batch after it is read again (and found there by _revs_diff).
        XCTAssertEqual(m.handle(.connected(since: 5)), .readChanges(since: 5, mode: .normal))
        _ = m.handle(.changesRead(rowCount: 3, last: 18))
        _ = m.handle(.transferred(checkpointDue: false))
        XCTAssertEqual(m.handle(.checkpointSaved), .readChanges(since: 18, mode: .feed))
        XCTAssertEqual(m.handle(.changesRead(rowCount: 10, last: 28)), .transfer)
        XCTAssertEqual(m.handle(.transferred(checkpointDue: false)), .saveCheckpoint(28), "a batch of the feed")
    }

    func testAnEmptyPageThatMovesTheSequenceIsCheckpointedBeforeTheEnd() {
        var m = machine()
        _ = m.handle(.start)
        _ = m.handle(.connected(since: 0))
        // Filtered changes: nothing to move, but the source's sequence advanced.
        XCTAssertEqual(m.handle(.changesRead(rowCount: 0, last: 40)), .saveCheckpoint(40))
        XCTAssertEqual(m.handle(.checkpointSaved), .finish)
        XCTAssertEqual(m.since, 40)
    }

    func testContinuousFollowsTheFeedOnceCaughtUpAndPollsAgainWhenItEnds() {
        var m = machine(continuous: true)
        _ = m.handle(.start)
        // Catching up reads pages answered at once.
        XCTAssertEqual(m.handle(.connected(since: 0)), .readChanges(since: 0, mode: .normal))
        XCTAssertEqual(m.activity, .busy)
        // A full page: not caught up yet, keep reading pages.
        XCTAssertEqual(m.handle(.changesRead(rowCount: 10, last: 10)), .transfer)
        XCTAssertFalse(m.isStreaming)
        _ = m.handle(.transferred(checkpointDue: true))
        XCTAssertEqual(m.handle(.checkpointSaved), .readChanges(since: 10, mode: .normal))
        // A short page: caught up, the next read follows the feed.
        XCTAssertEqual(m.handle(.changesRead(rowCount: 2, last: 12)), .transfer)
        _ = m.handle(.transferred(checkpointDue: true))
        XCTAssertEqual(m.handle(.checkpointSaved), .readChanges(since: 12, mode: .feed))
        XCTAssertEqual(m.activity, .idle, "a caught-up continuous replication is idle while it waits")
        XCTAssertEqual(m.handle(.changesRead(rowCount: 1, last: 13)), .transfer)
        XCTAssertEqual(m.activity, .busy)
        _ = m.handle(.transferred(checkpointDue: true))
        XCTAssertEqual(m.handle(.checkpointSaved), .readChanges(since: 13, mode: .feed))
        XCTAssertEqual(m.activity, .idle, "idle again while the feed waits after a batch")
        XCTAssertEqual(m.handle(.feedEnded), .readChanges(since: 13, mode: .longPoll(.seconds(5))))
        // An empty long poll in continuous mode neither finishes nor checkpoints.
        XCTAssertEqual(m.handle(.changesRead(rowCount: 0, last: 13)), .readChanges(since: 13, mode: .feed))
        XCTAssertFalse(m.hasEnded)
    }

    /// A continuous replication with nothing to read follows the feed at once, idle, rather than
    /// waiting out a long poll as busy.
    func testContinuousWithNothingToDoIdlesAtOnce() {
        var m = machine(continuous: true)
        _ = m.handle(.start)
        XCTAssertEqual(m.handle(.connected(since: 7)), .readChanges(since: 7, mode: .normal))
        XCTAssertEqual(m.handle(.changesRead(rowCount: 0, last: 7)), .readChanges(since: 7, mode: .feed))
        XCTAssertEqual(m.activity, .idle)
    }

    func testOneShotRetriesTransientErrorsWithDoublingDelaysThenGivesUp() {
        var m = machine(attempts: 3)
        _ = m.handle(.start)
        XCTAssertEqual(m.handle(.failed(transient)), .sleep(.milliseconds(100)))
        XCTAssertEqual(m.activity, .connecting)
        XCTAssertEqual(m.handle(.slept), .connect)
        _ = m.handle(.connected(since: 0))
        XCTAssertEqual(m.handle(.failed(transient)), .sleep(.milliseconds(200)))
        XCTAssertEqual(m.handle(.slept), .connect)
        XCTAssertEqual(m.handle(.failed(transient)), .fail(transient), "three attempts in all")
        XCTAssertEqual(m.state, .failed(transient))
        XCTAssertEqual(m.activity, .error)
    }

    func testProgressResetsTheAttemptsAndContinuousRetriesForeverAtTheMaximumDelay() {
        var m = machine(continuous: true, attempts: 2)
        _ = m.handle(.start)
        var delays: [Duration] = []
        for _ in 0..<5 {
            guard case .sleep(let delay) = m.handle(.failed(transient)) else { return XCTFail("expected a sleep") }
            XCTAssertEqual(m.activity, .offline)
            delays.append(delay)
            XCTAssertEqual(m.handle(.slept), .connect)
        }
        XCTAssertEqual(delays, [.milliseconds(100), .milliseconds(200), .milliseconds(350), .milliseconds(350), .milliseconds(350)])
        _ = m.handle(.connected(since: 0))
        _ = m.handle(.changesRead(rowCount: 1, last: 1))
        _ = m.handle(.transferred(checkpointDue: true))
        _ = m.handle(.checkpointSaved)
        XCTAssertEqual(m.failedAttempts, 0)
        XCTAssertEqual(m.handle(.failed(transient)), .sleep(.milliseconds(100)))
    }

    func testRefusalsFailAtOnce() {
        for step in 0..<4 {
            var m = machine(continuous: true)
            _ = m.handle(.start)
            if step > 0 { _ = m.handle(.connected(since: 0)) }
            if step > 1 { _ = m.handle(.changesRead(rowCount: 1, last: 1)) }
            if step > 2 { _ = m.handle(.transferred(checkpointDue: true)) }
            XCTAssertEqual(m.handle(.failed(refusal)), .fail(refusal), "step \(step)")
        }
    }

    func testStopEndsEveryStateButAnEndedOne() {
        let preparations: [(inout Machine) -> Void] = [
            { _ in },
            { _ = $0.handle(.start) },
            { _ = $0.handle(.start); _ = $0.handle(.connected(since: 0)) },
            { _ = $0.handle(.start); _ = $0.handle(.failed(self.transient)) },
        ]
        for prepare in preparations {
            var m = machine(continuous: true)
            prepare(&m)
            XCTAssertEqual(m.handle(.stopped), .stop)
            XCTAssertEqual(m.activity, .stopped)
            XCTAssertEqual(m.handle(.stopped), .none)
            XCTAssertEqual(m.handle(.start), .none, "an ended machine does not start again")
        }
        var finished = machine()
        _ = finished.handle(.start)
        _ = finished.handle(.connected(since: 0))
        _ = finished.handle(.changesRead(rowCount: 0, last: 0))
        XCTAssertEqual(finished.handle(.stopped), .none)
        XCTAssertEqual(finished.state, .finished)
    }

    func testEventsThatDoNotApplyAreIgnored() {
        var m = machine()
        XCTAssertEqual(m.handle(.transferred(checkpointDue: true)), .none)
        XCTAssertEqual(m.handle(.checkpointSaved), .none)
        _ = m.handle(.start)
        XCTAssertEqual(m.handle(.feedEnded), .none)
        XCTAssertEqual(m.handle(.slept), .none)
        XCTAssertEqual(m.state, .connecting)
    }
}
