import DocStore
import Foundation
import TestSupport
import XCTest

/// Requests whose answers Apache CouchDB 3.3.3 gave (`Tests/Fixtures/couchdb-3.3.3/conformance.json`,
/// recorded by `Tests/Interop/conformance_record.py`), replayed against DocServer: each case in a
/// database of its own, its setup first, then the request, whose status and body must be CouchDB's —
/// but for the differences `Docs/Server.md` lists, whose answers are asserted here as documented.
final class CouchDBConformanceTests: XCTestCase {
    private struct Case {
        let name: String
        let setup: [(method: String, path: String, body: String?)]
        let method: String
        let path: String
        let body: String?
        let headers: [String: String]
        let status: Int
        let answer: String
    }

    /// The cases where DocServer differs from CouchDB on purpose (`Docs/Server.md`): a built-in
    /// reduce over values it cannot reduce gives each such group the value
    /// `{"error": "builtin_reduce_error", …}` (as CouchDB does for a `_sum` of strings), where CouchDB
    /// answers `_stats` over a `null` with a 500 `invalid_value` (its reduce crashing).
    private static let documentedDifferences: Set<String> = [
        "_stats over arrays with nulls", "_stats over arrays with nulls, grouped", "_stats over null and array rows",
    ]

    /// Requests CouchDB crashes on (500) that DocServer refuses as malformed (400 `bad_request`), as
    /// `Docs/Server.md` lists them: a `_security` object whose names or roles are no strings.
    private static let refusedWhereCouchDBCrashes: Set<String> = [
        "_security with a number as a name", "_security with a boolean as a role",
    ]

    private func cases() throws -> [Case] {
        let data = try Data(contentsOf: CouchDBFixtures.directory.appendingPathComponent("conformance.json"))
        let file = try JSON(parsing: data)
        XCTAssertEqual(file["couchdb"], "3.3.3")
        return try XCTUnwrap(file["cases"]?.arrayValue).map { entry in
            let request = entry["request"] ?? .null
            return Case(
                name: entry["name"]?.stringValue ?? "",
                setup: (entry["setup"]?.arrayValue ?? []).map {
                    ($0["method"]?.stringValue ?? "", $0["path"]?.stringValue ?? "", $0["body"]?.stringValue)
                },
                method: request["method"]?.stringValue ?? "",
                path: request["path"]?.stringValue ?? "",
                body: request["body"]?.stringValue,
                headers: (request["headers"]?.objectValue ?? [:]).reduce(into: [:]) { $0[$1.key] = $1.value.stringValue },
                status: entry["status"]?.intValue ?? 0,
                answer: entry["body"]?.stringValue ?? "")
        }
    }

    func testDocServerAnswersAsCouchDB() async throws {
        let cases = try cases()
        XCTAssertGreaterThanOrEqual(cases.count, 20)
        let server = try await TestServer(self)
        for (number, entry) in cases.enumerated() {
            let db = "conformance_\(number)"
            let created = try await server.request("PUT", "/\(db)")
            XCTAssertEqual(created.status, 201, entry.name)
            for step in entry.setup {
                let reply = try await server.request(step.method, step.path.replacingOccurrences(of: "{db}", with: db),
                                                     body: step.body.map { Data($0.utf8) }, contentType: "application/json")
                XCTAssertLessThan(reply.status, 300, "\(entry.name): setup \(step.method) \(step.path): \(reply.text)")
            }
            var headers = entry.headers
            if entry.body != nil { headers["Content-Type"] = "application/json" }
            let reply = try await server.request(entry.method, entry.path.replacingOccurrences(of: "{db}", with: db),
                                                 body: entry.body.map { Data($0.utf8) }, headers: headers)
            let expected = try JSON(parsing: Data(entry.answer.utf8))
            let context = "\(entry.name): \(reply.text.prefix(400))"
            if Self.documentedDifferences.contains(entry.name) {
                XCTAssertEqual(entry.status, 500, "CouchDB's recorded answer: \(entry.name)")
                XCTAssertEqual(expected["error"], "invalid_value", entry.name)
                XCTAssertEqual(reply.status, 200, context)
                let values = (reply.json["rows"]?.arrayValue ?? []).map { $0["value"]?["error"] }
                XCTAssertTrue(values.contains(.string("builtin_reduce_error")), context)
                continue
            }
            if Self.refusedWhereCouchDBCrashes.contains(entry.name) {
                XCTAssertEqual(entry.status, 500, "CouchDB's recorded answer: \(entry.name)")
                XCTAssertEqual(reply.status, 400, context)
                XCTAssertEqual(reply.json["error"], "bad_request", context)
                continue
            }
            XCTAssertEqual(reply.status, entry.status, context)
            switch entry.name {
            case _ where entry.path.contains("/_changes") && entry.status == 200:
                // Sequences are each server's own: the same documents and revisions, in order.
                func rows(_ answer: JSON) -> [JSON] {
                    (answer["results"]?.arrayValue ?? []).map { ["id": $0["id"] ?? .null, "changes": $0["changes"] ?? .null] }
                }
                XCTAssertEqual(rows(reply.json), rows(expected), context)
                XCTAssertFalse(rows(expected).isEmpty, entry.name)
            case "sorted=false":
                // Unsorted rows come in the order CouchDB's shards answer: the same rows, no figures.
                XCTAssertNil(reply.json["total_rows"], context)
                XCTAssertNil(reply.json["offset"], context)
                XCTAssertEqual(Set(reply.json["rows"]?.arrayValue ?? []), Set(expected["rows"]?.arrayValue ?? []), context)
            default:
                XCTAssertEqual(reply.json, expected, context)
            }
        }
    }
}
