import CouchProtocol
@testable import DocStore
import Foundation
import TestSupport
import XCTest

/// Documents parsed with `JSON(parsing:documentDepth:)` keep their bodies as the bytes they came in
/// when those are exactly what DocStore would store, and otherwise read as the tree parser reads them:
/// either way, the same document, the same stored bytes, the same errors.
final class DocumentBytesParsingTests: XCTestCase {
    /// The document both ways; asserts they agree, and returns the one read with `documentDepth`.
    @discardableResult
    private func assertSameDocument(_ text: [UInt8], file: StaticString = #filePath, line: UInt = #line) throws -> Document? {
        let shown = String(decoding: text, as: UTF8.self)
        let tree: Result<Document, Error> = Result { try Document(couchJSON: JSON(parsing: Data(text))) }
        let bytes: Result<Document, Error> = Result { try Document(couchJSON: JSON(parsing: text, documentDepth: 1)) }
        // And inside a `_bulk_get` answer, read straight into a document (`BulkGetAnswer`): invalid
        // JSON fails the answer, a valid object that is no document is that entry's error.
        let answer = Array(#"{"results":[{"id":"x","docs":[{"ok":"#.utf8) + text + Array("}]}]}".utf8)
        let inAnswer: Result<Document, Error> = Result {
            let entries = try BulkGetAnswer(parsing: Data(answer)).results.first?.entries
            switch entries?.first {
            case .document(let document)?: return document
            case .invalid(let error)?: throw error
            default: throw DocStoreError(.badRequest, "no entry")
            }
        }
        switch (tree, inAnswer) {
        case (.success(let expected), .success(let document)):
            XCTAssertEqual(document, expected, shown, file: file, line: line)
            XCTAssertEqual(document.body.storedJSON, (try? bytes.get())?.body.storedJSON, shown, file: file, line: line)
        case (.failure(let expected as DocStoreError), .failure(let error as DocStoreError)):
            if expected.code == .invalidJSON {
                XCTAssertEqual(error.code, .invalidJSON, shown, file: file, line: line)
            } else {
                XCTAssertEqual("\(error)", "\(expected)", shown, file: file, line: line)
            }
        default:
            XCTFail("tree: \(tree), in a _bulk_get answer: \(inAnswer) for \(shown)", file: file, line: line)
        }
        switch (tree, bytes) {
        case (.success(let expected), .success(let document)):
            XCTAssertEqual(document.id, expected.id, shown, file: file, line: line)
            XCTAssertEqual(document.revision, expected.revision, shown, file: file, line: line)
            XCTAssertEqual(document.revisionHistory, expected.revisionHistory, shown, file: file, line: line)
            XCTAssertEqual(document.isDeleted, expected.isDeleted, shown, file: file, line: line)
            XCTAssertEqual(document.attachments, expected.attachments, shown, file: file, line: line)
            XCTAssertEqual(document.body, expected.body, shown, file: file, line: line)
            XCTAssertEqual(try JSON.object(document.body).serialized(), try JSON.object(expected.body).serialized(), shown, file: file, line: line)
            return document
        case (.failure(let expected), .failure(let error)):
            XCTAssertEqual("\(error)", "\(expected)", shown, file: file, line: line)
        default:
            XCTFail("tree: \(tree), bytes: \(bytes) for \(shown)", file: file, line: line)
        }
        return nil
    }

    func testCanonicalBodiesStayBytesAndReadAsTheirTree() throws {
        var generator = SplitMix64(seed: 0xB0D1_E5)
        var kept = 0
        for number in 0..<400 {
            var object = RandomJSON.object(&generator)
            // Reserved members are the parser's to reject or keep; these documents have none in the body.
            for key in object.keys where key.hasPrefix("_") { object.removeValue(forKey: key) }
            let body = try JSON.object(object).serialized()
            let text = Array(#"{"_id":"doc-\#(number)","_rev":"1-abc""#.utf8) + (object.isEmpty ? [] : [UInt8(ascii: ",")]) + body.dropFirst()
            let document = try XCTUnwrap(try assertSameDocument(text))
            // A body whose keys are all plain ASCII is in the writer's form and stays bytes.
            let plainKeys = object.keys.allSatisfy { $0.utf8.allSatisfy { $0 >= 0x20 && $0 < 0x80 && $0 != 0x22 && $0 != 0x5C } }
            if plainKeys && !containsNonPlainKey(.object(object)) {
                XCTAssertEqual(document.body.storedJSON, body, "kept as bytes: \(String(decoding: text, as: UTF8.self))")
                kept += 1
            }
        }
        XCTAssertGreaterThan(kept, 60, "a fair share of random bodies have plain keys only")
    }

    private func containsNonPlainKey(_ value: JSON) -> Bool {
        switch value {
        case .object(let object):
            return object.contains { key, member in
                !key.utf8.allSatisfy { $0 >= 0x20 && $0 < 0x80 && $0 != 0x22 && $0 != 0x5C } || containsNonPlainKey(member)
            }
        case .array(let elements): return elements.contains(where: containsNonPlainKey)
        default: return false
        }
    }

    /// A new revision's digest computed from a stored body's text (never parsed) is the one its tree
    /// gives: random bodies, strings long enough to bypass the buffer, bodies larger than it, escapes,
    /// non-ASCII text and every kind of number, under no parent and under one, live and deleted.
    func testStoredBodiesHashAsTheirTree() throws {
        var generator = SplitMix64(seed: 0x4A54_1D)
        var bodies: [JSONObject] = (0..<500).map { _ in RandomJSON.object(&generator) }
        let long = String(repeating: "lorem ipsum ", count: 200)
        bodies.append(["text": .string(long), "more": .string(long + "é"), "n": 1])
        bodies.append(JSONObject((0..<300).map { ("k\($0)", JSON.array([.string("v\($0)"), .double(Double($0) / 7), .object([:])])) }))
        bodies.append(try XCTUnwrap(try JSON(parsing: #"{"s":"q\"b\\n\nr\rt\tb\bf\f\u0001\u001f é 日本 😀","i":-12,"big":123456789012345678901234,"d":0.1,"e":1e+300,"t":5e-324,"z":-0.0,"n":null,"a":[true,false,[],{}],"o":{}}"#).objectValue))
        let parent = RevisionID(generation: 3, digest: "0123456789abcdef0123456789abcdef")
        var stored = 0
        for (number, body) in bodies.enumerated() {
            let text = try JSON.object(body).serialized()
            let kept = JSONObject(storedJSON: text)
            XCTAssertNotNil(kept.storedJSON)
            let parentOfThis: RevisionID? = number % 2 == 0 ? nil : parent
            let isDeleted = number % 5 == 0
            XCTAssertEqual(RevisionHash.digest(parent: parentOfThis, isDeleted: isDeleted, body: kept, attachments: [:]),
                           RevisionHash.digest(parent: parentOfThis, isDeleted: isDeleted, body: body, attachments: [:]),
                           String(decoding: text, as: UTF8.self))
            stored += 1
        }
        XCTAssertEqual(stored, bodies.count)
        // Text the walker cannot read falls back to the tree (here: whitespace, which no stored body has).
        let spaced = JSONObject(storedJSON: Array(#"{"a": [1, 2]}"#.utf8))
        XCTAssertEqual(RevisionHash.digest(parent: nil, isDeleted: false, body: spaced, attachments: [:]),
                       RevisionHash.digest(parent: nil, isDeleted: false, body: ["a": [1, 2]], attachments: [:]))
    }

    /// `Document(json:)` keeps a body in DocStore's form as text, and saving it neither parses it nor
    /// changes the revision it gets (CouchDB's, as ``RevisionHashTests`` checks).
    func testDocumentsReadFromTextAreSavedWithoutTheirTree() async throws {
        let text = #"{"_id":"t","name":"Ada","tags":["x","y"],"n":1.5,"o":{"k":null}}"#
        let document = try Document(json: text)
        XCTAssertEqual(document.body.storedJSON, Array(#"{"name":"Ada","tags":["x","y"],"n":1.5,"o":{"k":null}}"#.utf8))
        let db = try await makeDatabase(self)
        let saved = try await db.save(document)
        let fromTree = try await db.save(Document(id: "u", body: ["name": "Ada", "tags": ["x", "y"], "n": 1.5, "o": ["k": nil]]))
        XCTAssertEqual(saved.revision, fromTree.revision)
        XCTAssertTrue(document.body.isUnparsedStoredForm, "saving read no member of the stored body")
        let read = try await db.document(withID: "t")
        XCTAssertEqual(read?["tags"], ["x", "y"])
    }

    func testTextOutsideTheWritersFormIsReadAsATree() throws {
        let texts = [
            #"{"_id":"a", "x":1}"#,                       // whitespace
            #"{"_id":"a","x":"a\/b"}"#,                    // an escape the writer does not write
            #"{"_id":"a","x":"\u0041"}"#,
            #"{"_id":"a","x":"\u000a"}"#,                  // \n written long
            #"{"_id":"a","x":"\u001F"}"#,                  // upper-case hex
            #"{"_id":"a","x":1.50}"#,                      // not the shortest double
            #"{"_id":"a","x":1E2}"#,
            #"{"_id":"a","x":-0}"#,
            #"{"_id":"a","x":{"k" :1}}"#,
            #"{"_id":"a","é":1}"#,                         // a key that is not plain ASCII
            #"{"_id":"a","x\n":1}"#,
            #"{"_id":"a","_foo":1}"#,                      // an unknown reserved member stays in the body
            #"{"_id":"a","_replication_state":"completed","x":1}"#,
        ]
        for text in texts {
            let document = try XCTUnwrap(try assertSameDocument(Array(text.utf8)), text)
            XCTAssertNil(document.body.storedJSON, text)
        }
        // Canonical texts with every escape the writer does write, non-ASCII text and numbers of each kind.
        let canonical = #"{"_id":"b","s":"q\"b\\n\nr\rt\tb\bf\f\u0001\u001f é 日本 😀","i":-12,"big":123456789012345678901234,"d":0.1,"e":1e+300,"t":5e-324,"z":-0.0,"n":null,"a":[true,false,[],{}]}"#
        let document = try XCTUnwrap(try assertSameDocument(Array(canonical.utf8)))
        XCTAssertNotNil(document.body.storedJSON)
    }

    func testMetadataIsReadWhereverItStands() throws {
        let text = #"{"a":1,"_rev":"2-b","_attachments":{"f.txt":{"stub":true,"content_type":"text/plain","digest":"md5-AAAAAAAAAAAAAAAAAAAAAA==","length":3,"revpos":1}},"b":[1,2],"_id":"m","_revisions":{"start":2,"ids":["b","a"]},"_deleted":true,"_conflicts":["1-x"],"c":"x"}"#
        let document = try XCTUnwrap(try assertSameDocument(Array(text.utf8)))
        XCTAssertEqual(document.body.storedJSON, Array(#"{"a":1,"b":[1,2],"c":"x"}"#.utf8))
        XCTAssertEqual(document.id, "m")
        XCTAssertEqual(document.revision?.description, "2-b")
        XCTAssertEqual(document.revisionHistory?.map(\.description), ["1-a"])
        XCTAssertTrue(document.isDeleted)
        XCTAssertEqual(document.attachments["f.txt"]?.length, 3)
    }

    /// Every damaged form of a canonical document fails, or reads, exactly as the tree parser says.
    func testDamagedTextFailsAsTheTreeParserSays() throws {
        var generator = SplitMix64(seed: 0xDA4A_6ED)
        let base = Array(#"{"_id":"d","_rev":"1-a","name":"Zürich \"q\" \u0001","n":[1,2.5,-3,{"k":null}],"o":{"x":true,"y":"z"},"e":{}}"#.utf8)
        let alphabet = Array(#"{}[]",:\ 0123456789.-eEtrufalsn_xu"#.utf8) + [0xC3, 0xA9, 0xFF, 0x00]
        var failures = 0
        for _ in 0..<3000 {
            var text = base
            for _ in 0..<(1 + Int(generator.next() % 3)) {
                let position = Int(generator.next() % UInt64(text.count))
                switch generator.next() % 3 {
                case 0: text.remove(at: position)
                case 1: text.insert(alphabet[Int(generator.next() % UInt64(alphabet.count))], at: position)
                default: text[position] = alphabet[Int(generator.next() % UInt64(alphabet.count))]
                }
            }
            if (try? JSON(parsing: Data(text))) == nil { failures += 1 }
            try assertSameDocument(text)
        }
        XCTAssertGreaterThan(failures, 1000, "most damage is invalid JSON")
    }

    func testDuplicateKeysAndDepthLimitFailAsBefore() throws {
        try assertSameDocument(Array(#"{"_id":"a","x":1,"x":2}"#.utf8))
        try assertSameDocument(Array(#"{"_id":"a","_id":"b"}"#.utf8))
        try assertSameDocument(Array(#"{"_id":"a","o":{"k":1,"k":2}}"#.utf8))
        let deep = String(repeating: "[", count: JSONParser.maximumDepth) + String(repeating: "]", count: JSONParser.maximumDepth)
        try assertSameDocument(Array(#"{"_id":"a","deep":\#(deep)}"#.utf8))
        // 128 keys: past every small-object path, each key distinct.
        let many = (0..<128).map { #""k\#($0)":\#($0)"# }.joined(separator: ",")
        let document = try XCTUnwrap(try assertSameDocument(Array(#"{"_id":"a",\#(many)}"#.utf8)))
        XCTAssertEqual(document.body.count, 128)
        XCTAssertEqual(document.body["k127"], 127)
    }

    /// Only objects at the given depth are documents: in a `_bulk_docs` request, the documents, not
    /// the request; in `_bulk_get`'s answer, the `ok` documents.
    func testDocumentsAtADepthInsideLargerAnswers() throws {
        let request = #"{"docs":[{"_id":"a","_rev":"1-x","v":1},{"_id":"b","w":[2]}],"new_edits":false}"#
        let parsed = try JSON(parsing: Array(request.utf8), documentDepth: 3)
        XCTAssertEqual(parsed, try JSON(parsing: request))
        XCTAssertNil(parsed.objectValue?.storedJSON)
        let documents = try XCTUnwrap(parsed["docs"]?.arrayValue).map { try Document(json: $0) }
        XCTAssertEqual(documents.map(\.id), ["a", "b"])
        XCTAssertEqual(documents.map { $0.body.storedJSON.map { String(decoding: $0, as: UTF8.self) } }, [#"{"v":1}"#, #"{"w":[2]}"#])

        let answer = #"{"results":[{"id":"a","docs":[{"ok":{"_id":"a","_rev":"1-x","v":1}},{"error":{"id":"a","rev":"2-y","error":"not_found","reason":"missing"}}]}]}"#
        let read = try JSON(parsing: Array(answer.utf8), documentDepth: 6)
        XCTAssertEqual(read, try JSON(parsing: answer))
        let entries = try XCTUnwrap(read["results"]?[0]?["docs"]?.arrayValue)
        XCTAssertNotNil(entries[0]["ok"]?.objectValue.flatMap { try? Document(json: .object($0)) }?.body.storedJSON)
        XCTAssertEqual(entries[1]["error"]?["error"], "not_found")
    }

    /// A `_bulk_get` answer read straight into documents: its envelope as the tree parser reads it
    /// (any member order, whitespace, members it does not know), each entry a document, a document's
    /// error or the answer's error object.
    func testBulkGetAnswersReadStraightIntoDocuments() throws {
        let answer = """
            { "results" : [ {"docs":[{"ok":{"_id":"a","_rev":"1-x","v":1}},{"error":{"id":"a","rev":"2-y","error":"not_found","reason":"missing"}}],
              "id":"a","extra":[1,{"k":2}]}, {"id":null,"docs":[]}, {"id":"b","docs":[{"ok":{"_id":"b","_rev":5}},{"ok":"text"},
              {"ok":{"_id":"b", "_rev":"1-z","w":[2]}}]} ], "other":true }
            """
        let read = try BulkGetAnswer(parsing: Data(answer.utf8))
        XCTAssertEqual(read.results.map(\.id), ["a", nil, "b"])
        XCTAssertEqual(read.results.map(\.entries.count), [2, 0, 3])
        guard case .document(let a)? = read.results.first?.entries.first else { return XCTFail("\(read.results)") }
        XCTAssertEqual(a.id, "a")
        XCTAssertEqual(a.revision?.description, "1-x")
        XCTAssertEqual(a.body.storedJSON, Array(#"{"v":1}"#.utf8))
        guard case .error(let missing) = read.results[0].entries[1] else { return XCTFail("\(read.results[0])") }
        XCTAssertEqual(missing, ["id": "a", "rev": "2-y", "error": "not_found", "reason": "missing"])
        guard case .invalid(let badRevision) = read.results[2].entries[0], case .invalid(let notObject) = read.results[2].entries[1],
              case .document(let b) = read.results[2].entries[2] else { return XCTFail("\(read.results[2])") }
        XCTAssertEqual(badRevision.code, .invalidRevision)
        XCTAssertEqual(notObject.code, .invalidDocument)
        XCTAssertEqual(b.body, ["w": [2]])
        XCTAssertNil(b.body.storedJSON, "text outside the writer's form is read as a tree")

        for bad in [#"{"results":[{"id":"a","docs":[{"ok":{"_id":"a",}}]}]}"#,   // invalid JSON in a document
                    #"{"results":[{"id":"a","docs":[{}]}]}"#,                     // neither ok nor error
                    #"{"results":[{"id":"a","id":"b","docs":[]}]}"#,              // a key twice
                    #"{"results":[]} x"#,                                         // data after the answer
                    #"{"rows":[]}"#, #"[]"#, #"{"results":{}}"#, ""] {
            XCTAssertThrowsError(try BulkGetAnswer(parsing: Data(bad.utf8)), bad)
        }
        XCTAssertEqual(try BulkGetAnswer(parsing: Data(#"{"results":[]}"#.utf8)).results.count, 0)
    }

    /// A document that arrived as bytes is saved as those bytes, with the revision the tree would get.
    func testBytesDocumentsSaveAsTheirTrees() async throws {
        let db = try await makeDatabase(self)
        let other = try await makeDatabase(self)
        let text = #"{"_id":"s","name":"Kraków","n":[1,2.5],"o":{"k":"v"}}"#
        let fromBytes = try Document(json: JSON(parsing: Array(text.utf8), documentDepth: 1))
        XCTAssertNotNil(fromBytes.body.storedJSON)
        let fromTree = try Document(json: JSON(parsing: text))
        let saved = try await db.save(fromBytes)
        let savedTree = try await other.save(fromTree)
        XCTAssertEqual(saved.revision, savedTree.revision, "the same revision id either way")
        let readFound = try await db.document(withID: "s")
        let read = try XCTUnwrap(readFound)
        XCTAssertEqual(read.body, fromTree.body)
        XCTAssertEqual(read.body.storedJSON, try JSON.object(fromTree.body).serialized())
    }
}
