@testable import DocServer
import DocStore
import DocSync
import Foundation
import XCTest

/// The example of Docs/Sync.md, run as written there against a DocServer on 127.0.0.1 that holds a
/// database for the user alice.
final class SyncGuideTests: XCTestCase {
    func testGuideExample() async throws {
        let (server, serverURL, serverDatabase) = try await makeServer()
        try await server.users.setUser(name: "alice", password: "alice-secret")
        _ = try await serverDatabase.save(["id": "from-the-server", "text": "hello"])
        var components = URLComponents(url: serverURL, resolvingAgainstBaseURL: false)!
        components.user = nil
        components.password = nil
        let couchURL = components.url!
        let secret = "alice-secret"
        let folder = try makeTemporaryDirectory(self)
        let printed = Locked<[String]>([])
        @Sendable func print(_ items: Any...) { printed.withLock { $0.append(items.map { "\($0)" }.joined(separator: " ")) } }

        let db = try await Database.open(name: "notes", directory: folder)
        let remote = couchURL                  // e.g. URL(string: "https://couch.example.com/notes")!

        // Once, both ways; returns when done (throws ReplicationError on failure).
        var once = ReplicationConfiguration.oneTimeBidirectional(with: remote, database: db)
        once.authentication = .basic(name: "alice", password: secret)
        let status = try await Replicator(configuration: once).run()
        print(status.documentsWritten, status.documentWriteFailures)

        XCTAssertEqual(printed.withLock { $0 }, ["1 0"])
        await XCTAssertEqualAsync(try await db.fetchDocument("from-the-server")?["text"], "hello")
        _ = try await db.save(["id": "from-alice", "text": "hi"])

        // Continuously, until stopped: the status stream ends when the replication does.
        var always = ReplicationConfiguration.repeatingBidirectional(with: remote, database: db)
        always.authentication = once.authentication
        let live = Replicator(configuration: always)
        let watcher = Task {
            for await status in live.statusChanges() { print(status.activity) }   // connecting, busy, idle, offline…
        }
        live.start()
        try await eventually { try await serverDatabase.fetchDocument("from-alice") != nil }
        await live.stop()                      // or `await db.close()`, which stops the database's replications
        await watcher.value                    // the last status printed is `stopped`

        XCTAssertEqual(printed.withLock { $0.last }, "stopped")
        XCTAssertFalse(printed.withLock { $0 }.contains("error"))
        await db.close()
        try assertGuideBlocksAreIn(guide: "Sync.md", minimumBlocks: 1)
    }
}
