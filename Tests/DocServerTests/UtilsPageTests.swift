import DocServer
import DocStore
import Foundation
import XCTest

/// `/_utils/`, the web administration page: its files as the server sends them. What the page does in a
/// browser is `Tests/Interop/utils_browser_check.py` (headless Chromium, in `.ci/run`).
final class UtilsPageTests: XCTestCase {
    func testThePageIsPublicAndMovesBelowItsSlash() async throws {
        let server = try await TestServer(self)
        let moved = try await server.request("GET", "/_utils", as: .none)
        XCTAssertEqual(moved.status, 301, "as CouchDB, so relative links resolve below /_utils/")
        XCTAssertEqual(moved.header("Location"), "/_utils/")

        let page = try await server.request("GET", "/_utils/", headers: ["Accept": "text/html"], as: .none)
        XCTAssertEqual(page.status, 200, "the page itself needs no credentials: it signs in with _session")
        XCTAssertEqual(page.header("Content-Type"), "text/html; charset=utf-8")
        XCTAssertEqual(page.header("X-Content-Type-Options"), "nosniff")
        let policy = try XCTUnwrap(page.header("Content-Security-Policy"))
        XCTAssertTrue(policy.contains("script-src 'self'") && policy.contains("connect-src 'self'"), policy)
        let index = try await server.request("GET", "/_utils/index.html", as: .none)
        XCTAssertEqual(index.body, page.body)

        // Every file the page names is served, with its type.
        let types = ["js": "text/javascript; charset=utf-8", "css": "text/css; charset=utf-8", "svg": "image/svg+xml"]
        let names = Set(page.text.matches(of: /(?:src|href)="([^"#:]+)"/).map { String($0.output.1) })
        XCTAssertEqual(names, ["utils.js", "utils.css", "icon.svg"])
        for name in names {
            let file = try await server.request("GET", "/_utils/\(name)", as: .none)
            XCTAssertEqual(file.status, 200, name)
            XCTAssertEqual(file.header("Content-Type"), types[String(name.split(separator: ".").last!)], name)
            XCTAssertFalse(file.body.isEmpty, name)
            // No request leaves the server at run time: the only absolute URLs are the SVG namespace and
            // an example in a placeholder.
            let absolute = Set(file.text.matches(of: /https?:\/\/[A-Za-z0-9.:\-]+/).map { String($0.output) })
            XCTAssertTrue(absolute.isSubset(of: ["http://www.w3.org", "http://host:5984"]), "\(name): \(absolute)")
        }
    }

    func testValidatorsMethodsAndMissingFiles() async throws {
        let server = try await TestServer(self)
        let script = try await server.request("GET", "/_utils/utils.js", as: .none)
        let etag = try XCTUnwrap(script.header("ETag"))
        XCTAssertEqual(script.header("Cache-Control"), "no-cache", "browsers ask again, so a new version shows at once")
        let unchanged = try await server.request("GET", "/_utils/utils.js", headers: ["If-None-Match": etag], as: .none)
        XCTAssertEqual(unchanged.status, 304)
        XCTAssertTrue(unchanged.body.isEmpty)
        let changed = try await server.request("GET", "/_utils/utils.js", headers: ["If-None-Match": "\"other\""], as: .none)
        XCTAssertEqual(changed.status, 200)

        let head = try await server.request("HEAD", "/_utils/utils.js", as: .none)
        XCTAssertEqual(head.status, 200)
        XCTAssertEqual(head.header("Content-Length"), String(script.body.count))

        let posted = try await server.request("POST", "/_utils/", json: [:], as: .none)
        XCTAssertEqual(posted.status, 405)
        XCTAssertEqual(posted.json["error"], "method_not_allowed")
        let missing = try await server.request("GET", "/_utils/missing.js", as: .none)
        XCTAssertEqual(missing.status, 404)
        XCTAssertEqual(missing.json["error"], "not_found")
        let deeper = try await server.request("GET", "/_utils/a/b", as: .none)
        XCTAssertEqual(deeper.status, 401, "deeper paths are no files of the page")
    }

    /// With anonymous access allowed, `/_session` tells a request without credentials that it is an
    /// administrator (`name` null, role `_admin`, as CouchDB's "admin party"): the page, which signs in
    /// only when `/_session` names no user and no administrator, then works without a sign-in.
    func testAnonymousAdministratorsNeedNoSignIn() async throws {
        let open = try await TestServer(self) { $0.allowAnonymous = true }
        let session = try await open.request("GET", "/_session", as: .none)
        XCTAssertEqual(session.status, 200)
        XCTAssertEqual(session.json["userCtx"], ["name": .null, "roles": ["_admin"]])
        XCTAssertNil(session.json["info"]?["authenticated"], "no handler recognised credentials: there were none")
        let databases = try await open.request("GET", "/_all_dbs", as: .none)
        XCTAssertEqual(databases.status, 200)
        let signedIn = try await open.request("GET", "/_session")
        XCTAssertEqual(signedIn.json["userCtx"]?["name"], .string(TestServer.admin.name), "credentials still name their user")

        let closed = try await TestServer(self)
        let refused = try await closed.request("GET", "/_session", as: .none)
        XCTAssertEqual(refused.json["userCtx"], ["name": .null, "roles": []], "without --allow-anonymous nobody is anonymous administrator")
    }

    func testTurnedOffThereIsNoPage() async throws {
        let server = try await TestServer(self) { $0.utilsPage = false }
        let anonymous = try await server.request("GET", "/_utils/", as: .none)
        XCTAssertEqual(anonymous.status, 401, "an unknown endpoint, for the anonymous too")
        let missing = try await server.request("GET", "/_utils/")
        XCTAssertEqual(missing.status, 404)
        XCTAssertEqual(missing.json["error"], "not_found")
    }
}
