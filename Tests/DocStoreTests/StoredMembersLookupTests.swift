@testable import DocStore
import TestSupport
import XCTest

/// One member of a stored body is found by scanning its bytes, without parsing the others
/// (``StoredMembers/scannedValue(forKey:)``): what it finds must be what the parsed body holds.
final class StoredMembersLookupTests: XCTestCase {
    /// Keys chosen to trip a scanner: prefixes of each other, escapes a key must be compared after,
    /// non-ASCII spellings, brackets and quotes inside strings.
    private static let keys = ["a", "ab", "abc", "b", "é", "e\u{301}", "日本", "q\"uote", "back\\slash", "tab\t", "ctl\u{01}",
                               "{", "}", "[", "]", ",", ":", "", "_x", "score", "address"]
    private static let strings = ["", "x", "\"", "\\", "}", "]", "{\"a\":1}", "[1,2]", "a,b", "é日本🎉", "line\nbreak", "\u{1f}",
                                  "\\\"", "ends with backslash \\"]

    private static func randomValue(_ depth: Int, _ generator: inout SplitMix64) -> JSON {
        switch generator.next() % (depth > 3 ? 6 : 8) {
        case 0: return .integer(Int(truncatingIfNeeded: generator.next()) >> Int(generator.next() % 64))
        case 1: return .double(Double(Int64(bitPattern: generator.next() % 2_000_000)) / 7 - 100_000)
        case 2: return .string(strings[Int(generator.next() % UInt64(strings.count))])
        case 3: return [.null, .bool(true), .bool(false), .bigInteger("123456789012345678901234567890")][Int(generator.next() % 4)]
        case 4: return .array([])
        case 5: return .object([:])
        case 6: return .array((0..<Int(generator.next() % 4)).map { _ in randomValue(depth + 1, &generator) })
        default: return .object(randomObject(depth + 1, &generator))
        }
    }

    private static func randomObject(_ depth: Int, _ generator: inout SplitMix64) -> JSONObject {
        var object = JSONObject()
        for _ in 0..<Int(generator.next() % 7) {
            object[keys[Int(generator.next() % UInt64(keys.count))]] = randomValue(depth, &generator)
        }
        return object
    }

