@testable import DocServer
import DocStore
import Foundation
import TestSupport
import XCTest

final class SecurityTests: XCTestCase {
    /// A server with database `db`, user alice (red channel) and bob (blue), and documents in each.
    private func populatedServer(_ configure: (inout ServerConfiguration) -> Void = { _ in }) async throws -> TestServer {
        let server = try await TestServer(self, configure: configure)
        _ = try await server.request("PUT", "/db")
        await XCTAssertEqualAsync(try await server.addUser("alice", ["password": "alice-pw", "channels": ["red"]]), 201)
        await XCTAssertEqualAsync(try await server.addUser("bob", ["password": "bob-pw", "read_channels": ["blue", "red"], "write_channels": ["blue"]]), 201)
        _ = try await server.request("POST", "/db/_bulk_docs", json: ["docs": [
            ["_id": "red1", "channels": ["red"], "v": 1], ["_id": "blue1", "channels": ["blue"], "v": 2],
            ["_id": "none", "v": 3], ["_id": "both", "channels": ["red", "blue"], "v": 4],
        ]])
        return server
    }

    private let alice = TestServer.Credentials.user("alice", "alice-pw")

    func testCredentialsAreRequiredAndChecked() async throws {
        let server = try await populatedServer()
        let anonymous = try await server.request("GET", "/db", as: .none)
        XCTAssertEqual(anonymous.status, 401)
        XCTAssertEqual(anonymous.json["error"], "unauthorized")
        let wrong = try await server.request("GET", "/db", as: .user("alice", "nope"))
        XCTAssertEqual(wrong.status, 401)
        XCTAssertEqual(wrong.json, ["error": "unauthorized", "reason": "Name or password is incorrect."])
        await XCTAssertEqualAsync(try await server.request("GET", "/db", as: .user("admin", "nope")).status, 401)
        await XCTAssertEqualAsync(try await server.request("GET", "/db", as: .user("nobody", "x")).status, 401)
        await XCTAssertEqualAsync(try await server.request("GET", "/db", headers: ["Authorization": "Basic !!!"], as: .none).status, 401)
        await XCTAssertEqualAsync(try await server.request("GET", "/db", as: alice).status, 200)
        // As CouchDB: a database that is not there is missing (404) before it is forbidden; creating
        // one needs an admin.
        await XCTAssertEqualAsync(try await server.request("GET", "/nosuch/doc", as: .none).json,
                                  ["error": "not_found", "reason": "Database does not exist."])
        await XCTAssertEqualAsync(try await server.request("PUT", "/nosuch", as: .none).status, 401)
        // The welcome, health and session endpoints stay public.
        await XCTAssertEqualAsync(try await server.request("GET", "/", as: .none).status, 200)
        await XCTAssertEqualAsync(try await server.request("GET", "/_up", as: .none).status, 200)
    }

