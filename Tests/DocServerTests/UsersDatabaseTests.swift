@testable import DocServer
import DocStore
import Foundation
import XCTest

/// Users are documents of `_users`, as in CouchDB 3.3.3: hashed passwords (CouchDB's PBKDF2-SHA1, so
/// user documents replicate both ways), `_design/_auth`'s rules, a user's own document only, roles
/// matched by `_security`, `authentication_db`, `password_regexp`. Expected answers recorded with curl
/// from CouchDB 3.3.3.
final class UsersDatabaseTests: XCTestCase {
    /// A user document CouchDB 3.3.3 wrote for `{"name":"recorded","roles":["reader"],"password":"correct horse"}`.
    static let recordedByCouchDB: JSON = [
        "_id": "org.couchdb.user:recorded", "_rev": "1-11cc08f991677202f3b68dab8cd217f2", "name": "recorded", "type": "user",
        "roles": ["reader"], "password_scheme": "pbkdf2", "iterations": 10,
        "derived_key": "f292dbf122adb6ba7134da6467ff9d0531bafa49", "salt": "cedd76602dbdec4e4942f3fc14646886",
    ]

    func testUsersDatabaseIsMadeWithItsDesignDocumentAndHashesAsCouchDB() async throws {
        let server = try await TestServer(self)
        let design = try await server.request("GET", "/_users/_design/_auth")
        XCTAssertEqual(design.status, 200)
        XCTAssertNotNil(design.json["validate_doc_update"]?.stringValue)
        await XCTAssertEqualAsync(try await server.request("GET", "/_session").json["info"]?["authentication_db"], "_users")

        _ = try await server.request("PUT", "/_node/_local/_config/chttpd_auth/iterations", json: "1")
        await XCTAssertEqualAsync(try await server.addUser("jan", ["password": "apple"], roles: ["foo"]), 201)
        let stored = try await server.request("GET", "/_users/org.couchdb.user:jan").json
        XCTAssertNil(stored["password"])
        XCTAssertEqual(stored["password_scheme"], "pbkdf2")
        XCTAssertEqual(stored["iterations"], 1)
        let salt = try XCTUnwrap(stored["salt"]?.stringValue), key = try XCTUnwrap(stored["derived_key"]?.stringValue)
        XCTAssertEqual(salt.count, 32)
        // CouchDB's derivation: PBKDF2-HMAC-SHA1 of the password, with the salt's hex digits as salt, 20 bytes.
        XCTAssertEqual(key, try UsersDatabase.pbkdf2("apple", salt: salt, iterations: 1, prf: .sha1))
        XCTAssertEqual(try UsersDatabase.pbkdf2("correct horse", salt: "cedd76602dbdec4e4942f3fc14646886", iterations: 10, prf: .sha1),
                       Self.recordedByCouchDB["derived_key"]?.stringValue)
        let session = try await server.request("GET", "/_session", as: .user("jan", "apple")).json
        XCTAssertEqual(session["userCtx"], ["name": "jan", "roles": ["foo"], "channels": ["*"]])
        XCTAssertEqual(session["info"]?["authenticated"], "default")
    }

