@testable import DocServer
import DocStore
@testable import DocSync
import Foundation
import XCTest

/// Replication through a proxy that breaks requests: it must retry, and converge with nothing lost or
/// duplicated.
final class FaultTests: XCTestCase {
    private func proxied(_ rules: [FaultProxy.Rule]) async throws -> (FaultProxy, URL, Database) {
        let (_, url, remote) = try await makeServer()
        let upstream = "http://127.0.0.1:\(url.port!)"
        let proxy = FaultProxy(upstream: upstream, rules: rules)
        let port = try await proxy.start()
        let held = Held(proxy)
        addTeardownBlock { await held.take()?.stop() }
        return (proxy, URL(string: "http://admin:pw@127.0.0.1:\(port)/remote")!, remote)
    }

    private func fastRetries(_ configuration: inout ReplicationConfiguration) {
        configuration.retry.initialDelay = .milliseconds(10)
        configuration.retry.maximumAttempts = 12
        configuration.batchSize = 40
        configuration.requestTimeout = .seconds(1)
        configuration.heartbeat = .milliseconds(200)
    }

    /// The delays `policy` may wait between attempts.
    private func delays(_ policy: ReplicationConfiguration.RetryPolicy) -> Set<Duration> {
        Set((0..<policy.maximumAttempts).map(policy.delay(forAttempt:)))
    }

    /// A clock on which the backoff of `configuration` passes at once and request timeouts wait for
    /// the test to advance it.
    private func backoffClock(_ configuration: ReplicationConfiguration) -> TestClock {
        let delays = delays(configuration.retry)
        return TestClock(advancing: { delays.contains($0) })
    }

    /// Each failed attempt waited one of the policy's delays, in virtual time. Faults met by requests
    /// of the same attempt (parallel `_bulk_get`s) share one wait.
    private func assertBackoff(_ clock: TestClock, faults: Int, _ policy: ReplicationConfiguration.RetryPolicy,
                               file: StaticString = #filePath, line: UInt = #line) {
        let delays = delays(policy)
        let backoff = clock.sleeps.filter(delays.contains)
        XCTAssertTrue((1...faults).contains(backoff.count), "\(clock.sleeps)", file: file, line: line)
    }

    func testPushSurvivesErrorsAndDroppedConnections() async throws {
        let (proxy, url, remote) = try await proxied([
            .init(pathContains: "_revs_diff", fault: .status(503), remaining: 2),
            .init(pathContains: "_bulk_docs", fault: .status(500), remaining: 1),
            .init(pathContains: "_bulk_docs", fault: .cutResponse, remaining: 2),
            .init(pathContains: "_local", fault: .cutResponse, remaining: 1),
        ])
        let local = try await makeDatabase("push-faults")
        try await seed(local, prefix: "p", count: 200, attachments: true)
        var configuration = ReplicationConfiguration(source: .local(local), target: .remote(url))
        fastRetries(&configuration)
        let clock = backoffClock(configuration)
        let status = try await Replicator(configuration: configuration, clock: clock).run()
        XCTAssertEqual(proxy.pendingFaults, 0, "every fault was met")
        assertBackoff(clock, faults: 6, configuration.retry)
        XCTAssertNil(status.error)
        try await assertConverged(local, remote)
        // Nothing duplicated: every document has exactly one revision, the one pushed.
        for change in try await remote.changes().changes {
            XCTAssertEqual(change.leafRevisions.count, 1, change.id)
            XCTAssertEqual(change.revision.generation, 1, change.id)
        }
    }

    func testPullSurvivesFaultsInChangesAndBulkGet() async throws {
        let (proxy, url, remote) = try await proxied([
            .init(pathContains: "_changes", fault: .cutResponse, remaining: 1),
            .init(pathContains: "_changes", fault: .status(500), remaining: 1),
            .init(pathContains: "_bulk_get", fault: .cutResponse, remaining: 2),
            .init(pathContains: "_bulk_get", fault: .status(503), remaining: 1),
        ])
        try await seed(remote, prefix: "r", count: 150, attachments: true)
        let local = try await makeDatabase("pull-faults")
        var configuration = ReplicationConfiguration(source: .remote(url), target: .local(local))
        fastRetries(&configuration)
        let clock = backoffClock(configuration)
        try await Replicator(configuration: configuration, clock: clock).run()
        XCTAssertEqual(proxy.pendingFaults, 0)
        assertBackoff(clock, faults: 5, configuration.retry)
        try await assertConverged(local, remote)
        let copied = try await local.attachmentData(named: "file.bin", documentID: "r12")
        XCTAssertEqual(copied.count, 22)
    }

