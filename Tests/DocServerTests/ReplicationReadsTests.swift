import DocStore
import Foundation
import XCTest

/// `_bulk_get`, `_revs_diff`, `_missing_revs`, `open_revs` and attachment ranges answered as CouchDB 3.3.3
/// answers them (each expectation below was read off one; `Tests/Interop/read_parity.py` compares them
/// at random).
final class ReplicationReadsTests: XCTestCase {
    /// `conf`: 1-aaa → 2-bbb, and 1-ccc; `delbranch`: 1-aaa → 2-bbb (deleted), and 1-ccc; `three`: six
    /// leaves over four roots, one of them a 32-hex hash (CouchDB orders it by its bytes).
    private func seeded() async throws -> TestServer {
        let server = try await TestServer.withDatabase(self)
        let docs: JSON = ["new_edits": false, "docs": [
            ["_id": "conf", "_rev": "1-aaa", "v": 1],
            ["_id": "conf", "_rev": "2-bbb", "v": 2, "_revisions": ["start": 2, "ids": ["bbb", "aaa"]]],
            ["_id": "conf", "_rev": "1-ccc", "v": 3],
            ["_id": "delbranch", "_rev": "1-aaa", "v": 1],
            ["_id": "delbranch", "_rev": "2-bbb", "_deleted": true, "_revisions": ["start": 2, "ids": ["bbb", "aaa"]]],
            ["_id": "delbranch", "_rev": "1-ccc", "v": 3],
            ["_id": "three", "_rev": "1-zzz"],
            ["_id": "three", "_rev": "3-aaa", "_revisions": ["start": 3, "ids": ["aaa", "b", "a"]]],
            ["_id": "three", "_rev": "2-mmm", "_revisions": ["start": 2, "ids": ["mmm", "a"]]],
            ["_id": "three", "_rev": "2-c", "_deleted": true, "_revisions": ["start": 2, "ids": ["c", "a"]]],
            ["_id": "three", "_rev": "1-8b2bc181373a348640d43d7830d6abbc"],
            ["_id": "three", "_rev": "1-b"],
        ]]
        await XCTAssertEqualAsync(try await server.request("POST", "/db/_bulk_docs", json: docs).status, 201)
        return server
    }

    private func revisions(_ answer: JSON?) -> [String] {
        (answer?.arrayValue ?? []).map { $0["ok"]?["_rev"]?.stringValue ?? $0["error"]?["rev"]?.stringValue ?? $0["missing"]?.stringValue ?? "?" }
    }

    func testBulkGetWithoutARevisionAnswersEveryLeafInCouchDBsOrder() async throws {
        let server = try await seeded()
        let answer = try await server.request("POST", "/db/_bulk_get?latest=true", json: ["docs": [
            ["id": "delbranch"], ["id": "three"], ["id": "three", "rev": "1-a"], ["id": "three", "rev": "+2-mmm"],
        ]])
        let results = try XCTUnwrap(answer.json["results"]?.arrayValue)
        // Deleted leaves too; roots from the greatest down, each root's leaves depth first.
        XCTAssertEqual(revisions(results[0]["docs"]), ["1-ccc", "2-bbb"])
        XCTAssertEqual(revisions(results[1]["docs"]), ["1-8b2bc181373a348640d43d7830d6abbc", "1-zzz", "1-b", "3-aaa", "2-c", "2-mmm"])
        XCTAssertEqual(revisions(results[2]["docs"]), ["3-aaa", "2-c", "2-mmm"], "latest: the leaves under 1-a")
        XCTAssertEqual(revisions(results[3]["docs"]), ["2-mmm"], "a generation with a sign is read as CouchDB reads it")
        XCTAssertEqual(results[0]["docs"]?[1]?["ok"], ["_id": "delbranch", "_rev": "2-bbb", "_deleted": true])
    }

