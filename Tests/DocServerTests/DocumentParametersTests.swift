import DocStore
import Foundation
import XCTest

/// `GET /db/doc` parameters read as CouchDB 3.3.3 reads them (each answer below was checked against one).
final class DocumentParametersTests: XCTestCase {
    /// `a`: 1-aaa → 2-bbb (the winner) and 1-aaa → 2-ccc → 3-ddd (deleted); `b`: 1-x → 2-y, attachments
    /// replicated without revpos (`u.bin` only on 2-y); `t`: a new edit with an attachment (revpos 1).
    private func seeded() async throws -> TestServer {
        let server = try await TestServer.withDatabase(self)
        let docs: JSON = ["new_edits": false, "docs": [
            ["_id": "a", "_rev": "1-aaa", "v": 1],
            ["_id": "a", "_rev": "2-bbb", "v": 2, "_revisions": ["start": 2, "ids": ["bbb", "aaa"]]],
            ["_id": "a", "_rev": "2-ccc", "v": 3, "_revisions": ["start": 2, "ids": ["ccc", "aaa"]]],
            ["_id": "a", "_rev": "3-ddd", "_deleted": true, "_revisions": ["start": 3, "ids": ["ddd", "ccc", "aaa"]]],
            ["_id": "b", "_rev": "1-x", "_attachments": ["t.bin": ["content_type": "application/octet-stream", "data": "aGVsbG8="]]],
            ["_id": "b", "_rev": "2-y", "_revisions": ["start": 2, "ids": ["y", "x"]], "_attachments": [
                "t.bin": ["content_type": "application/octet-stream", "data": "aGVsbG8="],
                "u.bin": ["content_type": "application/octet-stream", "data": "d29ybGQ="]]],
        ]]
        await XCTAssertEqualAsync(try await server.request("POST", "/db/_bulk_docs", json: docs).status, 201)
        await XCTAssertEqualAsync(try await server.request("PUT", "/db/t", json: [
            "_attachments": ["t.txt": ["content_type": "text/plain", "data": "aGVsbG8="]]]).status, 201)
        return server
    }

    func testOptionsWithAndWithoutARevision() async throws {
        let server = try await seeded()
        // A flag is on only when `true`.
        await XCTAssertEqualAsync(try await server.request("GET", "/db/a?revs=x&conflicts=TRUE").json, ["_id": "a", "_rev": "2-bbb", "v": 2])
        let meta = try await server.request("GET", "/db/a?meta=true")
        XCTAssertEqual(meta.json["_deleted_conflicts"], ["3-ddd"])
        XCTAssertEqual(meta.json["_revs_info"]?.arrayValue?.count, 2)
        // A revision asked for by `rev` comes with `_revisions` only: not the tree's members, not `_local_seq`.
        await XCTAssertEqualAsync(try await server.request("GET", "/db/a?rev=2-bbb&meta=true&local_seq=true").json,
                                  ["_id": "a", "_rev": "2-bbb", "v": 2])
        await XCTAssertEqualAsync(try await server.request("GET", "/db/a?rev=3-ddd&deleted_conflicts=true").json,
                                  ["_id": "a", "_rev": "3-ddd", "_deleted": true])
        await XCTAssertEqualAsync(try await server.request("GET", "/db/a?rev=2-ccc&revs=true").json["_revisions"],
                                  ["start": 2, "ids": ["ccc", "aaa"]])
        // `latest=true` is the winner's read, whatever `rev` says (also one that is not there).
        for rev in ["1-aaa", "2-ccc", "9-zzz"] {
            let latest = try await server.request("GET", "/db/a?rev=\(rev)&latest=true&meta=true")
            XCTAssertEqual(latest.json["_rev"], "2-bbb", rev)
            XCTAssertEqual(latest.json["_deleted_conflicts"], ["3-ddd"], rev)
        }
    }

    func testOpenRevisions() async throws {
        let server = try await seeded()
        // Of a document that is not there, each revision asked for is missing; `open_revs=[]` is a plain read.
        await XCTAssertEqualAsync(try await server.request("GET", "/db/nope?open_revs=%5B%222-ccc%22%5D").json, [["missing": "2-ccc"]])
        await XCTAssertEqualAsync(try await server.request("GET", "/db/a?open_revs=%5B%5D").json["_rev"], "2-bbb")
        // The revisions asked for come without the tree's members.
        let leaves = try await server.request("GET", "/db/a?open_revs=all&deleted_conflicts=true&conflicts=true")
        XCTAssertEqual(leaves.json, [["ok": ["_id": "a", "_rev": "2-bbb", "v": 2]], ["ok": ["_id": "a", "_rev": "3-ddd", "_deleted": true]]])
        // CouchDB's words.
        for (query, reason) in [("open_revs=bad", "invalid UTF-8 JSON"), ("open_revs=%22x%22", "Invalid list of revisions"),
                                ("open_revs=%5B%22bad%22%5D", "Invalid rev format"), ("open_revs=all&rev=bad", "Invalid rev format"),
                                ("atts_since=5", "Invalid list of revisions"), ("atts_since=%5B1%5D", "Invalid rev format")] {
            let refused = try await server.request("GET", "/db/a?" + query)
            XCTAssertEqual(refused.status, 400, query)
            XCTAssertEqual(refused.json, ["error": "bad_request", "reason": .string(reason)], query)
        }
    }

    func testAttachmentsSince() async throws {
        let server = try await seeded()
        // `atts_since=[]` sends the bytes of attachments added by a revision (revpos 1 and up) and, as
        // CouchDB, stubs those replicated without a revpos.
        let new = try await server.request("GET", "/db/t?atts_since=%5B%5D")
        XCTAssertEqual(new.json["_attachments"]?["t.txt"]?["data"], "aGVsbG8=")
        let replicated = try await server.request("GET", "/db/b?atts_since=%5B%5D")
        XCTAssertEqual(replicated.json["_attachments"]?["u.bin"]?["stub"], true)
        // Where a leaf must be complete (`open_revs`), an attachment without a revpos is always sent:
        // nothing says the client has `u.bin`, which 1-x did not have.
        let leaf = try await server.request("GET", "/db/b?open_revs=all&attachments=true&atts_since=%5B%221-x%22%5D")
        XCTAssertEqual(leaf.json[0]?["ok"]?["_attachments"]?["u.bin"]?["data"], "d29ybGQ=", leaf.text)
    }

    func testFunctionsGetKeysAsJSON() async throws {
        let server = try await seeded()
        await XCTAssertEqualAsync(try await server.request("PUT", "/db/_design/f", json: [
            "filters": ["all": "function(doc, req) { return req.query.descending === true || true; }"]]).status, 201)
        // The function would get `descending` parsed: one that is not JSON fails the request (CouchDB: 500)…
        let refused = try await server.request("GET", "/db/_changes?filter=f/all&descending=yes")
        XCTAssertEqual(refused.status, 400)
        XCTAssertEqual(refused.json, ["error": "bad_request", "reason": "invalid UTF-8 JSON"])
        // …unless the filter is not there: 404 first, as CouchDB looks it up first.
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_changes?filter=f/none&descending=yes").status, 404)
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_changes?filter=f/all&descending=true").status, 200)
    }
}