    /// As CouchDB: once a tenth of its lifetime has passed, a request signed in by the session cookie
    /// gets a fresh cookie, so a session in use does not end; Basic requests get none; a cookie past
    /// its lifetime signs in no one. The server's time is a test clock's: nothing waits.
    func testASessionInUseIsRenewedAndOneUnusedEnds() async throws {
        let clock = TestClock(advancesOnSleep: false)
        let epoch = Date()
        let server = try await populatedServer {
            $0.sessionLifetime = .seconds(600)
            $0.clock = clock
            $0.currentDate = { epoch.addingTimeInterval(Double(clock.now.offset.components.seconds)) }
        }
        let login = try await server.request("POST", "/_session", json: ["name": "alice", "password": "alice-pw"], as: .none)
        let cookie = String(try XCTUnwrap(login.header("Set-Cookie")?.split(separator: ";").first?.dropFirst("AuthSession=".count)))
        let first = try await server.request("GET", "/db/red1", as: .cookie(cookie))
        XCTAssertEqual(first.status, 200)
        XCTAssertNil(first.header("Set-Cookie"), "a new session is not renewed")
        clock.advance(by: .seconds(60))
        let atATenth = try await server.request("GET", "/db/red1", as: .cookie(cookie))
        XCTAssertEqual(atATenth.status, 200)
        XCTAssertNil(atATenth.header("Set-Cookie"), "not before a tenth of the lifetime has passed")
        clock.advance(by: .seconds(1))
        let renewed = try await server.request("GET", "/db/red1", as: .cookie(cookie))
        let setCookie = try XCTUnwrap(renewed.header("Set-Cookie"))
        XCTAssertTrue(setCookie.hasPrefix("AuthSession=") && setCookie.contains("Max-Age=600") && setCookie.contains("HttpOnly"), setCookie)
        let fresh = String(setCookie.dropFirst("AuthSession=".count).prefix { $0 != ";" })
        XCTAssertNotEqual(fresh, cookie)
        let session = try await server.request("GET", "/_session", as: .cookie(fresh))
        XCTAssertEqual(session.json["userCtx"]?["name"], "alice", "the renewed cookie signs in")
        let basic = try await server.request("GET", "/db/red1", as: alice)
        XCTAssertNil(basic.header("Set-Cookie"))

        // 600 s after the login the first cookie has ended; the renewed one, made at 61 s, has not.
        clock.advance(by: .seconds(539))
        await XCTAssertEqualAsync(try await server.request("GET", "/db/red1", as: .cookie(cookie)).status, 401)
        await XCTAssertEqualAsync(try await server.request("GET", "/_session", as: .cookie(cookie)).json["userCtx"]?["name"], .null)
        await XCTAssertEqualAsync(try await server.request("GET", "/db/red1", as: .cookie(fresh)).status, 200)
        clock.advance(by: .seconds(61))
        await XCTAssertEqualAsync(try await server.request("GET", "/db/red1", as: .cookie(fresh)).status, 401)
    }

    func testCookieSessions() async throws {
        let server = try await populatedServer()
        let login = try await server.request("POST", "/_session", json: ["name": "alice", "password": "alice-pw"], as: .none)
        XCTAssertEqual(login.status, 200)
        XCTAssertEqual(login.json["ok"], true)
        XCTAssertEqual(login.json["name"], "alice")
        let setCookie = try XCTUnwrap(login.header("Set-Cookie"))
        XCTAssertTrue(setCookie.hasPrefix("AuthSession="), setCookie)
        let cookie = String(setCookie.dropFirst("AuthSession=".count).prefix { $0 != ";" })
        let session = try await server.request("GET", "/_session", as: .cookie(cookie))
        XCTAssertEqual(session.json["userCtx"]?["name"], "alice")
        await XCTAssertEqualAsync(try await server.request("GET", "/db/red1", as: .cookie(cookie)).status, 200)
        await XCTAssertEqualAsync(try await server.request("GET", "/db/red1", as: .cookie(cookie + "x")).status, 401, "a forged cookie is anonymous")

        let form = try await server.request("POST", "/_session", body: Data("name=bob&password=bob-pw".utf8),
                                            contentType: "application/x-www-form-urlencoded", as: .none)
        XCTAssertEqual(form.status, 200)
        // As CouchDB 3.3.3: a failed sign-in ends the client's session; a missing password is a wrong one;
        // the name may come as `username`; a body neither JSON nor a form is 415.
        let failed = try await server.request("POST", "/_session", json: ["name": "alice", "password": "bad"], as: .none)
        XCTAssertEqual(failed.status, 401)
        XCTAssertEqual(failed.json, ["error": "unauthorized", "reason": "Name or password is incorrect."])
        XCTAssertTrue(failed.header("Set-Cookie")?.hasPrefix("AuthSession=;") == true)
        await XCTAssertEqualAsync(try await server.request("POST", "/_session", json: ["name": "alice"], as: .none).status, 401)
        await XCTAssertEqualAsync(try await server.request("POST", "/_session", json: ["username": "alice", "password": "alice-pw"], as: .none).status, 200)
        await XCTAssertEqualAsync(try await server.request("POST", "/_session", json: ["password": "alice-pw"], as: .none).json["reason"],
                                  "request body must contain a username")
        await XCTAssertEqualAsync(try await server.request("POST", "/_session", json: ["name": "alice", "username": "bob", "password": "x"],
                                                           as: .none).json["reason"], "request body contains different usernames")
        let plain = try await server.request("POST", "/_session", body: Data("name=bob&password=bob-pw".utf8), contentType: "text/plain", as: .none)
        XCTAssertEqual(plain.status, 415)
        XCTAssertEqual(plain.json["error"], "bad_content_type")
        await XCTAssertEqualAsync(try await server.request("PUT", "/_session", json: [:], as: .none).json["reason"], "Only GET,HEAD,POST,DELETE allowed")
        let logout = try await server.request("DELETE", "/_session", as: .cookie(cookie))
        XCTAssertTrue(logout.header("Set-Cookie")?.contains("Max-Age=0") == true)

        // Changing the password ends the old sessions.
        await XCTAssertEqualAsync(try await server.addUser("alice", ["password": "new-pw", "channels": ["red"]]), 201)
        await XCTAssertEqualAsync(try await server.request("GET", "/db/red1", as: .cookie(cookie)).status, 401)
        await XCTAssertEqualAsync(try await server.request("GET", "/db/red1", as: .user("alice", "new-pw")).status, 200)
    }

