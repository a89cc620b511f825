import DocStore
import Foundation
import XCTest

/// `_find` and `_explain` over HTTP against Apache CouchDB 3.3.3's own answers, recorded by
/// `Tests/Interop/mango_plan_record.py` in `Tests/Fixtures/mango/plans.json` (on the corpus of
/// `selectors.json`, with the same indexes): the same documents in the same order, the same fields,
/// the same warnings, the same errors, the same index and key range.
final class MangoFindHTTPTests: XCTestCase {
    private func fixture(_ name: String) throws -> JSON {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/mango/\(name)")
        return try JSON(parsing: Data(contentsOf: url))
    }

    private func server() async throws -> (TestServer, JSON) {
        let server = try await TestServer(self)
        await XCTAssertEqualAsync(try await server.request("PUT", "/db").status, 201)
        let corpus = try XCTUnwrap(try fixture("selectors.json")["corpus"])
        await XCTAssertEqualAsync(try await server.request("POST", "/db/_bulk_docs", json: ["docs": corpus]).status, 201)
        let plans = try fixture("plans.json")
        for index in try XCTUnwrap(plans["indexes"]?.arrayValue) {
            await XCTAssertEqualAsync(try await server.request("POST", "/db/_index", json: index).json["result"], "created")
        }
        return (server, plans)
    }

    private func withoutRevision(_ documents: JSON?) -> [JSON] {
        (documents?.arrayValue ?? []).map { document in
            guard case .object(var object) = document else { return document }
            object["_rev"] = nil
            return .object(object)
        }
    }

    func testEveryRecordedQueryAnswersAsCouchDB() async throws {
        let (server, plans) = try await server()
        var compared = 0
        for recorded in try XCTUnwrap(plans["cases"]?.arrayValue) {
            let query = recorded["query"]!
            var body = query.objectValue!
            if body["limit"] == nil { body["limit"] = 1000 }
            let reply = try await server.request("POST", "/db/_find", json: .object(body))
            if let error = recorded["find_error"] {
                XCTAssertEqual(reply.status, 400, "\(query)")
                XCTAssertEqual(reply.json["error"], error, "\(query)")
                continue
            }
            XCTAssertEqual(reply.status, 200, "\(query): \(reply.json)")
            XCTAssertEqual(withoutRevision(reply.json["docs"]), withoutRevision(recorded["docs"]), "\(query)")
            XCTAssertEqual(reply.json["warning"] ?? .null, recorded["warning"] ?? .null, "warning of \(query)")
            XCTAssertEqual(reply.json["bookmark"]?.stringValue != "nil", recorded["has_bookmark"]?.boolValue, "bookmark of \(query)")
            compared += 1
            guard let name = recorded["name"] else { continue }
            let explained = try await server.request("POST", "/db/_explain", json: query)
            XCTAssertEqual(explained.json["index"]?["name"], name, "\(query)")
            XCTAssertEqual(explained.json["index"]?["ddoc"], recorded["ddoc"], "\(query)")
            XCTAssertEqual(explained.json["mrargs"]?["start_key"], recorded["start_key"] ?? .null, "\(query)")
            XCTAssertEqual(explained.json["mrargs"]?["end_key"], recorded["end_key"] ?? .null, "\(query)")
            XCTAssertEqual(explained.json["mrargs"]?["direction"], recorded["direction"], "\(query)")
        }
        XCTAssertGreaterThan(compared, 40)
    }

