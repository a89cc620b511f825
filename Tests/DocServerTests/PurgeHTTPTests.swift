@testable import DocServer
@testable import DocStore
import Foundation
import XCTest

/// `_purge` and `_revs_limit` over HTTP, with the answers a CouchDB 3.3.3 gives.
final class PurgeHTTPTests: XCTestCase {
    func testPurgeAndRevsLimit() async throws {
        let server = try await TestServer(self)
        await XCTAssertEqualAsync(try await server.request("PUT", "/db").status, 201)
        let created = try await server.request("PUT", "/db/a", json: ["v": 1])
        let first = try XCTUnwrap(created.json["rev"]?.stringValue)
        let edited = try await server.request("PUT", "/db/a", json: ["_rev": .string(first), "v": 2])
        let second = try XCTUnwrap(edited.json["rev"]?.stringValue)
        let branch: JSON = ["new_edits": false, "docs": [["_id": "a", "_rev": "2-bbbb", "v": 3,
                                                          "_revisions": ["start": 2, "ids": ["bbbb", .string(String(first.dropFirst(2)))]]]]]
        await XCTAssertEqualAsync(try await server.request("POST", "/db/_bulk_docs", json: branch).status, 201)

        let nonLeaf = try await server.request("POST", "/db/_purge", json: ["a": [.string(first)]])
        XCTAssertEqual(nonLeaf.status, 201)
        XCTAssertEqual(nonLeaf.json, ["purge_seq": nil, "purged": ["a": []]])
        // A revision named twice is purged and answered once, as CouchDB 3.3.3 does.
        let leaf = try await server.request("POST", "/db/_purge", json: ["a": ["2-bbbb", "2-bbbb"], "zz": ["1-abc"]])
        XCTAssertEqual(leaf.status, 201)
        XCTAssertEqual(leaf.json, ["purge_seq": nil, "purged": ["a": ["2-bbbb"], "zz": []]])
        let document = try await server.request("GET", "/db/a?conflicts=true")
        XCTAssertEqual(document.json["_rev"]?.stringValue, second)
        XCTAssertNil(document.json["_conflicts"])
        let last = try await server.request("POST", "/db/_purge", json: ["a": [.string(second)]])
        XCTAssertEqual(last.json["purged"], ["a": [.string(second)]])
        await XCTAssertEqualAsync(try await server.request("GET", "/db/a").status, 404)

        for (body, reason) in [(JSON(["a": ["x"]]), "Invalid rev format"), (["a": [1]], "Invalid rev format"),
                               (["a": "x"], "Invalid list of revisions"), ([1], "Request body must be a JSON object")] {
            let bad = try await server.request("POST", "/db/_purge", json: body)
            XCTAssertEqual(bad.status, 400, "\(body)")
            XCTAssertEqual(bad.json["reason"]?.stringValue, reason)
        }
        let get = try await server.request("GET", "/db/_purge")
        XCTAssertEqual(get.status, 405)
        XCTAssertEqual(get.json, ["error": "method_not_allowed", "reason": "Only POST allowed"])
        let wrongType = try await server.request("POST", "/db/_purge", body: Data("{}".utf8), contentType: "text/plain")
        XCTAssertEqual(wrongType.status, 415)

        let limit = try await server.request("GET", "/db/_revs_limit")
        XCTAssertEqual(limit.status, 200)
        XCTAssertEqual(limit.json, 1000)
        let set = try await server.request("PUT", "/db/_revs_limit", body: Data("7".utf8), contentType: "text/plain")
        XCTAssertEqual(set.json, ["ok": true])
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_revs_limit").json, 7)
        for body in ["0", "-1", "5.5", "\"x\""] {
            let bad = try await server.request("PUT", "/db/_revs_limit", body: Data(body.utf8), contentType: "application/json")
            XCTAssertEqual(bad.status, 400, body)
        }
        await XCTAssertEqualAsync(try await server.request("POST", "/db/_revs_limit", json: 5).status, 405)

        // Only admins purge and set the limit.
        await XCTAssertEqualAsync(try await server.addUser("alice", ["password": "pw", "channels": ["red"]]), 201)
        let refused = try await server.request("POST", "/db/_purge", json: [:], as: .user("alice", "pw"))
        XCTAssertEqual(refused.status, 401)
        XCTAssertEqual(refused.json["reason"], "You are not a server admin.")
        // CouchDB 3.3.3 answers a 500 wrapping `{forbidden, "You are not a db or server admin."}`: a 403 here.
        let refusedLimit = try await server.request("PUT", "/db/_revs_limit", json: 3, as: .user("alice", "pw"))
        XCTAssertEqual(refusedLimit.status, 403)
        XCTAssertEqual(refusedLimit.json, ["error": "forbidden", "reason": "You are not a db or server admin."])
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_revs_limit", as: .user("alice", "pw")).json, 7)
    }

