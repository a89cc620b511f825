@testable import DocServer
import DocStore
import Foundation
import TestSupport
import XCTest

/// `/_membership` and `/_node/{node}/_config` as a single CouchDB 3.3.3 node answers them (recorded with
/// curl), and the settings DocServer honours from there at once.
final class NodeConfigurationTests: XCTestCase {
    func testConfigurationEndpoints() async throws {
        let server = try await TestServer(self)
        await XCTAssertEqualAsync(try await server.request("GET", "/_membership").json,
                                  ["all_nodes": ["nonode@nohost"], "cluster_nodes": ["nonode@nohost"]])
        let refused = try await server.request("GET", "/_node/_local/_config", as: .none)
        XCTAssertEqual(refused.status, 401)
        XCTAssertEqual(refused.json, ["error": "unauthorized", "reason": "You are not a server admin."])
        await XCTAssertEqualAsync(try await server.request("GET", "/_node/_local").json, ["name": "nonode@nohost"])

        let all = try await server.request("GET", "/_node/_local/_config")
        XCTAssertEqual(all.json["chttpd"]?["port"], "0")
        XCTAssertNotNil(all.json["couchdb"]?["database_dir"]?.stringValue)
        XCTAssertEqual(all.json["uuids"]?["algorithm"], "sequential")
        XCTAssertEqual(all.json["admins"]?["admin"]?.stringValue?.hasPrefix("-pbkdf2-"), true)

        // PUT and DELETE answer the value before; a new key's is "".
        let base = "/_node/nonode@nohost/_config/test"
        await XCTAssertEqualAsync(try await server.request("PUT", base + "/foo", json: "  bar \n").json, "")
        await XCTAssertEqualAsync(try await server.request("GET", base + "/foo").json, "bar")
        await XCTAssertEqualAsync(try await server.request("PUT", base + "/foo", json: "baz").json, "bar")
        await XCTAssertEqualAsync(try await server.request("GET", base).json, ["foo": "baz"])
        await XCTAssertEqualAsync(try await server.request("GET", "/_node/_local/_config/nothing").json, [:])
        let missing = try await server.request("GET", base + "/nope")
        XCTAssertEqual(missing.status, 404)
        XCTAssertEqual(missing.json, ["error": "not_found", "reason": "unknown_config_value"])
        await XCTAssertEqualAsync(try await server.request("DELETE", base + "/foo").json, "baz")
        await XCTAssertEqualAsync(try await server.request("DELETE", base + "/foo").status, 404)
        await XCTAssertEqualAsync(try await server.request("GET", "/_node/bogus@x/_config").json,
                                  ["error": "not_found", "reason": "no such node: bogus@x"])
        let protected = try await server.request("PUT", "/_node/_local/_config/query_servers/wohali", json: "x")
        XCTAssertEqual(protected.status, 403)
        XCTAssertEqual(protected.json["reason"], "Config section blacklisted for modification over HTTP API.")
        await XCTAssertEqualAsync(try await server.request("PUT", base + "/x", body: Data("\"abc".utf8)).json["reason"], "invalid UTF-8 JSON")
        await XCTAssertEqualAsync(try await server.request("PUT", base + "/x", body: Data()).json["reason"], "Missing request body")
        await XCTAssertEqualAsync(try await server.request("POST", base + "/x", json: "y").status, 405)

        // Not persisted: gone after _reload; persisted: kept, in the data folder too.
        await XCTAssertEqualAsync(try await server.request("PUT", base + "/memory", json: "1", headers: ["X-Couch-Persist": "false"]).status, 200)
        await XCTAssertEqualAsync(try await server.request("PUT", base + "/kept", json: "2").status, 200)
        await XCTAssertEqualAsync(try await server.request("POST", "/_node/_local/_config/_reload").json, ["ok": true])
        await XCTAssertEqualAsync(try await server.request("GET", base).json, ["kept": "2"])
        let file = server.directory.appendingPathComponent(".docstore-system/config.json")
        XCTAssertEqual(try JSON(parsing: Data(contentsOf: file))["test"]?["kept"], "2")
    }