    func testBookmarksPageThroughAResultThatChangesBetweenPages() async throws {
        let (server, _) = try await server()
        let query: JSON = ["selector": ["kind": "string"], "fields": ["_id"], "limit": 2]
        let first = try await server.request("POST", "/db/_find", json: query)
        XCTAssertEqual(first.json["docs"], [["_id": "S"], ["_id": "Zed"]])
        // A document of the first page leaves the result, one after the bookmark joins it.
        let zed = try await server.request("GET", "/db/Zed")
        await XCTAssertEqualAsync(try await server.request("PUT", "/db/Zed?rev=\(zed.json["_rev"]!.stringValue!)", json: ["kind": "gone"]).status, 201)
        await XCTAssertEqualAsync(try await server.request("PUT", "/db/b-new", json: ["kind": "string"]).status, 201)
        var next = query.objectValue!
        next["bookmark"] = first.json["bookmark"]
        let second = try await server.request("POST", "/db/_find", json: .object(next))
        XCTAssertEqual(second.json["docs"], [["_id": "apple"], ["_id": "b-new"]], "after Zed's place, nothing skipped")
        next["bookmark"] = second.json["bookmark"]
        let third = try await server.request("POST", "/db/_find", json: .object(next))
        XCTAssertEqual(third.json["docs"], [["_id": "e"], ["_id": "s"]])
        next["bookmark"] = third.json["bookmark"]
        let fourth = try await server.request("POST", "/db/_find", json: .object(next))
        XCTAssertEqual(fourth.json["docs"], [["_id": "u"]])
        next["bookmark"] = fourth.json["bookmark"]
        let last = try await server.request("POST", "/db/_find", json: .object(next))
        XCTAssertEqual(last.json["docs"], [])
        XCTAssertEqual(last.json["bookmark"], next["bookmark"], "an empty page hands the bookmark back")
        let bad = try await server.request("POST", "/db/_find", json: ["selector": [:], "bookmark": "zzz"])
        XCTAssertEqual(bad.status, 400)
        XCTAssertEqual(bad.json["error"], "invalid_bookmark")
    }

    func testMalformedQueriesGetCouchDBsErrors() async throws {
        let (server, _) = try await server()
        let cases: [(JSON, String)] = [
            ([:], "missing_required_key"), (["selector": [:], "limit": -1], "invalid_non_neg_integer"),
            (["selector": [:], "limit": "x"], "invalid_non_neg_integer"), (["selector": [:], "skip": -1], "invalid_non_neg_integer"),
            (["selector": [:], "fields": "a"], "invalid_fields"), (["selector": [:], "fields": [1]], "invalid_field"),
            (["selector": [:], "foo": 1], "invalid_key"), (["selector": [:], "conflicts": "yes"], "invalid_boolean"),
            (["selector": [:], "r": "x"], "invalid_pos_integer"), (["selector": [:], "r": 0], "invalid_pos_integer"),
            (["selector": [:], "execution_stats": 1], "invalid_boolean"), (["selector": [:], "use_index": 5], "bad_request"),
            (["selector": ["v": ["$foo": 1]]], "invalid_operator"), (["selector": [:], "sort": ["other"]], "no_usable_index"),
        ]
        for (body, error) in cases {
            let reply = try await server.request("POST", "/db/_find", json: body)
            XCTAssertEqual(reply.status, 400, "\(body)")
            XCTAssertEqual(reply.json["error"]?.stringValue, error, "\(body): \(reply.json)")
        }
    }

    func testUsersFindOnlyTheirChannelsAndStatisticsAreReported() async throws {
        let server = try await TestServer(self)
        await XCTAssertEqualAsync(try await server.request("PUT", "/db").status, 201)
        await XCTAssertEqualAsync(try await server.addUser("alice", ["password": "pw", "channels": ["red"]]), 201)
        _ = try await server.request("POST", "/db/_bulk_docs", json: ["docs": [
            ["_id": "r1", "n": 1, "channels": ["red"]], ["_id": "b1", "n": 2, "channels": ["blue"]], ["_id": "r2", "n": 3, "channels": ["red"]],
        ]])
        let mine = try await server.request("POST", "/db/_find", json: ["selector": ["n": ["$gt": 0]], "fields": ["_id"], "limit": 1, "skip": 1,
                                                                         "execution_stats": true],
                                            as: .user("alice", "pw"))
        XCTAssertEqual(mine.json["docs"], [["_id": "r2"]], "the blue document is not counted by skip either")
        XCTAssertEqual(mine.json["execution_stats"]?["results_returned"], 1)
        XCTAssertEqual(mine.json["execution_stats"]?["total_quorum_docs_examined"], 0)
        XCTAssertNotNil(mine.json["execution_stats"]?["execution_time_ms"]?.doubleValue)
    }

