import Foundation

/// MIME multipart bodies as CouchDB uses them: `multipart/related` documents whose attachments follow
/// their JSON, `multipart/mixed` answers to `open_revs` and `_bulk_get`. Shared by the server and the
/// replicator, which both read and write them.
package enum Multipart {
    /// The `boundary` parameter of a `multipart/…` content type (quoted or not).
    package static func boundary(from contentType: String) -> String? {
        for parameter in contentType.split(separator: ";").dropFirst() {
            let pair = parameter.trimmingCharacters(in: .whitespaces).split(separator: "=", maxSplits: 1)
            if pair.count == 2, pair[0].trimmingCharacters(in: .whitespaces).lowercased() == "boundary" {
                var value = pair[1].trimmingCharacters(in: .whitespaces)
                if value.count >= 2, value.hasPrefix("\""), value.hasSuffix("\"") { value = String(value.dropFirst().dropLast()) }
                return value.isEmpty || value.utf8.count > 200 ? nil : value
            }
        }
        return nil
    }

    /// The media type of a content type, lowercased, without parameters.
    package static func mediaType(of contentType: String) -> String {
        String(contentType.split(separator: ";", maxSplits: 1).first ?? "").trimmingCharacters(in: .whitespaces).lowercased()
    }

    /// A fresh boundary: 32 hexadecimal digits, as CouchDB makes them.
    package static func makeBoundary() -> String {
        RandomHex.make()
    }

    /// The bytes that open a part: the delimiter line (after a CRLF unless `first`) and the headers.
    package static func partHeader(boundary: String, headers: [(String, String)], first: Bool) -> [UInt8] {
        var text = first ? "--\(boundary)\r\n" : "\r\n--\(boundary)\r\n"
        for (name, value) in headers { text += "\(name): \(value)\r\n" }
        text += "\r\n"
        return Array(text.utf8)
    }

    /// The bytes that close a multipart body.
    package static func closing(boundary: String) -> [UInt8] {
        Array("\r\n--\(boundary)--".utf8)
    }

    /// The parts of a whole multipart body held in memory (small bodies only; large ones are read with
    /// a ``MultipartParser`` as they arrive).
    package static func parse(_ body: [UInt8], boundary: String) throws -> [(headers: MultipartHeaders, body: [UInt8])] {
        var parser = MultipartParser(boundary: boundary)
        var parts: [(headers: MultipartHeaders, body: [UInt8])] = []
        for event in try parser.parse(body) {
            switch event {
            case .headers(let headers): parts.append((headers, []))
            case .body(let bytes): parts[parts.count - 1].body += bytes
            case .partEnd, .end: break
            }
        }
        try parser.finish()
        return parts
    }

    /// A whole multipart body of in-memory parts.
    package static func encode(parts: [(headers: [(String, String)], body: [UInt8])], boundary: String) -> [UInt8] {
        var out: [UInt8] = []
        for (index, part) in parts.enumerated() {
            out += partHeader(boundary: boundary, headers: part.headers, first: index == 0)
            out += part.body
        }
        out += closing(boundary: boundary)
        return out
    }
}

/// A multipart body as the pieces it is written from: bytes, and attachments whose stored bytes the
/// writer reads in chunks while it sends or spools the body, so that its size does not matter. The
/// server's `multipart/mixed` and `multipart/related` answers and the replicator's `multipart/related`
/// uploads are built with it.
package struct MultipartBody: Sendable {
    package enum Piece: Sendable {
        case bytes([UInt8])
        case attachment(Attachment)
    }

    package private(set) var pieces: [Piece] = []
    /// The body's length in bytes (attachments by their stored length).
    package private(set) var length = 0

    package init() {}

    package mutating func append(_ bytes: [UInt8]) {
        length += bytes.count
        if case .bytes(var previous)? = pieces.last {
            pieces.removeLast()
            previous += bytes
            pieces.append(.bytes(previous))
        } else {
            pieces.append(.bytes(bytes))
        }
    }

    package mutating func append(_ attachment: Attachment) {
        length += attachment.encodedLength
        pieces.append(.attachment(attachment))
    }

    /// Appends a document as a `multipart/related` body: its serialized JSON (whose `_attachments`
    /// mark the following ones `"follows": true`), then one part per following attachment with
    /// CouchDB's part headers (`Content-Disposition`, `Content-Type`, `Content-Length`, and
    /// `Content-Encoding: gzip` for gzip-stored bytes), then the closing delimiter.
    package mutating func appendRelated(json: [UInt8], following: [(name: String, attachment: Attachment)], boundary: String) {
        append(Multipart.partHeader(boundary: boundary, headers: [("Content-Type", "application/json")], first: true))
        append(json)
        for (name, attachment) in following {
            var headers = [("Content-Disposition", "attachment; filename=\"\(name)\""),
                           ("Content-Type", attachment.contentType),
                           ("Content-Length", String(attachment.encodedLength))]
            if attachment.encoding == .gzip { headers.append(("Content-Encoding", "gzip")) }
            append(Multipart.partHeader(boundary: boundary, headers: headers, first: false))
            append(attachment)
        }
        append(Multipart.closing(boundary: boundary))
    }
}

