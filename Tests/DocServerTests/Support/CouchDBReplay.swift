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

// MARK: - Documents as compared

/// A revision of a document as the comparison sees it: its body (order-sensitive), `_revisions`, and its
/// attachments by name — decoded content where the answer carried the bytes.
struct ComparedRevision: Equatable, CustomStringConvertible {
    struct ComparedAttachment: Equatable {
        var contentType: JSON?
        var revpos: JSON?
        var digest: JSON?
        var length: Int?
        /// The decoded content, or nil for a stub.
        var data: Data?
    }

    var body: JSON
    var revisions: JSON?
    var attachments: [String: ComparedAttachment]

    var description: String { "\(body) \(revisions ?? .null) \(attachments.mapValues { "\($0.digest ?? .null) \($0.data?.count ?? -1)" })" }

    /// From a document's JSON (with inline data or stubs), with the bytes of `following` parts.
    init(_ json: JSON, following: [String: (data: Data, gzip: Bool)] = [:]) throws {
        guard case .object(var object) = json else { throw DocStoreError(.badRequest, "not a document") }
        revisions = object.removeValue(forKey: "_revisions")
        var attachments: [String: ComparedAttachment] = [:]
        if case .object(let members)? = object.removeValue(forKey: "_attachments") {
            for (name, meta) in members {
                var entry = ComparedAttachment(contentType: meta["content_type"], revpos: meta["revpos"], digest: meta["digest"],
                                               length: meta["length"]?.intValue, data: nil)
                if let base64 = meta["data"]?.stringValue {
                    entry.data = Data(base64Encoded: base64)
                    entry.length = entry.data?.count
                } else if meta["follows"]?.boolValue == true, let part = following[name] {
                    let gzip = part.gzip || meta["encoding"]?.stringValue == "gzip"
                    entry.data = gzip ? try GzipStream.decompress(part.data) : part.data
                }
                attachments[name] = entry
            }
        }
        self.attachments = attachments
        body = .object(object)
    }

    /// Whether `actual` is this revision as another server may legitimately answer it: the same body and
    /// history, the same attachments with the same metadata and decoded bytes — except that an
    /// attachment the client said it has (no newer than `knownGeneration`) may come as a stub.
    func matches(_ actual: ComparedRevision, knownGeneration: Int? = nil) -> [String] {
        var problems: [String] = []
        if body != actual.body { problems.append("body \(body) != \(actual.body)") }
        if revisions != actual.revisions { problems.append("_revisions \(revisions ?? .null) != \(actual.revisions ?? .null)") }
        guard Set(attachments.keys) == Set(actual.attachments.keys) else {
            return problems + ["attachments \(attachments.keys.sorted()) != \(actual.attachments.keys.sorted())"]
        }
        for (name, expected) in attachments {
            let other = actual.attachments[name]!
            if expected.contentType != other.contentType || expected.revpos != other.revpos || expected.digest != other.digest
                || (expected.length != nil && other.length != nil && expected.length != other.length) {
                problems.append("\(name): \(expected.contentType ?? .null) \(expected.revpos ?? .null) \(expected.digest ?? .null) \(expected.length ?? -1) != \(other.contentType ?? .null) \(other.revpos ?? .null) \(other.digest ?? .null) \(other.length ?? -1)")
            }
            switch (expected.data, other.data) {
            case (let left?, let right?) where left != right:
                problems.append("\(name): different bytes (\(left.count) and \(right.count))")
            case (_?, nil):
                // DocServer honours atts_since on open_revs (CouchDB 3.3.3 ignores it; 3.5 does the same).
                let revpos = expected.revpos?.intValue ?? Int.max
                if revpos > (knownGeneration ?? -1) { problems.append("\(name): a stub where the client lacks the bytes") }
            case (nil, _?):
                problems.append("\(name): bytes where CouchDB sent a stub")
            default:
                break
            }
        }
        return problems
    }
}

/// The documents of an `open_revs` or `_bulk_get` answer in `multipart/mixed`, each with its
/// following attachments' bytes (decoded as their part headers say).
func documentsOfMultipartMixed(_ body: [UInt8], contentType: String) throws -> [ComparedRevision] {
    let boundary = try XCTUnwrap(Multipart.boundary(from: contentType))
    var documents: [ComparedRevision] = []
    for part in try Multipart.parse(body, boundary: boundary) {
        let type = part.headers["Content-Type"] ?? "application/json"
        if type.contains("error") { continue }
        if Multipart.mediaType(of: type) == "multipart/related" {
            let inner = try XCTUnwrap(Multipart.boundary(from: type))
            let parts = try Multipart.parse(part.body, boundary: inner)
            let json = try JSON(parsing: parts[0].body)
            var following: [String: (data: Data, gzip: Bool)] = [:]
            let names = (json["_attachments"]?.objectValue ?? JSONObject()).filter { $0.value["follows"]?.boolValue == true }.map(\.key)
            for (name, attachmentPart) in zip(names, parts.dropFirst()) {
                following[name] = (Data(attachmentPart.body), attachmentPart.headers["Content-Encoding"] == "gzip")
            }
            documents.append(try ComparedRevision(json, following: following))
        } else {
            documents.append(try ComparedRevision(try JSON(parsing: part.body)))
        }
    }
    return documents
}

/// The revisions of a `GET ?open_revs` answer (JSON or multipart), by revision.
func revisionsOfOpenRevs(_ response: RawResponse) throws -> [String: ComparedRevision] {
    let contentType = response.headers["content-type"] ?? "application/json"
    var revisions: [ComparedRevision] = []
    if Multipart.mediaType(of: contentType) == "multipart/mixed" {
        revisions = try documentsOfMultipartMixed(response.body, contentType: contentType)
    } else {
        for entry in try JSON(parsing: response.body).arrayValue ?? [] {
            if let ok = entry["ok"] { revisions.append(try ComparedRevision(ok)) }
        }
    }
    var byRevision: [String: ComparedRevision] = [:]
    for revision in revisions { byRevision[revision.body["_rev"]?.stringValue ?? "?"] = revision }
    return byRevision
}