    /// `_purged_infos_limit` as CouchDB 3.3.3 answers it (curl): 1000 until set, kept in the database
    /// file (and through the Swift API), a positive integer of any type of body, admins only
    /// (reading too); the other methods are requests for a document of that id.
    func testPurgedInfosLimitIsKeptAndAnsweredAsCouchDBDoes() async throws {
        let server = try await TestServer.withDatabase(self)
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_purged_infos_limit").json, 1000)
        let set = try await server.request("PUT", "/db/_purged_infos_limit", body: Data("5".utf8), contentType: "text/plain")
        XCTAssertEqual(set.status, 200)
        XCTAssertEqual(set.json, ["ok": true])
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_purged_infos_limit").json, 5)
        let db = try await server.server.registry.database(named: "db")
        await XCTAssertEqualAsync(try await db.purgedInfosLimit, 5)
        try await db.setPurgedInfosLimit(12)
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_purged_infos_limit").json, 12)
        do {
            try await db.setPurgedInfosLimit(0)
            XCTFail("a limit of 0 was kept")
        } catch let error as DocStoreError {
            XCTAssertEqual(error.code, .badRequest)
        }
        for body in ["0", "-1", "1.5", "\"7\"", "{}", "-99999999999999999999"] {
            let bad = try await server.request("PUT", "/db/_purged_infos_limit", body: Data(body.utf8), contentType: "application/json")
            XCTAssertEqual(bad.status, 400, body)
            XCTAssertEqual(bad.json, ["error": "bad_request", "reason": "`purge_infos_limit` must be positive integer"], body)
        }
        await XCTAssertEqualAsync(try await server.request("PUT", "/db/_purged_infos_limit", body: Data("abc".utf8), contentType: "application/json").json["reason"],
                                  "invalid UTF-8 JSON")
        await XCTAssertEqualAsync(try await server.request("PUT", "/db/_purged_infos_limit", body: Data("99999999999999999999".utf8),
                                                           contentType: "application/json").json, ["ok": true])
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_purged_infos_limit").json, .integer(Int.max))
        // Other methods: a document named so, as CouchDB's router has it.
        let deleted = try await server.request("DELETE", "/db/_purged_infos_limit")
        XCTAssertEqual(deleted.status, 404)
        XCTAssertEqual(deleted.json, ["error": "not_found", "reason": "missing"])
        let posted = try await server.request("POST", "/db/_purged_infos_limit", json: 3)
        XCTAssertEqual(posted.json, ["error": "bad_request", "reason": "Referer header required."])
        // Admins only, reading too.
        await XCTAssertEqualAsync(try await server.addUser("bob", ["password": "pw"]), 201)
        for method in ["GET", "PUT"] {
            let refused = try await server.request(method, "/db/_purged_infos_limit", body: method == "PUT" ? Data("3".utf8) : nil,
                                                   contentType: "application/json", as: .user("bob", "pw"))
            XCTAssertEqual(refused.status, 401, method)
            XCTAssertEqual(refused.json, ["error": "unauthorized", "reason": "You are not a server admin."], method)
        }
        // Compaction keeps that many purge records; `purge_seq` still counts every purge.
        await XCTAssertEqualAsync(try await server.request("PUT", "/db/_purged_infos_limit", body: Data("2".utf8)).json, ["ok": true])
        for n in 0..<4 {
            let saved = try await server.request("PUT", "/db/p\(n)", json: [:])
            let purged = try await server.request("POST", "/db/_purge", json: ["p\(n)": [saved.json["rev"]!]])
            XCTAssertEqual(purged.status, 201)
        }
        let purgeSequence = try await server.request("GET", "/db").json["purge_seq"]
        XCTAssertNotNil(purgeSequence)
        await XCTAssertEqualAsync(try await server.request("POST", "/db/_compact", json: [:]).status, 202)
        await XCTAssertEqualAsync(try await server.request("GET", "/db").json["purge_seq"], purgeSequence)
        XCTAssertEqual(try db.readNow { try $0.scalarInt("SELECT count(*) FROM purges") }, 2, "the newest two purge records stay")
        await XCTAssertEqualAsync(try await server.request("GET", "/_users/_purged_infos_limit").json, 1000)
        await XCTAssertEqualAsync(try await server.request("GET", "/_users/_purged_infos_limit", as: .user("bob", "pw")).status, 401)
    }
}