    func testUsersReadOnlyTheirChannels() async throws {
        let server = try await populatedServer()
        await XCTAssertEqualAsync(try await server.request("GET", "/db/red1", as: alice).json["v"], 1)
        let blue = try await server.request("GET", "/db/blue1", as: alice)
        XCTAssertEqual(blue.status, 403)
        XCTAssertEqual(blue.json["error"], "forbidden")
        await XCTAssertEqualAsync(try await server.request("GET", "/db/none", as: alice).status, 403, "no channel: only full readers")
        await XCTAssertEqualAsync(try await server.request("GET", "/db/both", as: alice).status, 200)

        let all = try await server.request("GET", "/db/_all_docs", as: alice)
        XCTAssertEqual(all.json["rows"]?.arrayValue?.map { $0["id"]! }, ["both", "red1"])
        XCTAssertNil(all.json["rows"]?[0]?["doc"], "documents used for filtering are not leaked")
        let changes = try await server.request("GET", "/db/_changes?include_docs=true", as: alice)
        XCTAssertEqual(changes.json["results"]?.arrayValue?.map { $0["id"]! }, ["red1", "both"])
        let bulkGet = try await server.request("POST", "/db/_bulk_get", json: ["docs": [["id": "blue1"], ["id": "red1"]]], as: alice)
        XCTAssertEqual(bulkGet.json["results"]?[0]?["docs"]?[0]?["error"]?["error"], "forbidden")
        XCTAssertEqual(bulkGet.json["results"]?[1]?["docs"]?[0]?["ok"]?["_id"], "red1")
        let openRevs = try await server.request("GET", "/db/blue1?open_revs=all", headers: ["Accept": "application/json"], as: alice)
        XCTAssertEqual(openRevs.json, [])
        await XCTAssertEqualAsync(try await server.request("GET", "/db/blue1", as: .user("bob", "bob-pw")).status, 200)

        // A deletion stays visible in the channels of the deleted revision.
        let rev = try await server.request("GET", "/db/red1").json["_rev"]!.stringValue!
        _ = try await server.request("DELETE", "/db/red1?rev=\(rev)")
        let after = try await server.request("GET", "/db/_changes?since=4", as: alice)
        XCTAssertEqual(after.json["results"]?[0]?["id"], "red1")
        XCTAssertEqual(after.json["results"]?[0]?["deleted"], true)
    }

