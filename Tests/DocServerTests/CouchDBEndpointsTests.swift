import DocStore
import Foundation
import XCTest

/// Endpoints and methods as CouchDB 3.3.3 answers them (each expectation read off one): several
/// queries in one request, `_dbs_info`, and the methods and names each endpoint refuses.
final class CouchDBEndpointsTests: XCTestCase {
    private func seeded() async throws -> TestServer {
        let server = try await TestServer.withDatabase(self)
        let docs: JSON = ["docs": [["_id": "a", "n": 1], ["_id": "b", "n": 2], ["_id": "c", "n": 3],
                                   ["_id": "_design/d", "views": ["v": ["map": "function(doc) { if (doc.n) emit(doc.n, doc._id); }"]],
                                    "lists": ["l": "function(head, req) { return 'x'; }"]]]]
        await XCTAssertEqualAsync(try await server.request("POST", "/db/_bulk_docs", json: docs).status, 201)
        await XCTAssertEqualAsync(try await server.request("PUT", "/db/_local/l", json: ["v": 1]).status, 201)
        return server
    }

    private func ids(_ answer: JSON?) -> [String] {
        (answer?["rows"]?.arrayValue ?? []).map { $0["id"]?.stringValue ?? $0["key"]?.stringValue ?? "?" }
    }

    func testSeveralQueriesInOneRequest() async throws {
        let server = try await seeded()
        // Each query's members (JSON values) over the query string's parameters.
        let all = try await server.request("POST", "/db/_all_docs/queries?limit=2", json: ["queries": [
            ["keys": ["c", "nope"]], [:], ["startkey": "b", "limit": 5, "include_docs": true], ["descending": true, "skip": 1],
        ]])
        XCTAssertEqual(all.status, 200, all.text)
        let results = try XCTUnwrap(all.json["results"]?.arrayValue)
        XCTAssertEqual(results.map(ids), [["c", "nope"], ["_design/d", "a"], ["b", "c"], ["b", "a"]])
        XCTAssertEqual(results[0]["rows"]?[1], ["key": "nope", "error": "not_found"])
        XCTAssertEqual(results[2]["rows"]?[0]?["doc"]?["n"], 2)
        XCTAssertEqual(results[1]["total_rows"], 4)

        let view = try await server.request("POST", "/db/_design/d/_view/v/queries", json: ["queries": [["key": 2], ["startkey": 2, "descending": false]]])
        XCTAssertEqual(try XCTUnwrap(view.json["results"]?.arrayValue).map(ids), [["b"], ["b", "c"]])
        let design = try await server.request("POST", "/db/_design_docs/queries", json: ["queries": [[:]]])
        XCTAssertEqual(ids(design.json["results"]?[0]), ["_design/d"])
        let local = try await server.request("POST", "/db/_local_docs/queries", json: ["queries": [["include_docs": true]]])
        XCTAssertEqual(local.json["results"]?[0]?["rows"]?[0]?["doc"]?["v"], 1)

        // CouchDB's refusals: no `queries`, another method, a faulty query (the whole request), and
        // `queries` sent to the view itself.
        let missing = try await server.request("POST", "/db/_all_docs/queries", json: [:])
        XCTAssertEqual(missing.json, ["error": "bad_request", "reason": "POST body must include `queries` parameter."])
        let get = try await server.request("GET", "/db/_all_docs/queries")
        XCTAssertEqual(get.status, 405)
        XCTAssertEqual(get.json, ["error": "method_not_allowed", "reason": "Only POST allowed"])
        await XCTAssertEqualAsync(try await server.request("POST", "/db/_all_docs/queries", json: ["queries": [[:], ["limit": -1]]]).status, 400)
        let old = try await server.request("POST", "/db/_design/d/_view/v", json: ["queries": [[:]]])
        XCTAssertEqual(old.json["reason"], "The `queries` parameter is no longer supported at this endpoint")
    }

