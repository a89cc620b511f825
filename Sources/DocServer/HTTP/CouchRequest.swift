import DocStore
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// A request as the CouchDB routes see it: method, percent-decoded path segments, query parameters,
/// headers, and the body — collected, or for uploads that may be large (attachments, multipart
/// documents) a stream the route reads in pieces.
struct CouchRequest: Sendable {
    var method: HTTPRequest.Method
    /// Whether the request came as HEAD, which is routed and answered as GET (``method`` is GET), as
    /// CouchDB does; the answer's headers are sent without its body.
    var isHead = false
    /// Path segments, percent-decoded; `/db/a%2Fb` is `["db", "a/b"]`.
    let segments: [String]
    /// Whether the path ended with `/` (which ``segments`` do not show): `/_utils` and `/_utils/` differ.
    let endsWithSlash: Bool
    var query: [String: String]
    let headers: HTTPFields
    /// The request's authority (HTTP/1's `Host`), which HTTP types keep apart from the header fields.
    var authority: String?
    /// The collected body (empty when ``bodyStream`` is set).
    var body: [UInt8]
    /// The body, not yet read, for the routes that stream it.
    var bodyStream: RequestBody?

    /// Hands the body to `consume` in pieces: as they arrive when it is streamed, else whole.
    func readBody(_ consume: (ByteBufferView) async throws -> Void) async throws {
        if let bodyStream {
            for try await buffer in bodyStream { try await consume(buffer.readableBytesView) }
        } else {
            try await consume(ByteBuffer(bytes: body).readableBytesView)
        }
    }

    /// The query string as it arrived (percent-encoded), for `req.raw_path`.
    var rawQuery: String?

    /// The header a proxy names the original host in (CouchDB's `chttpd/x_forwarded_host`).
    var forwardedHost = HTTPField.Name("X-Forwarded-Host")

    /// - Parameter plusIsSpace: a `+` in the path is a space, as CouchDB reads paths by default
    ///   (`chttpd/decode_plus_to_space`); `%2B` is always a plus.
    init(method: HTTPRequest.Method, path: String, rawQuery: String?, headers: HTTPFields, body: [UInt8],
         plusIsSpace: Bool = false) throws {
        self.rawQuery = rawQuery
        self.method = method
        self.headers = headers
        self.body = body
        var segments: [String] = []
        for raw in path.split(separator: "/", omittingEmptySubsequences: true) {
            guard let decoded = CouchRequest.percentDecoded(raw, plusIsSpace: plusIsSpace) else {
                throw CouchError.badRequest("Invalid percent-encoding in the path")
            }
            segments.append(decoded)
        }
        self.segments = CouchRequest.splittingDocumentPrefixes(segments)
        endsWithSlash = path.hasSuffix("/")
        var query: [String: String] = [:]
        try CouchRequest.forEachQueryParameter(in: rawQuery) { name, value in query[name] = value }
        self.query = query
    }

    /// Calls `body` with each parameter of a query string, in order, decoded (`+` as a space).
    /// - Throws: ``CouchError`` 400 for a percent-encoding that does not decode.
    static func forEachQueryParameter(in rawQuery: String?, _ body: (_ name: String, _ value: String) throws -> Void) throws {
        for pair in (rawQuery ?? "").split(separator: "&", omittingEmptySubsequences: true) {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = CouchRequest.percentDecoded(parts[0], plusIsSpace: true)
            let value = parts.count > 1 ? CouchRequest.percentDecoded(parts[1], plusIsSpace: true) : ""
            guard let name, let value else { throw CouchError.badRequest("Invalid percent-encoding in the query string") }
            try body(name, value)
        }
    }

    /// The query string's parameters in order (``query`` keeps the last of each name).
    var queryParameters: [(name: String, value: String)] {
        var parameters: [(name: String, value: String)] = []
        // The query string was decoded when the request was made: it cannot fail here.
        try? CouchRequest.forEachQueryParameter(in: rawQuery) { parameters.append(($0, $1)) }
        return parameters
    }

    func header(_ name: HTTPField.Name) -> String? {
        // One field, the usual case, is its value as it came; HTTPFields' own lookup joins even one
        // (1.6 % of a signed-in GET). Several are joined as it joins them.
        var found: String?
        for field in headers where field.name == name {
            guard found == nil else { return headers[name] }
            found = field.value
        }
        return found
    }

    /// The path the router matches: each decoded segment percent-encoded on its own (so `a/b` in one
    /// segment stays one), with the query string as it came.
    var routingPath: String {
        let path = "/" + segments.map { CouchRequest.percentEncoded($0) }.joined(separator: "/")
        return rawQuery.map { path + "?" + $0 } ?? path
    }

