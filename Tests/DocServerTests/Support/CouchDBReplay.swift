@testable import DocServer
import DocStore
import Foundation
import XCTest

/// Replays recorded CouchDB 3.3.3 exchanges against a DocServer and compares the answers, ignoring only
/// what the fixtures' README lists as legitimately different (sequences, uuids, dates, boundaries, key
/// order, batching…).
struct CouchDBReplay {
    let server: TestServer
    /// Recorded database names → the test server's.
    var databases: [String: String] = [:]
    /// CouchDB's sequences (opaque strings) → the equivalent sequences of the test server, as answers
    /// reveal them.
    var sequences: [String: String] = [:]

    /// The request headers a replay sends: the recorded ones except transport and credentials, plus the
    /// test server's own credentials.
    static func headers(of exchange: RecordedExchange) -> [(String, String)] {
        var headers = exchange.requestHeaders.filter { header in
            !["host", "authorization", "cookie", "content-length", "transfer-encoding", "user-agent"].contains(header.name.lowercased())
        }
        headers.append(("Authorization", TestServer.basic(TestServer.admin.name, TestServer.admin.password)))
        return headers
    }

    /// The recorded target with database names and sequences rewritten.
    func target(of exchange: RecordedExchange) -> String {
        var target = exchange.target
        for (recorded, local) in databases {
            if target.hasPrefix("/\(recorded)/") || target == "/\(recorded)" || target.hasPrefix("/\(recorded)?") {
                target = "/\(local)" + target.dropFirst(recorded.count + 1)
            }
        }
        for (recorded, local) in sequences {
            target = target.replacingOccurrences(of: "since=\(recorded)", with: "since=\(local)")
        }
        return target
    }

    /// Sends the exchange's request and reads the whole answer.
    func send(_ exchange: RecordedExchange, file: StaticString = #filePath, line: UInt = #line) throws -> RawResponse {
        let connection = try RawConnection(port: server.port, timeout: 60)
        connection.sendRequest(exchange.method, target(of: exchange), headers: CouchDBReplay.headers(of: exchange),
                               body: Array(exchange.requestBody))
        return try XCTUnwrap(connection.readResponse(head: exchange.method == "HEAD"),
                            "no answer to #\(exchange.sequence) \(exchange.method) \(exchange.target)", file: file, line: line)
    }
}

/// The revisions of a `GET ?open_revs` answer (JSON or multipart), by revision.
func revisionsOfOpenRevs(_ response: RawResponse) throws -> [String: ComparedRevision] {
    try revisionsOfOpenRevs(contentType: response.headers["content-type"] ?? "application/json", body: response.body)
}
