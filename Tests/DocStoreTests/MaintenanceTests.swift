@testable import DocStore
import Foundation
import XCTest

final class MaintenanceTests: XCTestCase {
    private func storedBodies(_ db: Database, _ id: String) throws -> Int64 {
        try db.readNow { try $0.scalarInt("SELECT count(*) FROM revs WHERE id = ?", [.text(id)]) ?? -1 }
    }

    func testRevisionsLimitPrunesHistory() async throws {
        let db = try await makeDatabase(self) {
            $0.revisionsLimit = 5
            $0.keepsAncestorBodies = true
        }
        var doc = try await db.save(Document(id: "p", body: ["n": 0]))
        var revisions = [doc.revision!]
        for n in 1..<20 {
            doc["n"] = .integer(n)
            doc = try await db.save(doc)
            revisions.append(doc.revision!)
        }
        let tree = try await db.revisionTree(ofDocumentWithID: "p")!
        XCTAssertEqual(tree.count, 5)
        XCTAssertEqual(tree.history(of: doc.revision!), Array(revisions.suffix(5).reversed()))
        let withHistory = try await db.document(withID: "p", includeRevisionHistory: true)!
        XCTAssertEqual(withHistory.revisionHistory?.count, 4)
        XCTAssertEqual(withHistory.json(revisions: true)["_revisions"]?["start"], 20)
        XCTAssertEqual(try storedBodies(db, "p"), 4, "bodies of pruned revisions are gone")
        let pruned = try await db.document(withID: "p", revision: revisions[0])
        XCTAssertNil(pruned)
        // The pruned revisions are missing to a peer, the kept ones are not.
        let diff = try await db.missingRevisions([(id: "p", revisions: [revisions[0], revisions[19]])])
        XCTAssertEqual(diff.first?.missing, [revisions[0]])
    }

    /// A limit lowered after the history grew applies at the next compaction, as CouchDB's does
    /// (CouchDB 3.3.3's own rev_stemming test: 6 revisions, the limit set to 5, compact → 5).
    func testCompactionStemsToALoweredLimit() async throws {
        let db = try await makeDatabase(self)
        var doc = try await db.save(Document(id: "s", body: ["n": 0]))
        for n in 1..<8 {
            doc["n"] = .integer(n)
            doc = try await db.save(doc)
        }
        try await db.setRevisionsLimit(5)
        await XCTAssertEqualAsync(try await db.revisionTree(ofDocumentWithID: "s")?.count, 8, "not before compaction")
        _ = try await db.compact()
        await XCTAssertEqualAsync(try await db.revisionTree(ofDocumentWithID: "s")?.count, 5)
        await XCTAssertEqualAsync(try await db.document(withID: "s", includeRevisionHistory: true)?.revisionHistory?.count, 4)
        await XCTAssertEqualAsync(try await db.document(withID: "s")?["n"], 7)
    }

    /// By default only leaves keep a body: an edit drops its parent's body (and attachment references)
    /// at once, on the winning branch and on a losing one, while conflicts keep theirs.
    func testByDefaultOnlyLeavesKeepBodies() async throws {
        let db = try await makeDatabase(self)
        var doc = try await db.save(Document(id: "d", body: ["v": 1]))
        let first = doc.revision!
        doc["v"] = 2
        doc = try await db.save(doc)
        let oldBody = try await db.document(withID: "d", revision: first)
        XCTAssertNil(oldBody, "the ancestor's body is gone without compaction")
        XCTAssertEqual(try storedBodies(db, "d"), 0)
        let history = try await db.document(withID: "d", includeRevisionHistory: true)
        XCTAssertEqual(history?.revisionHistory, [first], "the history itself is kept")

        // A conflict from a peer keeps its body. Editing that losing branch drops its parent's body and
        // makes it the winner (generation 3), so the former winner's body moves into revs.
        var branch = Document(id: "d", revision: RevisionID("2-0000"), body: ["v": "branch"])
        branch.revisionHistory = [first]
        _ = try await db.insertRevisions([branch])
        XCTAssertEqual(try storedBodies(db, "d"), 1)
        var loser = try await db.document(withID: "d", revision: RevisionID("2-0000"))!
        loser["v"] = "branch edited"
        let edited = try await db.save(loser)
        XCTAssertEqual(try storedBodies(db, "d"), 1, "only the former winner, now a conflict, is in revs")
        let gone = try await db.document(withID: "d", revision: RevisionID("2-0000"))
        XCTAssertNil(gone)
        let winner = try await db.document(withID: "d", includeConflicts: true)!
        XCTAssertEqual(winner.revision, edited.revision)
        XCTAssertEqual(winner.string(forKey: "v"), "branch edited")
        XCTAssertEqual(winner.conflicts, [doc.revision!])
        let conflictBody = try await db.document(withID: "d", revision: doc.revision)
        XCTAssertEqual(conflictBody?.int(forKey: "v"), 2)

        // Resolving by deleting the conflict leaves a tombstone leaf; compaction finds nothing to drop.
        try await db.delete(doc)
        XCTAssertEqual(try storedBodies(db, "d"), 1, "the tombstone leaf's body")
        let dropped = try await db.compact()
        XCTAssertEqual(dropped, 0)
        let resolved = try await db.document(withID: "d", includeConflicts: true)!
        XCTAssertEqual(resolved.conflicts, [])
        XCTAssertEqual(resolved.string(forKey: "v"), "branch edited")
    }

