@testable import DocStore
import Foundation
import XCTest

final class AttachmentTests: XCTestCase {
    private func storedContentCount(_ db: Database) throws -> Int64 {
        try db.read { try $0.scalarInt("SELECT count(*) FROM attachments") ?? -1 }
    }

    func testSaveFetchAndStubs() async throws {
        let db = try await makeDatabase(self)
        let bytes = Data((0..<5000).map { UInt8($0 % 251) })
        var doc = Document(id: "photo")
        doc.attachments["image.bin"] = Attachment(data: bytes, contentType: "application/octet-stream")
        doc.attachments["note.txt"] = Attachment(data: Data("hello".utf8), contentType: "text/plain")
        let saved = try await db.save(doc)
        XCTAssertEqual(saved.attachments["note.txt"]?.isStub, true)
        XCTAssertEqual(saved.attachments["note.txt"]?.revpos, 1)
        XCTAssertEqual(saved.attachments["note.txt"]?.digest, "md5-XUFAKrxLKna5cZ2REBfFkg==")

        let fetched = try await db.document(withID: "photo")!
        let stub = try XCTUnwrap(fetched.attachments["image.bin"])
        XCTAssertTrue(stub.isStub)
        XCTAssertEqual(stub.length, 5000)
        XCTAssertEqual(stub.contentType, "application/octet-stream")
        let content = try await db.attachmentData(stub)
        XCTAssertEqual(content, bytes)
        let byName = try await db.attachmentData(named: "note.txt", documentID: "photo")
        XCTAssertEqual(byName, Data("hello".utf8))
        XCTAssertEqual(fetched.json()["_attachments"]?["note.txt"],
                       ["content_type": "text/plain", "digest": "md5-XUFAKrxLKna5cZ2REBfFkg==", "length": 5, "revpos": 1, "stub": true])
        await assertThrowsDocStoreError(.notFound) { try await db.attachmentData(named: "none", documentID: "photo") }
    }

    func testContentIsStoredOncePerDigest() async throws {
        let db = try await makeDatabase(self)
        let shared = Data(repeating: 7, count: 10_000)
        for id in ["a", "b", "c"] {
            var doc = Document(id: id)
            doc.attachments["same"] = Attachment(data: shared, contentType: "application/x-test")
            doc.attachments["other-name"] = Attachment(data: shared, contentType: "application/x-test")
            _ = try await db.save(doc)
        }
        XCTAssertEqual(try storedContentCount(db), 1)
    }

    func testStubsCarryAttachmentsAcrossUpdatesUntilRemovedAndCompacted() async throws {
        let db = try await makeDatabase(self) { $0.keepsAncestorBodies = true }
        var doc = Document(id: "d", body: ["v": 1])
        doc.attachments["keep.txt"] = Attachment(data: Data("keep".utf8), contentType: "text/plain")
        doc.attachments["drop.txt"] = Attachment(data: Data("drop".utf8), contentType: "text/plain")
        let v1 = try await db.save(doc)

        var edit = try await db.document(withID: "d")!
        edit["v"] = 2
        let v2 = try await db.save(edit)
        XCTAssertEqual(v2.attachments["keep.txt"]?.revpos, 1, "unchanged content keeps its revpos")
        let keepData = try await db.attachmentData(named: "keep.txt", documentID: "d")
        XCTAssertEqual(keepData, Data("keep".utf8))

        // Replace one attachment's content, remove the other.
        var edit2 = try await db.document(withID: "d")!
        edit2.attachments["keep.txt"] = Attachment(data: Data("kept, changed".utf8), contentType: "text/plain")
        edit2.attachments["drop.txt"] = nil
        let v3 = try await db.save(edit2)
        XCTAssertEqual(v3.attachments["keep.txt"]?.revpos, 3)
        let current = try await db.document(withID: "d")!
        XCTAssertEqual(Set(current.attachments.keys), ["keep.txt"])
        let oldDrop = try await db.attachmentData(named: "drop.txt", documentID: "d", revision: v1.revision)
        XCTAssertEqual(oldDrop, Data("drop".utf8), "old revisions keep their attachments until compaction")
        XCTAssertEqual(try storedContentCount(db), 3)

        let dropped = try await db.compact()
        XCTAssertEqual(dropped, 2, "the bodies of revisions 1 and 2")
        XCTAssertEqual(try storedContentCount(db), 1, "only the current content remains")
        let kept = try await db.attachmentData(named: "keep.txt", documentID: "d")
        XCTAssertEqual(kept, Data("kept, changed".utf8))
    }

