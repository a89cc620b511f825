import DocStore
import Foundation
import XCTest

/// `/{db}/_security`: kept per database, admins set it, members (by name, or by a role matched against
/// their channels) may use the database, others get CouchDB's 403.
final class SecurityObjectHTTPTests: XCTestCase {
    func testMembersAreEnforced() async throws {
        let server = try await TestServer(self)
        await XCTAssertEqualAsync(try await server.request("PUT", "/db").status, 201)
        for (name, channel) in [("alice", "red"), ("bob", "blue"), ("carol", "green")] {
            await XCTAssertEqualAsync(try await server.request("PUT", "/_users/org.couchdb.user:\(name)",
                                                               json: ["password": "pw", "channels": [.string(channel)]]).status, 201)
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
                                  "bob's channel is a member role")
        for path in ["/db", "/db/_all_docs", "/db/_changes", "/db/anything"] {
            let refused = try await server.request("GET", path, as: .user("carol", "pw"))
            XCTAssertEqual(refused.status, 403, path)
            XCTAssertEqual(refused.json, ["error": "forbidden", "reason": "You are not allowed to access this db."])
        }
        await XCTAssertEqualAsync(try await server.request("POST", "/db", json: ["a": 1], as: .user("carol", "pw")).status, 403)

        // Only admins set it; a malformed one is refused and changes nothing.
        await XCTAssertEqualAsync(try await server.request("PUT", "/db/_security", json: [:], as: .user("alice", "pw")).status, 401)
        for bad: JSON in [[1], ["members": ["names": "alice"]], ["members": ["names": [1]]], ["admins": 3]] {
            await XCTAssertEqualAsync(try await server.request("PUT", "/db/_security", json: bad).status, 400)
        }
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_security").json, object)
        await XCTAssertEqualAsync(try await server.request("DELETE", "/db/_security").status, 405)
    }
}
