import DocStore
import Foundation
import XCTest

/// Writes answered as CouchDB 3.3.3 answers them (each answer below was checked against one).
final class WriteSemanticsTests: XCTestCase {
    func testDeletedDocumentsAreMadeAgainOnlyFromTheRoot() async throws {
        let server = try await TestServer.withDatabase(self)
        let created = try await server.request("PUT", "/db/x", json: ["v": 1])
        let first = try XCTUnwrap(created.json["rev"]?.stringValue)
        // A deletion written by PUT is a 200, as DELETE.
        let deleted = try await server.request("PUT", "/db/x", json: ["_rev": .string(first), "_deleted": true])
        XCTAssertEqual(deleted.status, 200)
        let tombstone = try XCTUnwrap(deleted.json["rev"]?.stringValue)
        // Naming the tombstone (or deleting again) is a conflict; naming nothing makes the document again.
        for body: JSON in [["_rev": .string(tombstone), "v": 2], ["_rev": .string(tombstone), "_deleted": true], ["_deleted": true]] {
            let refused = try await server.request("PUT", "/db/x", json: body)
            XCTAssertEqual(refused.status, 409, "\(body)")
            XCTAssertEqual(refused.json, ["error": "conflict", "reason": "Document update conflict."])
        }
        let bulk = try await server.request("POST", "/db/_bulk_docs", json: ["docs": [["_id": "x", "_rev": .string(tombstone), "v": 2]]])
        XCTAssertEqual(bulk.json[0]?["error"], "conflict")
        let again = try await server.request("PUT", "/db/x", json: ["v": 3])
        XCTAssertEqual(again.status, 201)
        XCTAssertEqual(again.json["rev"]?.stringValue?.hasPrefix("3-"), true, "a child of the tombstone")

        // A deleted branch of a live document may still be extended.
        let docs: JSON = ["new_edits": false, "docs": [
            ["_id": "m", "_rev": "1-a", "v": 1], ["_id": "m", "_rev": "2-b", "_deleted": true, "_revisions": ["start": 2, "ids": ["b", "a"]]],
            ["_id": "m", "_rev": "1-c", "v": 3],
        ]]
        await XCTAssertEqualAsync(try await server.request("POST", "/db/_bulk_docs", json: docs).status, 201)
        await XCTAssertEqualAsync(try await server.request("PUT", "/db/m", json: ["_rev": "2-b", "v": 9]).status, 201)
    }

    func testMissingAndDeletedDocumentsComeFirst() async throws {
        let server = try await TestServer.withDatabase(self)
        let created = try await server.request("PUT", "/db/d", json: ["v": 1])
        let rev = try XCTUnwrap(created.json["rev"]?.stringValue)
        await XCTAssertEqualAsync(try await server.request("DELETE", "/db/d?rev=\(rev)").status, 200)
        // A missing or deleted document is 404 before its revision is read; a live one checks it.
        await XCTAssertEqualAsync(try await server.request("DELETE", "/db/nope?rev=bad").json, ["error": "not_found", "reason": "missing"])
        await XCTAssertEqualAsync(try await server.request("DELETE", "/db/d?rev=bad").json, ["error": "not_found", "reason": "deleted"])
        _ = try await server.request("PUT", "/db/live", json: ["v": 1])
        await XCTAssertEqualAsync(try await server.request("DELETE", "/db/live?rev=bad").json,
                                  ["error": "bad_request", "reason": "Invalid rev format"])
        await XCTAssertEqualAsync(try await server.request("COPY", "/db/d", headers: ["Destination": "e"]).json,
                                  ["error": "not_found", "reason": "deleted"])
        // An id that starts with `_` and names no endpoint: nothing to read, copy or delete; no such write.
        for method in ["GET", "DELETE"] {
            await XCTAssertEqualAsync(try await server.request(method, "/db/_bad").json, ["error": "not_found", "reason": "missing"], method)
        }
        await XCTAssertEqualAsync(try await server.request("PUT", "/db/_bad", json: [:]).json["error"], "illegal_docid")
        // DocStore names the malformed revision; the answer, as CouchDB's, does not.
        await XCTAssertEqualAsync(try await server.request("POST", "/db", json: ["_id": "n", "_rev": "bad"]).json,
                                  ["error": "bad_request", "reason": "Invalid rev format"])
    }

    /// Replicas must agree on a conflict's winner: CouchDB orders a 32-hex-digit hash by its bytes.
    func testWinnerOfHexAndTextRevisions() async throws {
        let server = try await TestServer.withDatabase(self)
        let docs: JSON = ["new_edits": false, "docs": [
            ["_id": "p", "_rev": "1-bb"], ["_id": "p", "_rev": "1-b8f97323e7f26909d5e0c8d2764a765f"],
        ]]
        await XCTAssertEqualAsync(try await server.request("POST", "/db/_bulk_docs", json: docs).status, 201)
        await XCTAssertEqualAsync(try await server.request("GET", "/db/p?conflicts=true").json,
                                  ["_id": "p", "_rev": "1-b8f97323e7f26909d5e0c8d2764a765f", "_conflicts": ["1-bb"]])
    }
}
