@testable import DocStore
import Foundation
import XCTest

final class DatabaseCRUDTests: XCTestCase {
    func testSaveCreatesThenUpdates() async throws {
        let db = try await makeDatabase(self)
        var doc: Document = ["name": "Ada", "langs": ["en", "fr"]]
        doc = try await db.save(doc)
        XCTAssertEqual(doc.id.count, 32, "generated ids are 32 hex digits like CouchDB's")
        XCTAssertEqual(doc.revision?.generation, 1)
        XCTAssertEqual(doc.revision?.digest.count, 32)
        XCTAssertEqual(doc.sequence, 1)

        let fetched = try await db.document(withID: doc.id)
        XCTAssertEqual(fetched?.body, doc.body)
        XCTAssertEqual(fetched?.revision, doc.revision)

        doc["name"] = "Ada Lovelace"
        let updated = try await db.save(doc)
        XCTAssertEqual(updated.revision?.generation, 2)
        XCTAssertEqual(updated.sequence, 2)
        let again = try await db.document(withID: doc.id)
        XCTAssertEqual(again?.string(forKey: "name"), "Ada Lovelace")
        XCTAssertEqual(again?.revision, updated.revision)
        XCTAssertEqual(again?.createDate, fetched?.createDate)
        XCTAssertGreaterThanOrEqual(again!.lastChange!, fetched!.lastChange!)
    }

    func testStaleRevisionIsAConflict() async throws {
        let db = try await makeDatabase(self)
        let v1 = try await db.save(Document(id: "doc", body: ["n": 1]))
        var edit = v1
        edit["n"] = 2
        _ = try await db.save(edit)
        var stale = v1
        stale["n"] = 3
        let error = await assertThrowsDocStoreError(.conflict) { try await db.save(stale) }
        XCTAssertEqual(error?.couchDBError, "conflict")
        XCTAssertEqual(error?.httpStatus, 409)
        // With put, no revision for an existing document is a conflict as in CouchDB; a new document may
        // name the revision it descends from, as in CouchDB 3.3.3 — recorded as an ancestor it never had.
        await assertThrowsDocStoreError(.conflict) { try await db.put(Document(id: "doc", body: ["n": 4])) }
        let descendant = try await db.save(Document(id: "nope", revision: RevisionID("1-abc"), body: [:]))
        XCTAssertEqual(descendant.revision?.generation, 2)
        let tree = try await db.revisionTree(ofDocumentWithID: "nope")
        XCTAssertEqual(tree?.contains(RevisionID("1-abc")!), true)
        let ancestor = try await db.document(withID: "nope", revision: RevisionID("1-abc"))
        XCTAssertNil(ancestor, "no body for an ancestor the database never had")
        let current = try await db.document(withID: "doc")
        XCTAssertEqual(current?.int(forKey: "n"), 2)
        XCTAssertEqual(current?.revision?.generation, 2)
    }

    func testAddAndUpdatePolicies() async throws {
        let db = try await makeDatabase(self)
        let created = try await db.add(Document(id: "a", body: ["v": 1]))
        let error = await assertThrowsDocStoreError(.conflict) { try await db.add(Document(id: "a", body: ["v": 2])) }
        XCTAssertEqual(error?.reason, "Document already exists")
        await assertThrowsDocStoreError(.notFound) { try await db.update(Document(id: "missing", body: ["v": 1])) }
        var edit = created
        edit["v"] = 2
        let updated = try await db.update(edit)
        XCTAssertEqual(updated.revision?.generation, 2)
        // After deletion, update fails and add recreates.
        try await db.delete(updated)
        await assertThrowsDocStoreError(.notFound) { try await db.update(updated) }
        let recreated = try await db.add(Document(id: "a", body: ["v": 3]))
        XCTAssertEqual(recreated.revision?.generation, 4, "recreate extends the tombstone branch")
    }