    func testOneShotGivesUpAfterItsAttemptsAndContinuousGoesOffline() async throws {
        let (_, url, _) = try await proxied([.init(pathContains: "remote", fault: .status(503), remaining: 1000)])
        let local = try await makeDatabase("offline")
        var oneShot = ReplicationConfiguration(source: .local(local), target: .remote(url))
        fastRetries(&oneShot)
        oneShot.retry.maximumAttempts = 3
        oneShot.retry.initialDelay = .seconds(30)
        let clock = backoffClock(oneShot)
        do {
            try await Replicator(configuration: oneShot, clock: clock).run()
            XCTFail("expected a failure")
        } catch let error as ReplicationError {
            XCTAssertEqual(error.httpStatus, 503)
            XCTAssertTrue(error.isTransient)
        }
        XCTAssertEqual(clock.sleeps.filter(delays(oneShot.retry).contains), [.seconds(30), .seconds(60)],
                       "two waits between three attempts, in virtual time")
        var continuous = oneShot
        continuous.continuous = true
        let manualClock = TestClock(advancesOnSleep: false)
        let replicator = Replicator(configuration: continuous, clock: manualClock)
        let statuses = replicator.statusChanges()
        replicator.start()
        var offline = statuses.filter { $0.activity == .offline }.makeAsyncIterator()
        _ = await offline.next()
        // Request timeouts wait on the clock too: the backoff is told by its delays.
        let backoff = delays(continuous.retry)
        await eventually { manualClock.sleeps.filter(backoff.contains).count == 1 }
        XCTAssertEqual(manualClock.sleeps.filter(backoff.contains), [.seconds(30)])
        manualClock.advance(by: .seconds(30))   // the retry fails too: it waits twice as long
        await eventually { manualClock.sleeps.filter(backoff.contains).count == 2 }
        XCTAssertEqual(manualClock.sleeps.filter(backoff.contains), [.seconds(30), .seconds(60)])
        XCTAssertEqual(replicator.status.activity, .offline)
        await replicator.stop()
        XCTAssertEqual(replicator.status.activity, .stopped)

    }

    /// A request that gets no answer fails when the replicator's clock passes the request timeout
    /// (plus a heartbeat) after its last byte, not before, and is retried: in virtual time, so the
    /// test waits for no timeout in real time.
    func testStalledRequestsTimeOutOnTheReplicatorsClock() async throws {
        let (proxy, url, remote) = try await proxied([
            .init(pathContains: "_revs_diff", fault: .stall, remaining: 1),
            .init(pathContains: "_bulk_docs", fault: .stall, remaining: 1),
        ])
        let local = try await makeDatabase("push-stalls")
        try await seed(local, prefix: "s", count: 30, attachments: false)
        var configuration = ReplicationConfiguration(source: .local(local), target: .remote(url))
        fastRetries(&configuration)
        let idleLimit = configuration.requestTimeout + configuration.heartbeat
        let clock = backoffClock(configuration)
        let replicator = Replicator(configuration: configuration, clock: clock)
        let run = Task { try await replicator.run() }

        // Each failed attempt sleeps one of the policy's delays (which pass at once).
        let retryDelays = delays(configuration.retry)
        func backoffs() -> Int { clock.sleeps.filter(retryDelays.contains).count }
        // The stalled request times out once the clock reaches its deadline: the watchdog's, which a
        // progress report of the request that comes in late (URLSession's delegate may report the bytes
        // sent after the proxy got them, and after the clock moved) can set later than the limit after
        // the stall began — so the clock is moved to the deadline the watchdog waits for, until the
        // timeout's backoff shows.
        func advanceUntilRetrying(after count: Int) async {
            await eventually("the stalled request timed out") {
                if backoffs() > count { return true }
                clock.advanceToNextDeadline()
                return false
            }
        }

        await proxy.waitForStalls(1)
        await eventually("the stalled request's timeout is the one thing waiting") { clock.waitingSleepers == 1 }
        clock.advance(by: idleLimit - .milliseconds(1))
        XCTAssertEqual(clock.waitingSleepers, 1, "a millisecond before the limit, the request still waits")
        XCTAssertEqual(backoffs(), 0, "a millisecond before the limit, nothing timed out")
        await advanceUntilRetrying(after: 0)            // _revs_diff times out and is sent again

        await proxy.waitForStalls(2)                    // then _bulk_docs stalls
        await advanceUntilRetrying(after: 1)

        let status = try await run.value
        XCTAssertNil(status.error)
        XCTAssertEqual(proxy.pendingFaults, 0)
        // The stalled one, its retry, and the batch's again after _bulk_docs timed out.
        XCTAssertEqual(proxy.requests(to: "_revs_diff"), 3)
        XCTAssertEqual(proxy.requests(to: "_bulk_docs"), 2)
        assertBackoff(clock, faults: 2, configuration.retry)
        XCTAssertGreaterThanOrEqual(clock.now.offset, idleLimit * 2, "two timeouts passed in virtual time")
        try await assertConverged(local, remote)
    }
}
