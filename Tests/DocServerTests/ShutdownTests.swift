@testable import DocServer
import DocStore
import Foundation
import Logging
import TestSupport
import XCTest

/// Stopping a server ends the continuous and longpoll `_changes` feeds open on it (a client that never
/// leaves must not hold the stop), finishes them properly, and logs no error.
final class ShutdownTests: XCTestCase {
    func testStopEndsOpenFeedsAndLogsNoError() async throws {
        let directory = try makeTemporaryDirectory(self)
        var configuration = ServerConfiguration(dataDirectory: directory)
        configuration.port = 0
        configuration.admin = ("admin", "pw")
        configuration.passwordIterations = 1000
        let log = MessageLog()
        let server = try await DocServer(configuration: configuration,
                                         logger: Logger(label: "test.shutdown") { _ in CollectingLogHandler(log: log, logLevel: .trace) })
        let port = try await server.start()
        let db = try await server.registry.open("db")
        try await db.save(Document(id: "a", body: ["n": 1]))
        let authorization = "Basic " + Data("admin:pw".utf8).base64EncodedString()

        // A continuous feed with a one-minute heartbeat and no timeout, and a longpoll waiting past
        // the last change: neither would end by itself for a minute or more.
        let continuous = try RawConnection(port: port, timeout: 30)
        continuous.sendRequest("GET", "/db/_changes?feed=continuous&heartbeat=60000", headers: [("Authorization", authorization)])
        let head = try XCTUnwrap(continuous.readHead())
        XCTAssertEqual(head.status, 200)
        var complete = false
        let first = continuous.readChunked(until: { $0.contains(0x0A) }, ended: &complete)
        XCTAssertTrue(String(decoding: first, as: UTF8.self).contains(#""id":"a""#), "the feed is open")
        let longpoll = try RawConnection(port: port, timeout: 30)
        longpoll.sendRequest("GET", "/db/_changes?feed=longpoll&since=now&heartbeat=60000", headers: [("Authorization", authorization)])
        XCTAssertEqual(longpoll.readHead()?.status, 200)

        // The stop must end by itself while both clients keep their connections open.
        let stopped = Locked(false)
        Task {
            await server.stop()
            stopped.withLock { $0 = true }
        }
        let ended = await eventually(timeout: .seconds(20), "the stop waited for the feeds' clients") {
            stopped.withLock { $0 }
        }
        guard ended else { return }

        var rest = continuous.readChunked(until: { _ in false }, ended: &complete)
        XCTAssertTrue(complete, "the continuous feed's answer is complete")
        XCTAssertTrue(String(decoding: rest, as: UTF8.self).contains(#""last_seq":"1-"#), String(decoding: rest, as: UTF8.self))
        complete = false
        rest = longpoll.readChunked(until: { _ in false }, ended: &complete)
        XCTAssertTrue(complete, "the longpoll answer is complete")
        XCTAssertTrue(String(decoding: rest, as: UTF8.self).contains(#""last_seq":"1-"#), String(decoding: rest, as: UTF8.self))

        XCTAssertEqual(log.messages(atLeast: .error), [], "nothing logged as an error at the stop")
    }

    func testAServerThatCannotListenThrowsAndLeavesNoReplicationRunning() async throws {
        // A first server holds a port, with a persistent continuous replication in its folder.
        let first = try await TestServer(self)
        await XCTAssertEqualAsync(try await first.request("PUT", "/a").status, 201)
        await XCTAssertEqualAsync(try await first.request("PUT", "/_replicator/keep", json: ["source": "a", "target": "b", "create_target": true, "continuous": true]).status, 201)
        try await eventually { try await first.request("GET", "/_scheduler/docs/_replicator/keep").json["state"] == "running" }
        await first.server.stop()

        // A second server on the same folder cannot take the port a third holds: start() throws
        // (it does not wait forever for a port), and the job it started from _replicator is stopped.
        let holder = try await TestServer(self)
        var configuration = ServerConfiguration(dataDirectory: first.directory)
        configuration.port = holder.port
        configuration.admin = TestServer.admin
        configuration.passwordIterations = 1000
        let second = try await DocServer(configuration: configuration)
        do {
            _ = try await second.start()
            XCTFail("started on a port that is taken")
        } catch {}
        XCTAssertEqual(second.scheduler.allJobs.count, 0, "no replication outlives the failed start")
    }
}
