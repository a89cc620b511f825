import DocServer
import DocStore
import Foundation
import XCTest

/// CORS as CouchDB 3.3.3 answers it (recorded from the real one): preflights of allowed origins, the
/// headers on their answers, nothing for other origins or when CORS is off.
final class CORSTests: XCTestCase {
    func testPreflightAndAnswersForAllowedOriginsOnly() async throws {
        let server = try await TestServer(self) { $0.cors = CORSConfiguration(origins: ["http://page.test:8000"]) }
        await XCTAssertEqualAsync(try await server.request("PUT", "/db").status, 201)
        let preflight = try await server.request("OPTIONS", "/db/doc", headers: [
            "Origin": "http://page.test:8000", "Access-Control-Request-Method": "PUT",
            "Access-Control-Request-Headers": "authorization,content-type,x-unknown"], as: .none)
        XCTAssertEqual(preflight.status, 204, "no credentials needed")
        XCTAssertEqual(preflight.header("Access-Control-Allow-Origin"), "http://page.test:8000")
        XCTAssertEqual(preflight.header("Access-Control-Allow-Credentials"), "true")
        XCTAssertEqual(preflight.header("Access-Control-Allow-Methods"), "CONNECT, COPY, DELETE, GET, HEAD, OPTIONS, POST, PUT, TRACE")
        XCTAssertEqual(preflight.header("Access-Control-Allow-Headers"), "authorization,content-type", "only the allowed ones")
        XCTAssertEqual(preflight.header("Access-Control-Max-Age"), "600")

        let answer = try await server.request("GET", "/db", headers: ["Origin": "http://page.test:8000"])
        XCTAssertEqual(answer.status, 200)
        XCTAssertEqual(answer.header("Access-Control-Allow-Origin"), "http://page.test:8000")
        XCTAssertEqual(answer.header("Access-Control-Allow-Credentials"), "true")
        XCTAssertEqual(answer.header("Access-Control-Expose-Headers"),
                       "content-type, cache-control, accept-ranges, etag, server, x-couch-request-id, x-couch-update-newrev, x-couchdb-body-time")
        let refused = try await server.request("GET", "/db", headers: ["Origin": "http://page.test:8000"], as: .none)
        XCTAssertEqual(refused.status, 401)
        XCTAssertEqual(refused.header("Access-Control-Allow-Origin"), "http://page.test:8000", "errors carry them too")

        // Another origin: no preflight answer (the request is handled as any OPTIONS) and no headers.
        let evil = try await server.request("OPTIONS", "/db/doc", headers: [
            "Origin": "http://evil.test", "Access-Control-Request-Method": "PUT"], as: .none)
        XCTAssertEqual(evil.status, 401)
        XCTAssertNil(evil.header("Access-Control-Allow-Origin"))
        let other = try await server.request("GET", "/db", headers: ["Origin": "http://evil.test"])
        XCTAssertEqual(other.status, 200)
        XCTAssertNil(other.header("Access-Control-Allow-Origin"))
    }

    /// PouchDB fetches with credentials, which browsers refuse with `Allow-Origin: *`. CouchDB 3.3.3 with
    /// `[cors] origins = *` names the page's origin, with `Allow-Credentials: true` when `credentials =
    /// true` and without it when false (recorded with curl); a preflight asking for no headers gets an
    /// empty `Allow-Headers`.
    func testAnyOriginIsEchoedWithCredentialsAndOffByDefault() async throws {
        let open = try await TestServer(self) { $0.cors = CORSConfiguration(origins: ["*"]) }
        let any = try await open.request("GET", "/", headers: ["Origin": "http://anywhere.test"])
        XCTAssertEqual(any.header("Access-Control-Allow-Origin"), "http://anywhere.test")
        XCTAssertEqual(any.header("Access-Control-Allow-Credentials"), "true")
        let preflight = try await open.request("OPTIONS", "/db", headers: [
            "Origin": "http://anywhere.test", "Access-Control-Request-Method": "GET"], as: .none)
        XCTAssertEqual(preflight.status, 204)
        XCTAssertEqual(preflight.header("Access-Control-Allow-Origin"), "http://anywhere.test")
        XCTAssertEqual(preflight.header("Access-Control-Allow-Credentials"), "true")
        XCTAssertEqual(preflight.header("Access-Control-Allow-Headers"), "")

        let withoutCredentials = try await TestServer(self) { $0.cors = CORSConfiguration(origins: ["*"], credentials: false) }
        let plain = try await withoutCredentials.request("GET", "/", headers: ["Origin": "http://anywhere.test"])
        XCTAssertEqual(plain.header("Access-Control-Allow-Origin"), "http://anywhere.test")
        XCTAssertNil(plain.header("Access-Control-Allow-Credentials"))

        let off = try await TestServer(self)
        let none = try await off.request("GET", "/", headers: ["Origin": "http://anywhere.test"])
        XCTAssertNil(none.header("Access-Control-Allow-Origin"))
        await XCTAssertEqualAsync(try await off.request("OPTIONS", "/", headers: [
            "Origin": "http://anywhere.test", "Access-Control-Request-Method": "GET"], as: .none).header("Access-Control-Allow-Origin"), nil)
    }
}