    /// Without kept ancestor bodies an update drops the old revision's attachment references at once,
    /// so the next compaction frees content no leaf uses.
    func testReplacedContentIsFreedByCompactionByDefault() async throws {
        let db = try await makeDatabase(self)
        var doc = Document(id: "d", body: ["v": 1])
        doc.attachments["a.txt"] = Attachment(data: Data("first".utf8), contentType: "text/plain")
        _ = try await db.save(doc)
        var edit = try await db.document(withID: "d")!
        edit.attachments["a.txt"] = Attachment(data: Data("second".utf8), contentType: "text/plain")
        _ = try await db.save(edit)
        XCTAssertEqual(try storedContentCount(db), 2, "contents stay until compaction")
        let dropped = try await db.compact()
        XCTAssertEqual(dropped, 0, "no ancestor body was left to drop")
        XCTAssertEqual(try storedContentCount(db), 1)
        let current = try await db.attachmentData(named: "a.txt", documentID: "d")
        XCTAssertEqual(current, Data("second".utf8))
    }

    /// The check that lets an update skip deleting attachment references of a winner that had none:
    /// it may say yes wrongly (a nested `_attachments` key), never no wrongly.
    func testAttachmentStubCheckOnStoredBodies() throws {
        func check(_ json: String) -> Bool { DatabaseWriter.mayHaveAttachmentStubs(Array(json.utf8)) }
        XCTAssertTrue(check(#"{"v":1,"_attachments":{"a.txt":{"stub":true}}}"#))
        XCTAssertTrue(check(#"{"_attachments":{}}"#))
        XCTAssertFalse(check(#"{"v":1}"#))
        XCTAssertFalse(check(#"{}"#))
        XCTAssertFalse(check(#"{"note":"the key \"_attachments\": is escaped in strings","_attachments_x":1}"#))
        XCTAssertTrue(check(#"{"inner":{"_attachments":1}}"#), "a nested key only costs a needless delete")
    }

    func testUnknownStubIsRejected() async throws {
        let db = try await makeDatabase(self)
        var doc = Document(id: "s")
        doc.attachments["ghost"] = Attachment(stubWithContentType: "text/plain", length: 3, digest: "md5-nothere", revpos: 1)
        let error = await assertThrowsDocStoreError(.invalidAttachment) { try await db.save(doc) }
        XCTAssertEqual(error?.httpStatus, 412)
        XCTAssertEqual(error?.couchDBError, "missing_stub")
    }

    func testAttachmentFromFileAndReplicatedDigest() async throws {
        let db = try await makeDatabase(self)
        let directory = try makeTemporaryDirectory(self)
        let file = directory.appendingPathComponent("data.csv")
        try Data("a,b\n1,2\n".utf8).write(to: file)
        var doc = Document(id: "f")
        doc.attachments["data.csv"] = try Attachment(contentsOf: file, contentType: "text/csv")
        _ = try await db.save(doc)
        let content = try await db.attachmentData(named: "data.csv", documentID: "f")
        XCTAssertEqual(content, Data("a,b\n1,2\n".utf8))
        XCTAssertThrowsError(try Attachment(contentsOf: directory.appendingPathComponent("missing"), contentType: "x"))

        // A replicated attachment keeps the digest and revpos the peer sent (CouchDB's digest of gzip'd bytes).
        var replicated = Document(id: "r", revision: RevisionID("2-b"), body: [:])
        replicated.revisionHistory = [RevisionID("1-a")!]
        replicated.attachments["t.txt"] = Attachment(data: Data("text".utf8), contentType: "text/plain",
                                                     digest: "md5-peerdigest", revpos: 1)
        let results = try await db.insertRevisions([replicated])
        XCTAssertTrue(results[0].isSuccess)
        let fetched = try await db.document(withID: "r")!
        XCTAssertEqual(fetched.attachments["t.txt"]?.digest, "md5-peerdigest")
        XCTAssertEqual(fetched.attachments["t.txt"]?.revpos, 1)
    }
}