    /// As CouchDB 3.3.3 counts (recorded with curl: 4 documents and an index's design document give
    /// `total_docs_examined` 5 for 4 results): a design document read from `_all_docs` is examined,
    /// never answered — which decides when the "examined is high" warning appears.
    func testDesignDocumentsReadFromAllDocsAreExaminedNotAnswered() async throws {
        let server = try await TestServer(self)
        await XCTAssertEqualAsync(try await server.request("PUT", "/db").status, 201)
        _ = try await server.request("POST", "/db/_bulk_docs", json: ["docs": [["_id": "x1"], ["_id": "x2"], ["_id": "x3"], ["_id": "x4"]]])
        _ = try await server.request("POST", "/db/_index", json: ["index": ["fields": ["c"]], "ddoc": "i", "name": "c"])
        let all = try await server.request("POST", "/db/_find", json: ["selector": ["zz": ["$exists": false]], "execution_stats": true])
        XCTAssertEqual(all.json["docs"]?.arrayValue?.count, 4)
        XCTAssertEqual(all.json["execution_stats"]?["total_docs_examined"], 5)
        XCTAssertEqual(all.json["execution_stats"]?["results_returned"], 4)

        // `_all_docs` is bounded by string bounds only, and the selector compares `_id` in raw order
        // (strings above arrays and objects): CouchDB 3.3.3's answers and counts, recorded with curl.
        let cases: [(JSON, [String], Int)] = [
            (["$gt": 10, "$lte": ""], [], 0), (["$lt": 5], [], 5), (["$gt": [1]], ["x1", "x2", "x3", "x4"], 5),
            (["$gt": 5], ["x1", "x2", "x3", "x4"], 5), (["$lte": "x2"], ["x1", "x2"], 3), (["$gte": "x2", "$lt": [:]], [], 3),
        ]
        for (condition, ids, examined) in cases {
            let reply = try await server.request("POST", "/db/_find", json: ["selector": ["_id": condition], "execution_stats": true])
            XCTAssertEqual(reply.json["docs"]?.arrayValue?.compactMap { $0["_id"]?.stringValue }, ids, "\(condition)")
            XCTAssertEqual(reply.json["execution_stats"]?["total_docs_examined"], .integer(examined), "\(condition)")
        }
    }

    /// `stale: "ok"` and `update: false` read a json index as it is (CouchDB also takes `stale: false`
    /// and `"false"`, and fails on any other value: here a 400).
    func testStaleAndUpdateFalseReadTheIndexAsItIs() async throws {
        let server = try await TestServer(self)
        await XCTAssertEqualAsync(try await server.request("PUT", "/db").status, 201)
        _ = try await server.request("POST", "/db/_index", json: ["index": ["fields": ["n"]], "ddoc": "i", "name": "n"])
        _ = try await server.request("PUT", "/db/one", json: ["n": 1])
        let built = try await server.request("POST", "/db/_find", json: ["selector": ["n": ["$gt": 0]]])
        XCTAssertEqual(built.json["docs"]?.arrayValue?.count, 1)
        _ = try await server.request("PUT", "/db/two", json: ["n": 2])
        for option: (String, JSON) in [("stale", "ok"), ("update", false)] {
            let stale = try await server.request("POST", "/db/_find", json: ["selector": ["n": ["$gt": 0]], option.0: option.1])
            XCTAssertEqual(stale.json["docs"]?.arrayValue?.compactMap { $0["_id"]?.stringValue }, ["one"], "\(option)")
        }
        for fresh: JSON in [false, "false"] {
            let reply = try await server.request("POST", "/db/_find", json: ["selector": ["n": ["$gt": 0]], "stale": fresh])
            XCTAssertEqual(reply.json["docs"]?.arrayValue?.compactMap { $0["_id"]?.stringValue }, ["one", "two"], "\(fresh)")
        }
        for bad: JSON in [true, "x"] {
            let reply = try await server.request("POST", "/db/_find", json: ["selector": [:], "stale": bad])
            XCTAssertEqual(reply.status, 400, "\(bad)")
        }
    }
}
