import DocStore
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import XCTest

/// One corpus and one set of queries give the same documents, in the same
/// order, through Swift (`Database.search`), `docstore search`, `docstore serve`'s full-text view and
/// its `_find` with `$text`.
final class SearchParityTests: XCTestCase {
    private static let queries = [
        "tea", "Green TEA", "\"green tea\"", "tea NOT green", "tea OR coffee", "te*", "(tea OR coffee) morning",
        "tea NEAR/2 milk", "tea NEAR milk", "rooibos", "café", "brew NOT (green OR black)", "\"black tea\" OR matcha NOT milk",
    ]

    private static func corpus() -> [Document] {
        var random = SplitMix64(seed: 1616)
        let words = ["tea", "green", "black", "coffee", "milk", "morning", "brew", "matcha", "cafe", "Café", "sugar", "cup", "leaf", "tears"]
        return (0..<80).map { number in
            func sentence(_ count: Int) -> String {
                (0..<count).map { _ in words.randomElement(using: &random)! }.joined(separator: " ")
            }
            return Document(id: String(format: "note-%02d", number),
                            body: ["type": "note", "title": .string(sentence(3)), "body": .string(sentence(Int.random(in: 4...20, using: &random)))])
        }
    }

    func testSwiftCLIViewAndFindAgree() async throws {
        let dir = try makeTemporaryDirectory(self)
        let data = dir.appendingPathComponent("docstore-data")
        let db = try await Database.open(name: "notes", directory: data)
        _ = try await db.save(Self.corpus())
        try await db.createTextIndex(fields: ["title", "body"], name: "notes", designDocument: "search")
        let indexes = try await db.mangoIndexes()
        let indexName = try XCTUnwrap(indexes.first?.indexName)
        var expected: [String: [String]] = [:]
        for query in Self.queries {
            expected[query] = try await db.search(index: indexName, query: query).rows.map(\.documentID)
        }
        await db.close()
        XCTAssertGreaterThan(expected.values.filter { !$0.isEmpty }.count, 10, "most queries find something")
        XCTAssertEqual(expected["rooibos"], [])

        for query in Self.queries {
            let result = try runDocstore(["search", "--db", "docstore-data/notes", "--index", "search/notes", query], in: dir)
            XCTAssertEqual(result.status, 0, result.stderr)
            let rows = try JSON(parsing: result.stdout)["rows"]?.arrayValue ?? []
            XCTAssertEqual(rows.compactMap { $0["id"]?.stringValue }, expected[query], "docstore search \(query)")
        }

        let (_, _, url) = try launchServe(in: dir, self)
        XCTAssertTrue(url.hasPrefix("http://127.0.0.1:"), url)
        func send(_ method: String, _ path: String, _ body: JSON? = nil) async throws -> JSON {
            var request = URLRequest(url: URL(string: url + path)!)
            request.httpMethod = method
            request.setValue("Basic " + Data("admin:pw".utf8).base64EncodedString(), forHTTPHeaderField: "Authorization")
            if let body {
                request.httpBody = Data(body.description.utf8)
                request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            }
            let (data, _) = try await URLSession.shared.data(for: request)
            return try JSON(parsing: data)
        }
        for query in Self.queries {
            var components = URLComponents()
            components.queryItems = [URLQueryItem(name: "full_text", value: JSON.string(query).description)]
            let encoded = components.percentEncodedQuery!.replacingOccurrences(of: "+", with: "%2B")
            let view = try await send("GET", "notes/_design/search/_view/notes?" + encoded)
            XCTAssertEqual(view["rows"]?.arrayValue?.compactMap { $0["id"]?.stringValue }, expected[query], "view \(query): \(view)")
            XCTAssertEqual(view["total_rows"]?.intValue, expected[query]?.count)
            let found = try await send("POST", "notes/_find", ["selector": ["$text": .string(query)], "limit": 1000, "fields": ["_id"]])
            XCTAssertEqual(found["docs"]?.arrayValue?.compactMap { $0["_id"]?.stringValue }, expected[query], "_find \(query): \(found)")
        }
    }

    func testIndexCreateTypeTextAndSearchErrors() throws {
        let dir = try makeTemporaryDirectory(self)
        for body in [#"{"_id":"a","title":"Green tea"}"#, #"{"_id":"b","title":"Black coffee"}"#] {
            XCTAssertEqual(try runDocstore(["put", body], in: dir).status, 0)
        }
        let none = try runDocstore(["search", "--index", "titles", "tea"], in: dir)
        XCTAssertEqual(none.status, 1)
        XCTAssertEqual(none.stderr, "docstore: error: not_found: No text index named titles; there is none\n")
        let created = try runDocstore(["index", "create", "--type", "text", #"["title"]"#, "--name", "titles", "--ddoc", "search"], in: dir)
        XCTAssertEqual(created.status, 0, created.stderr)
        XCTAssertEqual(try JSON(parsing: created.stdout), ["result": "created", "id": "_design/search", "name": "titles"])
        let found = try runDocstore(["search", "--index", "titles", "--snippets", "TEA OR coffee", "--limit", "1"], in: dir)
        XCTAssertEqual(found.status, 0, found.stderr)
        let answer = try JSON(parsing: found.stdout)
        XCTAssertEqual(answer["total_rows"], 2)
        XCTAssertEqual(answer["rows"]?.arrayValue?.count, 1)
        XCTAssertNotNil(answer["rows"]?[0]?["snippet"]?.stringValue?.range(of: "["))
        let malformed = try runDocstore(["search", "--index", "titles", "tea NOT"], in: dir)
        XCTAssertEqual(malformed.status, 1)
        XCTAssertEqual(malformed.stderr, "docstore: error: query_parse_error: Malformed full-text query at character 5: NOT has nothing after it\n")
        let deleted = try runDocstore(["index", "delete", "--type", "text", "search", "titles"], in: dir)
        XCTAssertEqual(deleted.status, 0, deleted.stderr)
    }
}
