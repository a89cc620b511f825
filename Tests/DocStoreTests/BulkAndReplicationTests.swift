@testable import DocStore
import Foundation
import XCTest

final class BulkSaveTests: XCTestCase {
    func testOneBadDocumentAmongGoodOnes() async throws {
        let db = try await makeDatabase(self)
        let existing = try await db.save(Document(id: "taken", body: ["v": 1]))
        var reserved = Document(id: "reserved")
        reserved["_bad"] = true
        let batch: [Document] = [
            Document(id: "g1", body: ["n": 1]),
            Document(id: "_illegal", body: ["n": 2]),
            Document(id: "g2", body: ["n": 3]),
            Document(id: "taken", body: ["v": 2]),      // no revision: conflict
            reserved,
            Document(body: ["generated": true]),
        ]
        let results = try await db.put(each: batch)   // CouchDB's _bulk_docs rules
        XCTAssertEqual(results.count, 6)
        XCTAssertTrue(results[0].isSuccess)
        XCTAssertEqual(results[1].error?.code, .invalidDocumentID)
        XCTAssertEqual(results[1].id, "_illegal")
        XCTAssertTrue(results[2].isSuccess)
        XCTAssertEqual(results[3].error?.code, .conflict)
        XCTAssertEqual(results[4].error?.code, .invalidDocument)
        XCTAssertTrue(results[5].isSuccess)
        XCTAssertEqual(results[5].id.count, 32)

        let landed = try await db.documents(withIDs: ["g1", "g2", results[5].id, "taken"])
        XCTAssertEqual(landed.map(\.id), ["g1", "g2", results[5].id, "taken"])
        XCTAssertEqual(landed[3].revision, existing.revision, "the conflicting write changed nothing")
        let info = try await db.info()
        XCTAssertEqual(info.documentCount, 4)
        XCTAssertEqual(info.updateSequence, 4)
    }

    /// A batch large enough for the bodies to be prepared on another thread gives every document
    /// the same outcome — revision, body, error — as saving the documents one at a time, whatever
    /// the parent the writer decides (new, recreated after deletion, updated, stale).
    func testLargeBatchMatchesOneByOneSaves() async throws {
        let count = 785
        XCTAssertTrue(BodyPipeline.isWorthwhile(for: count))
        XCTAssertGreaterThan(count / BodyPipeline.chunkSize, BodyPipeline.lookahead + 1, "more chunks than are prepared ahead")
        let bulk = try await makeDatabase(self, name: "bulk")
        let single = try await makeDatabase(self, name: "single")
        var batch: [Document] = []
        for db in [bulk, single] {
            let updated = try await db.save(Document(id: "d00010", body: ["v": 0]))
            let deleted = try await db.save(Document(id: "d00020", body: ["v": 0]))
            try await db.delete(deleted)
            _ = try await db.save(Document(id: "d00030", body: ["v": 0]))
            if batch.isEmpty {
                for n in 0..<count {
                    var document = Document(id: String(format: "d%05d", n), body: ["n": .integer(n), "x": .double(Double(n) / 7)])
                    switch n {
                    case 10: document.revision = updated.revision           // an update of a live document
                    case 30: document.revision = RevisionID("1-00000000000000000000000000000000")  // stale
                    case 300, 700: document["_reserved"] = true              // invalid body
                    case 400: document.attachments["a.txt"] = Attachment(data: Data("n400".utf8), contentType: "text/plain")
                    case 500: document["nan"] = .double(.nan)                // cannot be encoded
                    default: break
                    }
                    batch.append(document)
                }
            }
        }
        let bulkResults = try await bulk.save(each: batch)
        var singleResults: [SaveResult] = []
        for document in batch { singleResults += try await single.save(each: [document]) }

        XCTAssertEqual(bulkResults.count, count)
        for (n, (a, b)) in zip(bulkResults, singleResults).enumerated() {
            XCTAssertEqual(a.revision, b.revision, "revision of document \(n)")
            XCTAssertEqual(a.error?.code, b.error?.code, "outcome of document \(n)")
        }
        XCTAssertEqual(bulkResults[10].revision?.generation, 2)
        XCTAssertEqual(bulkResults[20].revision?.generation, 3, "recreated on top of the tombstone")
        XCTAssertEqual(bulkResults[30].error?.code, .conflict)
        XCTAssertEqual(bulkResults[300].error?.code, .invalidDocument)
        XCTAssertEqual(bulkResults[500].error?.code, .invalidJSON)
        let ids = batch.map(\.id)
        let fromBulk = try await bulk.documents(withIDs: ids)
        let fromSingle = try await single.documents(withIDs: ids)
        XCTAssertEqual(fromBulk.count, count - 3, "all but the three invalid bodies (d00030 exists from before)")
        XCTAssertTrue(fromBulk.map(\.body) == fromSingle.map(\.body), "stored bodies differ")
        XCTAssertTrue(fromBulk.map(\.revision) == fromSingle.map(\.revision), "stored revisions differ")
        XCTAssertEqual(fromBulk.first { $0.id == "d00400" }?.attachments["a.txt"]?.length, 4)
    }