    func testDeleteAndRecreate() async throws {
        let db = try await makeDatabase(self) { $0.keepsAncestorBodies = true }
        let doc = try await db.save(Document(id: "x", body: ["k": "v"]))
        let tombstone = try await db.delete(doc)
        XCTAssertEqual(tombstone.generation, 2)
        let afterDelete = try await db.document(withID: "x")
        XCTAssertNil(afterDelete)
        let explicit = try await db.document(withID: "x", revision: tombstone)
        XCTAssertEqual(explicit?.isDeleted, true)
        let old = try await db.document(withID: "x", revision: doc.revision)
        XCTAssertEqual(old?.string(forKey: "k"), "v", "ancestor bodies stay until compaction")

        await assertThrowsDocStoreError(.notFound) { try await db.delete(id: "x", revision: tombstone) }
        await assertThrowsDocStoreError(.notFound) { try await db.delete(id: "never", revision: RevisionID("1-a")!) }
        await assertThrowsDocStoreError(.conflict) { try await db.delete(Document(id: "x")) }

        let recreated = try await db.save(Document(id: "x", body: ["k": "again"]))
        XCTAssertEqual(recreated.revision?.generation, 3)
        let fetched = try await db.document(withID: "x")
        XCTAssertEqual(fetched?.string(forKey: "k"), "again")
        let changes = try await db.changes().changes
        XCTAssertEqual(changes.map(\.id), ["x"])
        XCTAssertEqual(changes.first?.isDeleted, false)
    }

    func testInvalidIDsAreRejected() async throws {
        let db = try await makeDatabase(self)
        for id in ["", "_foo", "_design/", "_local/x", "_"] {
            await assertThrowsDocStoreError(.invalidDocumentID) { try await db.save(Document(id: id, body: ["a": 1])) }
        }
        let info = try await db.info()
        XCTAssertEqual(info.documentCount, 0)
        XCTAssertEqual(info.updateSequence, 0)
        // Design documents are documents, as in CouchDB (Mango indexes live in them).
        let design = try await db.save(Document(id: "_design/views", body: ["language": "query"]))
        XCTAssertEqual(design.revision?.generation, 1)
    }

