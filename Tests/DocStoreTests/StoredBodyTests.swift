@testable import DocStore
import Foundation
import XCTest

/// A document read from the database keeps its body as the stored JSON bytes until a member is read
/// (``JSONObject/init(storedJSON:)``): written out again it is those bytes, and every way of reading
/// it sees what the parsed body would show.
final class StoredBodyTests: XCTestCase {
    /// Bodies with what a writer may get wrong: escapes, non-ASCII, numbers of every kind, nesting,
    /// empty containers, more members than the position table's threshold, a replication state member.
    private let bodies: [JSONObject] = [
        [:],
        ["a": 1],
        ["text": "quote \" backslash \\ tab \t newline \n control \u{01} é 日本 🎉", "slash": "a/b"],
        ["int": 42, "negative": -7, "double": 0.1, "big": .bigInteger("123456789012345678901234567890"),
         "exponent": 1e300, "tiny": .double(Double.leastNonzeroMagnitude), "negativeZero": -0.0, "null": nil, "flags": [true, false]],
        ["nested": ["deeper": ["deepest": [1, [2, [3]], ["k": "v"]]]], "empty": [:], "none": []],
        JSONObject((0..<40).map { ("key\($0)", JSON.integer($0)) }),
        ["_replication_state": "completed", "n": 1],
    ]

    func testStoredBodiesReadAndWriteAsTheirParsedForm() async throws {
        let db = try await makeDatabase(self)
        for (number, body) in bodies.enumerated() {
            let saved = try await db.save(Document(id: "d\(number)", body: body))
            let readFound = try await db.document(withID: "d\(number)")
            let read = try XCTUnwrap(readFound)
            XCTAssertNotNil(read.body.storedJSON, "a body read back stays bytes: \(number)")
            // What the database wrote is what the same body serializes to.
            XCTAssertEqual(read.body.storedJSON, try JSON.object(body).serialized(), "\(number)")

            // Whole documents, as DocServer writes them, are the same bytes whether parsed or not.
            var eager = read
            eager.body = JSONObject(Array(read.body))
            XCTAssertNil(eager.body.storedJSON)
            XCTAssertEqual(try read.json().serialized(), try eager.json().serialized(), "\(number)")
            XCTAssertEqual(try read.json(revisions: true).serialized(), try eager.json(revisions: true).serialized())
            XCTAssertEqual(read.json()["_id"], .string("d\(number)"))
            XCTAssertEqual(read.json()["_rev"], .string(saved.revision!.description))

            // Reading members, iterating, comparing and hashing see the parsed body.
            XCTAssertEqual(read.body, body)
            XCTAssertEqual(read.body.count, body.count)
            XCTAssertEqual(read.body.keys, body.keys)
            for (key, value) in body { XCTAssertEqual(read[key], value, "\(number) \(key)") }
            XCTAssertEqual(Array(read.body).map(\.key), body.keys)
            XCTAssertEqual(read, eager)
            XCTAssertEqual(read.hashValue, eager.hashValue)
            XCTAssertEqual(read.json(), eager.json())
        }
    }