    func testSameIDTwiceInOneBatch() async throws {
        let db = try await makeDatabase(self)
        let results = try await db.put(each: [Document(id: "dup", body: ["n": 1]), Document(id: "dup", body: ["n": 2])])
        XCTAssertTrue(results[0].isSuccess)
        XCTAssertEqual(results[1].error?.code, .conflict)
        let doc = try await db.document(withID: "dup")
        XCTAssertEqual(doc?.int(forKey: "n"), 1)
    }

    func testBulkDeletionsAndUpdatesFromJSON() async throws {
        let db = try await makeDatabase(self)
        let a = try await db.save(Document(id: "a", body: ["v": 1]))
        let b = try await db.save(Document(id: "b", body: ["v": 1]))
        let results = try await db.save(each: [
            try Document(json: #"{"_id":"a","_rev":"\#(a.revision!)","_deleted":true}"#),
            try Document(json: #"{"_id":"b","_rev":"\#(b.revision!)","v":2}"#),
        ])
        XCTAssertTrue(results.allSatisfy(\.isSuccess))
        let gone = try await db.document(withID: "a")
        XCTAssertNil(gone)
        let bNow = try await db.document(withID: "b")
        XCTAssertEqual(bNow?.int(forKey: "v"), 2)
    }

    func testEmptyBatch() async throws {
        let db = try await makeDatabase(self)
        let results = try await db.save([Document]())
        XCTAssertTrue(results.isEmpty)
    }
}

final class ReplicatedInsertTests: XCTestCase {
    private func replicated(_ id: String, _ history: [String], deleted: Bool = false, body: JSONObject = [:]) throws -> Document {
        let revisions = history.map { RevisionID($0)! }
        var doc = Document(id: id, revision: revisions[0], body: body)
        doc.revisionHistory = Array(revisions.dropFirst())
        if deleted {
            var json = doc.json(revisions: true)
            json["_deleted"] = true
            doc = try Document(json: json)
        }
        return doc
    }

    func testBranchingHistoriesGiveCouchDBWinnerAndConflicts() async throws {
        let db = try await makeDatabase(self)
        let results = try await db.insertRevisions([
            try replicated("doc", ["2-b", "1-a"], body: ["side": "left"]),
            try replicated("doc", ["3-d", "2-c", "1-a"], body: ["side": "right"]),
            try replicated("doc", ["2-a0", "1-a"], body: ["side": "low"]),
        ])
        XCTAssertTrue(results.allSatisfy(\.isSuccess), "\(results.map(\.error))")
        let winner = try await db.document(withID: "doc", includeConflicts: true)
        XCTAssertEqual(winner?.revision, RevisionID("3-d"))
        XCTAssertEqual(winner?.string(forKey: "side"), "right")
        XCTAssertEqual(winner?.conflicts, [RevisionID("2-b")!, RevisionID("2-a0")!], "best first, as CouchDB lists them")
        let loser = try await db.document(withID: "doc", revision: RevisionID("2-b"))
        XCTAssertEqual(loser?.string(forKey: "side"), "left")
        let interior = try await db.document(withID: "doc", revision: RevisionID("2-c"))
        XCTAssertNil(interior, "a revision known only from history has no body")

        let change = try await db.changes().changes.first
        XCTAssertEqual(change?.revision, RevisionID("3-d"))
        XCTAssertEqual(change?.leafRevisions, [RevisionID("3-d")!, RevisionID("2-b")!, RevisionID("2-a0")!])

        // The winner is deleted on the other side: the next best live leaf wins.
        _ = try await db.insertRevisions([try replicated("doc", ["4-e", "3-d", "2-c", "1-a"], deleted: true)])
        let after = try await db.document(withID: "doc", includeConflicts: true)
        XCTAssertEqual(after?.revision, RevisionID("2-b"))
        XCTAssertEqual(after?.string(forKey: "side"), "left")
        XCTAssertEqual(after?.conflicts, [RevisionID("2-a0")!])
        let tree = try await db.revisionTree(ofDocumentWithID: "doc")
        XCTAssertEqual(tree?.deletedConflicts, [RevisionID("4-e")!])
    }

    func testResolvingAConflictByDeletingTheLoser() async throws {
        let db = try await makeDatabase(self)
        let local = try await db.save(Document(id: "c", body: ["v": "mine"]))
        var theirs = Document(id: "c", revision: RevisionID(generation: 2, digest: "ffffffffffffffffffffffffffffffff"), body: ["v": "theirs"])
        theirs.revisionHistory = [local.revision!]
        var mine = local
        mine["v"] = "mine2"
        let mine2 = try await db.save(mine)
        _ = try await db.insertRevisions([theirs])
        let current = try await db.document(withID: "c", includeConflicts: true)!
        XCTAssertEqual(current.revision, RevisionID("2-ffffffffffffffffffffffffffffffff"), "higher hash wins among generation 2 (by its 16 bytes, as CouchDB)")
        XCTAssertEqual(current.conflicts, [mine2.revision!])
        // Keep "theirs" by deleting our leaf (updating a non-winning leaf is allowed).
        try await db.delete(id: "c", revision: mine2.revision!)
        let resolved = try await db.document(withID: "c", includeConflicts: true)!
        XCTAssertEqual(resolved.conflicts, [])
        XCTAssertEqual(resolved.string(forKey: "v"), "theirs")
    }

    func testKnownRevisionsAreAcceptedWithoutChange() async throws {
        let db = try await makeDatabase(self)
        let doc = try replicated("r", ["2-b", "1-a"], body: ["x": 1])
        _ = try await db.insertRevisions([doc])
        let sequence = await db.updateSequence
        let again = try await db.insertRevisions([doc, try replicated("r", ["1-a"])])
        XCTAssertTrue(again.allSatisfy(\.isSuccess))
        let after = await db.updateSequence
        XCTAssertEqual(after, sequence, "nothing new, no new sequence")
    }

    func testMissingRevisions() async throws {
        let db = try await makeDatabase(self)
        _ = try await db.insertRevisions([try replicated("m", ["2-b", "1-a"])])
        let diff = try await db.missingRevisions([
            (id: "m", revisions: [RevisionID("2-b")!, RevisionID("4-d")!, RevisionID("3-c")!, RevisionID("1-a")!]),
            (id: "new", revisions: [RevisionID("2-y")!, RevisionID("1-z")!]),
            (id: "complete", revisions: []),
            // As CouchDB 3.3.3: a revision it has, offered twice, is answered missing once.
            (id: "m", revisions: [RevisionID("2-b")!, RevisionID("2-b")!]),
        ])
        XCTAssertEqual(diff, [
            RevisionDifference(id: "m", missing: [RevisionID("3-c")!, RevisionID("4-d")!], possibleAncestors: [RevisionID("2-b")!]),
            RevisionDifference(id: "new", missing: [RevisionID("2-y")!, RevisionID("1-z")!], possibleAncestors: []),
            RevisionDifference(id: "m", missing: [RevisionID("2-b")!], possibleAncestors: []),
        ])
    }

    func testReplicatedRequiresRevisionAndAllowsDesignDocuments() async throws {
        let db = try await makeDatabase(self)
        let results = try await db.insertRevisions([
            Document(id: "norev", body: [:]),
            try replicated("_design/app", ["1-a"], body: ["language": "javascript"]),
            try replicated("_bad", ["1-a"]),
        ])
        XCTAssertEqual(results[0].error?.code, .invalidRevision)
        XCTAssertTrue(results[1].isSuccess)
        XCTAssertEqual(results[2].error?.code, .invalidDocumentID)
    }

    func testReplicatedWritesAreAnnouncedAsReplication() async throws {
        let db = try await makeDatabase(self)
        let stream = db.observeChanges()
        _ = try await db.insertRevisions([try replicated("p", ["1-a"], body: ["k": 1])])
        _ = try await db.save(Document(id: "l", body: ["k": 2]))
        var iterator = stream.makeAsyncIterator()
        let first = await iterator.next()
        let second = await iterator.next()
        XCTAssertEqual(first?.map(\.source), [.replication])
        XCTAssertEqual(first?.map(\.id), ["p"])
        XCTAssertEqual(second?.map(\.source), [.local])
    }
}

final class RevisionsWithHistoryTests: XCTestCase {
    /// The bulk read a replication source uses gives, request by request, what reading each
    /// revision with its history alone gives: winners, conflicts, tombstones, and nil for what is
    /// not there.
    func testBulkReadMatchesSingleReads() async throws {
        let db = try await makeDatabase(self)
        var requests: [(id: String, revision: RevisionID)] = []
        for n in 0..<84 {
            var document = try await db.save(Document(id: String(format: "h%03d", n), body: ["n": .integer(n)]))
            document["n"] = .integer(n + 1000)
            document = try await db.save(document)
            requests.append((document.id, document.revision!))
        }
        var conflict = Document(id: "h001", revision: RevisionID("2-ffffffffffffffffffffffffffffffff"), body: ["side": "b"])
        conflict.revisionHistory = [try await db.revisionTree(ofDocumentWithID: "h001")!.history(of: requests[1].revision)[1]]
        _ = try await db.insertRevisions([conflict])
        let tombstone = try await db.delete(id: "h002", revision: requests[2].revision)
        let superseded = requests[2].revision
        let extra: [(id: String, revision: RevisionID)] = [
            ("h001", conflict.revision!), ("h002", tombstone), ("h002", superseded),
            ("nope", RevisionID("1-00000000000000000000000000000000")!),
            ("h003", RevisionID("9-00000000000000000000000000000000")!),
        ]
        requests += extra

        let bulk = try await db.documentsWithHistory(requests)
        XCTAssertEqual(bulk.count, requests.count)
        for (request, document) in zip(requests, bulk) {
            let single = try await db.document(withID: request.id, revision: request.revision, includeRevisionHistory: true)
            XCTAssertEqual(document?.revision, single?.revision, "\(request)")
            XCTAssertEqual(document?.body, single?.body, "\(request)")
            XCTAssertEqual(document?.isDeleted, single?.isDeleted, "\(request)")
            XCTAssertEqual(document?.revisionHistory, single?.revisionHistory, "\(request)")
        }
        XCTAssertEqual(bulk[0]?.revisionHistory?.count, 1)
        XCTAssertEqual(bulk[requests.count - 5]?.body["side"], "b", "the conflicting leaf")
        XCTAssertEqual(bulk[requests.count - 4]?.isDeleted, true, "the tombstone")
        XCTAssertNil(bulk[requests.count - 2], "missing document")
        XCTAssertNil(bulk[requests.count - 1], "missing revision")
    }
}

