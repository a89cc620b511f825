import DocStore
@testable import DocStoreFuzzing
import Foundation
import XCTest

/// Every fuzz target's seeds, and every input a fuzzer once broke (`regression-*`), hold the target's
/// properties (`Tests/Fixtures/fuzz/<target>/`, Docs/Reliability.md): the corpora stay meaningful and
/// a fixed crash stays fixed.
final class FuzzCorpusTests: XCTestCase {
    private static let corpora = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/fuzz")

    func testEveryTargetsCorpusHoldsItsProperties() throws {
        for target in FuzzTarget.allCases {
            let folder = FuzzCorpusTests.corpora.appendingPathComponent(target.rawValue)
            let files = try FileManager.default.contentsOfDirectory(at: folder, includingPropertiesForKeys: nil)
            XCTAssertGreaterThanOrEqual(files.count, 10, "\(target.rawValue) has a corpus")
            for file in files {
                XCTAssertNil(target.failure(Array(try Data(contentsOf: file))), "\(target.rawValue)/\(file.lastPathComponent)")
            }
        }
    }

    /// The server targets reach what they fuzz: the starting data answers as seeded (the administrator
    /// sees every row, alice only channel `a`'s), a feed is cut and ends, and the properties catch a
    /// 5xx and an error without CouchDB's body.
    func testTheServerTargetsReachTheirEndpointsAndTheirPropertiesCatchFailures() throws {
        let server = InProcessServer.shared
        func rows(_ target: String, as authorization: String = InProcessServer.adminAuthorization) throws -> [JSON] {
            let answer = try XCTUnwrap(server.answer(InProcessServer.request(.get, target, headers: [.authorization: authorization])))
            XCTAssertEqual(answer.status, .ok, "\(target): \(String(decoding: answer.body, as: UTF8.self))")
            return try XCTUnwrap(JSON(parsing: answer.body)["rows"]?.arrayValue, target)
        }
        XCTAssertEqual(try rows("/fuzzdb/_design/d/_view/sum?group=true").count, 16)
        XCTAssertEqual(try rows("/fuzzdb/_design/d/_view/count?group_level=1").map { $0["value"] }, [.integer(8), .integer(8)])
        XCTAssertEqual(try rows("/fuzzdb/_all_docs").count, 17, "16 documents and the design document")
        let alice = "Basic " + Data("alice:alice".utf8).base64EncodedString()
        let seen = try rows("/fuzzdb/_all_docs?include_docs=true", as: alice).compactMap { $0["doc"]?["channels"] }
        XCTAssertEqual(seen, Array(repeating: .array([.string("a")]), count: 8))

        let feed = try XCTUnwrap(server.answer(InProcessServer.request(.get, "/fuzzdb/_changes?feed=continuous&since=now"), patience: .milliseconds(50)))
        XCTAssertTrue(feed.cut)
        XCTAssertNil(FuzzTarget.http.failure(Array("GET /fuzzdb/_changes?feed=continuous HTTP/1.1\r\nAuthorization: \(InProcessServer.adminAuthorization)\r\n\r\n".utf8)))

        var failed = InProcessServer.Answer(status: .internalServerError, body: Array(#"{"error":"unknown_error","reason":"x"}"#.utf8))
        XCTAssertNotNil(FuzzTarget.answerFailure(failed, to: "GET /", streams: false))
        failed = InProcessServer.Answer(status: .badRequest, body: Array("bad".utf8))
        XCTAssertNotNil(FuzzTarget.answerFailure(failed, to: "GET /", streams: false))
        failed = InProcessServer.Answer(status: .ok, cut: true)
        XCTAssertNotNil(FuzzTarget.answerFailure(failed, to: "GET /db/_all_docs", streams: false))
    }
}
