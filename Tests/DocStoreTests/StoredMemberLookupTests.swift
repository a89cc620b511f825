@testable import DocStore
import TestSupport
import XCTest

/// One member of a stored body is found by scanning its bytes, without parsing the others
/// (``StoredMembers/scannedValue(forKey:)``): what it finds must be what the parsed body holds.
final class StoredMemberLookupTests: XCTestCase {
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
}
