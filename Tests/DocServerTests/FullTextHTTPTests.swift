import DocStore
import Foundation
import XCTest

/// Full-text search over HTTP: `full_text` on a natively registered full-text index and on a Mango
/// text index, `_index` with `"type": "text"`, `$text` in `_find`, and the errors (Docs/Search.md).
final class FullTextHTTPTests: XCTestCase {
    private func server() async throws -> TestServer {
        let notes = IndexDefinition(name: "app/notes", version: "1") { doc, emit in
            if let title = doc["title"]?.stringValue { emit(FullTextSearch.createKey(title), "title") }
            if let body = doc["body"]?.stringValue { emit(FullTextSearch.createKey(body), nil) }
        }
        let server = try await TestServer(self, indexes: { _ in [notes] })
        await XCTAssertEqualAsync(try await server.request("PUT", "/db").status, 201)
        let docs: JSON = ["docs": [
            ["_id": "a", "title": "Green tea", "body": "Brew the leaves at 80 degrees", "channels": ["red"]],
            ["_id": "b", "title": "Black tea", "body": "Tea, strong tea, for breakfast", "channels": ["blue"]],
            ["_id": "c", "title": "Coffee", "body": "No tea here, only beans", "channels": ["red"]],
        ]]
        await XCTAssertEqualAsync(try await server.request("POST", "/db/_bulk_docs", json: docs).status, 201)
        return server
    }

    /// `full_text` as a client sends it: a JSON string, percent-encoded.
    private func parameter(_ query: String) -> String {
        JSON.string(query).description.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
    }

    func testFullTextOnANativeIndex() async throws {
        let server = try await server()
        let reply = try await server.request("GET", "/db/_design/app/_view/notes?full_text=\(parameter("tea"))&snippets=true&limit=2")
        XCTAssertEqual(reply.status, 200)
        XCTAssertEqual(reply.json["total_rows"], 3)
        let rows = try XCTUnwrap(reply.json["rows"]?.arrayValue)
        XCTAssertEqual(rows.map { $0["id"] }, ["b", "a"], "the best two; b has tea three times")
        XCTAssertEqual(rows[0]["snippet"], "[Tea], strong [tea], for breakfast")
        XCTAssertNil(rows[0]["value"], "the body's value is null: left out")
        XCTAssertEqual(rows[1]["value"], "title")
        XCTAssertEqual(Set(rows[0].objectValue?.keys.map { $0 } ?? []), ["id", "score", "snippet"])
        XCTAssertGreaterThan(rows[0]["score"]?.doubleValue ?? 0, rows[1]["score"]?.doubleValue ?? 0)

        let plain = try await server.request("GET", "/db/_design/app/_view/notes?full_text=\(parameter("\"green tea\" OR beans"))&include_docs=true")
        XCTAssertEqual(plain.json["rows"]?.arrayValue?.compactMap { $0["id"]?.stringValue }.sorted(), ["a", "c"])
        XCTAssertNil(plain.json["rows"]?[0]?["snippet"], "no snippets unless asked")
        XCTAssertEqual(plain.json["rows"]?.arrayValue?.compactMap { $0["doc"]?["title"]?.stringValue }.sorted(), ["Coffee", "Green tea"])

