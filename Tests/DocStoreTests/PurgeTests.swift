import DocStore
import Foundation
import XCTest

/// Purging revisions as CouchDB's `_purge` does, and the revision limit kept in the database.
final class PurgeTests: XCTestCase {
    func testTheTreeLosesALeafAndTheBranchNoOtherLeafShares() throws {
        func rev(_ text: String) -> RevisionID { RevisionID(text)! }
        var tree = RevisionTree()
        try tree.merge(history: [rev("3-c"), rev("2-b"), rev("1-a")], isDeleted: false)
        try tree.merge(history: [rev("3-x"), rev("2-x"), rev("1-a")], isDeleted: false)
        XCTAssertEqual(tree.purge(leaves: [rev("2-b")]), [], "not a leaf: ignored")
        XCTAssertEqual(Set(tree.purge(leaves: [rev("3-x")])), [rev("3-x"), rev("2-x")], "1-a is shared, it stays")
        XCTAssertEqual(tree.leaves.map(\.revision), [rev("3-c")])
        XCTAssertEqual(Set(tree.purge(leaves: [rev("3-c")])), [rev("3-c"), rev("2-b"), rev("1-a")])
        XCTAssertTrue(tree.isEmpty, "the last leaf takes the whole document")
    }

    func testPurgingAConflictOrTheWinnerChoosesTheWinnerAgain() async throws {
        let db = try await makeDatabase(self) { $0.indexes = [.field("v")] }
        let first = try await db.save(Document(id: "d", body: ["v": 1]))
        var edit = first
        edit["v"] = 2
        let mine = try await db.save(edit)
        var theirs = Document(id: "d", revision: RevisionID("2-ffffffffffffffffffffffffffffffff"), body: ["v": 3])
        theirs.revisionHistory = [first.revision!]
        _ = try await db.insertRevisions([theirs])
        let before = try await db.query("by:v")
        XCTAssertEqual(before.rows.map(\.key), [3], "the greater revision wins")

        // Purging the winner: mine wins again, with its body, at a new sequence.
        let beforeSequence = try await db.info().updateSequence
        let purged = try await db.purge(revisions: [(id: "d", revisions: [theirs.revision!, first.revision!]), (id: "nobody", revisions: [theirs.revision!])])
        XCTAssertEqual(purged.map(\.id), ["d", "nobody"])
        XCTAssertEqual(purged[0].purged, [theirs.revision!], "the ancestor is not a leaf: not purged")
        XCTAssertEqual(purged[1].purged, [])
        let now = try await db.document(withID: "d", includeConflicts: true)
        XCTAssertEqual(now?.revision, mine.revision)
        XCTAssertEqual(now?["v"], 2)
        XCTAssertEqual(now?.conflicts, [])
        let tree = try await db.revisionTree(ofDocumentWithID: "d")
        XCTAssertEqual(tree?.nodes.map(\.revision), [first.revision!, mine.revision!])
        let changes = try await db.changes(since: beforeSequence)
        XCTAssertEqual(changes.changes.map(\.id), ["d"], "the new winner is a change")
        let after = try await db.query("by:v")
        XCTAssertEqual(after.rows.map(\.key), [2], "the index follows")
        let gone = try await db.document(withID: "d", revision: theirs.revision!)
        XCTAssertNil(gone)

        // Purging the last leaf purges the document.
        let last = try await db.purge(revisions: [(id: "d", revisions: [mine.revision!])])
        XCTAssertEqual(last[0].purged, [mine.revision!])
        let missing = try await db.revisionTree(ofDocumentWithID: "d")
        XCTAssertNil(missing)
        let empty = try await db.query("by:v")
        XCTAssertEqual(empty.rows.count, 0)
    }

    func testTheRevisionLimitIsKeptInTheDatabase() async throws {
        let directory = try makeTemporaryDirectory(self)
        var db = try await Database.open(name: "limits", directory: directory)
        let initial = await db.revisionsLimit
        XCTAssertEqual(initial, 1000)
        do {
            try await db.setRevisionsLimit(0)
            XCTFail("0 is not a limit")
        } catch let error as DocStoreError {
            XCTAssertEqual(error.code, .badRequest)
        }
        try await db.setRevisionsLimit(3)
        var document = try await db.save(Document(id: "d", body: ["n": 0]))
        for n in 1...5 {
            document["n"] = .integer(n)
            document = try await db.save(document)
        }
        let count = try await db.revisionTree(ofDocumentWithID: "d")?.count
        XCTAssertEqual(count, 3, "stemmed to the limit")
        await db.close()

        db = try await Database.open(name: "limits", directory: directory)
        let reopened = await db.revisionsLimit
        XCTAssertEqual(reopened, 3, "the database's own limit outlasts the configuration's default")
        await db.close()
    }

    func testTheSecurityObjectIsKeptButNotReplicated() async throws {
        let directory = try makeTemporaryDirectory(self)
        var db = try await Database.open(name: "secure", directory: directory)
        let empty = try await db.securityObject()
        XCTAssertEqual(empty, [:])
        let object: JSONObject = ["members": ["names": ["alice"], "roles": ["red"]], "admins": ["names": [], "roles": []]]
        try await db.setSecurityObject(object)
        let info = try await db.info()
        XCTAssertEqual(info.updateSequence, 0, "not a document: no change")
        await db.close()
        db = try await Database.open(name: "secure", directory: directory)
        let kept = try await db.securityObject()
        XCTAssertEqual(kept, object)
        await db.close()
    }
}
