@testable import DocStore
import Dispatch
import XCTest

/// Cancelling a task stops its SQLite read (`sqlite3_interrupt`).
final class CancellationTests: XCTestCase {
    /// A statement that never ends on its own.
    private static let endless = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"

    func testCancellingATaskInterruptsItsRead() async throws {
        let db = try await makeDatabase(self)
        _ = try await db.save(Document(id: "a", body: ["n": 1]))
        let started = DispatchSemaphore(value: 0)
        // A read of DocStore's, straight on the test's task.
        let reading = Task {
            try await ThreadRule.allowing(.testing) {
                try await db.read { connection in
                    started.signal()
                    return try connection.scalarInt(CancellationTests.endless)
                }
            }
        }
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                started.wait()
                continuation.resume()
            }
        }
        reading.cancel()
        do {
            let value = try await reading.value
            XCTFail("the endless read returned \(String(describing: value))")
        } catch {
            XCTAssertTrue(error is CancellationError, "\(error)")
        }
        // The interrupted connection went back to the pool and reads again.
        let document = try await db.document(withID: "a")
        XCTAssertEqual(document?.int(forKey: "n"), 1)
        let page = try await db.changes()
        XCTAssertEqual(page.changes.map(\.id), ["a"])
    }

    func testACancelledTaskDoesNotStartARead() async throws {
        let db = try await makeDatabase(self)
        let reading = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await db.read { _ in "ran" }
        }
        do {
            _ = try await reading.value
            XCTFail("a cancelled task read")
        } catch {
            XCTAssertTrue(error is CancellationError, "\(error)")
        }
    }
}