    func testReservedBodyMembersAndNonFiniteNumbersAreRejected() async throws {
        let db = try await makeDatabase(self)
        var doc = Document(id: "d")
        doc["_secret"] = 1
        let error = await assertThrowsDocStoreError(.invalidDocument) { try await db.save(doc) }
        XCTAssertEqual(error?.couchDBError, "doc_validation")
        await assertThrowsDocStoreError(.invalidDocument) { try await db.save(Document(json: #"{"_id":"e","_foo":1}"#)) }
        await assertThrowsDocStoreError(.invalidJSON) { try await db.save(Document(id: "n", body: ["x": .double(.nan)])) }
        let none = try await db.document(withID: "d")
        XCTAssertNil(none)
        // The state CouchDB's replicator writes into `_replicator` documents is accepted anywhere, as
        // CouchDB does, so those documents replicate; a near miss is not.
        let state = try await db.save(Document(json: #"{"_id":"r","source":"a","_replication_state":"completed","_replication_state_time":"2026-11-24T12:53:01Z","_replication_stats":{"docs_written":3},"_replication_id":"x","_replication_state_reason":"r"}"#))
        let stored = try await db.document(withID: state.id)
        XCTAssertEqual(stored?["_replication_stats"]?["docs_written"], 3)
        await assertThrowsDocStoreError(.invalidDocument) { try await db.save(Document(json: #"{"_id":"s","_replication_states":"x"}"#)) }
    }

    func testIDsAreExactByteStrings() async throws {
        let db = try await makeDatabase(self)
        let nfc = "caf\u{00E9}"
        let nfd = "cafe\u{0301}"
        XCTAssertEqual(nfc, nfd, "Swift's String == merges them…")
        _ = try await db.save(Document(id: nfc, body: ["form": "NFC"]))
        _ = try await db.save(Document(id: nfd, body: ["form": "NFD"]))  // …but they are two documents
        let a = try await db.document(withID: nfc)
        let b = try await db.document(withID: nfd)
        XCTAssertEqual(a?.string(forKey: "form"), "NFC")
        XCTAssertEqual(b?.string(forKey: "form"), "NFD")
        let all = try await db.allDocuments()
        XCTAssertEqual(all.rows.count, 2)
        XCTAssertEqual(Set(all.rows.map { Array($0.id.utf8) }), [Array(nfc.utf8), Array(nfd.utf8)])
    }

    func testDocumentsWithIDsSkipsMissingAndDeleted() async throws {
        let db = try await makeDatabase(self)
        for id in ["a", "b", "c"] { _ = try await db.save(Document(id: id, body: ["id": .string(id)])) }
        let b = try await db.document(withID: "b")!
        try await db.delete(b)
        let docs = try await db.documents(withIDs: ["c", "missing", "b", "a"])
        XCTAssertEqual(docs.map(\.id), ["c", "a"])
        XCTAssertEqual(docs.map { $0.string(forKey: "id") }, ["c", "a"])
    }

    func testRevisionsAreDeterministic() async throws {
        let db1 = try await makeDatabase(self, name: "one")
        let db2 = try await makeDatabase(self, name: "two")
        let doc = Document(id: "same", body: ["a": 1, "b": [true, nil]])
        let r1 = try await db1.save(doc)
        let r2 = try await db2.save(doc)
        XCTAssertEqual(r1.revision, r2.revision)
        var different = doc
        different["a"] = 2
        let r3 = try await makeDatabase(self, name: "three").save(different)
        XCTAssertNotEqual(r3.revision, r1.revision)
    }

    /// Generated ids (and multipart boundaries, session ids) are 32 lowercase hexadecimal digits, as
    /// CouchDB's random uuids, and do not repeat; shorter and longer ones have the length asked for.
    func testGeneratedIDsAreRandomHexadecimal() async throws {
        let db = try await makeDatabase(self)
        let saved = try await db.save(Document(body: ["x": 1]))
        var seen: Set<String> = [saved.id]
        for _ in 0..<2_000 { seen.insert(RandomHex.make()) }
        XCTAssertEqual(seen.count, 2_001)
        let hex = Set("0123456789abcdef")
        for id in seen {
            XCTAssertEqual(id.count, 32, id)
            XCTAssertTrue(id.allSatisfy(hex.contains), id)
        }
        XCTAssertEqual([0, 1, 15, 16, 17, 26, 70].map { RandomHex.make(count: $0).count }, [0, 1, 15, 16, 17, 26, 70])
        // Every digit turns up in every position (a digit stuck at one value would not).
        let samples = (0..<400).map { _ in Array(RandomHex.make(count: 40)) }
        for position in 0..<40 { XCTAssertEqual(Set(samples.map { $0[position] }).count, 16, "position \(position)") }
    }

    func testCustomIDFactoryAndDateFormat() async throws {
        let counter = Counter()
        let standard = Document.idFactory
        Document.idFactory = { "doc-\(counter.next())" }
        defer { Document.idFactory = standard }
        let db = try await makeDatabase(self)
        let created = Document(body: ["x": 1])
        XCTAssertEqual(created.id, "doc-1", "the id is made when the document is")
        let a = try await db.save(created)
        let b = try await db.save(["y": 2])
        XCTAssertEqual([a.id, b.id], ["doc-1", "doc-2"])
        Document.idFactory = standard
        let standardID = Document().id
        XCTAssertEqual(standardID.count, 32)
        XCTAssertTrue(standardID.allSatisfy(\.isHexDigit))

        var dated = Document(id: "dated")
        let when = Date(timeIntervalSince1970: 1_700_000_000.25)
        dated.setDate(when, forKey: "when")
        XCTAssertEqual(dated.string(forKey: "when"), "2023-11-14T22:13:20.250Z")
        let saved = try await db.save(dated)
        let fetched = try await db.document(withID: saved.id)
        XCTAssertEqual(fetched?.date(forKey: "when")?.timeIntervalSince1970 ?? 0, when.timeIntervalSince1970, accuracy: 0.001)
    }

    func testCodableDocuments() async throws {
        struct Invoice: Codable, Equatable {
            var _id: String?
            var number: Int
            var customer: String
            var issued: Date
            var lines: [Double]
        }
        let db = try await makeDatabase(self)
        let issued = Date(timeIntervalSince1970: 1_600_000_000)
        let invoice = Invoice(_id: "inv-7", number: 7, customer: "ACME", issued: issued, lines: [1.5, 2])
        let saved = try await db.save(try Document(from: invoice))
        XCTAssertEqual(saved.id, "inv-7")
        XCTAssertNil(saved.body["_id"])
        let fetched = try await db.document(withID: "inv-7")!
        let decoded = try fetched.decode(as: Invoice.self)
        XCTAssertEqual(decoded, invoice)
        XCTAssertEqual(fetched.string(forKey: "issued"), "2020-09-13T12:26:40.000Z")
    }

    func testACodableTypeCarryingItsRevisionSavesAgain() async throws {
        struct Note: Codable, Equatable {
            var _id: String
            var _rev: String?
            var text: String
        }
        let db = try await makeDatabase(self)
        let first = try await db.save(try Document(from: Note(_id: "n", _rev: nil, text: "one")))
        var note = try first.decode(as: Note.self)
        XCTAssertEqual(note._rev, first.revision?.description)
        note.text = "two"
        let document = try Document(from: note)
        XCTAssertEqual(document.revision, first.revision, "_rev becomes the revision")
        XCTAssertNil(document.body["_rev"], "and leaves the body")
        let second = try await db.save(document)
        XCTAssertEqual(second.revision?.generation, 2)
        XCTAssertEqual(try second.decode(as: Note.self), Note(_id: "n", _rev: second.revision?.description, text: "two"))
        // Saving the stale copy again is a conflict, as for any document.
        do {
            _ = try await db.save(document)
            XCTFail("expected a conflict")
        } catch let error as DocStoreError {
            XCTAssertEqual(error.code, .conflict)
        }
        struct Bad: Encodable { var _rev = "not a revision" }
        XCTAssertThrowsError(try Document(id: "b", from: Bad())) { error in
            XCTAssertEqual((error as? DocStoreError)?.code, .invalidRevision)
        }
    }

    func testOpeningAnOpenFileAgainNeedsTheSameSettings() async throws {
        let directory = try makeTemporaryDirectory(self)
        var configuration = DatabaseConfiguration(name: "shared", directory: directory)
        configuration.keepsAncestorBodies = true
        let db = try await Database.open(configuration)
        let same = try await Database.open(configuration)
        XCTAssertTrue(db === same, "the same settings give the same object")
        var variants: [DatabaseConfiguration] = []
        var plain = configuration
        plain.keepsAncestorBodies = false
        variants.append(plain)
        var limited = configuration
        limited.revisionsLimit = 10
        variants.append(limited)
        var durable = configuration
        durable.durability = .full
        variants.append(durable)
        var dated = configuration
        dated.dateFormat = .secondsSince1970
        variants.append(dated)
        var indexed = configuration
        indexed.indexes = [IndexDefinition(name: "app/v", version: "1") { _, _ in }]
        variants.append(indexed)
        for variant in variants {
            do {
                _ = try await Database.open(variant)
                XCTFail("opened with other settings")
            } catch let error as DocStoreError {
                XCTAssertEqual(error.code, .configurationMismatch)
            }
        }
        XCTAssertTrue(db.configuration.keepsAncestorBodies, "the open database keeps its settings")
        await db.close()
        let reopened = try await Database.open(plain)
        XCTAssertFalse(reopened.configuration.keepsAncestorBodies, "once closed, any settings")
        await reopened.close()
    }

    func testTypeChannelsAndDictionaryInit() async throws {
        var doc = try Document(id: "t", ["count": 3, "ratio": 0.5, "flag": true, "tags": ["a"], "nested": ["k": NSNull()]])
        doc.type = "invoice"
        doc.channels = ["eu", "finance"]
        XCTAssertEqual(doc["type"], "invoice")
        XCTAssertEqual(doc["channels"], ["eu", "finance"])
        XCTAssertEqual(doc.int(forKey: "count"), 3)
        XCTAssertEqual(doc.bool(forKey: "flag"), true)
        XCTAssertEqual(doc["nested"]?["k"], .null)
        doc["channels"] = "single"
        XCTAssertEqual(doc.channels, ["single"])
        doc.channels = []
        XCTAssertNil(doc["channels"])
        XCTAssertThrowsError(try Document(["bad": NSObject()]))
        XCTAssertEqual(Array(doc.map(\.key)), ["count", "flag", "nested", "ratio", "tags", "type"])
    }

    func testDocumentJSONForm() throws {
        let doc = try Document(json: """
            {"_id":"j","_rev":"3-c","_revisions":{"start":3,"ids":["c","b","a"]},"b":1,"a":[2],
             "_attachments":{"f.txt":{"content_type":"text/plain","data":"aGVsbG8="}},"_conflicts":["2-x"]}
            """)
        XCTAssertEqual(doc.id, "j")
        XCTAssertEqual(doc.revision, RevisionID("3-c"))
        XCTAssertEqual(doc.revisionHistory, [RevisionID("2-b")!, RevisionID("1-a")!])
        XCTAssertEqual(doc.body.keys, ["b", "a"])
        XCTAssertEqual(doc.attachments["f.txt"]?.data, Data("hello".utf8))
        XCTAssertEqual(doc.attachments["f.txt"]?.digest, "md5-XUFAKrxLKna5cZ2REBfFkg==")
        let json = doc.json(revisions: true)
        XCTAssertEqual(json["_id"], "j")
        XCTAssertEqual(json["_revisions"]?["ids"], ["c", "b", "a"])
        XCTAssertEqual(json["_attachments"]?["f.txt"]?["stub"], true)
        XCTAssertEqual(doc.json(attachmentData: true)["_attachments"]?["f.txt"]?["data"], "aGVsbG8=")

        assertThrowsDocStoreErrorSync(.invalidDocument) { try Document(json: "[1]") }
        assertThrowsDocStoreErrorSync(.invalidJSON) { try Document(json: "{") }
        assertThrowsDocStoreErrorSync(.invalidRevision) { try Document(json: #"{"_rev":"abc"}"#) }
        assertThrowsDocStoreErrorSync(.invalidDocumentID) { try Document(json: #"{"_id":5}"#) }
        // `_revisions` names the revision whatever `_rev` says (CouchDB 3.3.3 stores `2-c` for both).
        let disagreeing = try Document(json: #"{"_rev":"3-c","_revisions":{"start":2,"ids":["c","a"]}}"#)
        XCTAssertEqual(disagreeing.revision, RevisionID("2-c"))
        XCTAssertEqual(disagreeing.revisionHistory, [RevisionID("1-a")!])
        XCTAssertEqual(try Document(json: #"{"_revisions":{"start":2,"ids":["c","a"]},"_rev":"bad"}"#).revision, RevisionID("2-c"))
        // CouchDB keeps `"_rev": "1-"` (PouchDB sends it) as it is.
        XCTAssertEqual(try Document(json: #"{"_rev":"1-"}"#).revision?.description, "1-")
        assertThrowsDocStoreErrorSync(.invalidRevision) {
            try Document(json: #"{"_revisions":{"start":1,"ids":["c","b"]}}"#)
        }
        assertThrowsDocStoreErrorSync(.invalidAttachment) { try Document(json: #"{"_attachments":{"a":{"data":"!!"}}}"#) }
    }
}

/// A thread-safe counter for id factories in tests.
final class Counter: Sendable {
    private let storage = Locked(0)
    func next() -> Int { storage.withLock { $0 += 1; return $0 } }
    func decrement() { storage.withLock { $0 -= 1 } }
    var count: Int { storage.withLock { $0 } }
}


final class DateFormatTests: XCTestCase {
    func testDatabaseDateFormatIsUsedForCodable() async throws {
        struct Event: Codable, Equatable { var name: String; var at: Date }
        let db = try await makeDatabase(self) { config in
            config.dateFormat = .custom(format: { "epoch:\(Int($0.timeIntervalSince1970))" },
                                        parse: { $0.hasPrefix("epoch:") ? Double($0.dropFirst(6)).map(Date.init(timeIntervalSince1970:)) : nil })
        }
        let event = Event(name: "launch", at: Date(timeIntervalSince1970: 1_000))
        let saved = try await db.save(try db.makeDocument(from: event, id: "e"))
        XCTAssertEqual(saved.string(forKey: "at"), "epoch:1000")
        let fetched = try await db.document(withID: "e")!
        XCTAssertEqual(try db.decode(fetched, as: Event.self), event)
        XCTAssertThrowsError(try fetched.decode(as: Event.self), "the default ISO 8601 format cannot read it")
    }
}
