@_spi(Fuzzing) import DocServer
import DocStore
import Foundation
import HTTPTypes
import Hummingbird

// The properties of the targets that go through DocServer (``InProcessServer``).
extension FuzzTarget {
    /// The endpoints of `fuzzdb` the query-string target asks.
    private static let queriedPaths = ["/fuzzdb/_changes", "/fuzzdb/_all_docs", "/fuzzdb/_design_docs",
                                       "/fuzzdb/_design/d/_view/map", "/fuzzdb/_design/d/_view/sum",
                                       "/fuzzdb/_design/d/_view/count", "/fuzzdb/_design/d/_view/js"]

    /// The characters a query parameter keeps unencoded when the target writes parameters back.
    private static let unreserved = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.~")

    static func checkQueryString(_ bytes: [UInt8]) -> String? {
        // A query string is one line of text without a fragment.
        let raw = String(decoding: bytes.prefix { $0 != 0x23 && $0 != 0x0A && $0 != 0x0D }, as: UTF8.self)
        let parameters: [String: String]
        do {
            parameters = try DocServer.queryParameters(raw)
            let written = parameters.sorted { $0.key < $1.key }.map { name, value in
                (name.addingPercentEncoding(withAllowedCharacters: unreserved) ?? name) + "=" +
                    (value.addingPercentEncoding(withAllowedCharacters: unreserved) ?? value)
            }.joined(separator: "&")
            guard let again = try? DocServer.queryParameters(written), again == parameters else {
                return "\(parameters) written as \(written) reads back differently"
            }
        } catch let error as CouchError {
            return error.status == .badRequest ? nil : "the query string refused with \(error.status.code), not 400"
        } catch {
            return "the query string refused with an untyped error: \(error)"
        }
        let limit = parameters["limit"].flatMap { Int($0) }
        for path in queriedPaths {
            let isFeed = path.hasSuffix("_changes") && parameters["feed"].map { $0 != "normal" } == true
            let target = raw.isEmpty ? path : path + "?" + raw
            guard let answer = InProcessServer.shared.answer(InProcessServer.request(.get, target),
                                                             patience: isFeed ? .milliseconds(50) : .seconds(10)) else {
                return "GET \(target): no end ten seconds after the harness hung up"
            }
            if let failure = answerFailure(answer, to: "GET \(target)", streams: isFeed) { return failure }
            guard let status = answer.status?.code, status == 200, !isFeed else { continue }
            guard case .object(let object)? = try? JSON(parsing: answer.body) else { return "GET \(target): 200 with a body that is no JSON object" }
            let rows = path.hasSuffix("_changes") ? object["results"] : object["rows"]
            guard case .array(let list)? = rows else { return "GET \(target): 200 without its rows" }
            // A negative limit is none in `_changes`, as in CouchDB (views and `_all_docs` refuse one).
            if let limit, limit >= 0, list.count > limit { return "GET \(target): \(list.count) rows over limit \(limit)" }
        }
        return nil
    }

    /// The first line's method and target, the header lines, and the body after the first empty line.
    private static func request(from bytes: [UInt8]) -> Request? {
        var headEnd = bytes.count, bodyStart = bytes.count
        for index in bytes.indices where bytes[index] == 0x0A {
            if index + 1 < bytes.count, bytes[index + 1] == 0x0A { headEnd = index; bodyStart = index + 2; break }
            if index + 2 < bytes.count, bytes[index + 1] == 0x0D, bytes[index + 2] == 0x0A { headEnd = index; bodyStart = index + 3; break }
        }
        let lines = String(decoding: bytes[..<headEnd], as: UTF8.self).split(separator: "\n")
            .map { $0.hasSuffix("\r") ? $0.dropLast() : $0 }
        guard let first = lines.first else { return nil }
        let words = first.split(separator: " ", omittingEmptySubsequences: true)
        guard words.count >= 2, let method = HTTPRequest.Method(String(words[0])) else { return nil }
        let target = words[1].hasPrefix("/") ? String(words[1]) : "/" + words[1]
        var headers: HTTPFields = [:]
        for line in lines.dropFirst() {
            let parts = line.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
            guard parts.count == 2, let name = HTTPField.Name(String(parts[0]).trimmingCharacters(in: .whitespaces)) else { continue }
            // The framing is the HTTP parser's, before DocServer: the body is what follows the head.
            if name == .contentLength || name == .transferEncoding { continue }
            headers.append(HTTPField(name: name, value: String(parts[1]).trimmingCharacters(in: .whitespaces)))
        }
        let body = Array(bytes[bodyStart...])
        if !body.isEmpty || method == .post || method == .put { headers[.contentLength] = String(body.count) }
        return Request(head: HTTPRequest(method: method, scheme: "http", authority: "localhost", path: target, headerFields: headers),
                       body: RequestBody(buffer: ByteBuffer(bytes: body)))
    }

    static func checkHTTP(_ bytes: [UInt8]) -> String? {
        guard let request = request(from: bytes) else { return nil }
        let described = "\(request.method) \(request.head.path ?? "")"
        // Feeds answer until they are told to stop: the harness hangs up on them, as their clients do.
        let query = request.uri.queryParameters
        let isFeed = query["feed"].map { $0 != "normal" } ?? false
        guard let answer = InProcessServer.shared.answer(request, patience: isFeed ? .milliseconds(50) : .seconds(10)) else {
            return "\(described): no end ten seconds after the harness hung up"
        }
        return answerFailure(answer, to: described, streams: isFeed)
    }

    /// Errors a design document's own JavaScript may cause, whose 5xx CouchDB gives too.
    private static let functionErrors: Set<String> = ["os_process_error", "render_error", "external_response_error", "error", "unnamed_error"]

    /// Why `answer` breaks the properties every answer has, or `nil`.
    static func answerFailure(_ answer: InProcessServer.Answer, to request: String, streams: Bool) -> String? {
        if let thrown = answer.thrown { return "\(request): the responder threw \(thrown)" }
        guard let status = answer.status else {
            // Only a feed may still be waiting for its first change when the harness hangs up.
            return streams && answer.cut ? nil : "\(request): no answer in time"
        }
        if answer.cut && !streams { return "\(request): a body still coming after ten seconds" }
        guard status.code >= 400, !answer.cut, request.split(separator: " ").first != "HEAD" else { return nil }
        guard case .object(let body)? = try? JSON(parsing: answer.body), let error = body["error"]?.stringValue, body["reason"] != nil else {
            // A show, list or update function answers what it likes.
            if ["/_show/", "/_list/", "/_update/", "/_rewrite"].contains(where: request.contains) { return nil }
            return "\(request): \(status.code) without CouchDB's error body: \(String(decoding: answer.body.prefix(200), as: UTF8.self))"
        }
        if status.code >= 500, !functionErrors.contains(error) {
            return "\(request): \(status.code) \(String(decoding: answer.body.prefix(300), as: UTF8.self))"
        }
        return nil
    }
}