    func testBulkGetRefusesEntriesAsCouchDBDoes() async throws {
        let server = try await seeded()
        let answer = try await server.request("POST", "/db/_bulk_get", json: ["docs": [
            [:], "x", ["rev": "1-aaa"], ["id": ""], ["id": "_bad", "rev": "bad"], ["id": "_design/"], ["id": 3],
            ["id": "conf", "rev": "bad"], ["id": "conf", "atts_since": "x"], ["id": "conf", "atts_since": ["1-aaa", "bad"]],
            ["id": "conf", "rev": "0-aaa"], ["id": "_local/x"], ["id": "conf", "atts_since": ["0-aaa"]],
        ]])
        XCTAssertEqual(answer.status, 200)
        let errors = try XCTUnwrap(answer.json["results"]?.arrayValue).map { $0["docs"]?[0]?["error"] ?? $0["docs"]?[0] ?? .null }
        func error(_ id: JSON, _ rev: JSON, _ name: String, _ reason: String) -> JSON {
            ["rev": rev, "reason": .string(reason), "id": id, "error": .string(name)]
        }
        XCTAssertEqual(Array(errors.prefix(12)), [
            error(.null, .null, "bad_request", "document must be a JSON object"),
            error(.null, .null, "bad_request", "document must be a JSON object"),
            error(.null, .null, "bad_request", "document id missed"),
            error("", .null, "illegal_docid", "Document id must not be empty"),
            error("_bad", .null, "illegal_docid", "Only reserved document ids may start with underscore."),
            error("_design/", .null, "illegal_docid", "Illegal document id `_design/`"),
            error(.null, .null, "illegal_docid", "Document id must be a string"),
            error("conf", "bad", "bad_request", "Invalid rev format"),
            error("conf", "x", "bad_request", "att_since value must be array of revs."),
            error("conf", "bad", "bad_request", "Invalid rev format"),
            // A revision CouchDB reads but no database holds is missing, as is a local document.
            error("conf", "0-aaa", "not_found", "missing"),
            error("_local/x", "undefined", "not_found", "missing"),
        ])
        XCTAssertEqual(revisions(answer.json["results"]?[12]?["docs"]), ["1-ccc", "2-bbb"], "an atts_since revision no database holds is left out")
    }