    func testUserDocumentsReplicateBothWaysWithCouchDB() async throws {
        let server = try await TestServer(self)
        // A user CouchDB made logs in here once replicated.
        var recorded = Self.recordedByCouchDB.objectValue ?? [:]
        recorded["_revisions"] = ["start": 1, "ids": ["11cc08f991677202f3b68dab8cd217f2"]]
        let pushed = try await server.request("POST", "/_users/_bulk_docs", json: ["docs": [.object(recorded)], "new_edits": false])
        XCTAssertEqual(pushed.status, 201)
        let session = try await server.request("GET", "/_session", as: .user("recorded", "correct horse")).json
        XCTAssertEqual(session["userCtx"]?["roles"], ["reader"])
        await XCTAssertEqualAsync(try await server.request("GET", "/_session", as: .user("recorded", "wrong")).status, 401)

        // A replicated password in clear is stored hashed, under its revision (CouchDB does the same).
        let clear: JSON = ["_id": "org.couchdb.user:plain", "_rev": "1-abc", "name": "plain", "type": "user", "roles": [], "password": "s3cret"]
        _ = try await server.request("POST", "/_users/_bulk_docs", json: ["docs": [clear], "new_edits": false])
        let stored = try await server.request("GET", "/_users/org.couchdb.user:plain").json
        XCTAssertEqual(stored["_rev"], "1-abc")
        XCTAssertNil(stored["password"])
        XCTAssertEqual(stored["password_scheme"], "pbkdf2")
        await XCTAssertEqualAsync(try await server.request("GET", "/_session", as: .user("plain", "s3cret")).json["userCtx"]?["name"], "plain")

        // A conflicted user document does not authenticate until the conflict is resolved.
        let rival: JSON = ["_id": "org.couchdb.user:plain", "_rev": "1-abd", "name": "plain", "type": "user", "roles": [], "password": "other"]
        _ = try await server.request("POST", "/_users/_bulk_docs", json: ["docs": [rival], "new_edits": false])
        let refused = try await server.request("GET", "/_session", as: .user("plain", "s3cret"))
        XCTAssertEqual(refused.status, 401)
        XCTAssertEqual(refused.json, ["error": "unauthorized",
                                      "reason": "User document conflicts must be resolved before the document is used for authentication purposes."])
        await XCTAssertEqualAsync(try await server.request("DELETE", "/_users/org.couchdb.user:plain?rev=1-abd").status, 200)
        await XCTAssertEqualAsync(try await server.request("GET", "/_session", as: .user("plain", "s3cret")).status, 200)
    }

    /// Signed-in users' documents are remembered between requests; a write to `_users` through the
    /// server is seen by the very next request: a changed password, changed roles (an administrator's
    /// too, whose user document gives its roles), a deleted user.
    func testRememberedUserDocumentsFollowEveryWriteThroughTheServer() async throws {
        let server = try await TestServer(self)
        func roles(_ credentials: TestServer.Credentials) async throws -> [String]? {
            try await server.request("GET", "/_session", as: credentials).json["userCtx"]?["roles"]?.arrayValue?.compactMap(\.stringValue)
        }
        await XCTAssertEqualAsync(try await server.addUser("kim", ["password": "one"], roles: ["a"]), 201)
        await XCTAssertEqualAsync(try await roles(.user("kim", "one")), ["a"])
        await XCTAssertEqualAsync(try await roles(.user("kim", "one")), ["a"], "remembered")
        await XCTAssertEqualAsync(try await server.addUser("kim", ["password": "two"], roles: ["b"]), 201)
        await XCTAssertEqualAsync(try await server.request("GET", "/_session", as: .user("kim", "one")).status, 401)
        await XCTAssertEqualAsync(try await roles(.user("kim", "two")), ["b"])

        let admin = TestServer.admin
        await XCTAssertEqualAsync(try await server.addUser(admin.name, ["password": "unused"], roles: ["boss"]), 201)
        await XCTAssertEqualAsync(try await roles(.admin)?.contains("boss"), true)
        await XCTAssertEqualAsync(try await server.addUser(admin.name, ["password": "unused"], roles: ["chief"]), 201)
        let changed = try await roles(.admin) ?? []
        XCTAssertTrue(changed.contains("chief") && !changed.contains("boss"), "\(changed)")

        let revision = try await server.request("GET", "/_users/org.couchdb.user:kim").json["_rev"]?.stringValue ?? ""
        await XCTAssertEqualAsync(try await server.request("DELETE", "/_users/org.couchdb.user:kim?rev=\(revision)").status, 200)
        await XCTAssertEqualAsync(try await server.request("GET", "/_session", as: .user("kim", "two")).status, 401)
    }

