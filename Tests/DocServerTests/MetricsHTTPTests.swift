import DocStore
import Foundation
import XCTest

/// `/_node/_local/_prometheus`: the server's metrics in Prometheus's text format, moving with the load.
final class MetricsHTTPTests: XCTestCase {
    /// The samples of an exposition: `name{labels}` → value (comments skipped; every other line must be
    /// a sample, which is what makes the text parse).
    private func samples(_ server: TestServer) async throws -> [String: Double] {
        let reply = try await server.request("GET", "/_node/_local/_prometheus")
        XCTAssertEqual(reply.status, 200)
        XCTAssertEqual(reply.header("Content-Type"), "text/plain; version=0.0.4; charset=utf-8")
        var samples: [String: Double] = [:]
        for line in reply.text.split(separator: "\n") where !line.hasPrefix("#") {
            guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else {
                XCTFail("not a sample: \(line)")
                continue
            }
            samples[String(line[..<space])] = value
        }
        return samples
    }

    func testCountersMoveWithRequestsAndWrites() async throws {
        let server = try await TestServer(self)
        await XCTAssertEqualAsync(try await server.request("PUT", "/db").status, 201)
        let before = try await samples(server)
        for n in 0..<5 {
            await XCTAssertEqualAsync(try await server.request("PUT", "/db/d\(n)", json: ["n": .integer(n)]).status, 201)
            await XCTAssertEqualAsync(try await server.request("GET", "/db/d\(n)").status, 200)
        }
        await XCTAssertEqualAsync(try await server.request("GET", "/db/missing").status, 404)
        let docs: JSON = ["docs": .array((5..<15).map { ["_id": .string("d\($0)")] })]
        await XCTAssertEqualAsync(try await server.request("POST", "/db/_bulk_docs", json: docs).status, 201)

        let after = try await samples(server)
        XCTAssertEqual(after["couchdb_httpd_requests_total"], (before["couchdb_httpd_requests_total"] ?? 0) + 13,
                       "twelve requests and the first exposition")
        XCTAssertEqual(after[#"docstore_http_requests_total{route="/{db}/{docid}",status="201"}"#], 5)
        XCTAssertEqual(after[#"docstore_http_requests_total{route="/{db}/{docid}",status="404"}"#], 1)
        XCTAssertEqual(after[#"docstore_http_requests_total{route="/{db}/_bulk_docs",status="201"}"#], 1)
        XCTAssertEqual(after[#"couchdb_httpd_request_methods{method="GET"}"#].map { $0 - (before[#"couchdb_httpd_request_methods{method="GET"}"#] ?? 0) }, 7)
        XCTAssertEqual(after["couchdb_database_reads_total"], 5)
        XCTAssertEqual(after["couchdb_open_databases_total"], 3, "the database, _replicator and _users")
        XCTAssertNotNil(after[#"docstore_http_request_duration_seconds_count{route="/{db}/{docid}"}"#])
        // Writes are counted as the database publishes them, just after each commit.
        try await eventually {
            (try await self.samples(server)["couchdb_database_writes_total"] ?? 0) == 15
        }

        // Admins only.
        await XCTAssertEqualAsync(try await server.addUser("alice", ["password": "pw", "channels": ["red"]]), 201)
        let refused = try await server.request("GET", "/_node/_local/_prometheus", as: .user("alice", "pw"))
        XCTAssertEqual(refused.status, 401)
    }

    /// `/_node/_local/_stats`: the figures CouchDB also keeps, nested and described as CouchDB's, the
    /// same values `_prometheus` serves; a path names a part of them.
    func testStatisticsAsCouchDBNestsThem() async throws {
        let server = try await TestServer.withDatabase(self)
        for n in 0..<3 {
            await XCTAssertEqualAsync(try await server.request("PUT", "/db/d\(n)", json: [:]).status, 201)
            await XCTAssertEqualAsync(try await server.request("GET", "/db/d\(n)").status, 200)
        }
        let all = try await server.request("GET", "/_node/_local/_stats")
        XCTAssertEqual(all.status, 200)
        XCTAssertEqual(all.json["couchdb"]?["database_reads"], ["value": 3, "type": "counter",
                                                               "desc": "number of times a document was read from a database"])
        XCTAssertEqual(all.json["couchdb"]?["httpd_status_codes"]?["201"]?["value"], 4, "the database and three documents")
        XCTAssertEqual(all.json["couch_replicator"]?["jobs"]?["total"]?["type"], "gauge")
        let prometheus = try await samples(server)
        let created = try await server.request("GET", "/_node/_local/_stats/couchdb/httpd_status_codes/201")
        XCTAssertEqual(created.json["desc"], "number of HTTP 201 responses")
        XCTAssertEqual(created.json["value"]?.doubleValue, prometheus[#"couchdb_httpd_status_codes{code="201"}"#])
        await XCTAssertEqualAsync(try await server.request("GET", "/_node/_local/_stats/couchdb/httpd_request_methods/PUT").json["value"], 4)
        await XCTAssertEqualAsync(try await server.request("GET", "/_node/_local/_stats/nope").json, .null)
    }
}
