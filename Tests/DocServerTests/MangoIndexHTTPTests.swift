import DocStore
import Foundation
import XCTest

/// `/{db}/_index` with CouchDB 3.3.3's shapes, statuses and error names (recorded from the real server).
final class MangoIndexHTTPTests: XCTestCase {

    func testCreateListAndDeleteAsCouchDB() async throws {
        let server = try await TestServer.withDatabase(self)
        let body: JSON = ["index": ["fields": ["kind"], "partial_filter_selector": ["v": ["$gt": 1]]], "ddoc": "mine", "name": "byKind"]
        let created = try await server.request("POST", "/db/_index", json: body)
        XCTAssertEqual(created.status, 200)
        XCTAssertEqual(created.json, ["result": "created", "id": "_design/mine", "name": "byKind"])
        await XCTAssertEqualAsync(try await server.request("POST", "/db/_index", json: body).json,
                                  ["result": "exists", "id": "_design/mine", "name": "byKind"])
        let generated = try await server.request("POST", "/db/_index", json: ["index": ["fields": ["kind", ["v": "asc"]]]])
        let generatedName = try XCTUnwrap(generated.json["name"]?.stringValue)
        XCTAssertEqual(generated.json["id"]?.stringValue, "_design/" + generatedName)

        let listing = try await server.request("GET", "/db/_index")
        XCTAssertEqual(listing.json["total_rows"], 3)
        XCTAssertEqual(listing.json["indexes"]?[0], ["ddoc": .null, "name": "_all_docs", "type": "special", "def": ["fields": [["_id": "asc"]]]])
        XCTAssertEqual(listing.json["indexes"]?[2], ["ddoc": "_design/mine", "name": "byKind", "type": "json", "partitioned": false,
                                                     "def": ["fields": [["kind": "asc"]], "partial_filter_selector": ["v": ["$gt": 1]]]])
        XCTAssertEqual(listing.json["indexes"]?[1]?["def"], ["fields": [["kind": "asc"], ["v": "asc"]]])
        let page = try await server.request("GET", "/db/_index?limit=1&skip=1")
        XCTAssertEqual(page.json["total_rows"], 3)
        XCTAssertEqual(page.json["indexes"]?.arrayValue?.count, 1)
        // The design document is CouchDB's.
        let ddoc = try await server.request("GET", "/db/_design/mine")
        XCTAssertEqual(ddoc.json["language"], "query")
        XCTAssertEqual(ddoc.json["views"]?["byKind"]?["reduce"], "_count")

        await XCTAssertEqualAsync(try await server.request("DELETE", "/db/_index/_design/mine/json/byKind").json, ["ok": true])
        await XCTAssertEqualAsync(try await server.request("DELETE", "/db/_index/\(generatedName)/json/\(generatedName)").json, ["ok": true])
        let missing = try await server.request("DELETE", "/db/_index/mine/json/byKind")
        XCTAssertEqual(missing.status, 404)
        XCTAssertEqual(missing.json, ["error": "not_found", "reason": "missing"])
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_index").json["total_rows"], 1)
    }

    /// Without `ddoc`, CouchDB 3.3.3 gives every index a design document of its own, named from its
    /// definition and name: two names for the same fields are two design documents (DocServer put both
    /// in one). A partial filter is stored normalised in the view's map and the listing, as given in
    /// `options.def`; the map has `"partial_filter_selector": {}` without one (recorded with curl).
    /// A json index read through `_view`, as CouchDB 3.3.3 answered the same requests (recorded): keys
    /// are the arrays of field values, values null, and the reduce is `_count`; `find` still reads rows.
    func testAJsonIndexIsReadAsAView() async throws {
        let server = try await TestServer.withDatabase(self)
        try await server.request("POST", "/db/_bulk_docs", json: ["docs": [
            ["_id": "a", "t": "x", "n": 1], ["_id": "b", "t": "x", "n": 2], ["_id": "c", "t": "y", "n": 1], ["_id": "d", "z": 1]]])
        try await server.request("POST", "/db/_index", json: ["index": ["fields": ["t", "n"]], "name": "tn", "ddoc": "m"])
        let recorded: [(String, JSON)] = [
            ("", ["rows": [["key": .null, "value": 3]]]),
            ("?reduce=false", ["total_rows": 3, "offset": 0, "rows": [["id": "a", "key": ["x", 1], "value": .null],
                                                                     ["id": "b", "key": ["x", 2], "value": .null],
                                                                     ["id": "c", "key": ["y", 1], "value": .null]]]),
            ("?group=true", ["rows": [["key": ["x", 1], "value": 1], ["key": ["x", 2], "value": 1], ["key": ["y", 1], "value": 1]]]),
            ("?group_level=1", ["rows": [["key": ["x"], "value": 2], ["key": ["y"], "value": 1]]]),
            ("?reduce=false&descending=true&limit=2", ["total_rows": 3, "offset": 0, "rows": [["id": "c", "key": ["y", 1], "value": .null],
                                                                                             ["id": "b", "key": ["x", 2], "value": .null]]]),
            ("?reduce=false&startkey=%5B%22y%22%5D", ["total_rows": 3, "offset": 2, "rows": [["id": "c", "key": ["y", 1], "value": .null]]]),
            ("?group=true&skip=1&limit=1", ["rows": [["key": ["x", 2], "value": 1]]]),
        ]
        for (query, answer) in recorded {
            let reply = try await server.request("GET", "/db/_design/m/_view/tn" + query)
            XCTAssertEqual(reply.status, 200, query)
            XCTAssertEqual(reply.json, answer, query)
        }
        let missing = try await server.request("GET", "/db/_design/m/_view/nosuch")
        XCTAssertEqual(missing.status, 404)
        XCTAssertEqual(missing.json, ["error": "not_found", "reason": "missing_named_view"])
        let found = try await server.request("POST", "/db/_find", json: ["selector": ["t": "x"], "use_index": ["m", "tn"]])
        XCTAssertEqual(found.json["docs"]?.arrayValue?.compactMap { $0["_id"]?.stringValue }, ["a", "b"], "find reads the rows, not the count")
    }