    func testCompactionKeepsLeavesAndDropsAncestors() async throws {
        let db = try await makeDatabase(self) { $0.keepsAncestorBodies = true }
        var doc = try await db.save(Document(id: "c", body: ["v": 1]))
        let first = doc.revision!
        doc["v"] = 2
        doc = try await db.save(doc)
        // A conflicting branch from a peer, and a deleted branch.
        var branch = Document(id: "c", revision: RevisionID("2-0000"), body: ["v": "branch"])
        branch.revisionHistory = [first]
        var deleted = try Document(json: #"{"_id":"c","_rev":"3-dead","_deleted":true,"_revisions":{"start":3,"ids":["dead","beef"]}}"#)
        deleted.revisionHistory = [RevisionID("2-beef")!]
        _ = try await db.insertRevisions([branch, deleted])
        doc["v"] = 3
        doc = try await db.save(doc)

        let dropped = try await db.compact()
        XCTAssertEqual(dropped, 2, "revision 1 and our revision 2")
        let tree = try await db.revisionTree(ofDocumentWithID: "c")!
        for leaf in tree.leaves {
            let body = try await db.document(withID: "c", revision: leaf.revision)
            XCTAssertNotNil(body, "leaf \(leaf.revision) must survive compaction")
        }
        let ancestor = try await db.document(withID: "c", revision: first)
        XCTAssertNil(ancestor)
        let winner = try await db.document(withID: "c", includeConflicts: true)!
        XCTAssertEqual(winner.int(forKey: "v"), 3)
        XCTAssertEqual(winner.conflicts, [RevisionID("2-0000")!])
        let again = try await db.compact()
        XCTAssertEqual(again, 0)
    }

    func testPurgeRemovesEverything() async throws {
        let db = try await makeDatabase(self)
        var doc = Document(id: "secret", body: ["pin": 1234])
        doc.attachments["a"] = Attachment(data: Data("unique content".utf8), contentType: "text/plain")
        doc = try await db.save(doc)
        doc["pin"] = 4321
        _ = try await db.save(doc)
        _ = try await db.save(Document(id: "other", body: [:]))
        let before = await db.updateSequence

        let purged = try await db.purge(documentIDs: ["secret", "never-existed"])
        XCTAssertEqual(purged, ["secret"])
        let gone = try await db.document(withID: "secret")
        XCTAssertNil(gone)
        let tree = try await db.revisionTree(ofDocumentWithID: "secret")
        XCTAssertNil(tree)
        let changes = try await db.changes().changes
        XCTAssertEqual(changes.map(\.id), ["other"])
        XCTAssertEqual(try storedBodies(db, "secret"), 0)
        XCTAssertEqual(try db.readNow { try $0.scalarInt("SELECT count(*) FROM attachments") }, 0)
        let after = await db.updateSequence
        XCTAssertEqual(after, before + 1, "a purge takes a sequence so that indexes notice it")
        // The id is free again, starting a fresh history.
        let fresh = try await db.save(Document(id: "secret", body: [:]))
        XCTAssertEqual(fresh.revision?.generation, 1)
    }

    func testLocalDocuments() async throws {
        let db = try await makeDatabase(self)
        let r1 = try await db.saveLocalDocument(withID: "_local/checkpoint", body: ["seq": 10])
        XCTAssertEqual(r1.description, "0-1")
        let fetched = try await db.localDocument(withID: "checkpoint")
        XCTAssertEqual(fetched?.body["seq"], 10)
        XCTAssertEqual(fetched?.revision, r1)
        await assertThrowsDocStoreError(.conflict) { try await db.saveLocalDocument(withID: "checkpoint", body: ["seq": 11]) }
        await assertThrowsDocStoreError(.conflict) {
            try await db.saveLocalDocument(withID: "checkpoint", body: ["seq": 11], revision: RevisionID("1-a")!)
        }
        let r2 = try await db.saveLocalDocument(withID: "checkpoint", body: ["seq": 20], revision: r1)
        XCTAssertEqual(r2.description, "0-2")
        await assertThrowsDocStoreError(.invalidDocument) { try await db.saveLocalDocument(withID: "x", body: ["_bad": 1]) }
        await assertThrowsDocStoreError(.invalidDocumentID) { try await db.saveLocalDocument(withID: "_local/", body: [:]) }

        // Local documents are not documents: not in the feed, not counted, not listed.
        let changes = try await db.changes().changes
        XCTAssertTrue(changes.isEmpty)
        let info = try await db.info()
        XCTAssertEqual(info.documentCount, 0)
        XCTAssertEqual(info.updateSequence, 0)

        await assertThrowsDocStoreError(.conflict) { try await db.deleteLocalDocument(withID: "checkpoint", revision: r1) }
        try await db.deleteLocalDocument(withID: "checkpoint", revision: r2)
        let deleted = try await db.localDocument(withID: "checkpoint")
        XCTAssertNil(deleted)
        await assertThrowsDocStoreError(.notFound) { try await db.deleteLocalDocument(withID: "checkpoint", revision: r2) }
    }

    func testAllDocumentsOptions() async throws {
        let db = try await makeDatabase(self)
        for id in ["a", "b", "c", "d", "e", "B"] { _ = try await db.save(Document(id: id, body: ["id": .string(id)])) }
        let c = try await db.document(withID: "c")!
        try await db.delete(c)

        let all = try await db.allDocuments()
        XCTAssertEqual(all.rows.map(\.id), ["B", "a", "b", "d", "e"], "raw byte order: uppercase first")
        XCTAssertEqual(all.totalRows, 5)
        XCTAssertEqual(all.offset, 0)
        XCTAssertNil(all.rows[0].document)

        let range = try await db.allDocuments(AllDocumentsQuery(startKey: "a", endKey: "d", includeDocuments: true))
        XCTAssertEqual(range.rows.map(\.id), ["a", "b", "d"])
        XCTAssertEqual(range.offset, 1)
        XCTAssertEqual(range.rows.map { $0.document?.string(forKey: "id") }, ["a", "b", "d"])
        let exclusive = try await db.allDocuments(AllDocumentsQuery(startKey: "a", endKey: "d", inclusiveEnd: false))
        XCTAssertEqual(exclusive.rows.map(\.id), ["a", "b"])
        let descending = try await db.allDocuments(AllDocumentsQuery(startKey: "d", endKey: "a", descending: true))
        XCTAssertEqual(descending.rows.map(\.id), ["d", "b", "a"])
        XCTAssertEqual(descending.offset, 1)
        let paged = try await db.allDocuments(AllDocumentsQuery(limit: 2, skip: 1))
        XCTAssertEqual(paged.rows.map(\.id), ["a", "b"])
        XCTAssertEqual(paged.offset, 1)

        let keyed = try await db.allDocuments(AllDocumentsQuery(keys: ["e", "zzz", "c", "a"], includeDocuments: true))
        XCTAssertEqual(keyed.rows.map(\.id), ["e", "zzz", "c", "a"])
        XCTAssertEqual(keyed.rows[1].error, "not_found")
        XCTAssertEqual(keyed.rows[2].isDeleted, true)
        XCTAssertNil(keyed.rows[2].document)
        XCTAssertEqual(keyed.rows[3].document?.id, "a")
        await assertThrowsDocStoreError(.badRequest) { try await db.allDocuments(AllDocumentsQuery(skip: -1)) }
    }
}