    func testUsersWriteOnlyIntoTheirChannels() async throws {
        let server = try await populatedServer()
        let bob = TestServer.Credentials.user("bob", "bob-pw")
        await XCTAssertEqualAsync(try await server.request("PUT", "/db/b2", json: ["channels": ["blue"]], as: bob).status, 201)
        let outside = try await server.request("PUT", "/db/b3", json: ["channels": ["red"]], as: bob)
        XCTAssertEqual(outside.status, 403)
        XCTAssertEqual(outside.json["error"], "forbidden")
        await XCTAssertEqualAsync(try await server.request("PUT", "/db/b4", json: ["v": 1], as: bob).status, 403, "a document must be in a channel")
        await XCTAssertEqualAsync(try await server.request("PUT", "/db/b5", json: ["channels": ["blue", "red"]], as: bob).status, 403)
        // Taking over a red document by rewriting its channels is refused.
        let redRev = try await server.request("GET", "/db/red1").json["_rev"]!.stringValue!
        await XCTAssertEqualAsync(try await server.request("PUT", "/db/red1?rev=\(redRev)", json: ["channels": ["blue"]], as: bob).status, 403)
        await XCTAssertEqualAsync(try await server.request("DELETE", "/db/red1?rev=\(redRev)", as: bob).status, 403)
        let bulk = try await server.request("POST", "/db/_bulk_docs", json: ["docs": [["_id": "ok1", "channels": ["blue"]], ["_id": "no1", "channels": ["red"]]]], as: bob)
        XCTAssertEqual(bulk.json[0]?["ok"], true)
        XCTAssertEqual(bulk.json[1]?["error"], "forbidden")
        await XCTAssertEqualAsync(try await server.request("GET", "/db/no1").status, 404)
        await XCTAssertEqualAsync(try await server.request("PUT", "/db/red1/att.txt?rev=\(redRev)", body: Data("x".utf8), contentType: "text/plain", as: bob).status, 403)
    }

    func testOnlyAdminsWriteDesignDocuments() async throws {
        let server = try await populatedServer()
        let put = try await server.request("PUT", "/db/_design/idx", json: ["language": "query", "views": [:]], as: alice)
        XCTAssertEqual(put.status, 403)
        XCTAssertEqual(put.json["error"], "forbidden")
        let bulk = try await server.request("POST", "/db/_bulk_docs", json: ["docs": [["_id": "_design/idx", "channels": ["red"]]]], as: alice)
        XCTAssertEqual(bulk.json[0]?["error"], "forbidden")
        let created = try await server.request("PUT", "/db/_design/idx", json: ["language": "query", "views": [:]])
        XCTAssertEqual(created.status, 201, "an admin writes design documents, as in CouchDB")
        let revision = try XCTUnwrap(created.json["rev"]?.stringValue)
        await XCTAssertEqualAsync(try await server.request("DELETE", "/db/_design/idx?rev=\(revision)", as: alice).status, 403)
        // Reading follows channels, and a design document has none: a user does not see it.
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_design/idx", as: alice).status, 403)
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_design/idx").status, 200)
    }

    func testAdminOnlyRoutesRefuseUsers() async throws {
        let server = try await populatedServer()
        // As CouchDB 3.3.3 answers a user who is no admin (curl, recorded).
        for (method, path, reason) in [("PUT", "/newdb", "You are not a server admin."), ("DELETE", "/db", "You are not a server admin."),
                                       ("POST", "/db/_compact", "You are not a server or db admin."),
                                       ("GET", "/_users/_all_docs", "You are not a server admin."),
                                       ("GET", "/_users/_changes", "You are not a server admin.")] {
            let reply = try await server.request(method, path, json: method == "POST" ? [:] : nil, as: alice)
            XCTAssertEqual(reply.status, 401, "\(method) \(path)")
            XCTAssertEqual(reply.json["reason"], .string(reason), "\(method) \(path)")
        }
        // Another user's document is missing to alice, whether she reads, writes or deletes it.
        let bob = try await server.request("GET", "/_users/org.couchdb.user:bob")
        let bobRevision = try XCTUnwrap(bob.json["_rev"]?.stringValue)
        let attempts: [(String, String, JSON?)] = [("GET", "/_users/org.couchdb.user:bob", nil),
                                     ("PUT", "/_users/org.couchdb.user:mallory", ["name": "mallory", "type": "user", "roles": [], "password": "x"] as JSON),
                                     ("PUT", "/_users/org.couchdb.user:bob", ["_rev": .string(bobRevision), "name": "bob", "type": "user", "roles": [], "password": "x"] as JSON),
                                     ("DELETE", "/_users/org.couchdb.user:bob?rev=\(bobRevision)", nil),
                                     ("DELETE", "/_users/org.couchdb.user:bob", nil),
                                     ("COPY", "/_users/org.couchdb.user:bob", nil),
                                     ("GET", "/_users/org.couchdb.user:bob?open_revs=all", nil)]
        for (method, path, body) in attempts {
            let reply = try await server.request(method, path, json: body, as: alice)
            XCTAssertEqual(reply.json, ["error": "not_found", "reason": "missing"], "\(method) \(path)")
            XCTAssertEqual(reply.status, 404)
        }
        // The admin sees users and the validating design document.
        await XCTAssertEqualAsync(try await server.request("GET", "/_users/_all_docs").json["total_rows"], 3)
        XCTAssertEqual(bob.json["write_channels"], ["blue"])
        XCTAssertNil(bob.json["password"], "stored hashed")
        await XCTAssertEqualAsync(try await server.request("DELETE", "/_users/org.couchdb.user:bob?rev=\(bobRevision)").status, 200)
        await XCTAssertEqualAsync(try await server.request("GET", "/db", as: .user("bob", "bob-pw")).status, 401)
    }

