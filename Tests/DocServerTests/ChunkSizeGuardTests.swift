@testable import DocServer
import XCTest

/// The framing follower in front of the HTTP parser: it must find every over-limit chunk size, however
/// the bytes are split, and never flag a well-formed request.
final class ChunkSizeGuardTests: XCTestCase {
    /// Feeds `text` in pieces of `piece` bytes; returns the verdict and the offset of the flagged byte.
    private func run(_ text: String, limit: UInt64 = 1000, piece: Int) -> Int? {
        var guardState = ChunkSizeGuard(limit: limit)
        let bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let end = min(offset + piece, bytes.count)
            let verdict = bytes[offset..<end].withUnsafeBytes { guardState.consume($0) }
            if case .tooLarge(let consumed) = verdict { return offset + consumed }
            offset = end
        }
        return nil
    }

    private func assertVerdict(_ text: String, flaggedAt expected: Int?, limit: UInt64 = 1000,
                               file: StaticString = #filePath, line: UInt = #line) {
        for piece in [1, 2, 3, 7, 64, text.utf8.count] {
            XCTAssertEqual(run(text, limit: limit, piece: piece), expected, "pieces of \(piece)", file: file, line: line)
        }
    }

    func testWellFormedRequestsPass() {
        let get = "GET /db HTTP/1.1\r\nHost: x\r\n\r\n"
        let post = "POST /db HTTP/1.1\r\nContent-Length: 11\r\n\r\nFFFFFFFFFFF"
        let chunked = "PUT /db/d/a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3e8\r\n" + String(repeating: "x", count: 1000)
            + "\r\n5;name=value\r\nhello\r\n0\r\nTrailer: 1\r\n\r\n"
        // Pipelined: the body of one request is never read as the next head, nor chunk data as a size.
        assertVerdict("\r\n" + get + post + chunked + get + chunked, flaggedAt: nil)
        assertVerdict("CONNECT host:1 HTTP/1.1\r\n\r\nFFFFFFFFFFFFFFFFFFFF\r\n", flaggedAt: nil, limit: 1)
    }

    func testOverLimitChunkSizesAreFlaggedAtTheirFirstExcessDigit() {
        let head = "POST /db/_bulk_docs HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        let offset = head.utf8.count
        assertVerdict(head + "3e9\r\n", flaggedAt: offset + 3)
        assertVerdict(head + "FFFFFFFFFFFF\r\nabc", flaggedAt: offset + 3)
        assertVerdict(head + "00000000003e9", flaggedAt: offset + 13, limit: 1000)
        assertVerdict(head + "A\r\n0123456789\r\n" + "FFFF", flaggedAt: offset + 15 + 3)
        assertVerdict(head + "7FFFFFFFFFFFFFFF\r\n", flaggedAt: nil, limit: UInt64.max - 1)
        assertVerdict(head + "FFFFFFFFFFFFFFFF\r\n", flaggedAt: offset + 16, limit: UInt64.max - 1)
        assertVerdict(head + "FFFFFFFFFFFFFFFFF", flaggedAt: offset + 17, limit: UInt64.max)
        // In a second request on the connection, after a first one with a body.
        let first = "PUT /a HTTP/1.1\r\nContent-Length: 4\r\n\r\n1000"
        assertVerdict(first + head + "1001\r\n", flaggedAt: first.utf8.count + offset + 4)
    }

    /// What the guard does not follow it leaves to the HTTP parser, which rejects it.
    func testMalformedFramingIsLeftToTheParser() {
        let head = "POST /db HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
        assertVerdict(head + "ZZZ\r\nFFFFFFFF\r\n", flaggedAt: nil)
        assertVerdict(head + "2\r\nabXYFFFFFFFF\r\n", flaggedAt: nil, limit: 10)
        assertVerdict("POST /db HTTP/1.1\r\nContent-Length: nope\r\nTransfer-Encoding: chunked\r\n\r\nFFFFFFFF", flaggedAt: nil)
    }
}

/// Which requests DocServer answers on the global pool rather than on their connection's event loop.
final class BulkAnswerRoutingTests: XCTestCase {
    func testBatchesAndFeedsLeaveTheLoopAndPointRequestsStay() {
        for path in ["/db/_changes?feed=continuous", "/db/_all_docs", "/db/_bulk_get?revs=true", "/db/_bulk_docs", "/db/_find",
                     "/db/_design/app/_view/by_type?limit=5", "/db/_design/app/_show/s/doc", "/_all_dbs", "/_replicate",
                     "/_node/_local/_config", "/_utils/", "/db/_design%2Fapp"] {
            XCTAssertTrue(CouchHTTPChannel.answersInBulk(path: path), path)
        }
        for path in ["/", "", "/db", "/db/", "/db/doc", "/db/doc?rev=1-abc", "/db/doc/attachment.png", "/db/_design/app",
                     "/db/_design/app/attachment", "/db/_local/checkpoint", "/_up", "/_session", "/_uuids?count=3", "/db/a%2Fb"] {
            XCTAssertFalse(CouchHTTPChannel.answersInBulk(path: path), path)
        }
    }
}

/// The metrics' route of a path, read from its segments as sent unless one is percent-encoded.
final class RouteLabelTests: XCTestCase {
    func testRoutesOfPathsAsSentEqualThoseOfDecodedSegments() {
        let expected: [(String, String)] = [
            ("/", "/"), ("", "/"), ("/db", "/{db}"), ("/db/", "/{db}"), ("/db/doc", "/{db}/{docid}"),
            ("/db//doc?rev=1-a", "/{db}/{docid}"), ("/db/doc/a/b.png", "/{db}/{docid}/{attachment}"),
            ("/db/_all_docs?limit=1", "/{db}/_all_docs"), ("/db/_design/app", "/{db}/_design/{ddoc}"),
            ("/db/_design/app/_view/v", "/{db}/_design/{ddoc}/_view/{view}"),
            ("/db/_design/app/file.txt", "/{db}/_design/{ddoc}/{attachment}"), ("/db/_local/x", "/{db}/_local/{docid}"),
            ("/_up", "/_up"), ("/_node/_local/_config/a/b", "/_node/_local/_config"), ("/_node", "/_node"),
            ("/db/_design%2Fapp", "/{db}/_design/{ddoc}"), ("/db/%5Fall_docs", "/{db}/_all_docs"),
            ("/db/a%2Fb", "/{db}/{docid}"), ("/a/b/c/d/e/f/g", "/{db}/{docid}/{attachment}"),
        ]
        for (path, route) in expected {
            var segments = PathSegments(path: path)
            if segments.needsDecoding { segments = PathSegments(decoded: CouchRequest.segments(ofPath: path)) }
            XCTAssertEqual(ServerMetrics.route(of: segments), route, path)
            // Hummingbird's `uri.path` has no query.
            let decoded = CouchRequest.segments(ofPath: String(path.prefix { $0 != "?" }))
            XCTAssertEqual(ServerMetrics.route(of: PathSegments(decoded: decoded)), route, path)
        }
    }
}
