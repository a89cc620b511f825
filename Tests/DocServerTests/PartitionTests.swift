@testable import DocServer
import DocStore
import Foundation
import TestSupport
import XCTest

/// CouchDB 3.3.3's partitioned databases, as recorded with curl from the real one and as its own
/// partition tests expect them.
final class PartitionTests: XCTestCase {
    /// A partitioned database with foo:2…foo:20 (even values) and bar:1…bar:19 (odd).
    private func server() async throws -> TestServer {
        let server = try await TestServer(self)
        await XCTAssertEqualAsync(try await server.request("PUT", "/db?partitioned=true").json, ["ok": true])
        let docs: [JSON] = (1...20).map { i in
            ["_id": .string(i % 2 == 0 ? "foo:\(i)" : "bar:\(i)"), "value": .integer(i), "some": "field", "group": i % 3 == 0 ? "one" : "two"]
        }
        await XCTAssertEqualAsync(try await server.request("POST", "/db/_bulk_docs", json: ["docs": .array(docs)]).status, 201)
        return server
    }

    func testDatabasesAndDocumentIDs() async throws {
        let server = try await server()
        await XCTAssertEqualAsync(try await server.request("GET", "/db").json["props"], ["partitioned": true])
        _ = try await server.request("PUT", "/plain")
        await XCTAssertEqualAsync(try await server.request("GET", "/plain").json["props"], [:])
        await XCTAssertEqualAsync(try await server.request("PUT", "/bad?partitioned=tru").json,
                                  ["error": "bad_request", "reason": "Invalid `partitioned` parameter"])
        await XCTAssertEqualAsync(try await server.request("PUT", "/_replicator?partitioned=true").json["reason"],
                                  "Cannot partition a system database")

        let put = try await server.request("PUT", "/db/my-partition:doc", json: ["partitioned_doc": true])
        XCTAssertEqual(put.json["rev"], "1-43d86359741cb629c0953a2beb6e9d7a", "CouchDB's revision")
        for (id, error, reason) in [("not-partitioned", "illegal_docid", "Doc id must be of form partition:id"),
                                    ("_bad:partitioned", "illegal_docid", "Only reserved document ids may start with underscore."),
                                    ("bad:", "illegal_docid", "Document id must not be empty"),
                                    (":bad", "illegal_partition", "Partition must not be empty")] {
            let refused = try await server.request("PUT", "/db/\(id)", json: [:])
            XCTAssertEqual(refused.status, 400, id)
            XCTAssertEqual(refused.json, ["error": .string(error), "reason": .string(reason)], id)
        }
        await XCTAssertEqualAsync(try await server.request("POST", "/db", json: ["x": 1]).json["reason"], "Doc id must be of form partition:id")
        let bulk = try await server.request("POST", "/db/_bulk_docs", json: ["docs": [["_id": "ok:3"], ["_id": "foo1"]]])
        XCTAssertEqual(bulk.status, 400)
        await XCTAssertEqualAsync(try await server.request("GET", "/db/ok:3").status, 404, "nothing written")
        await XCTAssertEqualAsync(try await server.request("PUT", "/db/_design/d", json: [:]).status, 201)
        await XCTAssertEqualAsync(try await server.request("GET", "/db/nocolon").json["reason"], "Doc id must be of form partition:id")
        let bulkGet = try await server.request("POST", "/db/_bulk_get", json: ["docs": [["id": "nocolon"]]])
        XCTAssertEqual(bulkGet.json["results"]?[0]?["docs"]?[0]?["error"]?["error"], "illegal_docid")
        await XCTAssertEqualAsync(try await server.request("POST", "/db/_purge", json: ["nocolon": []]).json["error"], "illegal_docid")
    }

    func testPartitionInfoAllDocsAndLimits() async throws {
        let server = try await server()
        let info = try await server.request("GET", "/db/_partition/foo")
        XCTAssertEqual(info.json["partition"], "foo")
        XCTAssertEqual(info.json["doc_count"], 10)
        XCTAssertEqual(info.json["doc_del_count"], 0)
        XCTAssertGreaterThan(info.json["sizes"]?["external"]?.intValue ?? 0, 0)
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_partition/none").json["doc_count"], 0)
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_partition").json["reason"], "invalid_partition_req")
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_partition/_bar/_all_docs").json,
                                  ["error": "illegal_partition", "reason": "Partition must not start with an underscore"])
        _ = try await server.request("PUT", "/plain")
        await XCTAssertEqualAsync(try await server.request("GET", "/plain/_partition/foo").json["reason"], "database is not partitioned")

        let all = try await server.request("GET", "/db/_partition/foo/_all_docs")
        XCTAssertEqual(all.json["rows"]?.arrayValue?.compactMap { $0["id"]?.stringValue },
                       ["foo:10", "foo:12", "foo:14", "foo:16", "foo:18", "foo:2", "foo:20", "foo:4", "foo:6", "foo:8"])
        let ranged = try await server.request("GET", "/db/_partition/foo/_all_docs?start_key=%22bar:%22&limit=2")
        XCTAssertEqual(ranged.json["rows"]?.arrayValue?.compactMap { $0["id"]?.stringValue }, ["foo:10", "foo:12"])
        let descending = try await server.request("GET", "/db/_partition/foo/_all_docs?descending=true&limit=2")
        XCTAssertEqual(descending.json["rows"]?.arrayValue?.compactMap { $0["id"]?.stringValue }, ["foo:8", "foo:6"])