        // A user sees the matches in their channels, counted as such.
        await XCTAssertEqualAsync(try await server.addUser("alice", ["password": "pw", "channels": ["red"]]), 201)
        let alice = try await server.request("GET", "/db/_design/app/_view/notes?full_text=\(parameter("tea"))", as: .user("alice", "pw"))
        XCTAssertEqual(alice.json["total_rows"], 2)
        XCTAssertEqual(alice.json["rows"]?.arrayValue?.compactMap { $0["id"]?.stringValue }.sorted(), ["a", "c"])
    }

    func testMalformedQueriesAnswerA400WithTheirPosition() async throws {
        let server = try await server()
        let malformed = try await server.request("GET", "/db/_design/app/_view/notes?full_text=\(parameter("tea AND"))")
        XCTAssertEqual(malformed.status, 400)
        XCTAssertEqual(malformed.json, ["error": "query_parse_error", "reason": "Malformed full-text query at character 5: AND has nothing after it"])
        let unquoted = try await server.request("GET", "/db/_design/app/_view/notes?full_text=tea")
        XCTAssertEqual(unquoted.status, 400, "full_text is a JSON string")
        XCTAssertEqual(unquoted.json["error"], "query_parse_error")
        let badLimit = try await server.request("GET", "/db/_design/app/_view/notes?full_text=\(parameter("tea"))&limit=-1")
        XCTAssertEqual(badLimit.status, 400)
        let missing = try await server.request("GET", "/db/_design/app/_view/nothing?full_text=\(parameter("tea"))")
        XCTAssertEqual(missing.status, 404)
        XCTAssertEqual(missing.json["reason"], "missing_named_view")
        let unread = try await server.request("POST", "/db/_find", json: ["selector": ["$text": "(tea"]])
        XCTAssertEqual(unread.status, 200, "without a text index, CouchDB never reads the query, and neither does DocStore")
        // As CouchDB 3.3.3 answers `$text` without a text index: it holds for every document.
        let noIndex = try await server.request("POST", "/db/_find", json: ["selector": ["$text": "no such word"], "fields": ["_id"]])
        XCTAssertEqual(noIndex.status, 200)
        XCTAssertEqual(noIndex.json["docs"], [["_id": "a"], ["_id": "b"], ["_id": "c"]])
        XCTAssertEqual(noIndex.json["warning"], "No matching index found, create an index to optimize query time.")
        let onAField = try await server.request("POST", "/db/_find", json: ["selector": ["title": ["$text": "tea"]]])
        XCTAssertEqual(onAField.status, 400)
        XCTAssertEqual(onAField.json["error"], "bad_field", "as CouchDB answers")
    }

    func testTextIndexesOverHTTP() async throws {
        let server = try await server()
        let body: JSON = ["index": ["fields": [["name": "title", "type": "string"], ["name": "body", "type": "string"]]],
                          "type": "text", "ddoc": "search", "name": "notes"]
        let created = try await server.request("POST", "/db/_index", json: body)
        XCTAssertEqual(created.status, 200)
        XCTAssertEqual(created.json, ["result": "created", "id": "_design/search", "name": "notes"])
        let listing = try await server.request("GET", "/db/_index")
        XCTAssertEqual(listing.json["indexes"]?[1]?["type"], "text")
        XCTAssertEqual(listing.json["indexes"]?[1]?["def"]?["fields"], [["title": "string"], ["body": "string"]])
        let numbers = try await server.request("POST", "/db/_index", json: ["index": ["fields": [["name": "n", "type": "number"]]], "type": "text"])
        XCTAssertEqual(numbers.status, 400)
        XCTAssertEqual(numbers.json["error"], "invalid_index")

        let found = try await server.request("POST", "/db/_find", json: ["selector": ["$text": "tea", "channels": ["$elemMatch": ["$eq": "red"]]],
                                                                        "fields": ["_id"]])
        XCTAssertEqual(found.status, 200)
        XCTAssertEqual(found.json["docs"]?.arrayValue?.compactMap { $0["_id"]?.stringValue }.sorted(), ["a", "c"])
        let view = try await server.request("GET", "/db/_design/search/_view/notes?full_text=\(parameter("breakfast OR leaves"))")
        XCTAssertEqual(view.json["rows"]?.arrayValue?.compactMap { $0["id"]?.stringValue }.sorted(), ["a", "b"])
        XCTAssertEqual(view.json["rows"]?[0]?["value"], "body", "a text index's value is the field's path")
        let explained = try await server.request("POST", "/db/_explain", json: ["selector": ["$text": "tea"]])
        XCTAssertEqual(explained.json["index"]?["type"], "text")
        XCTAssertEqual(explained.json["selector"], ["$default": ["$text": "tea"]], "normalised as CouchDB writes it")
        let malformed = try await server.request("POST", "/db/_find", json: ["selector": ["$text": "(tea"]])
        XCTAssertEqual(malformed.status, 400)
        XCTAssertEqual(malformed.json, ["error": "query_parse_error", "reason": "Malformed full-text query at character 1: Unbalanced '('"])
        let misplaced = try await server.request("POST", "/db/_find", json: ["selector": ["$or": [["$text": "tea"], ["title": "Coffee"]]]])
        XCTAssertEqual(misplaced.status, 400, "a text index cannot answer $text inside $or")
        XCTAssertEqual(misplaced.json["error"], "not_supported")

        await XCTAssertEqualAsync(try await server.request("DELETE", "/db/_index/_design/search/text/notes").json, ["ok": true])
        await XCTAssertEqualAsync(try await server.request("DELETE", "/db/_index/_design/search/text/notes").status, 404)
    }
}
