import DocStore
import Foundation
import XCTest

/// `/{db}/_security`: kept per database, admins set it, members (by name or role; `readers` in an
/// old object) and database admins may use the database, others get CouchDB's 403.
final class SecurityObjectHTTPTests: XCTestCase {
    func testMembersAreEnforced() async throws {
        let server = try await TestServer(self)
        await XCTAssertEqualAsync(try await server.request("PUT", "/db").status, 201)
        for (name, channel) in [("alice", "red"), ("bob", "blue"), ("carol", "green")] {
            await XCTAssertEqualAsync(try await server.addUser(name, ["password": "pw", "channels": [.string(channel)]], roles: [channel]), 201)
        }
        let initial = try await server.request("GET", "/db/_security")
        XCTAssertEqual(initial.status, 200)
        XCTAssertEqual(initial.json, [:], "no members: every signed-in user, within their channels")
        await XCTAssertEqualAsync(try await server.request("GET", "/db", as: .user("bob", "pw")).status, 200)

        let object: JSON = ["admins": ["names": [], "roles": []], "members": ["names": ["alice"], "roles": ["blue"]]]
        let set = try await server.request("PUT", "/db/_security", json: object)
        XCTAssertEqual(set.json, ["ok": true])
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_security").json, object)

        await XCTAssertEqualAsync(try await server.request("GET", "/db", as: .user("alice", "pw")).status, 200)
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_all_docs", as: .user("bob", "pw")).status, 200,
                                  "bob's role is a member role")
        for path in ["/db", "/db/_all_docs", "/db/_changes", "/db/anything"] {
            let refused = try await server.request("GET", path, as: .user("carol", "pw"))
            XCTAssertEqual(refused.status, 403, path)
            XCTAssertEqual(refused.json, ["error": "forbidden", "reason": "You are not allowed to access this db."])
        }
        await XCTAssertEqualAsync(try await server.request("POST", "/db", json: ["a": 1], as: .user("carol", "pw")).status, 403)

        // Only admins set it (a member: CouchDB's 403); a malformed one is refused and changes nothing.
        let byMember = try await server.request("PUT", "/db/_security", json: [:], as: .user("alice", "pw"))
        XCTAssertEqual(byMember.json, ["error": "forbidden", "reason": "You are not a db or server admin."])
        for bad: JSON in [[1], ["members": ["names": "alice"]], ["members": ["names": [1]]], ["admins": 3]] {
            await XCTAssertEqualAsync(try await server.request("PUT", "/db/_security", json: bad).status, 400)
        }
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_security").json, object)
        await XCTAssertEqualAsync(try await server.request("DELETE", "/db/_security").status, 405)
    }

    /// As CouchDB 3.3.3 (its reader_acl and security_validation tests, and curl): a database admin —
    /// by name or role — is a member, writes design documents and `_security`, compacts; `readers`
    /// stands for `members` in an old object; a member who is no database admin may not.
    func testDatabaseAdminsAndReaders() async throws {
        let server = try await TestServer.withDatabase(self)
        for (name, role) in [("bond", "top-secret"), ("joe", "other")] {
            await XCTAssertEqualAsync(try await server.addUser(name, ["password": "pw"], roles: [role]), 201)
        }
        let bond = TestServer.Credentials.user("bond", "pw"), joe = TestServer.Credentials.user("joe", "pw")
        _ = try await server.request("PUT", "/db/baz", json: ["foo": "bar"])
        _ = try await server.request("PUT", "/db/_security", json: ["members": ["roles": ["super-secret-club"], "names": ["joe"]]])
        await XCTAssertEqualAsync(try await server.request("GET", "/db/baz", as: bond).status, 403)
        let design: JSON = ["views": ["all": ["map": "function(doc) { emit(doc._id, null); }"]]]
        let refused = try await server.request("PUT", "/db/_design/app", json: design, as: joe)
        XCTAssertEqual(refused.status, 403)
        XCTAssertEqual(refused.json, ["error": "forbidden", "reason": "You are not a db or server admin."])
        let compact = try await server.request("POST", "/db/_compact", json: [:], as: joe)
        XCTAssertEqual(compact.json, ["error": "unauthorized", "reason": "You are not a server or db admin."])

        _ = try await server.request("PUT", "/db/_security", json: ["admins": ["roles": ["top-secret"], "names": []],
                                                                    "members": ["roles": ["super-secret-club"], "names": ["joe"]]])
        await XCTAssertEqualAsync(try await server.request("GET", "/db/baz", as: bond).status, 200, "a database admin is a member")
        await XCTAssertEqualAsync(try await server.request("PUT", "/db/_design/app", json: design, as: bond).status, 201)
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_design/app/_view/all", as: joe).json["total_rows"], 1)
        await XCTAssertEqualAsync(try await server.request("POST", "/db/_compact", json: [:], as: bond).status, 202)
        await XCTAssertEqualAsync(try await server.request("PUT", "/db/_security", json: ["readers": ["names": ["bond"]]], as: bond).status, 200)
        await XCTAssertEqualAsync(try await server.request("GET", "/db/baz", as: bond).status, 200, "readers stand for members")
        await XCTAssertEqualAsync(try await server.request("GET", "/db/baz", as: joe).status, 403)
    }
}
