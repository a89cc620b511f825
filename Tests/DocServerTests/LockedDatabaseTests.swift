@testable import DocServer
@testable import DocStore
import Foundation
import Synchronization
import XCTest

/// Another connection (another process) holding a database's write lock: a write that cannot get it
/// within the lock timeout is a 503 naming the lock, and writes nothing.
final class LockedDatabaseTests: XCTestCase {
    /// Holds the write lock of the database file at `path` (`BEGIN IMMEDIATE` on a connection of its
    /// own) on a thread of its own until `release` is called.
    private final class LockHolder: @unchecked Sendable {
        // `connection` is used only by `init` and then by the holder's thread, after `release` (the
        // semaphore orders the two): one user at a time.
        private let connection: SQLiteConnection
        private let released = DispatchSemaphore(value: 0)
        private let finished = DispatchSemaphore(value: 0)

        init(path: String) throws {
            connection = try SQLiteConnection(path: path)
            try connection.execute("BEGIN IMMEDIATE")
            Thread { [self] in
                released.wait()
                try? connection.execute("COMMIT")
                connection.close()
                finished.signal()
            }.start()
        }

        func release() {
            released.signal()
            finished.wait()
        }
    }

    func testAWriteThatCannotGetTheLockInTimeIsA503() async throws {
        let server = try await TestServer(self) { $0.lockTimeout = .milliseconds(300) }
        await XCTAssertEqualAsync(try await server.request("PUT", "/locked").status, 201)
        let holder = try LockHolder(path: server.directory.appendingPathComponent("locked.sqlite").path)
        let refused = try await server.request("PUT", "/locked/doc", json: ["n": 1])
        XCTAssertEqual(refused.status, 503)
        XCTAssertEqual(refused.json["error"], "service_unavailable")
        XCTAssertTrue(refused.json["reason"]?.stringValue?.contains("write lock of") == true, "\(refused.json)")
        await XCTAssertEqualAsync(try await server.request("GET", "/locked/doc").status, 404, "nothing was written")
        holder.release()
        await XCTAssertEqualAsync(try await server.request("PUT", "/locked/doc", json: ["n": 1]).status, 201)
    }
}