    func testAuthDesignDocumentRules() async throws {
        let server = try await TestServer(self)
        // CouchDB 3.3.3's 403 reasons (its users_db and cookie_auth tests, and curl).
        let cases: [(JSON, String)] = [
            (["_id": "org.couchdb.user:a", "name": "a", "roles": []], "doc.type must be user"),
            (["_id": "org.couchdb.user:a", "type": "user", "roles": []], "doc.name is required"),
            (["_id": "org.couchdb.user:a", "type": "user", "name": "a"], "doc.roles must exist"),
            (["_id": "org.couchdb.user:a", "type": "user", "name": "a", "roles": "x"], "doc.roles must be an array"),
            (["_id": "org.couchdb.user:a", "type": "user", "name": "a", "roles": [12]], "doc.roles can only contain strings"),
            (["_id": "org.couchdb.user:b", "type": "user", "name": "a", "roles": []], "Doc ID must be of the form org.couchdb.user:name"),
            (["_id": "org.couchdb.user:_why", "type": "user", "name": "_why", "roles": []], "Username may not start with underscore."),
            (["_id": "org.couchdb.user:a:b", "type": "user", "name": "a:b", "roles": []], "Character `:` is not allowed in usernames."),
            (["_id": "org.couchdb.user:a", "type": "user", "name": "a", "roles": ["_bar"]], "No system roles (starting with underscore) in users db."),
            (["_id": "org.couchdb.user:a", "type": "user", "name": "a", "roles": [], "password_scheme": "md5"], "Password scheme `md5` not supported."),
            (["_id": "org.couchdb.user:a", "type": "user", "name": "a", "roles": [], "password_sha": "ab"],
             "Users with password_sha must have a salt.See /_utils/script/couch.js for example code."),
        ]
        for (document, reason) in cases {
            let reply = try await server.request("POST", "/_users", json: document)
            XCTAssertEqual(reply.json, ["error": "forbidden", "reason": .string(reason)], "\(document)")
            XCTAssertEqual(reply.status, 403)
        }

        // A user changes their own password, not their roles, and reads their own document only.
        await XCTAssertEqualAsync(try await server.addUser("jchris", ["password": "funnybone"]), 201)
        await XCTAssertEqualAsync(try await server.addUser("jason", ["password": "test"]), 201)
        let jchris = TestServer.Credentials.user("jchris", "funnybone")
        var own = try await server.request("GET", "/_users/org.couchdb.user:jchris", as: jchris).json
        XCTAssertNotNil(own["derived_key"])
        own["roles"] = ["foo"]
        let roles = try await server.request("PUT", "/_users/org.couchdb.user:jchris", json: own, as: jchris)
        XCTAssertEqual(roles.json, ["error": "forbidden", "reason": "Only _admin may edit roles"])
        own["roles"] = []
        own["password"] = "new"
        await XCTAssertEqualAsync(try await server.request("PUT", "/_users/org.couchdb.user:jchris", json: own, as: jchris).status, 201)
        let design = try await server.request("GET", "/_users/_design/_auth", as: .user("jchris", "new"))
        XCTAssertEqual(design.json, ["error": "forbidden", "reason": "Only administrators can view design docs in the users database."])
        await XCTAssertEqualAsync(try await server.request("PUT", "/_users/_design/mine", json: [:], as: .user("jchris", "new")).json,
                                  ["error": "forbidden", "reason": "You are not a db or server admin."])
        await XCTAssertEqualAsync(try await server.request("POST", "/_users/_bulk_get", json: ["docs": [["id": "org.couchdb.user:jason"]]],
                                                           as: .user("jchris", "new")).status, 403)

        // An admin of the configuration has the roles of a user document of its name.
        _ = try await server.request("PUT", "/_node/_local/_config/admins/jchris", json: "funnybone")
        await XCTAssertEqualAsync(try await server.addUser("jchris", [:], roles: ["foo"]), 201)
        let admin = try await server.request("POST", "/_session", json: ["name": "jchris", "password": "funnybone"], as: .none)
        XCTAssertEqual(admin.json["roles"], ["_admin", "foo"])
    }

