@testable import DocStore
import Foundation
import XCTest

/// The streaming multipart parser: the same parts whatever the split of the input, never a part held
/// whole, and clear errors for bodies that are not multipart.
final class MultipartParserTests: XCTestCase {
    private struct Part: Equatable {
        var headers: [String]
        var body: [UInt8]
    }

    /// Parses `body` fed in pieces of `piece` bytes.
    private func parse(_ body: [UInt8], boundary: String, piece: Int) throws -> [Part] {
        var parser = MultipartParser(boundary: boundary)
        var parts: [Part] = []
        var ended = false
        var offset = 0
        while offset < body.count {
            let end = min(offset + piece, body.count)
            for event in try parser.parse(body[offset..<end]) {
                switch event {
                case .headers(let headers): parts.append(Part(headers: headers.fields.map { "\($0.name)=\($0.value)" }, body: []))
                case .body(let bytes):
                    XCTAssertFalse(bytes.isEmpty)
                    parts[parts.count - 1].body += bytes
                case .partEnd: break
                case .end: ended = true
                }
            }
            offset = end
        }
        try parser.finish()
        XCTAssertTrue(ended)
        return parts
    }

    func testPartsAreTheSameForEverySplitOfTheInput() throws {
        let boundary = "b0undary"
        // Content that looks like a delimiter without being one, a part without headers, binary bytes.
        let binary = (0..<3000).map { UInt8(truncatingIfNeeded: $0 &* 13) }
        let expected = [
            Part(headers: ["Content-Type=application/json"], body: Array(#"{"a":"--b0undar"}"#.utf8)),
            Part(headers: [], body: Array("\r\n--b0undarx\r\n-- b0undary".utf8)),
            Part(headers: ["Content-Disposition=attachment; filename=\"x y.bin\"", "Content-Length=3000"], body: binary),
            Part(headers: ["A=1"], body: []),
        ]
        var body = Array("preamble text\r\n".utf8)
        body += Multipart.encode(parts: expected.map { part in
            (part.headers.map { pair in
                let split = pair.split(separator: "=", maxSplits: 1)
                return (String(split[0]), String(split[1]))
            }, part.body)
        }, boundary: boundary)
        body += Array("\r\nepilogue, ignored".utf8)
        for piece in [1, 2, 5, 13, 100, body.count] {
            XCTAssertEqual(try parse(body, boundary: boundary, piece: piece), expected, "pieces of \(piece)")
        }
    }

    /// CouchDB's `_bulk_get` answers begin with a CRLF and use a boundary that itself starts with `--`.
    func testCouchDBBulkGetFraming() throws {
        let boundary = "--382b21ffd926faf760535f8130152837"
        let body = Array("\r\n--\(boundary)\r\nContent-Type: application/json\r\n\r\n{\"_id\":\"a\"}\r\n--\(boundary)\r\nContent-Type: application/json; error=\"true\"\r\n\r\n{\"error\":\"not_found\"}\r\n--\(boundary)--\r\n".utf8)
        let parts = try parse(body, boundary: boundary, piece: 7)
        XCTAssertEqual(parts.map { String(decoding: $0.body, as: UTF8.self) }, [#"{"_id":"a"}"#, #"{"error":"not_found"}"#])
        XCTAssertEqual(parts[1].headers, [#"Content-Type=application/json; error="true""#])
    }

    func testLargePartsArePassedOnInPieces() throws {
        var parser = MultipartParser(boundary: "x")
        _ = try parser.parse(Array("--x\r\nContent-Type: a/b\r\n\r\n".utf8))
        let piece = [UInt8](repeating: 0x41, count: 65536)
        var delivered = 0
        for _ in 0..<100 {
            for event in try parser.parse(piece) {
                if case .body(let bytes) = event { delivered += bytes.count }
            }
        }
        XCTAssertGreaterThan(delivered, 100 * 65536 - 10, "all but a possible delimiter start is delivered at once")
        let last = try parser.parse(Array("\r\n--x--".utf8))
        XCTAssertTrue(last.contains { if case .end = $0 { return true } else { return false } })
    }

    func testMalformedBodiesAreRejected() throws {
        XCTAssertThrowsError(try parse(Array("--x\r\nContent-Type: a\r\n\r\nno closing delimiter".utf8), boundary: "x", piece: 4))
        XCTAssertThrowsError(try parse(Array("--xGARBAGE\r\n\r\n\r\n--x--".utf8), boundary: "x", piece: 4))
        XCTAssertThrowsError(try parse(Array("--x\r\nno colon here\r\n\r\nbody\r\n--x--".utf8), boundary: "x", piece: 4))
        XCTAssertThrowsError(try parse(Array(String(repeating: "no boundary at all ", count: 400).utf8), boundary: "x", piece: 100))
        XCTAssertEqual(Multipart.boundary(from: #"multipart/related; boundary="abc""#), "abc")
        XCTAssertEqual(Multipart.boundary(from: "multipart/mixed;boundary=--abc"), "--abc")
        XCTAssertNil(Multipart.boundary(from: "multipart/mixed"))
    }
}