    func testIndexesWithoutDesignDocumentGetOneEachAndNormalisedFilters() async throws {
        let server = try await TestServer.withDatabase(self)
        let one = try await server.request("POST", "/db/_index", json: ["index": ["fields": ["a"]], "name": "one"])
        let two = try await server.request("POST", "/db/_index", json: ["index": ["fields": ["a"]], "name": "two"])
        XCTAssertEqual(one.json["result"], "created")
        XCTAssertEqual(two.json["result"], "created")
        XCTAssertNotEqual(one.json["id"], two.json["id"])
        await XCTAssertEqualAsync(try await server.request("POST", "/db/_index", json: ["index": ["fields": ["a"]], "name": "one"]).json,
                                  ["result": "exists", "id": one.json["id"]!, "name": "one"])
        let oneID = try XCTUnwrap(one.json["id"]?.stringValue)
        await XCTAssertEqualAsync(try await server.request("GET", "/db/\(oneID)").json["views"]?["one"]?["map"],
                                  ["fields": ["a": "asc"], "partial_filter_selector": [:]])

        let body: JSON = ["index": ["fields": ["a"], "partial_filter_selector": ["type": "x"]], "name": "three"]
        let three = try await server.request("POST", "/db/_index", json: body)
        XCTAssertEqual(three.json["result"], "created")
        let threeID = try XCTUnwrap(three.json["id"]?.stringValue)
        let view = try await server.request("GET", "/db/\(threeID)").json["views"]?["three"]
        XCTAssertEqual(view?["map"]?["partial_filter_selector"], ["type": ["$eq": "x"]])
        XCTAssertEqual(view?["options"]?["def"]?["partial_filter_selector"], ["type": "x"])
        let listed = try await server.request("GET", "/db/_index").json["indexes"]?.arrayValue?.first { $0["name"] == "three" }
        XCTAssertEqual(listed?["def"]?["partial_filter_selector"], ["type": ["$eq": "x"]])
        await XCTAssertEqualAsync(try await server.request("POST", "/db/_index", json: body).json["result"], "exists")
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_index").json["total_rows"], 4)
        // The normalised filter still selects: only type x is in the index.
        for (id, type) in [("p", "x"), ("q", "y")] {
            _ = try await server.request("PUT", "/db/\(id)", json: ["a": 1, "type": .string(type)])
        }
        let found = try await server.request("POST", "/db/_find", json: ["selector": ["a": 1, "type": "x"], "use_index": .string(threeID)])
        XCTAssertEqual(found.json["docs"]?.arrayValue?.map { $0["_id"] }, ["p"])
    }

    func testMalformedRequestsGetCouchDBsErrors() async throws {
        let server = try await TestServer.withDatabase(self)
        let cases: [(JSON, String)] = [
            ([:], "missing_required_key"),
            (["index": [:]], "missing_required_key"),
            (["index": ["fields": "kind"]], "invalid_sort_json"),
            (["index": ["fields": [5]]], "invalid_sort_field"),
            (["index": ["fields": [["a": "up"]]]], "invalid_sort_field"),
            (["index": ["fields": [["a": "asc", "b": "asc"]]]], "invalid_sort_field"),
            (["index": ["fields": ["a"]], "type": "foo"], "invalid_index"),
            (["index": ["fields": ["a"]], "name": 5], "invalid_string"),
            (["index": ["fields": ["a"]], "ddoc": 5], "invalid_string"),
            (["index": ["fields": ["a"]], "extra": 1], "invalid_key"),
            (["index": ["fields": ["a"], "partial_filter_selector": ["x": ["$foo": 1]]]], "invalid_operator"),
            (["index": ["fields": ["a", ["b": "desc"]]]], "unsupported_mixed_sort"),
            ([], "bad_request"),
        ]
        for (body, error) in cases {
            let reply = try await server.request("POST", "/db/_index", json: body)
            XCTAssertEqual(reply.status, 400, "\(body)")
            XCTAssertEqual(reply.json["error"]?.stringValue, error, "\(body): \(reply.json)")
        }
        let untyped = try await server.request("POST", "/db/_index", body: Data(#"{"index":{"fields":["a"]}}"#.utf8), contentType: "text/plain")
        XCTAssertEqual(untyped.status, 415)
        XCTAssertEqual(untyped.json["error"], "bad_content_type")
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_index").json["total_rows"], 1, "nothing was created")
    }

    func testUsersListButOnlyAdminsCreateOrDelete() async throws {
        let server = try await TestServer.withDatabase(self)
        await XCTAssertEqualAsync(try await server.addUser("alice", ["password": "pw", "channels": ["red"]]), 201)
        let alice = TestServer.Credentials.user("alice", "pw")
        let refused = try await server.request("POST", "/db/_index", json: ["index": ["fields": ["a"]], "ddoc": "d", "name": "n"], as: alice)
        XCTAssertEqual(refused.status, 403)
        XCTAssertEqual(refused.json["error"], "forbidden")
        await XCTAssertEqualAsync(try await server.request("POST", "/db/_index", json: ["index": ["fields": ["a"]], "ddoc": "d", "name": "n"]).status, 200)
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_index", as: alice).json["total_rows"], 2)
        await XCTAssertEqualAsync(try await server.request("DELETE", "/db/_index/d/json/n", as: alice).status, 403)
    }
}