    func testScannedMembersAreTheParsedOnes() throws {
        var generator = SplitMix64(seed: 0x5CA7)
        var scanned = 0
        for _ in 0..<2000 {
            let body = Self.randomObject(0, &generator)
            let bytes = try JSON.object(body).serialized()
            // Without an escaped key in the body, every lookup is answered without parsing it.
            let needsParse = body.keys.contains { name in name.utf8.contains { $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") || $0 < 0x20 } }
            for key in Self.keys {
                let stored = JSONObject(storedJSON: bytes)
                XCTAssertEqual(stored[key], body[key], "\(key) in \(String(decoding: bytes, as: UTF8.self))")
                if !needsParse {
                    XCTAssertTrue(stored.isUnparsedStoredForm, "\(key) in \(String(decoding: bytes, as: UTF8.self))")
                    scanned += 1
                }
            }
        }
        XCTAssertGreaterThan(scanned, 10_000, "most lookups were answered by the scan")
    }

    /// Reading member after member, the object is scanned a few times, then parsed once.
    func testManyLookupsParseTheObjectOnce() throws {
        let body = JSONObject((0..<20).map { ("field\($0)", JSON.integer($0)) })
        let stored = JSONObject(storedJSON: try JSON.object(body).serialized())
        for index in 0..<StoredMembers.scannedLookupsBeforeParsing {
            XCTAssertEqual(stored["field\(index)"], .integer(index))
            XCTAssertTrue(stored.isUnparsedStoredForm)
        }
        XCTAssertEqual(stored["field19"], 19)
        XCTAssertFalse(stored.isUnparsedStoredForm)
        XCTAssertEqual(stored["field7"], 7)
        XCTAssertNil(stored["field20"])
    }

    /// Text the scan cannot follow answers "unknown" (the caller parses), never a wrong value;
    /// whitespace between tokens is followed.
    func testTextTheScanCannotFollow() {
        func scan(_ text: String, _ key: String) -> JSON?? {
            StoredMembers(head: [], bytes: Array(text.utf8), tail: []).scannedValue(forKey: key)
        }
        XCTAssertEqual(scan(#" { "a" : [1, {"b": "}"}] , "c" : true } "#, "c"), .some(.bool(true)))
        XCTAssertEqual(scan(#" { "a" : [1, {"b": "}"}] , "c" : true } "#, "b"), .some(nil))
        XCTAssertEqual(scan(#"{"a":1}"#, "a"), .some(.integer(1)))
        XCTAssertEqual(scan(#"{}"#, "a"), .some(nil))
        for damaged in [#"{"a":1"#, #"{"a""#, #"{"a":"1}"#, #"{"a":[1,2}"#, #"["a",1]"#, #"{"a":1;"b":2}"#, #"{"a":tru}"#, ""] {
            XCTAssertTrue(scan(damaged, "a") == nil, damaged)
        }
        // An escaped key could spell the one asked for: missing is not certain without a parse.
        XCTAssertTrue(scan(#"{"\u0061":1}"#, "b") == nil)
        XCTAssertTrue(scan(#"{"\u0061":1}"#, "a") == nil)
    }

    /// A Mango query through an index matches its selector's fields without parsing the bodies it answers with.
    func testFindReadsTheSelectedFieldOnly() async throws {
        let db = try await makeDatabase(self)
        _ = try await db.save((0..<50).map { Document(id: "d\($0)", body: ["score": .integer($0), "name": .string("n\($0)"), "tags": ["a", "b"]]) })
        try await db.createIndex(fields: [SortField("score")], name: "score", designDocument: "find")
        let result = try await db.find(FindQuery(selector: try MangoSelector(["score": ["$gte": 10, "$lt": 20], "name": ["$ne": "n15"]])))
        XCTAssertEqual(result.documents.map(\.id), (10..<20).filter { $0 != 15 }.map { "d\($0)" })
        XCTAssertTrue(result.documents.allSatisfy(\.body.isUnparsedStoredForm))
        XCTAssertEqual(result.documents.first?["tags"], ["a", "b"])
    }

    /// A member set on a stored object changes its bytes (``StoredMembers/setting(_:to:)``) where that
    /// is sure to give what changing the parsed tree gives: the same members in the same order, the
    /// same JSON text — and otherwise the tree is changed, as before.
    func testSettingMembersOfStoredBytesIsSettingThemInTheTree() throws {
        var generator = SplitMix64(seed: 0x5E77)
        var spliced = 0
        for _ in 0..<2000 {
            let start = Self.randomObject(0, &generator)
            var tree = start
            var stored = JSONObject(storedJSON: try JSON.object(start).serialized())
            for _ in 0..<Int(generator.next() % 6) {
                let key = Self.keys[Int(generator.next() % UInt64(Self.keys.count))]
                let value = generator.next() % 5 == 0 ? nil : Self.randomValue(2, &generator)
                let wasUnparsed = stored.isUnparsedStoredForm
                tree[key] = value
                stored[key] = value
                if wasUnparsed && stored.isUnparsedStoredForm { spliced += 1 }
                // Written out (which copies stored bytes without parsing them), the two are one text.
                XCTAssertEqual(try JSON.object(stored).serialized(), try JSON.object(tree).serialized())
            }
            XCTAssertEqual(stored, tree)
            XCTAssertEqual(stored.keys, tree.keys)
            for key in Self.keys { XCTAssertEqual(stored[key], tree[key], key) }
        }
        XCTAssertGreaterThan(spliced, 600, "scalar changes were made in the bytes (849 of the 5 000 or so changes, of which half set containers, remove members or use escaped or `_` keys)")
    }

    /// Which changes stay in the bytes, and which parse the object.
    func testWhatIsChangedInTheBytes() throws {
        let bytes = Array(#"{"a":1,"b":{"c":[1,2]},"d":"x"}"#.utf8)
        func changed(_ key: String, _ value: JSON?) -> JSONObject {
            var object = JSONObject(storedJSON: bytes)
            object[key] = value
            return object
        }
        XCTAssertEqual(changed("a", 2.5).storedJSON.map { String(decoding: $0, as: UTF8.self) }, #"{"a":2.5,"b":{"c":[1,2]},"d":"x"}"#)
        XCTAssertEqual(changed("b", nil).storedJSON, nil, "a removal parses")
        XCTAssertEqual(changed("b", .null).storedJSON.map { String(decoding: $0, as: UTF8.self) }, #"{"a":1,"b":null,"d":"x"}"#)
        XCTAssertEqual(changed("e", "y\"").storedJSON.map { String(decoding: $0, as: UTF8.self) }, #"{"a":1,"b":{"c":[1,2]},"d":"x","e":"y\""}"#)
        XCTAssertEqual(changed("d", ["x"]).storedJSON, nil, "a container parses")
        XCTAssertEqual(changed("_x", 1).storedJSON, nil, "an underscore key parses, for the body's validation")
        XCTAssertEqual(changed("a", .double(.nan)).storedJSON, nil, "a value JSON cannot hold parses, and fails at the save")
        var empty = JSONObject(storedJSON: Array("{}".utf8))
        empty["k"] = true
        XCTAssertEqual(empty.storedJSON.map { String(decoding: $0, as: UTF8.self) }, #"{"k":true}"#)
        // Metadata around the bytes is a member like the others.
        var document = JSONObject(head: [("_id", "d")], middle: JSONObject(storedJSON: bytes), tail: [])
        document["_id"] = "e"
        document["a"] = 3
        XCTAssertEqual(try JSON.object(document).serialized(), Array(#"{"_id":"e","a":3,"b":{"c":[1,2]},"d":"x"}"#.utf8))
        // After a few changes the object is parsed once and changed as a tree.
        var object = JSONObject(storedJSON: bytes)
        for count in 1...(StoredMembers.splicesBeforeParsing + 1) {
            object["a"] = .integer(count)
            XCTAssertEqual(object.isUnparsedStoredForm, count <= StoredMembers.splicesBeforeParsing)
        }
        XCTAssertEqual(object["a"], .integer(StoredMembers.splicesBeforeParsing + 1))
    }

    /// Read, change a field, save: the revision is the one the same edit gets made on a tree (CouchDB's).
    func testAnUpdateInTheBytesGetsTheTreesRevision() async throws {
        let db = try await makeDatabase(self)
        let other = try await makeDatabase(self)
        let body: JSONObject = ["age": 41, "name": "Ada", "tags": ["x", "y"], "address": ["city": "Oslo"]]
        _ = try await db.save(Document(id: "p", body: body))
        _ = try await other.save(Document(id: "p", body: body))
        let found = try await db.document(withID: "p")
        var read = try XCTUnwrap(found)
        read["age"] = .integer((read.int(forKey: "age") ?? 0) + 1)
        read["city"] = "Bergen"
        XCTAssertTrue(read.body.isUnparsedStoredForm)
        let saved = try await db.save(read)
        let foundOther = try await other.document(withID: "p")
        var edited = try XCTUnwrap(foundOther)
        edited.body = JSONObject(Array(edited.body.map { ($0.key, $0.value) }))
        edited["age"] = 42
        edited["city"] = "Bergen"
        XCTAssertFalse(edited.body.isUnparsedStoredForm)
        let savedFromTree = try await other.save(edited)
        XCTAssertEqual(saved.revision, savedFromTree.revision)
        let back = try await db.document(withID: "p")
        XCTAssertEqual(back?.body, ["age": 42, "name": "Ada", "tags": ["x", "y"], "address": ["city": "Oslo"], "city": "Bergen"])
    }
}