    /// `_bulk_get` writes a revision without attachments straight from its stored bytes; every
    /// revision must read as `open_revs` (which builds the answer's tree) gives it, with each option.
    func testBulkGetAnswersEachRevisionAsOpenRevsDoes() async throws {
        let server = try await seeded()
        await XCTAssertEqualAsync(try await server.request("PUT", "/db/_revs_limit", body: Data("3".utf8), contentType: "application/json").status, 200)
        await XCTAssertEqualAsync(try await server.request("POST", "/db/_bulk_docs", json: ["new_edits": false, "docs": [
            // A history longer than the limit (written before it was lowered, as a replicator may).
            ["_id": "long", "_rev": "5-e", "n": 5, "_revisions": ["start": 5, "ids": ["e", "d", "c", "b", "a"]]],
            ["_id": "text", "_rev": "1-8b2bc181373a348640d43d7830d6abbc", "s": "quote \" back \\ tab \t é \u{1}", "x": 1.5e300,
             "nested": ["a": [1, -0.25, true, .null, ["b": "c"]]], "empty": [:]],
            ["_id": "bare", "_rev": "2-f", "_revisions": ["start": 2, "ids": ["f", "e"]]],
            ["_id": "odd\"id é", "_rev": "1-\"q\\", "v": 1],
        ]]).status, 201)
        await XCTAssertEqualAsync(try await server.request("PUT", "/db/withfile", json: [
            "v": 1, "_attachments": ["a.txt": ["content_type": "text/plain", "data": "aGVsbG8="]]]).status, 201)
        let withFile = try await server.request("GET", "/db/withfile").json["_rev"]?.stringValue ?? "?"
        let asked: [(String, String)] = [
            ("conf", "2-bbb"), ("conf", "1-ccc"), ("conf", "1-aaa"), ("delbranch", "2-bbb"), ("three", "3-aaa"), ("three", "2-c"),
            ("three", "1-8b2bc181373a348640d43d7830d6abbc"), ("long", "5-e"), ("text", "1-8b2bc181373a348640d43d7830d6abbc"),
            ("bare", "2-f"), ("odd\"id é", "1-\"q\\"), ("withfile", withFile),
        ]
        // (`open_revs` leaves out `conflicts`, `revs_info` and `local_seq`, which `_bulk_get` applies.)
        for options in ["", "revs=true", "revs=true&latest=true", "revs=true&attachments=true", "att_encoding_info=true&revs=true"] {
            let docs = JSON.array(asked.map { ["id": .string($0.0), "rev": .string($0.1)] })
            let bulk = try await server.request("POST", "/db/_bulk_get?\(options)", json: ["docs": docs])
            XCTAssertEqual(bulk.status, 200, options)
            let results = try XCTUnwrap(bulk.json["results"]?.arrayValue, options)
            XCTAssertEqual(results.count, asked.count, options)
            for ((id, revision), result) in zip(asked, results) {
                let list = String(decoding: try JSON.array([.string(revision)]).serializedData(), as: UTF8.self)
                let query = "open_revs=\(list.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)" + (options.isEmpty ? "" : "&\(options)")
                let open = try await server.request("GET", "/db/\(id.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)?\(query)")
                XCTAssertEqual(open.status, 200, "\(id) \(options)")
                XCTAssertNotNil(open.json[0]?["ok"], "\(id) \(options)")
                XCTAssertEqual(result["docs"]?[0]?["ok"], open.json[0]?["ok"], "\(id) \(revision) \(options)")
                XCTAssertEqual(result["id"]?.stringValue, id)
            }
        }
        // Options that need the revision tree still apply.
        let meta = try await server.request("POST", "/db/_bulk_get?conflicts=true&local_seq=true", json: ["docs": [["id": "conf", "rev": "2-bbb"]]])
        XCTAssertEqual(meta.json["results"]?[0]?["docs"]?[0]?["ok"], ["_id": "conf", "_rev": "2-bbb", "v": 2, "_conflicts": ["1-ccc"], "_local_seq": 3])
        // The limit cut the long history as CouchDB shows it: the revision and two ancestors.
        let long = try await server.request("POST", "/db/_bulk_get?revs=true", json: ["docs": [["id": "long"]]])
        XCTAssertEqual(long.json["results"]?[0]?["docs"]?[0]?["ok"]?["_revisions"], ["start": 5, "ids": ["e", "d", "c"]])
    }

    func testOpenRevisionsInAscendingOrderThenTheMissing() async throws {
        let server = try await seeded()
        let all = try await server.request("GET", "/db/three?open_revs=all")
        XCTAssertEqual(revisions(all.json), ["1-b", "1-zzz", "1-8b2bc181373a348640d43d7830d6abbc", "2-c", "2-mmm", "3-aaa"])
        let list = "%5B%223-aaa%22,%229-z%22,%220-x%22,%221-b%22,%2202-mmm%22,%221-b%22%5D"
        let some = try await server.request("GET", "/db/three?open_revs=\(list)")
        XCTAssertEqual(revisions(some.json), ["1-b", "2-mmm", "3-aaa", "0-x", "9-z"], "each once, found then missing, both ascending")
        let latest = try await server.request("GET", "/db/three?open_revs=%5B%221-a%22%5D&latest=true")
        XCTAssertEqual(revisions(latest.json), ["2-c", "2-mmm", "3-aaa"])
        // A revision CouchDB reads but no database holds is missing, not malformed.
        let unheld = try await server.request("GET", "/db/conf?rev=0-aaa")
        XCTAssertEqual(unheld.status, 404)
        XCTAssertEqual(unheld.json, ["error": "not_found", "reason": "missing"])
        await XCTAssertEqualAsync(try await server.request("GET", "/db/conf?rev=-1-aaa").status, 400)
        await XCTAssertEqualAsync(try await server.request("GET", "/db/conf?rev=%2B2-bbb").json["v"], 2)
    }