    /// `JSONWriter.writeDocument` (a `_bulk_get` answer's documents) writes what writing the document's
    /// tree gives — a stored body spliced, with every metadata member — and any other document through
    /// its tree.
    func testWritingADocumentEqualsWritingItsTree() async throws {
        let db = try await makeDatabase(self)
        var documents: [Document] = []
        for (number, body) in bodies.enumerated() {
            _ = try await db.save(Document(id: "w\(number) \"é", body: body))
            let read = try await db.document(withID: "w\(number) \"é", includeRevisionHistory: true)
            documents.append(try XCTUnwrap(read))
        }
        // A deleted leaf with a history, a conflict, a hash that is not hex, an attachment.
        _ = try await db.insertRevisions([
            Document(json: #"{"_id":"c","_rev":"2-b","x":1,"_revisions":{"start":2,"ids":["b","a"]}}"#),
            Document(json: #"{"_id":"c","_rev":"2-z","y":2,"_revisions":{"start":2,"ids":["z","a"]}}"#),
            Document(json: #"{"_id":"c","_rev":"3-\"q\\","_deleted":true,"_revisions":{"start":3,"ids":["\"q\\","9","a"]}}"#),
        ])
        let deleted = try await db.document(withID: "c", revision: RevisionID("3-\"q\\"), includeRevisionHistory: true)
        let conflicted = try await db.document(withID: "c", includeConflicts: true)
        documents += [try XCTUnwrap(deleted), try XCTUnwrap(conflicted)]
        var withFile = Document(id: "f", body: ["a": 1])
        withFile.attachments["t.txt"] = Attachment(data: Data("hi".utf8), contentType: "text/plain")
        _ = try await db.save(withFile)
        let file = try await db.document(withID: "f", includeRevisionHistory: true)
        documents.append(try XCTUnwrap(file))
        documents.append(Document(id: "memory", body: ["b": [1, 2]]))
        XCTAssertTrue(documents.contains { $0.isDeleted && $0.revisionHistory?.isEmpty == false && $0.body.storedJSON != nil })
        XCTAssertTrue(documents.contains { !$0.conflicts.isEmpty && $0.body.storedJSON != nil })
        for document in documents {
            for revisions in [false, true] {
                var writer = JSONWriter()
                try writer.writeDocument(document, revisions: revisions)
                XCTAssertEqual(String(decoding: writer.bytes, as: UTF8.self),
                               String(decoding: try document.json(revisions: revisions).serialized(), as: UTF8.self), "\(document.id) \(revisions)")
            }
        }
    }

    /// A change to a stored body (set, remove, add) behaves as on a parsed one, and saves.
    func testChangingAStoredBody() async throws {
        let db = try await makeDatabase(self)
        _ = try await db.save(Document(id: "doc", body: ["a": 1, "b": "two", "c": [3]]))
        let found = try await db.document(withID: "doc")
        var document = try XCTUnwrap(found)
        let untouched = document
        document["b"] = "zwei"
        document["c"] = nil
        document["d"] = ["four": 4]
        XCTAssertNil(document.body.storedJSON)
        XCTAssertEqual(document.body, ["a": 1, "b": "zwei", "d": ["four": 4]])
        XCTAssertEqual(untouched.body, ["a": 1, "b": "two", "c": [3]], "a copy keeps its own body")
        XCTAssertNotNil(untouched.body.storedJSON)
        let saved = try await db.save(document)
        let againFound = try await db.document(withID: "doc")
        let again = try XCTUnwrap(againFound)
        XCTAssertEqual(again.revision, saved.revision)
        XCTAssertEqual(again.body, ["a": 1, "b": "zwei", "d": ["four": 4]])

        // Saved as it was read (a replication between two databases does so), it keeps its bytes.
        let copy = try await makeDatabase(self, name: "copy")
        let results = try await copy.insertRevisions([again])
        XCTAssertTrue(results.allSatisfy(\.isSuccess))
        let copiedFound = try await copy.document(withID: "doc")
        XCTAssertEqual(copiedFound?.body.storedJSON, again.body.storedJSON)
        XCTAssertEqual(copiedFound?.revision, again.revision)
    }

    /// Many threads reading one stored body at once all see it whole (it is parsed once, under a lock).
    func testConcurrentFirstReadsAgree() async throws {
        let db = try await makeDatabase(self)
        let body = JSONObject((0..<50).map { ("field\($0)", JSON.string(String(repeating: "x", count: $0))) })
        _ = try await db.save(Document(id: "shared", body: body))
        for _ in 0..<20 {
            let found = try await db.document(withID: "shared")
            let document = try XCTUnwrap(found)
            let seen = await withTaskGroup(of: Bool.self) { group in
                for index in 0..<8 {
                    group.addTask { document["field\(index * 6)"] == .string(String(repeating: "x", count: index * 6)) && document.body.count == 50 }
                }
                return await group.reduce(true) { $0 && $1 }
            }
            XCTAssertTrue(seen)
        }
    }
}