    func testPasswordRulesAndPublicFields() async throws {
        let server = try await TestServer(self)
        _ = try await server.request("PUT", "/_node/_local/_config/couch_httpd_auth/password_regexp",
                                     json: #"[{".{10,}"}, {"[A-Z]+", "Requirement 2."}, {"[a-z]+", ""}, {"\\d+", "Req 4."}, "[!.,()]+"]"#)
        // CouchDB 3.3.3's answers, in its users_db test's order.
        for (password, reason) in [("abc", "Password does not conform to requirements."),
                                   ("abcdefghij", "Password does not conform to requirements. Requirement 2."),
                                   ("ABCDEFGHIJ", "Password does not conform to requirements."),
                                   ("ABCDEFGHIJabcdefghij", "Password does not conform to requirements. Req 4."),
                                   ("ABCDEFGHIJabcdefghij1", "Password does not conform to requirements.")] {
            let reply = try await server.request("PUT", "/_users/org.couchdb.user:rules",
                                                 json: ["name": "rules", "type": "user", "roles": [], "password": .string(password)])
            XCTAssertEqual(reply.json, ["error": "bad_request", "reason": .string(reason)], password)
        }
        await XCTAssertEqualAsync(try await server.addUser("rules", ["password": "ABCDEFGHIJabcdefghij1!"]), 201)
        _ = try await server.request("PUT", "/_node/_local/_config/couch_httpd_auth/password_regexp", json: #"{{".{10,}"}}"#)
        let unusable = try await server.request("PUT", "/_users/org.couchdb.user:other",
                                                json: ["name": "other", "type": "user", "roles": [], "password": "x"])
        XCTAssertEqual(unusable.json, ["error": "forbidden", "reason": "Server cannot hash passwords at this time."])
        _ = try await server.request("DELETE", "/_node/_local/_config/couch_httpd_auth/password_regexp")

        // Another user's document: missing, unless `public_fields` shows some of it.
        await XCTAssertEqualAsync(try await server.addUser("tom", ["password": "cat", "email": "tom@example.org"]), 201)
        let rules = TestServer.Credentials.user("rules", "ABCDEFGHIJabcdefghij1!")
        await XCTAssertEqualAsync(try await server.request("GET", "/_users/org.couchdb.user:tom", as: rules).json,
                                  ["error": "not_found", "reason": "missing"])
        _ = try await server.request("PUT", "/_node/_local/_config/chttpd_auth/public_fields", json: "name, email")
        let shown = try await server.request("GET", "/_users/org.couchdb.user:tom", as: rules).json
        XCTAssertEqual(shown["email"], "tom@example.org")
        XCTAssertNil(shown["derived_key"])
    }

    func testACustomAuthenticationDatabase() async throws {
        let server = try await TestServer(self)
        // As CouchDB's security_validation test: users posted without `type` into a database of any
        // name that the configuration names are hashed there and sign in; it gets no `_design/_auth`.
        await XCTAssertEqualAsync(try await server.request("PUT", "/custom-users").status, 201)
        _ = try await server.request("PUT", "/_node/_local/_config/chttpd_auth/authentication_db", json: "custom-users")
        let posted = try await server.request("POST", "/custom-users", json: ["_id": "org.couchdb.user:tom", "name": "tom", "password": "cat", "roles": []])
        XCTAssertEqual(posted.json["ok"], true)
        let tom = try await server.request("GET", "/custom-users/org.couchdb.user:tom").json
        XCTAssertNil(tom["password"])
        XCTAssertEqual(tom["password_scheme"], "pbkdf2")
        await XCTAssertEqualAsync(try await server.request("GET", "/custom-users/_design/_auth").status, 404)
        let session = try await server.request("GET", "/_session", as: .user("tom", "cat")).json
        XCTAssertEqual(session["userCtx"]?["name"], "tom")
        XCTAssertEqual(session["info"]?["authentication_db"], "custom-users")
        // Editing its security object needs `users_db_security_editable`.
        let security = try await server.request("PUT", "/custom-users/_security", json: [:])
        XCTAssertEqual(security.json, ["error": "forbidden", "reason": "You can't edit the security object of the user database."])
    }

    func testSessionsAsCouchDBAnswersThem() async throws {
        let server = try await TestServer(self)
        await XCTAssertEqualAsync(try await server.addUser("jan", ["password": "apple"]), 201)
        let next = try await server.request("POST", "/_session?next=/_up", json: ["name": "jan", "password": "apple"], as: .none)
        XCTAssertEqual(next.status, 302)
        XCTAssertTrue(next.header("Location")?.hasSuffix("/_up") == true)
        let fail = try await server.request("POST", "/_session?fail=/_up", json: ["name": "jan", "password": "pear"], as: .none)
        XCTAssertEqual(fail.status, 302)
        XCTAssertTrue(fail.header("Location")?.hasSuffix("/_up") == true)
        // Only to this server's own paths: a sign-in is never sent on to another site.
        let elsewhere = try await server.request("POST", "/_session?next=http://evil.example/", json: ["name": "jan", "password": "apple"], as: .none)
        XCTAssertEqual(elsewhere.status, 200)
        XCTAssertNil(elsewhere.header("Location"))
        // `_:_` are no credentials; a valid session cookie wins over Basic credentials.
        await XCTAssertEqualAsync(try await server.request("GET", "/_session", as: .user("_", "_")).json["userCtx"]?["name"], .null)
        let cookie = try XCTUnwrap(next.header("Set-Cookie")?.split(separator: ";").first?.dropFirst("AuthSession=".count))
        let both = try await server.request("GET", "/_session", headers: ["Cookie": "AuthSession=\(cookie)"])
        XCTAssertEqual(both.json["userCtx"]?["name"], "jan")
        XCTAssertEqual(both.json["info"]?["authenticated"], "cookie")
        await XCTAssertEqualAsync(try await server.request("GET", "/_session?basic=true", as: .none).json,
                                  ["error": "unauthorized", "reason": "Please login."])
    }

    /// CouchDB's proxy authentication (its proxyauth test): off until `[chttpd] authentication_handlers`
    /// names it; then the proxy's headers name the user and roles, vouched for by an HMAC of the name
    /// when `proxy_use_secret` is on.
    func testProxyAuthentication() async throws {
        let server = try await TestServer(self)
        let headers = ["X-Auth-CouchDB-UserName": "couch@apache.org", "X-Auth-CouchDB-Roles": "test_role_1, test_role_2"]
        await XCTAssertEqualAsync(try await server.request("GET", "/_session", headers: headers, as: .none).json["userCtx"]?["name"], .null)
        _ = try await server.request("PUT", "/_node/_local/_config/chttpd/authentication_handlers",
                                     json: "{chttpd_auth, proxy_authentication_handler}, {chttpd_auth, default_authentication_handler}")
        let proxied = try await server.request("GET", "/_session", headers: headers, as: .none).json
        XCTAssertEqual(proxied["userCtx"]?["name"], "couch@apache.org")
        XCTAssertEqual(proxied["userCtx"]?["roles"], ["test_role_1", "test_role_2"])
        XCTAssertEqual(proxied["info"]?["authenticated"], "proxy")

        _ = try await server.request("PUT", "/_node/_local/_config/chttpd_auth/proxy_use_secret", json: "true")
        _ = try await server.request("PUT", "/_node/_local/_config/chttpd_auth/secret", json: "s3cr3t")
        await XCTAssertEqualAsync(try await server.request("GET", "/_session", headers: headers, as: .none).json["userCtx"]?["name"], .null,
                                  "no token, no user")
        var signed = headers
        signed["X-Auth-CouchDB-Token"] = "36f9c59a0e1a2cb0bd1a0e9b61e0a7d8e7e3e06a"
        await XCTAssertEqualAsync(try await server.request("GET", "/_session", headers: signed, as: .none).json["userCtx"]?["name"], .null,
                                  "a wrong token, no user")
        // hex(HMAC-SHA1("s3cr3t", "couch@apache.org")), computed with Python's hmac module.
        signed["X-Auth-CouchDB-Token"] = "b92209842acd947a0eece8cec2cd2975e9d8eb54"
        await XCTAssertEqualAsync(try await server.request("GET", "/_session", headers: signed, as: .none).json["userCtx"]?["name"],
                                  "couch@apache.org")
    }
}
