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
        addTeardownBlock { await proxy.stop() }
        return (proxy, URL(string: "http://admin:pw@127.0.0.1:\(port)/remote")!, remote)
    }

    private func fastRetries(_ configuration: inout ReplicationConfiguration) {
        configuration.retry.initialDelay = .milliseconds(10)
        configuration.retry.maximumAttempts = 12
        configuration.batchSize = 40
        configuration.requestTimeout = .seconds(1)
        configuration.heartbeat = .milliseconds(200)
    }

    /// Each failed attempt waited one of the policy's delays, in virtual time. Faults met by requests
    /// of the same attempt (parallel `_bulk_get`s) share one wait.
    private func assertBackoff(_ sleeps: [Duration], faults: Int, _ policy: ReplicationConfiguration.RetryPolicy,
                               file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertTrue((1...faults).contains(sleeps.count), "\(sleeps)", file: file, line: line)
        let delays = Set((0..<policy.maximumAttempts).map(policy.delay(forAttempt:)))
        XCTAssertTrue(sleeps.allSatisfy(delays.contains), "\(sleeps)", file: file, line: line)
    }

    func testPushSurvivesErrorsDroppedConnectionsAndStalls() async throws {
        let (proxy, url, remote) = try await proxied([
            .init(pathContains: "_revs_diff", fault: .status(503), remaining: 2),
            .init(pathContains: "_bulk_docs", fault: .status(500), remaining: 1),
            .init(pathContains: "_bulk_docs", fault: .cutResponse, remaining: 2),
            .init(pathContains: "_local", fault: .cutResponse, remaining: 1),
            .init(pathContains: "_revs_diff", fault: .stall(.seconds(3)), remaining: 1),
        ])
        let local = try await makeDatabase("push-faults")
        try await seed(local, prefix: "p", count: 200, attachments: true)
        var configuration = ReplicationConfiguration(source: .local(local), target: .remote(url))
        fastRetries(&configuration)
        let clock = TestClock()
        let status = try await Replicator(configuration: configuration, clock: clock).run()
        XCTAssertEqual(proxy.pendingFaults, 0, "every fault was met")
        assertBackoff(clock.sleeps, faults: 7, configuration.retry)
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
            .init(pathContains: "_changes", fault: .stall(.seconds(3)), remaining: 1),
        ])
        try await seed(remote, prefix: "r", count: 150, attachments: true)
        let local = try await makeDatabase("pull-faults")
        var configuration = ReplicationConfiguration(source: .remote(url), target: .local(local))
        fastRetries(&configuration)
        let clock = TestClock()
        try await Replicator(configuration: configuration, clock: clock).run()
        XCTAssertEqual(proxy.pendingFaults, 0)
        assertBackoff(clock.sleeps, faults: 6, configuration.retry)
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
        let clock = TestClock()
        do {
            try await Replicator(configuration: oneShot, clock: clock).run()
            XCTFail("expected a failure")
        } catch let error as ReplicationError {
            XCTAssertEqual(error.httpStatus, 503)
            XCTAssertTrue(error.isTransient)
        }
        XCTAssertEqual(clock.sleeps, [.seconds(30), .seconds(60)], "two waits between three attempts, in virtual time")
        var continuous = oneShot
        continuous.continuous = true
        let manualClock = TestClock(advancesOnSleep: false)
        let replicator = Replicator(configuration: continuous, clock: manualClock)
        let statuses = replicator.statusChanges()
        replicator.start()
        var offline = statuses.filter { $0.activity == .offline }.makeAsyncIterator()
        _ = await offline.next()
        await manualClock.waitForSleepers()
        XCTAssertEqual(manualClock.sleeps, [.seconds(30)])
        manualClock.advance(by: .seconds(30))   // the retry fails too: it waits twice as long
        await manualClock.waitForSleepers()
        XCTAssertEqual(manualClock.sleeps, [.seconds(30), .seconds(60)])
        XCTAssertEqual(replicator.status.activity, .offline)
        await replicator.stop()
        XCTAssertEqual(replicator.status.activity, .stopped)

    }
}