/// One header of a multipart part, looked up case-insensitively.
package struct MultipartHeaders: Sendable {
    package var fields: [(name: String, value: String)]

    package subscript(name: String) -> String? {
        fields.first { $0.name.caseInsensitiveCompare(name) == .orderedSame }?.value
    }

    /// The `filename` parameter of a `Content-Disposition` header.
    package var filename: String? {
        guard let disposition = self["Content-Disposition"], let range = disposition.range(of: "filename=") else { return nil }
        var value = String(disposition[range.upperBound...])
        if value.hasPrefix("\"") {
            value.removeFirst()
            guard let end = value.firstIndex(of: "\"") else { return nil }
            return String(value[..<end])
        }
        return value.split(separator: ";").first.map { String($0).trimmingCharacters(in: .whitespaces) }
    }
}

/// Splits a multipart body into parts as its bytes arrive: part headers, then the part's bytes in
/// pieces, then its end — no part is ever held whole, so attachments of any size stream through. A pure
/// state machine: feed it bytes, act on the events it returns.
package struct MultipartParser {
    /// What the bytes fed so far contain.
    package enum Event {
        /// A part begins, with these headers.
        case headers(MultipartHeaders)
        /// Bytes of the current part.
        case body([UInt8])
        /// The current part is complete.
        case partEnd
        /// The closing delimiter: the body is complete.
        case end
    }

    private enum State { case preamble, headers, body, epilogue }

    /// `--boundary`
    private let delimiter: [UInt8]
    /// `CRLF--boundary`, which ends a part's bytes.
    private let partEnd: [UInt8]
    private var state = State.preamble
    private var pending: [UInt8] = []
    /// Parts started so far.
    package private(set) var partCount = 0

    /// The most header bytes a part may have.
    static let maximumHeaderSize = 64 * 1024

    package init(boundary: String) {
        delimiter = Array("--\(boundary)".utf8)
        partEnd = [0x0D, 0x0A] + delimiter
    }

    /// Whether the closing delimiter has been read.
    package var isComplete: Bool { state == .epilogue }

    /// Parses the next bytes.
    /// - Throws: ``DocStoreError/Code/badRequest`` for a body that is not multipart.
    package mutating func parse<Bytes: Collection>(_ bytes: Bytes) throws -> [Event] where Bytes.Element == UInt8 {
        if state == .epilogue { return [] }
        pending.append(contentsOf: bytes)
        var events: [Event] = []
        var consumed = 0
        defer { pending.removeFirst(consumed) }
        loop: while true {
            switch state {
            case .epilogue:
                consumed = pending.count
                break loop
            case .preamble:
                // The first delimiter may come after a preamble (CouchDB's _bulk_get begins with a CRLF).
                guard let found = MultipartParser.find(delimiter, in: pending, from: consumed) else {
                    if pending.count - consumed > 4096 { throw DocStoreError(.badRequest, "Multipart body has no boundary line") }
                    break loop
                }
                guard let next = try afterDelimiter(at: found + delimiter.count, &events) else { break loop }
                consumed = next
            case .headers:
                guard pending.count - consumed >= 2 else { break loop }
                if pending[consumed] == 0x0D, pending[consumed + 1] == 0x0A {
                    // A part without headers starts with the blank line at once.
                    events.append(.headers(MultipartHeaders(fields: [])))
                    consumed += 2
                    state = .body
                    continue loop
                }
                guard let end = MultipartParser.find([0x0D, 0x0A, 0x0D, 0x0A], in: pending, from: consumed) else {
                    if pending.count - consumed > MultipartParser.maximumHeaderSize {
                        throw DocStoreError(.badRequest, "Multipart part headers are too long")
                    }
                    break loop
                }
                let text = String(decoding: pending[consumed..<end], as: UTF8.self)
                var fields: [(name: String, value: String)] = []
                for line in text.split(separator: "\r\n", omittingEmptySubsequences: true) {
                    guard let colon = line.firstIndex(of: ":") else {
                        throw DocStoreError(.badRequest, "Malformed multipart header")
                    }
                    fields.append((String(line[..<colon]).trimmingCharacters(in: .whitespaces),
                                   String(line[line.index(after: colon)...]).trimmingCharacters(in: .whitespaces)))
                }
                events.append(.headers(MultipartHeaders(fields: fields)))
                consumed = end + 4
                state = .body
            case .body:
                if let found = MultipartParser.find(partEnd, in: pending, from: consumed) {
                    if found > consumed { events.append(.body(Array(pending[consumed..<found]))) }
                    events.append(.partEnd)
                    guard let next = try afterDelimiter(at: found + partEnd.count, &events) else {
                        consumed = found
                        // Keep the delimiter: it is read again once the bytes after it arrive.
                        events.removeLast()
                        state = .body
                        break loop
                    }
                    consumed = next
                } else {
                    // All but a possible beginning of the delimiter is part data.
                    let safe = pending.count - (partEnd.count - 1)
                    if safe > consumed {
                        events.append(.body(Array(pending[consumed..<safe])))
                        consumed = safe
                    }
                    break loop
                }
            }
        }
        return events
    }

    /// Reads what follows a delimiter at `index`: `--` (the end) or the line end before a part's
    /// headers. Returns where reading goes on, or `nil` if more bytes are needed.
    private mutating func afterDelimiter(at index: Int, _ events: inout [Event]) throws -> Int? {
        guard pending.count >= index + 2 else { return nil }
        if pending[index] == UInt8(ascii: "-"), pending[index + 1] == UInt8(ascii: "-") {
            state = .epilogue
            events.append(.end)
            return pending.count
        }
        // Transport padding (spaces, tabs) may precede the CRLF.
        var position = index
        while position < pending.count, pending[position] == 0x20 || pending[position] == 0x09 { position += 1 }
        guard pending.count >= position + 2 else { return nil }
        guard pending[position] == 0x0D, pending[position + 1] == 0x0A else {
            throw DocStoreError(.badRequest, "Malformed multipart boundary line")
        }
        partCount += 1
        guard partCount <= 100_000 else { throw DocStoreError(.badRequest, "Too many multipart parts") }
        state = .headers
        return position + 2
    }

    /// Checks that the body ended with its closing delimiter.
    package func finish() throws {
        guard state == .epilogue else { throw DocStoreError(.badRequest, "Multipart body ends before its closing boundary") }
    }

    /// The first index of `needle` in `haystack` at or after `start`.
    static func find(_ needle: [UInt8], in haystack: [UInt8], from start: Int) -> Int? {
        guard !needle.isEmpty, start >= 0, haystack.count - start >= needle.count else { return nil }
        return haystack.withUnsafeBufferPointer { hay in
            needle.withUnsafeBufferPointer { pattern in
                let first = pattern[0]
                var index = start
                let last = hay.count - pattern.count
                while index <= last {
                    guard let pointer = memchr(hay.baseAddress! + index, Int32(first), last - index + 1) else { return nil }
                    let position = hay.baseAddress!.distance(to: pointer.assumingMemoryBound(to: UInt8.self))
                    if memcmp(hay.baseAddress! + position, pattern.baseAddress!, pattern.count) == 0 { return position }
                    index = position + 1
                }
                return nil
            }
        }
    }
}