    func testDatabasesInfo() async throws {
        let server = try await seeded()
        await XCTAssertEqualAsync(try await server.request("PUT", "/other").status, 201)
        let listed = try await server.request("GET", "/_dbs_info?startkey=%22db%22")
        XCTAssertEqual(listed.json.arrayValue?.map { $0["key"] }, ["db", "other"])
        XCTAssertEqual(listed.json[0]?["info"]?["doc_count"], 4)
        XCTAssertEqual(listed.json[0]?["info"]?["db_name"], "db")
        // As a single CouchDB 3.3 node describes a database: one copy, one "shard".
        XCTAssertEqual(listed.json[0]?["info"]?["cluster"], ["q": 1, "n": 1, "w": 1, "r": 1])
        let asked = try await server.request("POST", "/_dbs_info", json: ["keys": ["other", "nope", 3]])
        XCTAssertEqual(asked.json.arrayValue?.map { $0["key"] }, ["other", "nope", 3])
        XCTAssertEqual(asked.json[1], ["key": "nope", "error": "not_found"])
        XCTAssertEqual(asked.json[0]?["info"]?["doc_count"], 0)
        let noKeys = try await server.request("POST", "/_dbs_info", json: [:])
        XCTAssertEqual(noKeys.json, ["error": "bad_request", "reason": "`keys` member must exist."])
        let tooMany = try await server.request("POST", "/_dbs_info", json: ["keys": JSON((0...100).map { "db\($0)" })])
        XCTAssertEqual(tooMany.json, ["error": "bad_request", "reason": "too_many_keys"])
        await XCTAssertEqualAsync(try await server.request("PUT", "/_dbs_info").status, 405)
    }

