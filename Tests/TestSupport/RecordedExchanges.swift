import Foundation
import DocStore

/// One HTTP exchange recorded from Apache CouchDB 3.3.3 (Tests/Fixtures/couchdb-3.3.3, whose README
/// describes the files): the request a CouchDB replicator or client sent, and CouchDB's answer.
public struct RecordedExchange: Sendable {
    public let sequence: Int
    public let method: String
    /// Path and query exactly as sent.
    public let target: String
    public let requestHeaders: [(name: String, value: String)]
    public let requestBody: Data
    public let status: Int
    public let responseHeaders: [(name: String, value: String)]
    /// The answer's body, de-chunked (multipart and gzip never decoded); for a stream the client hung
    /// up on, what passed before.
    public let responseBody: Data
    /// Whether the client closed a streamed answer before it ended.
    public let clientClosed: Bool

    public func requestHeader(_ name: String) -> String? {
        requestHeaders.first { $0.name.caseInsensitiveCompare(name) == .orderedSame }?.value
    }

    public func responseHeader(_ name: String) -> String? {
        responseHeaders.first { $0.name.caseInsensitiveCompare(name) == .orderedSame }?.value
    }

    /// The path without its query.
    public var path: String { String(target.split(separator: "?", maxSplits: 1)[0]) }

    /// The query parameters, percent-decoded.
    public var query: [String: String] {
        guard let components = URLComponents(string: "http://x" + target) else { return [:] }
        var result: [String: String] = [:]
        for item in components.queryItems ?? [] { result[item.name] = item.value ?? "" }
        return result
    }
}

public enum CouchDBFixtures {
    /// The folder of the recordings.
    public static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Fixtures/couchdb-3.3.3")

    /// The exchanges of `name` (e.g. `push-to-target.ndjson`), in the order they reached CouchDB. Each
    /// file is read once per test process: several suites replay the same recordings.
    public static func exchanges(_ name: String) throws -> [RecordedExchange] {
        if let cached = parsed.withLock({ $0[name] }) { return cached }
        let exchanges = try parse(Data(contentsOf: directory.appendingPathComponent(name)))
        parsed.withLock { $0[name] = exchanges }
        return exchanges
    }

    private static let parsed = Locked<[String: [RecordedExchange]]>([:])

    /// One exchange per line of NDJSON; lines are split on their bytes (splitting a 3.5 MB `String` by
    /// characters cost the suite seconds).
    private static func parse(_ data: Data) throws -> [RecordedExchange] {
        var result: [RecordedExchange] = []
        for line in data.split(separator: UInt8(ascii: "\n")) where !line.isEmpty {
            guard let object = try JSONSerialization.jsonObject(with: line) as? [String: Any] else { continue }
            func headers(_ key: String) -> [(name: String, value: String)] {
                ((object[key] as? [[String]]) ?? []).compactMap { $0.count == 2 ? ($0[0], $0[1]) : nil }
            }
            func body(_ key: String) -> Data {
                (object[key] as? String).flatMap { Data(base64Encoded: $0) } ?? Data()
            }
            result.append(RecordedExchange(
                sequence: object["seq"] as? Int ?? 0, method: object["method"] as? String ?? "GET",
                target: object["target"] as? String ?? "/", requestHeaders: headers("req_headers"),
                requestBody: body("req_body_b64"), status: object["status"] as? Int ?? 0,
                responseHeaders: headers("resp_headers"), responseBody: body("resp_body_b64"),
                clientClosed: (object["end_reason"] as? String) == "client_closed"))
        }
        return result.sorted { $0.sequence < $1.sequence }
    }

    /// `source-dump.json`: CouchDB's own view of the source database.
    public static func sourceDump() throws -> Data {
        try Data(contentsOf: directory.appendingPathComponent("source-dump.json"))
    }
}
