@testable import DocServer
import DocStore
@testable import DocSync
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Hummingbird
import Logging
import NIOCore
import XCTest

final class ProtocolDetailTests: XCTestCase {
    func testServerFilterWithParameters() async throws {
        let (_, url, remote) = try await makeServer(filters: [
            "app/by-kind": { document, parameters in document.string(forKey: "kind") == parameters["kind"] },
        ])
        _ = try await remote.save([Document(id: "a1", body: ["kind": "a"]), Document(id: "b1", body: ["kind": "b"]),
                                   Document(id: "b2", body: ["kind": "b"])])
        let local = try await makeDatabase("filtered")
        var configuration = ReplicationConfiguration(source: .remote(url), target: .local(local))
        configuration.filterName = "app/by-kind"
        configuration.filterParameters = ["kind": "b"]
        try await Replicator(configuration: configuration).run()
        await XCTAssertEqualAsync(try await local.changes().changes.map(\.id), ["b1", "b2"])
        configuration.filterParameters = ["kind": "a"]
        try await Replicator(configuration: configuration).run()
        await XCTAssertEqualAsync(try await local.changes().changes.map(\.id).sorted(), ["a1", "b1", "b2"],
                                  "new parameters, new replication id: it starts from the beginning")
        var unknown = configuration
        unknown.filterName = "app/none"
        do {
            try await Replicator(configuration: unknown).run()
            XCTFail("expected a failure")
        } catch let error as ReplicationError {
            XCTAssertEqual(error.httpStatus, 404)
        }
    }

    func testFallbackToOpenRevsWithoutBulkGetAndRequestCounts() async throws {
        let (_, serverURL, remote) = try await makeServer()
        let proxy = FaultProxy(upstream: "http://127.0.0.1:\(serverURL.port!)",
                               rules: [.init(pathContains: "_bulk_get", fault: .status(404), remaining: 1000)])
        let port = try await proxy.start()
        let held = Held(proxy)
        addTeardownBlock { await held.take()?.stop() }
        let url = URL(string: "http://admin:pw@127.0.0.1:\(port)/remote")!
        try await seed(remote, prefix: "o", count: 30, attachments: true)
        let local = try await makeDatabase("fallback")
        var configuration = ReplicationConfiguration(source: .remote(url), target: .local(local))
        configuration.batchSize = 10
        try await Replicator(configuration: configuration).run()
        try await assertConverged(local, remote)
        let attachment = try await local.attachmentData(named: "file.bin", documentID: "o6")
        XCTAssertEqual(attachment.count, 16)
        XCTAssertGreaterThanOrEqual(proxy.requests(to: "_bulk_get"), 3, "tried _bulk_get first")

        // A second run reads the checkpoint and one empty page of changes, and moves nothing.
        let changesBefore = proxy.requests(to: "_changes")
        let bulkGetBefore = proxy.requests(to: "_bulk_get")
        let second = try await Replicator(configuration: configuration).run()
        XCTAssertEqual(second.documentsWritten, 0)
        XCTAssertEqual(proxy.requests(to: "_changes") - changesBefore, 1)
        XCTAssertEqual(proxy.requests(to: "_bulk_get") - bulkGetBefore, 0)
    }

