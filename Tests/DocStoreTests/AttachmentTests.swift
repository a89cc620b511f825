@testable import DocStore
import Foundation
import XCTest

final class AttachmentTests: XCTestCase {
    private func storedContentCount(_ db: Database) throws -> Int64 {
        try db.readNow { try $0.scalarInt("SELECT count(*) FROM attachments") ?? -1 }
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
                       ["content_type": "text/plain", "revpos": 1, "digest": "md5-XUFAKrxLKna5cZ2REBfFkg==", "length": 5, "stub": true])
        await assertThrowsDocStoreError(.notFound) { try await db.attachmentData(named: "none", documentID: "photo") }

        // Names starting with `_` are CouchDB's: refused, and the document keeps its revision.
        var reserved = fetched
        reserved.attachments["_meta"] = Attachment(data: Data("x".utf8), contentType: "text/plain")
        let error = await assertThrowsDocStoreError(.invalidAttachment) { try await db.save(reserved) }
        XCTAssertEqual(error?.reason, "Attachment name '_meta' starts with prohibited character '_'")
        await XCTAssertEqualAsync(try await db.document(withID: "photo")?.revision, saved.revision)
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
        func check(_ json: String) -> Bool { StoredBody.mayHaveAttachmentStubs(Array(json.utf8)) }
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
        let error = await assertThrowsDocStoreError(.missingStub) { try await db.save(doc) }
        XCTAssertEqual(error?.httpStatus, 412)
        XCTAssertEqual(error?.couchDBError, "missing_stub")
        XCTAssertEqual(error?.reason, "Invalid attachment stub in s for ghost")
    }

    /// As CouchDB: a stub is matched by name with the attachments of the revision the edit replaces —
    /// its digest and length may be absent — and a `revpos`, when given, must be that attachment's.
    func testStubsMatchTheParentRevisionByNameAndRevpos() async throws {
        let db = try await makeDatabase(self)
        var doc = Document(id: "d")
        doc.attachments["a.txt"] = Attachment(data: Data("alpha".utf8), contentType: "text/plain")
        let v1 = try await db.save(doc)

        var bare = try Document(json: #"{"_id":"d","_rev":"\#(v1.revision!)","v":2,"_attachments":{"a.txt":{"stub":true}}}"#)
        let v2 = try await db.save(bare)
        XCTAssertEqual(v2.attachments["a.txt"]?.digest, v1.attachments["a.txt"]?.digest, "filled in from the parent")
        XCTAssertEqual(v2.attachments["a.txt"]?.revpos, 1)
        let data = try await db.attachmentData(named: "a.txt", documentID: "d")
        XCTAssertEqual(data, Data("alpha".utf8))

        bare = try Document(json: #"{"_id":"d","_rev":"\#(v2.revision!)","_attachments":{"a.txt":{"stub":true,"revpos":2}}}"#)
        await assertThrowsDocStoreError(.missingStub) { try await db.save(bare) }
        bare = try Document(json: #"{"_id":"d","_rev":"\#(v2.revision!)","_attachments":{"b.txt":{"stub":true}}}"#)
        await assertThrowsDocStoreError(.missingStub) { try await db.save(bare) }
        // The same content under another name is still a missing stub: names, not digests, identify it.
        bare = try Document(json: #"{"_id":"d","_rev":"\#(v2.revision!)","_attachments":{"b.txt":{"stub":true,"digest":"\#(v1.attachments["a.txt"]!.digest)"}}}"#)
        await assertThrowsDocStoreError(.missingStub) { try await db.save(bare) }
    }

    /// A replicated revision's stubs are matched with the nearest ancestor in its history whose body
    /// the database holds; with no such ancestor every stub is missing (CouchDB's rule, which decides
    /// what a replicator may send as a stub).
    func testReplicatedStubsMatchTheNearestStoredAncestor() async throws {
        let db = try await makeDatabase(self)
        var root = Document(id: "r", revision: RevisionID("1-a"), body: ["v": 1])
        root.attachments["keep.txt"] = Attachment(data: Data("kept".utf8), contentType: "text/plain")
        root.attachments["keep.txt"]!.revpos = 1
        let rootResult = try await db.insertRevisions([root])
        XCTAssertTrue(rootResult[0].isSuccess)

        // 3-c descends from 1-a through 2-b, which this database never saw.
        var child = try Document(json: #"{"_id":"r","_rev":"3-c","_revisions":{"start":3,"ids":["c","b","a"]},"_attachments":{"keep.txt":{"stub":true,"revpos":0}}}"#)
        let wrongRevpos = try await db.insertRevisions([child])
        XCTAssertEqual(wrongRevpos[0].error?.code, .missingStub, "revpos 0 is not the stored revpos")
        child = try Document(json: #"{"_id":"r","_rev":"3-c","_revisions":{"start":3,"ids":["c","b","a"]},"_attachments":{"keep.txt":{"stub":true}}}"#)
        let childResult = try await db.insertRevisions([child])
        XCTAssertTrue(childResult[0].isSuccess)
        let stored = try await db.document(withID: "r")!
        XCTAssertEqual(stored.revision, RevisionID("3-c"))
        let kept = try await db.attachmentData(named: "keep.txt", documentID: "r")
        XCTAssertEqual(kept, Data("kept".utf8))

        // A branch whose history shares nothing with the tree has no ancestor to take stubs from.
        let stranger = try Document(json: #"{"_id":"r","_rev":"2-x","_revisions":{"start":2,"ids":["x","w"]},"_attachments":{"keep.txt":{"stub":true}}}"#)
        let refused = try await db.insertRevisions([stranger])[0]
        XCTAssertEqual(refused.error?.code, .missingStub)
        XCTAssertEqual(refused.error?.reason, "Invalid attachment stub in r for keep.txt")
        // A revision the tree already has is accepted without looking at its stubs, as CouchDB does.
        let again = try await db.insertRevisions([child])
        XCTAssertTrue(again[0].isSuccess)
    }

    func testAttachmentFromFileIsCopiedInChunks() async throws {
        let db = try await makeDatabase(self)
        let directory = try makeTemporaryDirectory(self)
        let file = directory.appendingPathComponent("data.bin")
        let bytes = Data((0..<(3 * AttachmentStorage.chunkSize + 1234)).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 >> 9) })
        try bytes.write(to: file)
        var doc = Document(id: "f")
        doc.attachments["data.bin"] = try Attachment(contentsOf: file, contentType: "application/octet-stream")
        XCTAssertNil(doc.attachments["data.bin"]?.data, "the file is not read into memory")
        XCTAssertEqual(doc.attachments["data.bin"]?.digest, Attachment.digest(of: bytes))
        _ = try await db.save(doc)
        let content = try await db.attachmentData(named: "data.bin", documentID: "f")
        XCTAssertEqual(content, bytes)
        XCTAssertEqual(try db.readNow { try $0.scalarInt("SELECT count(*) FROM attachment_chunks") }, 4)
        XCTAssertThrowsError(try Attachment(contentsOf: directory.appendingPathComponent("missing"), contentType: "x"))

        // A file that changes between the attachment and the save is refused, not stored half-new.
        let small = directory.appendingPathComponent("small.txt")
        try Data("one".utf8).write(to: small)
        var changed = Document(id: "g")
        changed.attachments["small.txt"] = try Attachment(contentsOf: small, contentType: "text/plain")
        try Data("two!".utf8).write(to: small)
        await assertThrowsDocStoreError(.io) { try await db.save(changed) }
        let missing = try await db.document(withID: "g")
        XCTAssertNil(missing)
    }

    /// Bytes as a peer stores them keep the peer's digest when it is theirs, and are refused otherwise.
    func testEncodedDataKeepsAMatchingDigestOnly() async throws {
        let text = Data("text".utf8)
        let gzip = try GzipStream.compress(text)
        let attachment = try Attachment(encodedData: gzip, encoding: .gzip, contentType: "text/plain",
                                        digest: Attachment.digest(of: gzip), length: 4, revpos: 1)
        XCTAssertEqual(attachment.length, 4)
        XCTAssertEqual(attachment.encodedLength, gzip.count)
        XCTAssertEqual(attachment.data, text)
        XCTAssertEqual(attachment.encodedData, gzip)
        XCTAssertThrowsError(try Attachment(encodedData: text, encoding: .identity, contentType: "text/plain",
                                            digest: "md5-peerdigest")) { error in
            XCTAssertEqual((error as? DocStoreError)?.code, .digestMismatch)
            XCTAssertEqual((error as? DocStoreError)?.couchDBError, "content_md5_mismatch")
        }
        XCTAssertThrowsError(try Attachment(encodedData: gzip, encoding: .gzip, contentType: "text/plain", length: 5)) { error in
            XCTAssertEqual((error as? DocStoreError)?.code, .invalidAttachment)
        }
        XCTAssertThrowsError(try Attachment(encodedData: text, encoding: .gzip, contentType: "text/plain")) { error in
            XCTAssertEqual((error as? DocStoreError)?.code, .invalidAttachment, "not gzip data")
        }
    }
}