    func testMalformedRequestsGetJSONErrorsAndTheServerKeepsServing() async throws {
        let server = try await populatedServer { $0.maximumBodySize = 1024 * 1024 }
        let deep = String(repeating: "[", count: 5000) + String(repeating: "]", count: 5000)
        let cases: [(String, String, Data?, String?, Int)] = [
            ("PUT", "/db/doc", Data("{bad json".utf8), "application/json", 400),
            ("POST", "/db/_bulk_docs", Data("[]".utf8), "application/json", 400),
            ("POST", "/db/_bulk_docs", Data(#"{"docs":5}"#.utf8), "application/json", 400),
            ("PUT", "/db/doc?rev=banana", Data("{}".utf8), "application/json", 400),
            ("GET", "/db/red1?rev=xyz", nil, nil, 400),
            ("GET", "/db/_all_docs?limit=abc", nil, nil, 400),
            ("GET", "/db/_all_docs?startkey=notjson", nil, nil, 400),
            ("GET", "/db/_changes?since=abc", nil, nil, 400),
            ("GET", "/db/_changes?feed=bogus", nil, nil, 400),
            ("GET", "/db/_changes?seq_interval=maybe", nil, nil, 400),
            ("GET", "/db/%ZZ", nil, nil, 404),  // URLSession sends %25ZZ: the id "%ZZ", which does not exist
            ("PUT", "/db/big", Data(repeating: 0x61, count: 2 * 1024 * 1024), "application/json", 413),
            ("PUT", "/db/_foo", Data("{}".utf8), "application/json", 400),
            ("GET", "/db/..%2F..%2Fetc%2Fpasswd", nil, nil, 404),
            ("PUT", "/%2E%2E", nil, nil, 400),
            ("POST", "/db/_revs_diff", Data(#"{"a":"notarray"}"#.utf8), "application/json", 400),
            ("POST", "/db/_bulk_get", Data("nope".utf8), "application/json", 400),
            ("GET", "/db/red1?open_revs=%5Bbad", nil, nil, 400),
            ("POST", "/db/_changes?filter=_selector", Data(#"{"selector":"x"}"#.utf8), "application/json", 400),
            ("PUT", "/db/deep", Data(deep.utf8), "application/json", 400),
            ("PUT", "/db/huge", Data(#"{"n":1E400}"#.utf8), "application/json", 400),
            ("PUT", "/db/lone", Data(#"{"s":"\ud800"}"#.utf8), "application/json", 400),
            ("PUT", "/db/mp", Data("x".utf8), "multipart/related", 400),
            ("GET", "/db/_design/app/_view/v?limit=-5", nil, nil, 400),
            ("PATCH", "/db/red1", nil, nil, 405),
            ("GET", "/_nothing", nil, nil, 404),
        ]
        for (method, path, body, type, status) in cases {
            let reply = try await server.request(method, path, body: body, contentType: type)
            XCTAssertEqual(reply.status, status, "\(method) \(path): \(reply.text)")
            XCTAssertNotNil(reply.json["error"]?.stringValue, "\(method) \(path) must answer CouchDB's JSON error: \(reply.text)")
            XCTAssertNotNil(reply.json["reason"]?.stringValue, "\(method) \(path)")
        }
        await XCTAssertEqualAsync(try await server.request("GET", "/").status, 200)
        await XCTAssertEqualAsync(try await server.request("GET", "/db/red1").json["v"], 1, "nothing was damaged")
        await XCTAssertEqualAsync(try await server.request("GET", "/db").json["doc_count"], 4)
    }
}
