import DocServer
import DocStore
import Foundation
import TestSupport
import XCTest

/// A request that writes is answered on DocStore's threads for writes, not on the event loop that reads
/// it: a large write then holds up no other connection of that loop. Seen through the thread that opens
/// a database for a request (the server asks for the database's indexes there).
final class WritesOffTheLoopTests: XCTestCase {
    func testWritesRunOnDocStoresThreadsAndReadsOnTheLoop() async throws {
        let threads = Locked<[String: String]>([:])
        let server = try await TestServer(self, indexes: { name in
            threads.withLock { $0[name] = Thread.current.name ?? "" }
            return []
        })
        let created = try await server.request("PUT", "/written")
        XCTAssertEqual(created.status, 201)
        let writer = try XCTUnwrap(threads.withLock { $0["written"] })
        XCTAssertTrue(writer.hasPrefix("docstore.writes"), writer)

        // A database made in the folder by DocStore itself is opened by the server at its first read.
        let made = try await Database.open(name: "made", directory: server.directory)
        _ = try await made.save(Document(id: "a", body: ["n": 1]))
        await made.close()
        let read = try await server.request("GET", "/made/a")
        XCTAssertEqual(read.status, 200)
        let reader = try XCTUnwrap(threads.withLock { $0["made"] })
        XCTAssertFalse(reader.hasPrefix("docstore."), "a point read stays on its connection's event loop: \(reader)")
    }
}
