@testable import DocStore
import DocSync
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import XCTest

/// Commits of another process to the same database file are seen within ``bound``: by a longpoll wait,
/// a live query, a continuous local replication and a server's `_db_updates`. The other process is a
/// real `docstore` child (a `put`, or `serve`); the time counts from its commit being done (the `put`
/// having exited, the test's own save having returned).
final class OtherProcessTests: XCTestCase {
    /// Within 100 ms: the commit watch asks every 50 ms.
    private static let bound = Sanitizer.latencyBound(.milliseconds(100), underSanitizer: 3)

    /// Cancels `tasks` after 30 s, so that a change never seen fails the test instead of hanging it.
    private func watchdog(_ tasks: [any CancellableTask]) -> Task<Void, Never> {
        Task {
            try? await Task.sleep(for: .seconds(30))
            if !Task.isCancelled { tasks.forEach { $0.cancelTask() } }
        }
    }

    /// Runs `docstore` on a thread of its own (the command's exit is waited for there, not on the pool),
    /// and returns when it has exited.
    private func put(_ json: String, db name: String, in directory: URL) async throws -> ContinuousClock.Instant {
        let result = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<CommandResult, any Error>) in
            Thread { continuation.resume(with: Result { try runDocstore(["put", "--db", name, json], in: directory) }) }.start()
        }
        XCTAssertEqual(result.status, 0, result.stderr)
        return ContinuousClock.now
    }

    func testALongpollWaitSeesAnotherProcesssWriteAndTheNextWriteNumbersOnFromIt() async throws {
        let directory = try makeTemporaryDirectory(self)
        let db = try await Database.open(name: "shared", directory: directory)
        try await db.save(Document(id: "mine", body: ["n": 1]))
        let before = await db.updateSequence
        let waiting = Task { () -> (Bool, ContinuousClock.Instant) in
            let seen = await db.waitForCommit(after: before, timeout: .seconds(30))
            return (seen, ContinuousClock.now)
        }
        let written = try await put(#"{"_id":"theirs","n":2}"#, db: "shared", in: directory)
        let (seen, at) = await waiting.value   // the wait's own timeout bounds it
        XCTAssertTrue(seen)
        XCTAssertLessThanOrEqual(at - written, Self.bound)
        await XCTAssertEqualAsync(await db.updateSequence, before + 1)
        let feed = try await db.changes(since: before)
        XCTAssertEqual(feed.changes.map(\.id), ["theirs"])
        // The writer numbers on from the other process's sequence (it would reuse it otherwise).
        let next = try await db.save(Document(id: "mine-again", body: [:]))
        XCTAssertEqual(next.sequence, before + 2)
        await db.close()
    }

    func testAnObserverAndALiveQuerySeeAnotherProcesssWrite() async throws {
        let directory = try makeTemporaryDirectory(self)
        var configuration = DatabaseConfiguration(name: "shared", directory: directory)
        configuration.indexes = [IndexDefinition(name: "by-n", version: "1") { doc, emit in emit(doc["n"] ?? nil, nil) }]
        let db = try await Database.open(configuration)
        try await db.save(Document(id: "mine", body: ["n": 1]))
        let changes = db.observeChanges()
        let live = Task { () -> ContinuousClock.Instant? in
            for try await result in db.observe(index: "by-n") where result.rows.contains(where: { $0.documentID == "theirs" }) {
                return ContinuousClock.now
            }
            return nil
        }
        let observed = Task { () -> (DocumentChange, ContinuousClock.Instant)? in
            for await batch in changes {
                if let change = batch.first(where: { $0.id == "theirs" }) { return (change, ContinuousClock.now) }
            }
            return nil
        }
        let guardian = watchdog([live, observed])
        defer { guardian.cancel() }
        let written = try await put(#"{"_id":"theirs","n":2}"#, db: "shared", in: directory)
        let observedChange = await observed.value
        let change = try XCTUnwrap(observedChange)
        XCTAssertEqual(change.0.source, .otherConnection)
        XCTAssertLessThanOrEqual(change.1 - written, Self.bound)
        let liveSeen = try await live.value
        let seen = try XCTUnwrap(liveSeen)
        XCTAssertLessThanOrEqual(seen - written, Self.bound)
        await db.close()
    }

    func testAContinuousLocalReplicationCarriesAnotherProcesssWrite() async throws {
        let directory = try makeTemporaryDirectory(self)
        let source = try await Database.open(name: "shared", directory: directory)
        let target = try await Database.open(name: "copy", directory: directory)
        try await source.save(Document(id: "mine", body: ["n": 1]))
        var configuration = ReplicationConfiguration(source: .local(source), target: .local(target))
        configuration.continuous = true
        let replicator = Replicator(configuration: configuration)
        let arrivals = target.observeChanges()
        replicator.start()
        let arrived = Task { () -> ContinuousClock.Instant? in
            var seenMine = false
            for await batch in arrivals {
                if batch.contains(where: { $0.id == "mine" }) { seenMine = true }
                if batch.contains(where: { $0.id == "theirs" }) { return seenMine ? ContinuousClock.now : nil }
            }
            return nil
        }
        let guardian = watchdog([arrived])
        defer { guardian.cancel() }
        // The other process writes once the replication has carried this process's document.
        while try await target.document(withID: "mine") == nil { await Task.yield() }
        let written = try await put(#"{"_id":"theirs","n":2}"#, db: "shared", in: directory)
        let arrivedAt = await arrived.value
        let at = try XCTUnwrap(arrivedAt, "the other process's document never arrived")
        XCTAssertLessThanOrEqual(at - written, Self.bound)
        await XCTAssertEqualAsync(try await target.document(withID: "theirs")?.int(forKey: "n"), 2)
        await replicator.stop()
        await source.close()
        await target.close()
    }

    func testDatabaseUpdatesOfAServerSeeAnotherProcesssWrite() async throws {
        let directory = try makeTemporaryDirectory(self)
        let data = directory.appendingPathComponent("data")
        let (_, _, url) = try launchServe(in: directory, self, arguments: ["--data", data.path])
        let base = try XCTUnwrap(URL(string: url))
        func request(_ method: String, _ path: String) async throws -> (Int, JSON) {
            var request = URLRequest(url: URL(string: path, relativeTo: base)!)
            request.httpMethod = method
            request.setValue("Basic " + Data("admin:pw".utf8).base64EncodedString(), forHTTPHeaderField: "Authorization")
            request.timeoutInterval = 60
            let (body, answer) = try await URLSession.shared.data(for: request)
            return ((answer as? HTTPURLResponse)?.statusCode ?? 0, try JSON(parsing: body))
        }
        let (created, _) = try await request("PUT", "shared")
        XCTAssertEqual(created, 201)
        // The feed's position once the server has recorded the database's creation, then a longpoll
        // from there until the other process's write shows.
        func events(since: String) async throws -> (status: Int, rows: [JSON], last: String) {
            let (status, answer) = try await request("GET", "_db_updates?feed=longpoll&timeout=30000&since=\(since)")
            let last = answer["last_seq"]?.stringValue ?? since
            return (status, answer["results"]?.arrayValue ?? [], last.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? last)
        }
        func has(_ rows: [JSON], _ type: String) -> Bool {
            rows.contains { $0["db_name"]?.stringValue == "shared" && $0["type"]?.stringValue == type }
        }
        var position = "0"
        while true {
            let page = try await events(since: position)
            position = page.last
            if page.status != 200 || has(page.rows, "created") { break }
        }
        let start = position
        let feed = Task { () -> (Int, ContinuousClock.Instant) in
            var since = start
            while true {
                let page = try await events(since: since)
                if page.status != 200 || has(page.rows, "updated") { return (page.status, ContinuousClock.now) }
                since = page.last
            }
        }
        // This test process is the other process: it writes the file the server has open.
        let db = try await Database.open(name: "shared", directory: data)
        try await db.save(Document(id: "theirs", body: [:]))
        let written = ContinuousClock.now
        let guardian = watchdog([feed])
        defer { guardian.cancel() }
        let (status, arrived) = try await feed.value
        XCTAssertEqual(status, 200)
        // The watch asks every 50 ms, and the server gathers its events for 50 ms before writing them.
        XCTAssertLessThanOrEqual(arrived - written, Self.bound + .milliseconds(50))
        await db.close()
    }
}

/// A task the watchdog can cancel, whatever it returns.
private protocol CancellableTask: Sendable {
    func cancelTask()
}

extension Task: CancellableTask {
    func cancelTask() { cancel() }
}

/// A database nobody waits on is never asked for other connections' commits.
final class IdleDatabaseTests: XCTestCase {
    func testNobodyWaitingMeansNoChecks() async throws {
        let directory = try makeTemporaryDirectory(self)
        let idle = try await Database.open(name: "idle", directory: directory)
        let watched = try await Database.open(name: "watched", directory: directory)
        try await idle.save(Document(id: "a", body: [:]))
        let idleChecks = idle.writer.otherConnectionChecks.load(ordering: .relaxed)
        let waiting = Task { await watched.waitForCommit(after: await watched.updateSequence, timeout: .seconds(60)) }
        // The watch thread has gone round several times: the watched database was asked each time.
        let start = watched.writer.otherConnectionChecks.load(ordering: .relaxed)
        while watched.writer.otherConnectionChecks.load(ordering: .relaxed) < start + 4 { await Task.yield() }
        XCTAssertEqual(idle.writer.otherConnectionChecks.load(ordering: .relaxed), idleChecks, "the idle database was not asked")
        waiting.cancel()
        _ = await waiting.value
        await idle.close()
        await watched.close()
    }
}