    /// A restarted server keeps what was set over HTTP.
    func testPersistedSettingsSurviveARestart() async throws {
        let first = try await TestServer(self)
        await XCTAssertEqualAsync(try await first.request("PUT", "/_node/_local/_config/uuids/algorithm", json: "utc_id").status, 200)
        await first.server.stop()
        let second = try await TestServer(self, directory: first.directory)
        await XCTAssertEqualAsync(try await second.request("GET", "/_node/_local/_config/uuids/algorithm").json, "utc_id")
    }

    /// `[admins]`: a password set over HTTP is kept hashed and lets that admin in at once; deleting the
    /// key shuts them out.
    func testAdminsSetOverHTTP() async throws {
        let server = try await TestServer(self)
        await XCTAssertEqualAsync(try await server.request("PUT", "/_node/_local/_config/admins/jan", json: "apple").json, "")
        let stored = try await server.request("GET", "/_node/_local/_config/admins/jan").json.stringValue
        XCTAssertEqual(stored?.hasPrefix("-pbkdf2-"), true)
        XCTAssertNotEqual(stored?.contains("apple"), true)
        let session = try await server.request("GET", "/_session", as: .user("jan", "apple"))
        XCTAssertEqual(session.json["userCtx"], ["name": "jan", "roles": ["_admin"]])
        await XCTAssertEqualAsync(try await server.request("GET", "/_node/_local/_config", as: .user("jan", "apple")).status, 200)
        await XCTAssertEqualAsync(try await server.request("GET", "/_session", as: .user("jan", "pear")).status, 401)
        await XCTAssertEqualAsync(try await server.request("DELETE", "/_node/_local/_config/admins/jan").status, 200)
        await XCTAssertEqualAsync(try await server.request("GET", "/_session", as: .user("jan", "apple")).status, 401)
    }

    /// `uuids/algorithm` decides `_uuids` and the ids of new documents: `sequential` (the default),
    /// `utc_random`, `utc_id` with its suffix.
    func testUUIDAlgorithms() async throws {
        let server = try await TestServer(self)
        func uuids(_ count: Int = 20) async throws -> [String] {
            try await server.request("GET", "/_uuids?count=\(count)").json["uuids"]?.arrayValue?.compactMap(\.stringValue) ?? []
        }
        let sequential = try await uuids(1000)
        XCTAssertEqual(sequential.count, 1000)
        XCTAssertTrue(sequential.allSatisfy { $0.count == 32 && $0.allSatisfy(\.isHexDigit) })
        XCTAssertEqual(sequential, sequential.sorted())
        XCTAssertEqual(Set(sequential).count, 1000)

        _ = try await server.request("PUT", "/_node/_local/_config/uuids/algorithm", json: "utc_random", headers: ["X-Couch-Persist": "false"])
        let utcRandom = try await uuids()
        XCTAssertTrue(utcRandom.allSatisfy { $0.count == 32 })
        XCTAssertLessThan(utcRandom[0].prefix(14), utcRandom[19].prefix(14))
        XCTAssertEqual(Set(utcRandom).count, 20)

        _ = try await server.request("PUT", "/_node/_local/_config/uuids/algorithm", json: "utc_id", headers: ["X-Couch-Persist": "false"])
        _ = try await server.request("PUT", "/_node/_local/_config/uuids/utc_id_suffix", json: "frog", headers: ["X-Couch-Persist": "false"])
        let utcID = try await uuids()
        XCTAssertTrue(utcID.allSatisfy { $0.count == 18 && $0.hasSuffix("frog") })
        XCTAssertEqual(utcID, utcID.sorted())
        _ = try await server.request("PUT", "/db")
        let posted = try await server.request("POST", "/db", json: ["v": 1])
        XCTAssertEqual(posted.json["id"]?.stringValue?.hasSuffix("frog"), true)
        let bulk = try await server.request("POST", "/db/_bulk_docs", json: ["docs": [["v": 2]]])
        XCTAssertEqual(bulk.json[0]?["id"]?.stringValue?.hasSuffix("frog"), true)
    }