    func testMethodsAndNamesRefusedAsCouchDBRefusesThem() async throws {
        let server = try await seeded()
        // An attachment name is checked before the document's revision.
        let reserved = try await server.request("PUT", "/db/a/_x", body: Data("x".utf8), contentType: "text/plain")
        XCTAssertEqual(reserved.status, 400)
        XCTAssertEqual(reserved.json, ["error": "bad_request", "reason": "Attachment name '_x' starts with prohibited character '_'"])
        await XCTAssertEqualAsync(try await server.request("PUT", "/db/_design/d/_x", body: Data("x".utf8), contentType: "text/plain").status, 400)
        let post = try await server.request("POST", "/db/a/f.txt", body: Data("x".utf8), contentType: "text/plain")
        XCTAssertEqual(post.json, ["error": "method_not_allowed", "reason": "Only DELETE,GET,HEAD,PUT allowed"])
        // A design document's unknown `_x` is an attachment it does not have.
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_design/d/_x").json,
                                  ["error": "not_found", "reason": "Document is missing attachment"])
        // A database named `_x` cannot be made; `/db/_x` is no document.
        await XCTAssertEqualAsync(try await server.request("PUT", "/_x").json["error"], "illegal_database_name")
        await XCTAssertEqualAsync(try await server.request("POST", "/db/_x", json: [:]).json,
                                  ["error": "bad_request", "reason": "Referer header required."])
        await XCTAssertEqualAsync(try await server.request("PATCH", "/db/_x").status, 405)
        await XCTAssertEqualAsync(try await server.request("PUT", "/db/_design", json: [:]).json["error"], "illegal_docid")
        await XCTAssertEqualAsync(try await server.request("POST", "/db/_local/l", json: [:]).json["reason"], "Referer header required.")
        await XCTAssertEqualAsync(try await server.request("DELETE", "/db/_index").json,
                                  ["error": "method_not_allowed", "reason": "Only GET,POST allowed"])
        await XCTAssertEqualAsync(try await server.request("DELETE", "/_node/_local").json["name"], "nonode@nohost")
        // A list takes GET and POST; `_view_cleanup` any method.
        let list = try await server.request("PUT", "/db/_design/d/_list/l/v")
        XCTAssertEqual(list.json, ["error": "method_not_allowed", "reason": "Only GET,POST,HEAD allowed"])
        let cleanup = try await server.request("GET", "/db/_view_cleanup")
        XCTAssertEqual(cleanup.status, 202)
        XCTAssertEqual(cleanup.json, ["ok": true])
    }

    /// `/_db_updates` as CouchDB 3.3 answers it: each database's latest events in the order they came,
    /// kept across a restart; `longpoll` and `continuous` wait for the next; admins only.
    func testDatabaseUpdates() async throws {
        let server = try await TestServer.withDatabase(self)
        await XCTAssertEqualAsync(try await server.request("PUT", "/db/a", json: ["v": 1]).status, 201)
        await XCTAssertEqualAsync(try await server.request("PUT", "/gone").status, 201)
        await XCTAssertEqualAsync(try await server.request("DELETE", "/gone").status, 200)
        // Events are written as they come, after the request that made them: read until all are there.
        func read(_ query: String = "") async throws -> (events: [String], last: String) {
            let answer = try await server.request("GET", "/_db_updates" + query)
            let events = (answer.json["results"]?.arrayValue ?? []).compactMap { row -> String? in
                guard let name = row["db_name"]?.stringValue, let type = row["type"]?.stringValue else { return nil }
                return "\(type):\(name)"
            }
            return (events, answer.json["last_seq"]?.stringValue ?? "0")
        }
        func events(_ query: String = "") async throws -> [String] { try await read(query).events }
        var (listed, last) = try await read()
        while !listed.contains("deleted:gone") {
            // Not all there yet: a longpoll after the last one read answers when the next comes.
            _ = try await server.request("GET", "/_db_updates?feed=longpoll&timeout=30000&since=\(last)")
            (listed, last) = try await read()
        }
        XCTAssertEqual(listed.filter { !$0.hasSuffix(":_users") && !$0.hasSuffix(":_replicator") },
                       ["created:db", "updated:db", "created:gone", "deleted:gone"])
        await XCTAssertEqualAsync(try await events("?descending=true&limit=1"), ["deleted:gone"])
        let current = try await server.request("GET", "/_db_updates")
        let now = try XCTUnwrap(current.json["last_seq"]?.stringValue)

        // A longpoll waits for the next event.
        async let waited = server.request("GET", "/_db_updates?feed=longpoll&timeout=30000&since=\(now)")
        await XCTAssertEqualAsync(try await server.request("PUT", "/later").status, 201)
        let next = try await waited
        XCTAssertEqual(next.json["results"]?[0]?["db_name"], "later")
        XCTAssertEqual(next.json["results"]?[0]?["type"], "created")
        // A continuous feed: one line per event, the last sequence at its end.
        let feed = try await server.request("GET", "/_db_updates?feed=continuous&limit=2")
        let lines = feed.text.split(separator: "\n").map { (try? JSON(parsing: Array($0.utf8))) ?? .null }
        XCTAssertEqual(lines.count, 3, feed.text)
        XCTAssertNotNil(lines.last?["last_seq"])
        await XCTAssertEqualAsync(try await server.request("GET", "/_db_updates?feed=x").status, 400)
        await XCTAssertEqualAsync(try await server.request("POST", "/_db_updates", json: [:]).status, 405)
        await XCTAssertEqualAsync(try await server.request("GET", "/_db_updates", as: .none).status, 401)
    }

    /// `POST /{db}/_index/_bulk_delete`: design documents lose their Mango indexes, as CouchDB 3.3
    /// answers (each list newest first).
    func testBulkDeleteOfIndexes() async throws {
        let server = try await TestServer.withDatabase(self)
        for (fields, ddoc) in [(["a"], "one"), (["b"], "two"), (["c"], "two")] {
            await XCTAssertEqualAsync(try await server.request("POST", "/db/_index", json: ["index": ["fields": JSON(fields)], "ddoc": .string(ddoc)]).status, 200)
        }
        let deleted = try await server.request("POST", "/db/_index/_bulk_delete", json: ["docids": ["one", "_design/two", "nope"]])
        XCTAssertEqual(deleted.status, 200)
        XCTAssertEqual(deleted.json, ["success": [["id": "_design/two", "ok": true], ["id": "_design/one", "ok": true]],
                                      "fail": [["id": "_design/nope", "error": "not_found"]]])
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_index").json["total_rows"], 1, "_all_docs alone")
        await XCTAssertEqualAsync(try await server.request("POST", "/db/_index/_bulk_delete", json: [:]).json,
                                  ["error": "missing_required_key", "reason": "Missing required key: docids"])
        await XCTAssertEqualAsync(try await server.request("POST", "/db/_index/_bulk_delete", json: ["docids": "x"]).json["error"], "invalid_bulk_docs")
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_index/_bulk_delete").status, 405)
    }
}
