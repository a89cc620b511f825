@testable import DocServer
import DocStore
import Foundation
import XCTest

/// Input no client library sends, on a raw connection: each gets a prompt 4xx with CouchDB's JSON
/// error body — never a 500, never a hang — and the server goes on serving.
final class HostileInputTests: XCTestCase {
    private var auth: String { "Authorization: " + TestServer.basic(TestServer.admin.name, TestServer.admin.password) }

    private func server() async throws -> TestServer {
        let server = try await TestServer(self)
        _ = try await server.request("PUT", "/db")
        return server
    }

    /// Sends `request` on a new connection; returns the answer and its JSON body.
    private func exchange(_ server: TestServer, _ request: String, file: StaticString = #filePath, line: UInt = #line)
        throws -> (status: Int, json: JSON, connection: RawConnection)
    {
        let connection = try RawConnection(port: server.port)
        connection.send(request)
        let response = try XCTUnwrap(connection.readResponse(), "no answer (a hang or a dropped connection)", file: file, line: line)
        XCTAssertEqual(response.headers["content-type"], "application/json", file: file, line: line)
        return (response.status, (try? JSON(parsing: response.body)) ?? .null, connection)
    }

    private func assertStillServing(_ server: TestServer, file: StaticString = #filePath, line: UInt = #line) async throws {
        let welcome = try await server.request("GET", "/db")
        XCTAssertEqual(welcome.status, 200, file: file, line: line)
    }

    func testMalformedChunkSizeLineIs400() async throws {
        let server = try await server()
        let answer = try exchange(server, "POST /db/_bulk_docs HTTP/1.1\r\nHost: x\r\n\(auth)\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nZZZ\r\nabc\r\n0\r\n\r\n")
        XCTAssertEqual(answer.status, 400)
        XCTAssertEqual(answer.json["error"], "bad_request")
        XCTAssertTrue(answer.connection.isClosedByServer())
        try await assertStillServing(server)
    }

    /// A declared chunk larger than any accepted body is refused as its size line arrives, whether or
    /// not the line has ended, without waiting for the bytes it announces.
    func testAbsurdChunkSizeIs413AtOnce() async throws {
        let server = try await server()
        for (path, size) in [("/db/_bulk_docs", "FFFFFFFFFFFF\r\nabc"), ("/db/doc1/file.bin", "7FFFFFFFFFFFFFFF\r\n"),
                             ("/db/doc2/file.bin", "1000000000000000000000"), ("/db/_bulk_docs", "FFFFFFFF")] {
            let answer = try exchange(server, "PUT \(path) HTTP/1.1\r\nHost: x\r\n\(auth)\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n\(size)")
            XCTAssertEqual(answer.status, 413, size)
            XCTAssertEqual(answer.json["error"], "too_large", size)
            XCTAssertTrue(answer.connection.isClosedByServer(), size)
        }
        try await assertStillServing(server)
        await XCTAssertEqualAsync(try await server.request("GET", "/db/doc1").status, 404, "nothing was written")
    }

    func testUnknownMethodTokenIs405() async throws {
        let server = try await server()
        for method in ["FOO", "get", "GET\u{01}"] {
            let answer = try exchange(server, "\(method) /db HTTP/1.1\r\nHost: x\r\n\(auth)\r\nContent-Length: 0\r\n\r\n")
            XCTAssertEqual(answer.status, 405, method)
            XCTAssertEqual(answer.json["error"], "method_not_allowed", method)
        }
        let connect = try exchange(server, "CONNECT /db HTTP/1.1\r\nHost: x\r\n\(auth)\r\n\r\n")
        XCTAssertEqual(connect.status, 405)
        XCTAssertTrue(connect.connection.isClosedByServer(), "a CONNECT answer ends the connection")
        try await assertStillServing(server)
    }

    func testGarbageContentTypesAre415Or400() async throws {
        let server = try await server()
        let body = #"{"docs":[]}"#
        for (type, status, error) in [("garbage", 415, "bad_content_type"), ("application json", 415, "bad_content_type"),
                                      ("Application/JSON", 415, "bad_content_type"), ("\u{01}\u{02}x", 400, "bad_request"),
                                      ("a\u{7F}b", 400, "bad_request")] {
            let answer = try exchange(server, "POST /db/_bulk_docs HTTP/1.1\r\nHost: x\r\n\(auth)\r\nContent-Type: \(type)\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)")
            XCTAssertEqual(answer.status, status, type)
            XCTAssertEqual(answer.json["error"], .string(error), type)
        }
        let missing = try exchange(server, "POST /db/_bulk_docs HTTP/1.1\r\nHost: x\r\n\(auth)\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)")
        XCTAssertEqual(missing.status, 415)
        try await assertStillServing(server)
    }

    func testMalformedBulkDocsAre400AndWriteNothing() async throws {
        let server = try await server()
        for (body, reason) in [(#"{"docs":[{"_id":"ok-1"},1,"a"]}"#, "Document must be a JSON object"),
                               (#"{"docs":[{"_id":"ok-1"}],"new_edits":"no"}"#, "`new_edits` parameter must be a boolean."),
                               (#"{"docs":{}}"#, "`docs` parameter must be an array."),
                               (#"{"doc":[]}"#, "POST body must include `docs` parameter."),
                               (#"{"docs":[{"_id":"ok-1"},{"_id":"_nope"}]}"#, nil),
                               (#"{"new_edits":false,"docs":[{"_id":"ok-1"}]}"#, nil)] {
            let reply = try await server.request("POST", "/db/_bulk_docs", body: Data(body.utf8), contentType: "application/json")
            XCTAssertEqual(reply.status, 400, body)
            if let reason { XCTAssertEqual(reply.json["reason"], .string(reason), body) }
        }
        await XCTAssertEqualAsync(try await server.request("GET", "/db/ok-1").status, 404)
    }

    /// A body over the limit is refused from its `Content-Length`, before it is sent.
    func testDeclaredBodyOverTheLimitIs413BeforeItsBytes() async throws {
        let server = try await TestServer(self) { $0.maximumBodySize = 1000; $0.maximumAttachmentSize = 5000 }
        _ = try await server.request("PUT", "/db")
        let json = try exchange(server, "POST /db/_bulk_docs HTTP/1.1\r\nHost: x\r\n\(auth)\r\nContent-Type: application/json\r\nContent-Length: 5000000\r\n\r\n{")
        XCTAssertEqual(json.status, 413)
        XCTAssertEqual(json.json["error"], "too_large")
        XCTAssertTrue(json.connection.isClosedByServer())
        let attachment = try exchange(server, "PUT /db/d/big.bin HTTP/1.1\r\nHost: x\r\n\(auth)\r\nContent-Type: application/octet-stream\r\nContent-Length: 5001\r\n\r\nab")
        XCTAssertEqual(attachment.status, 413)
        XCTAssertEqual(attachment.json, ["error": "attachment_too_large", "reason": "big.bin"])
        XCTAssertTrue(attachment.connection.isClosedByServer())
        // Within the attachment limit, past the JSON one: attachments have their own limit.
        let fine = try await server.request("PUT", "/db/d/ok.bin", body: Data(count: 4000), contentType: "application/octet-stream")
        XCTAssertEqual(fine.status, 201)
        try await assertStillServing(server)
    }
}