    func testSessionCookieAndBearerAuthenticationAndStreams() async throws {
        let (_, url, remote) = try await makeServer()
        var login = URLRequest(url: URL(string: "http://127.0.0.1:\(url.port!)/_session")!)
        login.httpMethod = "POST"
        login.httpBody = Data(#"{"name":"admin","password":"pw"}"#.utf8)
        login.setValue("application/json", forHTTPHeaderField: "Content-Type")
        let (_, response) = try await URLSession(configuration: .ephemeral).data(for: login)
        let setCookie = try XCTUnwrap((response as? HTTPURLResponse)?.value(forHTTPHeaderField: "Set-Cookie"))
        let cookie = String(setCookie.dropFirst("AuthSession=".count).prefix { $0 != ";" })

        let local = try await makeDatabase("cookie")
        try await seed(local, prefix: "s", count: 12)
        let plainURL = URL(string: "http://127.0.0.1:\(url.port!)/remote")!
        var configuration = ReplicationConfiguration(source: .local(local), target: .remote(plainURL))
        configuration.authentication = .sessionCookie(cookie)
        configuration.batchSize = 5
        let replicator = Replicator(configuration: configuration)
        let statuses = replicator.statusChanges()
        let documents = replicator.replicatedDocuments()
        let collectedStatuses = Task { await statuses.reduce(into: [ReplicatorActivity]()) { $0.append($1.activity) } }
        let collectedDocuments = Task { await documents.reduce(into: [String]()) { $0 += $1.map(\.id) } }
        try await replicator.run()
        let activities = await collectedStatuses.value
        let moved = await collectedDocuments.value
        XCTAssertEqual(activities.first, .connecting)
        XCTAssertTrue(activities.contains(.busy))
        XCTAssertEqual(activities.last, .idle)
        XCTAssertEqual(moved.sorted(), (0..<12).map { "s\($0)" }.sorted())
        let count = try await remote.info().documentCount
        XCTAssertEqual(count, 12)

        var bearer = configuration
        bearer.authentication = .bearer("not-a-token")
        do {
            try await Replicator(configuration: bearer).run()
            XCTFail("expected a failure")
        } catch let error as ReplicationError {
            XCTAssertEqual(error.code, .unauthorized)
        }
    }
}

final class SessionAuthenticationTests: XCTestCase {
    /// `.session(name:password:)`, as CouchDB's replicator keeps a session: one sign-in, the cookie the
    /// server renews while it is in use kept, a new sign-in once every cookie has ended. The server's
    /// time is a test clock's, so the 600 s sessions end at once.
    func testASessionIsSignedInForRenewedAndSignedInForAgain() async throws {
        let log = MessageLog()
        let clock = TestClock(advancesOnSleep: false)
        let epoch = Date()
        let (_, url, remote) = try await makeServer(logger: Logger(label: "session") { _ in CollectingLogHandler(log: log) }) {
            $0.clock = clock
            $0.currentDate = { epoch.addingTimeInterval(Double(clock.now.offset.components.seconds)) }
            $0.sessionLifetime = .seconds(600)
        }
        func signIns() -> Int { log.count(containing: "POST /_session") }
        let local = try await makeDatabase("session")
        try await seed(local, prefix: "a", count: 5)
        var configuration = ReplicationConfiguration(source: .local(local), target: .remote(URL(string: "http://127.0.0.1:\(url.port!)/remote")!))
        configuration.authentication = .session(name: "admin", password: "pw")
        configuration.continuous = true
        let replicator = Replicator(configuration: configuration)
        replicator.start()
        // The clock moves only while no request is in flight: a request answered after a move would
        // be given a cookie that ends later than the test reckons.
        func quiet(_ id: String) async throws {
            try await eventually { try await remote.document(withID: id) != nil && replicator.status.activity == .idle }
        }
        try await quiet("a4")
        XCTAssertEqual(signIns(), 1)

        // 400 s on, the first request with the cookie gets a fresh one (expiring at 1 000 s) …
        clock.advance(by: .seconds(400))
        _ = try await local.save(Document(id: "b1", body: [:]))
        try await quiet("b1")
        // … so at 700 s, past the first cookie's end, the writes go on without signing in.
        clock.advance(by: .seconds(300))
        _ = try await local.save(Document(id: "b2", body: [:]))
        try await quiet("b2")
        XCTAssertEqual(signIns(), 1, "the renewed cookie signed the requests in")

        // Every cookie has ended: the 401 makes the replicator sign in again.
        clock.advance(by: .seconds(2000))
        _ = try await local.save(Document(id: "b3", body: [:]))
        try await eventually { try await remote.document(withID: "b3") != nil }
        // The server logs a request once its answer is sent: the line may come after the client moved on.
        await eventually("a second sign-in") { signIns() == 2 }
        XCTAssertEqual(signIns(), 2)
        XCTAssertNil(replicator.status.error)
        await replicator.stop()

        // A wrong password fails the replication as unauthorized, at the start.
        configuration.authentication = .session(name: "admin", password: "wrong")
        configuration.continuous = false
        do {
            try await Replicator(configuration: configuration).run()
            XCTFail("expected a failure")
        } catch let error as ReplicationError {
            XCTAssertEqual(error.code, .unauthorized)
        }
    }
}

extension SessionAuthenticationTests {
    /// `.session(name:password:)` against a real Apache CouchDB (`COUCHDB_URL`, credentials in it): it
    /// signs in at CouchDB's `_session` and pushes with the cookie CouchDB gives.
    func testASessionWithARealCouchDB() async throws {
        guard let base = ProcessInfo.processInfo.environment["COUCHDB_URL"].flatMap(URLComponents.init(string:)),
              let name = base.user, let password = base.password else {
            throw XCTSkip("COUCHDB_URL (with a name and password) is not set: no CouchDB to sign in to")
        }
        var plain = base
        (plain.user, plain.password) = (nil, nil)
        let url = try XCTUnwrap(plain.url).appendingPathComponent("docstore-session-\(UUID().uuidString.lowercased())")
        let local = try await makeDatabase("couch-session")
        try await seed(local, prefix: "s", count: 5)
        var configuration = ReplicationConfiguration(source: .local(local), target: .remote(url))
        configuration.createTarget = true
        configuration.authentication = .session(name: name, password: password)
        let status = try await Replicator(configuration: configuration).run()
        XCTAssertEqual(status.documentsWritten, 5)
        var check = URLRequest(url: url)
        check.setValue("Basic " + Data("\(name):\(password)".utf8).base64EncodedString(), forHTTPHeaderField: "Authorization")
        let (data, _) = try await URLSession.shared.data(for: check)
        XCTAssertEqual(try JSON(parsing: data)["doc_count"], 5)
        check.httpMethod = "DELETE"
        _ = try await URLSession.shared.data(for: check)
    }
}

final class ContinuousFeedTests: XCTestCase {
    /// Once caught up, a continuous pull reads one streamed `_changes` feed: later changes arrive without
    /// new `_changes` requests.
    func testContinuousPullStreamsOneFeed() async throws {
        let log = MessageLog()
        let (_, url, remote) = try await makeServer(logger: Logger(label: "feed") { _ in CollectingLogHandler(log: log) })
        func changesRequests() -> Int { log.count(containing: "/remote/_changes") }
        try await seed(remote, prefix: "c", count: 5)
        let local = try await makeDatabase("streamed")
        var configuration = ReplicationConfiguration(source: .remote(url), target: .local(local))
        configuration.continuous = true
        configuration.heartbeat = .seconds(5)
        let replicator = Replicator(configuration: configuration)
        replicator.start()
        try await eventually { try await local.info().documentCount == 5 }
        // Caught up: one long poll read the five, then the feed was opened, and the replicator idles on it.
        await eventually { changesRequests() >= 2 && replicator.status.activity == .idle }
        let before = changesRequests()
        XCTAssertGreaterThan(before, 0, "the server's requests are being counted")
        for n in 0..<3 {
            _ = try await remote.save(Document(id: "later\(n)", body: [:]))
            try await eventually { try await local.document(withID: "later\(n)") != nil }
        }
        XCTAssertEqual(changesRequests(), before, "later changes came over the open feed")
        await replicator.stop()
        XCTAssertEqual(replicator.status.activity, .stopped)
    }
}

final class BulkGetFallbackTests: XCTestCase {
    /// A revision `_bulk_get` answers with an error is asked for alone (`open_revs`), once, as CouchDB's
    /// replicator does; the others of the batch come from `_bulk_get`, matched to their requests by id.
    func testARevisionTheBatchCouldNotReadIsAskedForAlone() async throws {
        let log = MessageLog()
        let (_, url, remote) = try await makeServer(logger: Logger(label: "bulk-get") { _ in CollectingLogHandler(log: log) })
        let saved = try await remote.save(Document(id: "here", body: ["n": 1]))
        let peer = try await HTTPPeer.connect(url, configuration: ReplicationConfiguration(source: .remote(url), target: .remote(url)), clock: ContinuousClock())
        defer { peer.close() }
        let gone = RevisionID("1-0123456789abcdef0123456789abcdef")!
        let documents = try await peer.fetch([
            FetchRequest(id: "here", revision: saved.revision!, possibleAncestors: []),
            FetchRequest(id: "nowhere", revision: gone, possibleAncestors: []),
        ], stagingInto: nil)
        XCTAssertEqual(documents.map(\.id), ["here"])
        XCTAssertEqual(documents.first?.int(forKey: "n"), 1)
        XCTAssertEqual(log.count(containing: "/remote/_bulk_get"), 1)
        XCTAssertEqual(log.count(containing: "GET /remote/nowhere "), 1, "the failed revision alone, once")
        XCTAssertEqual(log.count(containing: "GET /remote/here "), 0)
    }
}

final class ChangeFeedLineTests: XCTestCase {
    /// A continuous feed line that is not a change, a heartbeat or the final `last_seq` fails the feed,
    /// and nothing after it is handed out: a change is never skipped.
    func testAMalformedLineFailsTheFeedAndNothingAfterItIsRead() async throws {
        let server = LoopbackServer()
        let lines = [
            #"{"seq":1,"id":"a","changes":[{"rev":"1-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}]}"#,
            "",
            #"{"seq":2,"id":"b","changes":"#,
            #"{"seq":3,"id":"c","changes":[{"rev":"1-cccccccccccccccccccccccccccccccc"}]}"#,
            #"{"last_seq":3,"pending":0}"#,
        ]
        let port = try await server.start { _ in
            Response(status: .ok, headers: [.contentType: "application/json"],
                     body: ResponseBody(byteBuffer: ByteBuffer(string: lines.joined(separator: "\n") + "\n")))
        }
        let held = Held(server)
        addTeardownBlock { await held.take()?.stop() }
        let transport = HTTPTransport(configuration: HTTPTransport.sessionConfiguration(), idleLimit: .seconds(60), clock: ContinuousClock())
        defer { transport.close() }
        let feed = try ChangeFeed(URLRequest(url: URL(string: "http://127.0.0.1:\(port)/db/_changes?feed=continuous")!), on: transport)
        defer { feed.close() }
        var received: [String] = []
        do {
            while let rows = try await feed.next(maximum: 10) { received += rows.map(\.id) }
            XCTFail("the feed ended without an error after \(received)")
        } catch let error as ReplicationError {
            XCTAssertEqual(error.code, .badResponse)
            XCTAssertTrue(error.reason.contains("malformed"), error.reason)
        }
        XCTAssertEqual(received, ["a"], "the row after the malformed line is not handed out")
    }
}

final class ChangeFeedTimeoutTests: XCTestCase {
    /// A feed fails once its transport's clock passes the idle limit after the last byte received, not
    /// after the feed opened: a feed that keeps moving stays open.
    private static func line(_ id: String) -> ByteBuffer {
        ByteBuffer(string: #"{"seq":"1","id":"\#(id)","changes":[{"rev":"1-abc"}]}"# + "\n")
    }

    func testASilentFeedTimesOutAfterItsLastByteOnTheClock() async throws {
        let (gate, opener) = AsyncStream<Void>.makeStream()
        let server = LoopbackServer()
        let port = try await server.start { _ in
            Response(status: .ok, headers: [.contentType: "application/json"], body: ResponseBody { writer in
                var opened = gate.makeAsyncIterator()
                try await writer.write(Self.line("a"))
                _ = await opened.next()
                try await writer.write(Self.line("b"))
                _ = await opened.next()
                try await writer.finish(nil)
            })
        }
        let held = Held(server)
        addTeardownBlock {
            opener.finish()
            await held.take()?.stop()
        }
        let clock = TestClock(advancesOnSleep: false)
        let transport = HTTPTransport(configuration: HTTPTransport.sessionConfiguration(), idleLimit: .seconds(5), clock: clock)
        defer { transport.close() }
        let feed = try ChangeFeed(URLRequest(url: URL(string: "http://127.0.0.1:\(port)/db/_changes?feed=continuous")!), on: transport)
        defer { feed.close() }

        let first = try await feed.next(maximum: 10)
        XCTAssertEqual(first?.map(\.id), ["a"])
        await eventually { clock.waitingSleepers == 1 }
        clock.advance(by: .seconds(3))
        XCTAssertEqual(clock.waitingSleepers, 1, "at 3 s of 5 the watchdog still waits")
        opener.yield()
        let second = try await feed.next(maximum: 10)   // received at 3 s
        XCTAssertEqual(second?.map(\.id), ["b"])
        clock.advance(by: .seconds(4))                  // 7 s: past 5 s since the feed opened
        await eventually("the watchdog saw the byte at 3 s and waits until 8 s") { clock.waitingSleepers == 1 }
        clock.advance(by: .seconds(1))
        do {
            let rows = try await feed.next(maximum: 10)
            XCTFail("the silent feed went on with \(rows as Any)")
        } catch let error as ReplicationError {
            XCTAssertEqual(error.code, .network)
            XCTAssertTrue(error.isTransient)
            XCTAssertTrue(error.reason.contains("timed out"), error.reason)
        }
        XCTAssertEqual(clock.sleeps, [.seconds(5), .seconds(1)], "one wait to the first deadline, one to the moved one")
    }
}