    /// `text` with every byte of its UTF-8 but RFC 3986's unreserved characters (`A-Z a-z 0-9 - _ . ~`)
    /// percent-encoded, in capitals (as Foundation's `addingPercentEncoding` does, at a fraction of
    /// its cost: this runs for every segment of every request); with `spaceAsPlus`, a space as `+`
    /// (a form value, as CouchDB's rewrites write query strings).
    static func percentEncoded(_ text: String, spaceAsPlus: Bool = false) -> String {
        func isUnreserved(_ byte: UInt8) -> Bool {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."), UInt8(ascii: "~"):
                return true
            default:
                return false
            }
        }
        if text.utf8.allSatisfy(isUnreserved) { return text }
        let hex = Array("0123456789ABCDEF".utf8)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count * 3)
        for byte in text.utf8 {
            if isUnreserved(byte) {
                bytes.append(byte)
            } else if spaceAsPlus && byte == UInt8(ascii: " ") {
                bytes.append(UInt8(ascii: "+"))
            } else {
                bytes.append(contentsOf: [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 15)]])
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// `text` with its `%XX` escapes decoded (and `+` as a space with `plusIsSpace`); `nil` where an
    /// escape is not two hexadecimal digits or the bytes are not UTF-8 — as Foundation's
    /// `removingPercentEncoding` answers, at a fraction of its cost (this runs for every segment and
    /// parameter of every request).
    static func percentDecoded(_ text: Substring, plusIsSpace: Bool) -> String? {
        let utf8 = text.utf8
        guard utf8.contains(where: { $0 == UInt8(ascii: "%") || (plusIsSpace && $0 == UInt8(ascii: "+")) }) else { return String(text) }
        func digit(_ byte: UInt8) -> UInt8? {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
            default: return nil
            }
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(utf8.count)
        var index = utf8.startIndex
        while index != utf8.endIndex {
            let byte = utf8[index]
            utf8.formIndex(after: &index)
            if byte == UInt8(ascii: "%") {
                guard index != utf8.endIndex, let high = digit(utf8[index]) else { return nil }
                utf8.formIndex(after: &index)
                guard index != utf8.endIndex, let low = digit(utf8[index]) else { return nil }
                utf8.formIndex(after: &index)
                bytes.append(high << 4 | low)
            } else {
                bytes.append(plusIsSpace && byte == UInt8(ascii: "+") ? UInt8(ascii: " ") : byte)
            }
        }
        // Invalid UTF-8 is repaired by `String(decoding:)`, so the repaired text has other bytes.
        let decoded = String(decoding: bytes, as: UTF8.self)
        return decoded.utf8.elementsEqual(bytes) ? decoded : nil
    }

    /// A path's segments, percent-decoded where they can be (as they came where they cannot): for
    /// labels and logs, not for routing.
    static func segments(ofPath path: String) -> [String] {
        splittingDocumentPrefixes(path.split(separator: "/").map { percentDecoded($0, plusIsSpace: false) ?? String($0) })
    }

    /// `/db/_design%2Fname` and `/db/_local%2Fname` name the same documents as `/db/_design/name`.
    private static func splittingDocumentPrefixes(_ segments: [String]) -> [String] {
        var segments = segments
        if segments.count >= 2 {
            for prefix in ["_design/", "_local/"] where segments[1].hasPrefix(prefix) && (segments[1].count > prefix.count || prefix == "_local/") {
                let name = String(segments[1].dropFirst(prefix.count))
                segments[1] = String(prefix.dropLast())
                segments.insert(name, at: 2)
            }
        }
        return segments
    }

    /// The bounds of a range of ids or names (`_all_docs`, `_all_dbs`) as CouchDB 3.3.3 reads them: `key`,
    /// else `startkey`/`start_key` and `endkey`/`end_key`, each a JSON string — a value of another type
    /// bounds nothing — and where there is none, `startkey_docid`/`start_key_doc_id` and
    /// `endkey_docid`/`end_key_doc_id`, ids as sent (not JSON).
    /// - Throws: ``CouchError`` 400 for a key that is not JSON.
    func idBounds() throws -> (start: String?, end: String?) {
        // `key` sets both ends, and whichever of the spellings comes last in the query string wins.
        let start = try lastJSON("key", "startkey", "start_key")
        let end = try lastJSON("key", "endkey", "end_key")
        return (start?.stringValue ?? lastParameter(["startkey_docid", "start_key_doc_id"]).flatMap { query[$0] },
                end?.stringValue ?? lastParameter(["endkey_docid", "end_key_doc_id"]).flatMap { query[$0] })
    }

    /// Which of `names` — parameters that set the same thing — counts, as CouchDB reads them: the one
    /// that comes last in the query string (one taken from a POST body only where the query string
    /// has none of them).
    func lastParameter(_ names: [String]) -> String? {
        let present = names.filter { query[$0] != nil }
        guard present.count > 1 else { return present.first }
        return queryParameters.last { present.contains($0.name) }?.name ?? present.first
    }

    /// The JSON value of whichever of `names` counts (``lastParameter(_:)``); every one given must be JSON.
    func lastJSON(_ names: String...) throws -> JSON? {
        var values: [String: JSON] = [:]
        for name in names where query[name] != nil { values[name] = try json(name) }
        return lastParameter(names).flatMap { values[$0] }
    }

    /// The request with a POST body's members as query parameters (JSON-encoded but for the document
    /// ids and `stale`/`update`, which are plain strings), the query string winning where both name
    /// one, as CouchDB reads `_all_docs` and view requests. `keys` comes from the body when it has it.
    func withBodyParameters() throws -> CouchRequest {
        guard method == .post else { return self }
        try requireJSONContentType()
        var request = self
        for (name, value) in try jsonObjectBody() where name == "keys" || query[name] == nil {
            request.query[name] = try CouchRequest.parameterText(name, value)
        }
        return request
    }

    /// A parameter given as JSON (a POST body's member) as the query string would give it.
    private static func parameterText(_ name: String, _ value: JSON) throws -> String {
        switch value {
        case .string(let text) where name.hasSuffix("docid") || name.hasSuffix("doc_id") || name == "stale" || name == "update":
            return text
        default:
            return try value.serializedString()
        }
    }

    /// The GET that one query of a multi-query POST (`…/queries`) stands for: the query string's
    /// parameters, each of `members` (JSON, as a POST body gives them) over them, and no body.
    func withParameters(_ members: JSONObject) throws -> CouchRequest {
        var request = self
        request.method = .get
        request.body = []
        var kept = queryParameters.filter { members[$0.name] == nil }.map {
            "\(CouchRequest.percentEncoded($0.name))=\(CouchRequest.percentEncoded($0.value))"
        }
        for (name, value) in members {
            let text = try CouchRequest.parameterText(name, value)
            request.query[name] = text
            kept.append("\(CouchRequest.percentEncoded(name))=\(CouchRequest.percentEncoded(text))")
        }
        // The raw query decides which of two spellings came last (`startkey`, `start_key`).
        request.rawQuery = kept.joined(separator: "&")
        return request
    }

    /// Whether `If-None-Match` names `etag` (quoted): among a list, weak (`W/"…"`) or not.
    func ifNoneMatch(_ etag: String) -> Bool {
        guard let header = headers[.ifNoneMatch] else { return false }
        return header.split(separator: ",").contains { item in
            var tag = item.trimmingCharacters(in: .whitespaces)
            if tag.hasPrefix("W/") { tag.removeFirst(2) }
            return tag == etag
        }
    }

    /// The absolute URL of `parts` on this server, as CouchDB's `Location` names it: every part
    /// percent-encoded but letters, digits and `-_.` (so `a/b` is `a%2Fb`); the scheme and host from
    /// `X-Forwarded-Proto` and `X-Forwarded-Host` where a proxy sent them, else `http` and the `Host`.
    /// Without a host, just the path.
    func location(_ parts: String...) -> String {
        let kept = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")
        return absoluteURL(parts.map { "/" + ($0.addingPercentEncoding(withAllowedCharacters: kept) ?? $0) }.joined())
    }

    /// A path (or URL) a client gave, absolute on this server: `_session?next=/page`.
    func absoluteURL(_ target: String) -> String {
        guard target.hasPrefix("/"), let host = forwardedHost.flatMap({ headers[$0] }) ?? authority ?? headers[HTTPField.Name("Host")!] else {
            return target
        }
        return "\(headers[HTTPField.Name("X-Forwarded-Proto")!] ?? "http")://\(host)\(target)"
    }

    /// A Boolean query parameter (`true`/`false`).
    func bool(_ name: String, default value: Bool = false, anyCase: Bool = false) throws -> Bool {
        guard let text = query[name] else { return value }
        switch anyCase ? text.lowercased() : text {
        case "true": return true
        case "false": return false
        default: throw CouchError(.badRequest, "query_parse_error", "Invalid boolean parameter: \"\(name)\"")
        }
    }

    /// A Boolean parameter of a view query, which CouchDB reads in any case (`TRUE`, `False`).
    func viewBool(_ name: String, default value: Bool = false) throws -> Bool {
        try bool(name, default: value, anyCase: true)
    }

    /// A non-negative integer query parameter.
    func int(_ name: String) throws -> Int? {
        guard let text = query[name] else { return nil }
        guard let value = Int(text), value >= 0 else {
            throw CouchError(.badRequest, "query_parse_error", "Invalid value for integer parameter \"\(name)\": \"\(text)\"")
        }
        return value
    }

    /// The parameters of a view or `_all_docs` query, by how they are read.
    static let viewJSONParameters: Set<String> = ["key", "keys", "startkey", "start_key", "endkey", "end_key"]
    static let viewBooleanParameters: Set<String> = ["descending", "inclusive_end", "include_docs", "update_seq", "conflicts",
                                                     "attachments", "att_encoding_info", "reduce", "group", "sorted"]
    static let viewIntegerParameters: Set<String> = ["limit", "skip", "group_level"]

    /// Reads the view parameters of the query string in their order, so that the first one that is
    /// wrong is the one refused, as CouchDB reads them.
    func checkViewParametersInOrder() throws {
        guard query.count > 1 else { return }
        for (name, _) in queryParameters {
            if Self.viewJSONParameters.contains(name) {
                _ = try json(name)
            } else if Self.viewBooleanParameters.contains(name) {
                _ = try viewBool(name)
            } else if Self.viewIntegerParameters.contains(name) {
                _ = try int(name)
            }
        }
    }

    /// A JSON query parameter (`key="a"`, `keys=[…]`).
    func json(_ name: String) throws -> JSON? {
        guard let text = query[name] else { return nil }
        do {
            return try JSON(parsing: text)
        } catch {
            // CouchDB's words for JSON it cannot read, whatever the parameter.
            throw CouchError(.badRequest, "bad_request", "invalid UTF-8 JSON")
        }
    }

    /// Checks the `Content-Type` as CouchDB does on the endpoints that take only JSON (`_bulk_docs`,
    /// `_bulk_get`, `_revs_diff`, `POST /db`, …): its media type must be exactly `application/json`.
    /// - Throws: 415 `bad_content_type` otherwise, or when it is missing.
    func requireJSONContentType() throws {
        let type = header(.contentType).map { String($0.split(separator: ";", maxSplits: 1, omittingEmptySubsequences: false)[0]) }
        guard type?.trimmingCharacters(in: .whitespaces) == "application/json" else {
            throw CouchError(.unsupportedMediaType, "bad_content_type", "Content-Type must be application/json")
        }
    }

    /// The body parsed as JSON (whatever the `Content-Type`, as CouchDB reads document bodies).
    /// - Parameter documentDepth: where the body's documents stand (`JSON(parsing:documentDepth:)`):
    ///   1 for a document, 3 for `_bulk_docs`; their bodies are then kept as the bytes sent.
    func jsonBody(documentDepth: Int = 0) throws -> JSON {
        guard !body.isEmpty else { throw CouchError.badRequest("Missing request body") }
        do {
            return try JSON(parsing: body, documentDepth: documentDepth)
        } catch is DocStoreError {
            // CouchDB's words for any malformed body.
            throw CouchError(.badRequest, "bad_request", "invalid UTF-8 JSON")
        }
    }

    /// The body parsed as a JSON object.
    func jsonObjectBody(documentDepth: Int = 0) throws -> JSONObject {
        guard case .object(let object) = try jsonBody(documentDepth: documentDepth) else { throw CouchError.badRequest("Request body must be a JSON object") }
        return object
    }

    /// Whether the client accepts `type` (e.g. `multipart/mixed`) as CouchDB's HTTP layer decides it:
    /// yes without an `Accept` header, or when a listed range — the type itself, `type/*` or `*/*` —
    /// has a non-zero quality.
    func accepts(_ type: String) -> Bool {
        guard let accept = header(.accept) else { return true }
        let wanted = type.lowercased()
        let major = wanted.split(separator: "/").first.map(String.init) ?? wanted
        for item in accept.split(separator: ",") {
            let parameters = item.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            guard let range = parameters.first, !range.isEmpty else { continue }
            if let quality = parameters.dropFirst().first(where: { $0.hasPrefix("q=") }), Double(quality.dropFirst(2)) == 0 {
                continue
            }
            if range == wanted || range == "*/*" || range == "\(major)/*" { return true }
        }
        return false
    }
}