    /// `chttpd` settings honoured at once: `max_http_request_size`, `x_forwarded_host`, `allow_jsonp`,
    /// `decode_plus_to_space` (on by default, as in CouchDB) and `WWW-Authenticate`.
    func testHTTPSettings() async throws {
        let server = try await TestServer(self)
        _ = try await server.request("PUT", "/db")
        func set(_ key: String, _ value: String) async throws {
            await XCTAssertEqualAsync(try await server.request("PUT", "/_node/_local/_config/chttpd/\(key)", json: .string(value),
                                                               headers: ["X-Couch-Persist": "false"]).status, 200)
        }
        // `+` in a path is a space unless decode_plus_to_space is false; %2B is always a plus.
        await XCTAssertEqualAsync(try await server.request("PUT", "/db/test+doc", json: [:]).json["id"], "test doc")
        await XCTAssertEqualAsync(try await server.request("PUT", "/db/a%2Bb", json: [:]).json["id"], "a+b")
        try await set("decode_plus_to_space", "false")
        await XCTAssertEqualAsync(try await server.request("PUT", "/db/test+doc", json: [:]).json["id"], "test+doc")

        try await set("x_forwarded_host", "X-Host")
        let located = try await server.request("PUT", "/db/located", json: [:], headers: ["X-Host": "mysite2.com", "X-Forwarded-Host": "other.com"])
        XCTAssertEqual(located.header("Location"), "http://mysite2.com/db/located")

        let plain = try await server.request("GET", "/db/located?callback=foo")
        XCTAssertEqual(plain.header("Content-Type"), "application/json")
        try await set("allow_jsonp", "true")
        let wrapped = try await server.request("GET", "/db/located?callback=foo")
        XCTAssertEqual(wrapped.header("Content-Type"), "application/javascript")
        XCTAssertTrue(wrapped.text.hasPrefix("/* CouchDB */foo({\"_id\":\"located\""), wrapped.text)
        XCTAssertTrue(wrapped.text.hasSuffix("});"), wrapped.text)
        let changes = try await server.request("GET", "/db/_changes?callback=foo")
        XCTAssertTrue(changes.text.hasPrefix("/* CouchDB */foo({\"results\":["), changes.text)
        XCTAssertTrue(changes.text.hasSuffix(");"), changes.text)
        let invalid = try await server.request("GET", "/db/located?callback=fo%22o")
        XCTAssertEqual(invalid.status, 400)
        XCTAssertEqual(invalid.json, ["error": "bad_request", "reason": "invalid_callback"])

        try await set("WWW-Authenticate", "X-Couch-Test-Auth")
        await XCTAssertEqualAsync(try await server.request("GET", "/db", as: .none).header("WWW-Authenticate"), "X-Couch-Test-Auth")

        try await set("max_http_request_size", "16")
        let tooLarge = try await server.request("PUT", "/db/big", json: ["text": "more than sixteen bytes"])
        XCTAssertEqual(tooLarge.status, 413)
        XCTAssertEqual(tooLarge.json, ["error": "too_large", "reason": "the request entity is too large"])
        await XCTAssertEqualAsync(try await server.request("PUT", "/db/small", json: [:]).status, 201)
    }

    /// Settings are read with their spaces trimmed as Foundation's `trimmingCharacters(in: .whitespaces)`
    /// would, which the server's own trimming replaces.
    func testSettingsAreTrimmedAsFoundationTrims() {
        let pieces = ["1", "20", "true", " ", "\t", "\u{00A0}", "\u{3000}", "\n", "\r", "x", "é", "\u{2028}"]
        for _ in 0..<3000 {
            let text = (0..<Int.random(in: 0...6)).map { _ in pieces.randomElement()! }.joined()
            XCTAssertEqual(String(NodeConfiguration.trimmingSpaces(text)), text.trimmingCharacters(in: .whitespaces), text.debugDescription)
        }
    }
}
