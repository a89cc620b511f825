@testable import DocStore
import TestSupport
import XCTest

/// Feeds that wake on the same commit share one read of the newest changes (``ChangesTail``), and
/// every answer is still what a read of its own would have given.
final class ChangesTailTests: XCTestCase {
    func testListenersAfterTheSameSequenceShareOneRead() async throws {
        let db = try await makeDatabase(self)
        _ = try await db.save((0..<10).map { Document(id: "d\($0)", body: ["n": .integer($0)]) })
        let before = db.changesTail.readsStarted.load(ordering: .relaxed)
        let pages = try await withThrowingTaskGroup(of: ChangesPage.self) { group in
            for _ in 0..<100 { group.addTask { try await db.changes(since: 5) } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        XCTAssertEqual(db.changesTail.readsStarted.load(ordering: .relaxed) - before, 1)
        for page in pages {
            XCTAssertEqual(page.changes.map(\.id), ["d5", "d6", "d7", "d8", "d9"])
            XCTAssertEqual(page.lastSequence, 10)
        }
        // Later starts take their rows from the same read; documents need a read with them.
        let later = try await db.changes(since: 8)
        XCTAssertEqual(later.changes.map(\.id), ["d8", "d9"])
        XCTAssertEqual(db.changesTail.readsStarted.load(ordering: .relaxed) - before, 1)
        let withDocuments = try await db.changes(since: 8, includeDocuments: true)
        XCTAssertEqual(withDocuments.changes.compactMap { $0.document?.int(forKey: "n") }, [8, 9])
        XCTAssertEqual(db.changesTail.readsStarted.load(ordering: .relaxed) - before, 2)
        let limited = try await db.changes(since: 5, limit: 10, includeDocuments: false)
        XCTAssertEqual(limited.changes.map(\.id), ["d5", "d6", "d7", "d8", "d9"])
        XCTAssertTrue(limited.changes.allSatisfy { $0.document == nil })
    }

    func testANewCommitIsNeverAnsweredFromAnOlderRead() async throws {
        let db = try await makeDatabase(self)
        _ = try await db.save((0..<10).map { Document(id: "d\($0)", body: ["n": .integer($0)]) })
        _ = try await db.changes(since: 5, includeDocuments: true)
        // d6 (sequence 7) changes again: it moves to sequence 11.
        _ = try await db.save(Document(id: "d6", body: ["n": 60]))
        let page = try await db.changes(since: 5, includeDocuments: true)
        XCTAssertEqual(page.changes.map(\.id), ["d5", "d7", "d8", "d9", "d6"])
        XCTAssertEqual(page.changes.map(\.sequence), [6, 8, 9, 10, 11])
        XCTAssertEqual(page.changes.last?.document?.int(forKey: "n"), 60)
        // A filter that needs the documents reads through the same tail and sees the new body too.
        let filtered = try await db.changes(since: 5, filter: ChangesFilter(predicate: { $0.int(forKey: "n") == 60 }))
        XCTAssertEqual(filtered.changes.map(\.id), ["d6"])
        // A predicate that throws fails the read, as CouchDB fails a `_changes` whose filter throws.
        struct Refused: Error {}
        let throwing = ChangesFilter(predicate: { document in
            if document.id == "d8" { throw Refused() }
            return true
        })
        do {
            _ = try await db.changes(since: 5, filter: throwing)
            XCTFail("a predicate that throws must fail the read")
        } catch is Refused {
        }
        await XCTAssertEqualAsync(try await db.changes(since: 9, filter: throwing).changes.map(\.id), ["d9", "d6"])
    }
}
