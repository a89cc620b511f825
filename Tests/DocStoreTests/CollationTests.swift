@testable import DocStore
import Foundation
import XCTest

final class CollationTests: XCTestCase {
    /// Saves one document per key (in a scrambled order), indexes `doc.k`, and returns the keys as a
    /// real query returns them.
    private func keysThroughIndex(_ keys: [JSON], collation: Collation = .unicode, descending: Bool = false) async throws -> [JSON] {
        let index = IndexDefinition(name: "k", version: "1", collation: collation) { doc, emit in
            if let key = doc["k"] { emit(key, nil) }
        }
        let db = try await makeDatabase(self) { $0.indexes = [index] }
        var generator = SplitMix64(seed: 42)
        let scrambled = keys.enumerated().shuffled(using: &generator)
        _ = try await db.save(scrambled.map { Document(id: String(format: "doc%03d", $0.offset), body: ["k": $0.element]) })
        var query = IndexQuery()
        query.descending = descending
        return try await db.query("k", query).rows.map(\.key)
    }

    /// The full example list of CouchDB's "Views Collation" documentation, in CouchDB's order.
    static let couchDBExample: [JSON] = [
        nil, false, true,
        1, 2, 3.0, 4,
        "a", "A", "aa", "b", "B", "ba", "bb",
        ["a"], ["b"], ["b", "c"], ["b", "c", "a"], ["b", "d"], ["b", "d", "e"],
        ["a": 1], ["a": 2], ["b": 1], ["b": 2], ["b": 2, "a": 1], ["b": 2, "c": 2],
    ]

    func testCouchDBDocumentationExampleThroughAnIndex() async throws {
        let sorted = try await keysThroughIndex(Self.couchDBExample)
        XCTAssertEqual(sorted, Self.couchDBExample)
        let reversed = try await keysThroughIndex(Self.couchDBExample, descending: true)
        XCTAssertEqual(reversed, Self.couchDBExample.reversed())
    }

    func testUnicodeStringsSortAsICURootCollation() async throws {
        // The order CouchDB gives on these machines, plus accents, CJK and emoji.
        let expected: [JSON] = ["_", "-", "!", "😀", "$", "1", "a", "A", "aa", "b", "B", "e", "E", "é", "É", "f",
                                "z", "Ω", "한국어", "中文", "日本"]
        let sorted = try await keysThroughIndex(expected)
        XCTAssertEqual(sorted, expected)
    }

    func testMixedTypesAndNestedArrays() async throws {
        let expected: [JSON] = [
            nil, false, true, -1e300, -5, -1.5, 0, 0.5, 1, .bigInteger("18446744073709551621"), 1e300,
            "", " ", "10", "9", "a",
            // strings sort before arrays, arrays before objects, at every depth
            [], [nil], [false], [1], [1, nil], [1, "a"], [1, [2]], [1, [2, 3]], ["a", []], ["a", [:]], [[1]], [[1, 2]],
            [:], ["a": nil], ["a": "b", "c": 1], ["a": []], ["a": [:]],
        ]
        let sorted = try await keysThroughIndex(expected)
        XCTAssertEqual(sorted, expected)
    }

    func testRawCollation() async throws {
        // CouchDB's documented raw order, then byte order of strings.
        let expected: [JSON] = [1, 2.5, false, nil, true, ["a": "a"], ["a"], ["b"], "A", "B", "a", "b", "é"]
        let sorted = try await keysThroughIndex(expected, collation: .raw)
        XCTAssertEqual(sorted, expected)
    }

    func testKeysEncodeWithoutPrefixAmbiguity() {
        // Numbers equal as doubles collate equal; -0 equals 0.
        XCTAssertEqual(CollationKey.encode(1), CollationKey.encode(1.0))
        XCTAssertEqual(CollationKey.encode(.double(-0.0)), CollationKey.encode(0))
        XCTAssertEqual(JSONCollator.compare(1, 1.0), 0)
        // A string containing NUL in raw collation still sorts before its extensions.
        let raw: [JSON] = ["a", "a\u{0}", "a\u{0}\u{0}", "a\u{1}", "ab"]
        let encoded = raw.map { CollationKey.encode($0, collation: .raw) }
        XCTAssertEqual(encoded, encoded.sorted { $0.lexicographicallyPrecedes($1) })
    }

    /// Two independent implementations — byte encoding and the reference comparator — agree on random values.
    func testEncodingAgreesWithReferenceComparator() {
        var generator = SplitMix64(seed: 0xC011A7E)
        let pool: [JSON] = ["a", "A", "b", "é", "e", "", "中", "😀", "-", "1", 0, 1, -1, 2.5, 1e10, nil, true, false]
        func random(_ depth: Int) -> JSON {
            switch generator.next() % (depth > 2 ? 1 : 4) {
            case 0: return pool[Int(generator.next() % UInt64(pool.count))]
            case 1: return .array((0..<Int(generator.next() % 3)).map { _ in random(depth + 1) })
            case 2:
                var object = JSONObject()
                for _ in 0..<Int(generator.next() % 3) {
                    object[pool[Int(generator.next() % 8)].stringValue!] = random(depth + 1)
                }
                return .object(object)
            default: return pool[Int(generator.next() % UInt64(pool.count))]
            }
        }
        for collation in [Collation.unicode, .raw] {
            for _ in 0..<2000 {
                let a = random(0), b = random(0)
                let byBytes = compareBytes(CollationKey.encode(a, collation: collation), CollationKey.encode(b, collation: collation))
                let byReference = JSONCollator.compare(a, b, collation: collation)
                XCTAssertEqual(byBytes, byReference, "\(collation): \(a) vs \(b)")
            }
        }
    }

    func testCollatorVersionIsRecorded() {
        XCTAssertTrue(CollationKey.unicodeVersion.hasPrefix("icu-"), CollationKey.unicodeVersion)
        XCTAssertTrue(CollationKey.unicodeVersion.contains("/collator-"), CollationKey.unicodeVersion)
    }
}