    func testRevsDiffAndMissingRevsAsCouchDBAnswersThem() async throws {
        let server = try await seeded()
        // Missing revisions in ascending order; possible ancestors ranked as the winner is chosen; of a
        // document not there, every revision as given; a revision the tree has, offered twice, once missing.
        let diff = try await server.request("POST", "/db/_revs_diff", json: [
            "conf": ["9-x", "3-y", "1-aaa", "1-aaa"], "nope": ["2-b", "1-a", "1-a"], "three": ["9-x"], "delbranch": ["1-ccc"],
        ])
        XCTAssertEqual(diff.json, [
            "conf": ["missing": ["1-aaa", "3-y", "9-x"], "possible_ancestors": ["2-bbb", "1-ccc"]],
            "nope": ["missing": ["2-b", "1-a", "1-a"]],
            "three": ["missing": ["9-x"], "possible_ancestors": ["3-aaa", "2-mmm", "1-8b2bc181373a348640d43d7830d6abbc", "1-zzz", "1-b", "2-c"]],
        ])
        let missing = try await server.request("POST", "/db/_missing_revs", json: ["conf": ["9-x", "2-bbb"], "delbranch": ["1-ccc"], "nope": ["1-a"]])
        XCTAssertEqual(missing.json, ["missing_revs": ["conf": ["9-x"], "nope": ["1-a"]]])
        let refused = try await server.request("POST", "/db/_missing_revs", json: ["conf": "1-aaa"])
        XCTAssertEqual(refused.status, 400)
        XCTAssertEqual(refused.json["error"], "bad_request")
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_missing_revs").status, 405)
        await XCTAssertEqualAsync(try await server.request("POST", "/db/_missing_revs", body: Data("{}".utf8), contentType: "text/plain").status, 415)
    }

    func testRangesOfACompressedAttachmentAreCheckedThenIgnored() async throws {
        let server = try await TestServer.withDatabase(self)
        let text = String(repeating: "hello world ", count: 20)
        await XCTAssertEqualAsync(try await server.request("PUT", "/db/t", json: [
            "_attachments": ["a.txt": ["content_type": "text/plain", "data": .string(Data(text.utf8).base64EncodedString())]]]).status, 201)
        // Stored gzipped (text/plain): the whole content for a range inside it, 416 for one past its end.
        let inside = try await server.request("GET", "/db/t/a.txt", headers: ["Range": "bytes=0-4", "Accept-Encoding": "identity"])
        XCTAssertEqual(inside.status, 200)
        XCTAssertEqual(inside.header("Accept-Ranges"), "none")
        XCTAssertEqual(String(decoding: inside.body, as: UTF8.self), text)
        for range in ["bytes=1000-2000", "bytes=3-1"] {
            let past = try await server.request("GET", "/db/t/a.txt", headers: ["Range": range, "Accept-Encoding": "identity"])
            XCTAssertEqual(past.status, 416, range)
            XCTAssertEqual(past.json["error"], "requested_range_not_satisfiable", range)
        }
        // Ten ranges or more are each checked, then the whole content is sent.
        let ten = (0..<10).map { "\($0)-\($0)" }.joined(separator: ",")
        await XCTAssertEqualAsync(try await server.request("GET", "/db/t/a.txt", headers: ["Range": "bytes=\(ten),300-301"]).status, 416)
        let many = try await server.request("GET", "/db/t/a.txt", headers: ["Range": "bytes=\(ten)", "Accept-Encoding": "identity"])
        XCTAssertEqual(many.status, 200)
        XCTAssertEqual(many.body.count, text.utf8.count)
    }
}