        _ = try await server.request("PUT", "/_node/_local/_config/query_server_config/partition_query_limit", json: "3",
                                     headers: ["X-Couch-Persist": "false"])
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_partition/foo/_all_docs").json["rows"]?.arrayValue?.count, 3)
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_partition/foo/_all_docs?limit=4").json,
                                  ["error": "query_parse_error", "reason": "Limit is too large, must not exceed 3"])
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_all_docs?limit=4").json["rows"]?.arrayValue?.count, 4, "global: no limit")
    }

    func testPartitionedViews() async throws {
        let server = try await server()
        let designs: JSON = ["docs": [
            ["_id": "_design/map", "views": ["some": ["map": "function(doc) { if (doc.some) emit(doc.value, doc.some); }"]]],
            ["_id": "_design/global", "options": ["partitioned": false],
             "views": ["some": ["map": "function(doc) { if (doc.some) emit(doc.value, doc.some); }"]]],
            ["_id": "_design/reduce", "views": ["some": ["map": "function(doc) { if (doc.group) emit([doc.some, doc.group], 1); }", "reduce": "_count"]]],
        ]]
        await XCTAssertEqualAsync(try await server.request("POST", "/db/_bulk_docs", json: designs).status, 201)
        let rows = try await server.request("GET", "/db/_partition/foo/_design/map/_view/some?limit=3&skip=1")
        XCTAssertEqual(rows.json["rows"]?.arrayValue?.compactMap { $0["id"]?.stringValue }, ["foo:4", "foo:6", "foo:8"])
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_design/map/_view/some").json,
                                  ["error": "query_parse_error", "reason": "`partition` parameter is mandatory for queries to this view."])
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_partition/foo/_design/global/_view/some").json["reason"],
                                  "`partition` parameter is not supported in this design doc")
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_design/global/_view/some").json["rows"]?.arrayValue?.count, 20)
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_partition/foo/_design/map/_view/some?partition=bar").json["reason"],
                                  "Conflicting value for `partition` in query string")
        let grouped = try await server.request("GET", "/db/_partition/foo/_design/reduce/_view/some?group_level=2")
        // foo has 2…20: 6, 12, 18 in group one, the seven others in two.
        XCTAssertEqual(grouped.json["rows"], [["key": ["field", "one"], "value": 3], ["key": ["field", "two"], "value": 7]])
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_partition/foo/_design/reduce/_view/some").json["rows"],
                                  [["key": .null, "value": 10]])
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_partition/fake/_design/nope/_view/some").status, 404)
    }

    func testPartitionedMangoAndSizeLimit() async throws {
        let server = try await server()
        let index = try await server.request("POST", "/db/_index", json: ["index": ["fields": ["some"]]])
        XCTAssertEqual(index.json["result"], "created")
        let found = try await server.request("POST", "/db/_partition/foo/_find", json: ["selector": ["some": "field"], "limit": 20])
        XCTAssertEqual(found.json["docs"]?.arrayValue?.count, 10)
        XCTAssertTrue(found.json["docs"]?.arrayValue?.allSatisfy { $0["_id"]?.stringValue?.hasPrefix("foo:") == true } ?? false)
        let explained = try await server.request("POST", "/db/_partition/bar/_explain", json: ["selector": ["some": "field"]])
        XCTAssertEqual(explained.json["index"]?["def"], ["fields": [["some": "asc"]]])
        XCTAssertEqual(explained.json["mrargs"]?["partition"], "bar")
        let global = try await server.request("POST", "/db/_explain", json: ["selector": ["some": "field"]])
        XCTAssertEqual(global.json["index"]?["name"], "_all_docs", "a partitioned index serves no global query")
        XCTAssertEqual(global.json["mrargs"]?["partition"], .null)
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_index").json["indexes"]?[1]?["partitioned"], true)
        let sorted = try await server.request("POST", "/db/_partition/foo/_find", json: ["selector": ["value": ["$gt": 0]], "sort": ["value"]])
        XCTAssertEqual(sorted.json["reason"], "No partitioned index exists for this sort, try indexing by the sort fields.")

        _ = try await server.request("PUT", "/_node/_local/_config/couchdb/max_partition_size", json: "10", headers: ["X-Couch-Persist": "false"])
        let overflow = try await server.request("PUT", "/db/foo:new", json: ["v": 1])
        XCTAssertEqual(overflow.status, 403)
        XCTAssertEqual(overflow.json, ["error": "partition_overflow", "reason": "Partition limit exceeded due to update on 'foo:new'"])
        let mixed = try await server.request("POST", "/db/_bulk_docs", json: ["docs": [["_id": "foo:bulk"], ["_id": "_design/x"]]])
        XCTAssertEqual(mixed.json[0]?["error"], "partition_overflow")
        XCTAssertEqual(mixed.json[1]?["ok"], true)
        let current = try await server.request("GET", "/db/foo:2").json
        await XCTAssertEqualAsync(try await server.request("DELETE", "/db/foo:2?rev=\(current["_rev"]!.stringValue!)").status, 200, "deletes pass")
    }
}
