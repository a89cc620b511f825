import CouchProtocol
import Crypto
import DocStore
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

extension DocServer {
    /// `/db/doc/name`: one attachment, streamed between SQLite and the connection in chunks both ways.
    func attachmentRoute(_ db: Database, id: String, name: String, _ request: CouchRequest, principal: Principal) async throws -> Response {
        try Partition.checkHasPartition(id)
        switch request.method {
        case .get, .head:
            return try await getAttachment(db, id: id, name: name, request, principal: principal)
        case .put, .delete:
            // As CouchDB, the name is checked before the document is read.
            do { try Attachment.checkName(name) } catch let error as DocStoreError { throw CouchError.badRequest(error.reason) }
            return try await changeAttachment(db, id: id, name: name, request, principal: principal)
        default:
            throw CouchError.only("DELETE,GET,HEAD,PUT")
        }
    }

    /// `GET|HEAD /db/doc/name` as CouchDB answers it: the decoded content, or the stored gzip bytes with
    /// `Content-Encoding: gzip` to a client that accepts gzip; the base64 MD5 as `ETag` (a matching
    /// `If-None-Match` gets 304); byte ranges of contents stored as they are (206, or 416).
    private func getAttachment(_ db: Database, id: String, name: String, _ request: CouchRequest,
                               principal: Principal) async throws -> Response {
        let revision = try request.query["rev"].map { text in
            guard let revision = try revisionToRead(text) else { throw CouchError.notFound("missing") }
            return revision
        }
        guard let document = try await db.document(withID: id, revision: revision) else {
            let tree = revision == nil ? try await db.revisionTree(ofDocumentWithID: id) : nil
            throw CouchError.notFound(tree != nil ? "deleted" : "missing")
        }
        try checkRead(document, principal)
        guard let attachment = document.attachments[name] else { throw CouchError.notFound("Document is missing attachment") }
        let md5 = String(attachment.digest.dropFirst("md5-".count))
        var headers: HTTPFields = [.contentType: attachment.contentType, .eTag: "\"\(md5)\"", .cacheControl: "must-revalidate"]
        headers[HTTPField.Name("Content-Security-Policy")!] = "sandbox"
        if request.ifNoneMatch("\"\(md5)\"") {
            return Response(status: .notModified, headers: [.eTag: "\"\(md5)\""])
        }
        let sendsEncoded = attachment.encoding == .gzip && request.acceptsEncoding("gzip")
        headers[.acceptRanges] = attachment.encoding == .identity ? "bytes" : "none"
        // As CouchDB, the ranges are checked against the length sent (416 for one past it) even where
        // they are then ignored: a content stored compressed is sent whole.
        if let rangeHeader = request.header(.range),
            let ranges = try ByteRanges(rangeHeader, length: sendsEncoded ? attachment.encodedLength : attachment.length),
            attachment.encoding == .identity {
            return try rangeResponse(db, attachment, ranges, headers: headers, head: request.isHead)
        }
        if sendsEncoded { headers[.contentEncoding] = "gzip" }
        if attachment.encoding == .identity || sendsEncoded { headers[HTTPField.Name("Content-MD5")!] = md5 }
        let content = try db.attachmentContent(attachment, encoded: sendsEncoded)
        headers[.contentLength] = String(content.byteCount)
        if request.isHead { return Response(status: .ok, headers: headers) }
        return Response(status: .ok, headers: headers, body: ResponseBody(contentLength: content.byteCount) { writer in
            for try await piece in content { try await writer.write(ByteBuffer(bytes: piece)) }
            try await writer.finish(nil)
        })
    }

    /// The answer to a `Range` request on a content stored as it is: one range (206 with
    /// `Content-Range`) or several (206 `multipart/byteranges`).
    private func rangeResponse(_ db: Database, _ attachment: Attachment, _ ranges: ByteRanges, headers: HTTPFields,
                               head: Bool) throws -> Response {
        var headers = headers
        let total = attachment.length
        if ranges.ranges.count == 1 {
            let range = ranges.ranges[0]
            headers[.contentRange] = "bytes \(range.lowerBound)-\(range.upperBound - 1)/\(total)"
            headers[.contentLength] = String(range.count)
            if head { return Response(status: .partialContent, headers: headers) }
            return Response(status: .partialContent, headers: headers, body: ResponseBody(contentLength: range.count) { writer in
                try await DocServer.writeRange(range, of: attachment, in: db, to: &writer)
                try await writer.finish(nil)
            })
        }
        let boundary = Multipart.makeBoundary()
        var parts: [([UInt8], Range<Int>)] = []
        var length = 0
        for (index, range) in ranges.ranges.enumerated() {
            let header = Multipart.partHeader(boundary: boundary, headers: [
                ("Content-Type", attachment.contentType),
                ("Content-Range", "bytes \(range.lowerBound)-\(range.upperBound - 1)/\(total)"),
            ], first: index == 0)
            parts.append((header, range))
            length += header.count + range.count
        }
        let closing = Multipart.closing(boundary: boundary)
        length += closing.count
        headers[.contentType] = "multipart/byteranges; boundary=\"\(boundary)\""
        headers[.contentLength] = String(length)
        if head { return Response(status: .partialContent, headers: headers) }
        return Response(status: .partialContent, headers: headers, body: ResponseBody(contentLength: length) { [parts] writer in
            for (header, range) in parts {
                try await writer.write(ByteBuffer(bytes: header))
                try await DocServer.writeRange(range, of: attachment, in: db, to: &writer)
            }
            try await writer.write(ByteBuffer(bytes: closing))
            try await writer.finish(nil)
        })
    }

    private static func writeRange(_ range: Range<Int>, of attachment: Attachment, in db: Database,
                                   to writer: inout any ResponseBodyWriter) async throws {
        var remaining = range.count
        for try await piece in try db.attachmentContent(attachment, encoded: true, from: range.lowerBound) {
            let wanted = min(piece.count, remaining)
            try await writer.write(ByteBuffer(bytes: piece.prefix(wanted)))
            remaining -= wanted
            if remaining == 0 { break }
        }
    }

    /// `PUT /db/doc/name` (the body streamed into the database, then a new revision with it) and
    /// `DELETE /db/doc/name` (a new revision without it), on the leaf revision given as `rev`.
    private func changeAttachment(_ db: Database, id: String, name: String, _ request: CouchRequest,
                                  principal: Principal) async throws -> Response {
        let revision = try (request.query["rev"] ?? request.header(.ifMatch)?.trimmingCharacters(in: CharacterSet(charactersIn: "\"")))
            .map(parseRevision)
        var document: Document
        if let current = try await db.document(withID: id) {
            guard let revision else {
                // As CouchDB, a deletion first looks for the attachment on the current revision.
                if request.method == .delete, current.attachments[name] == nil { throw CouchError.notFound("Document is missing attachment") }
                throw CouchError(.conflict, "conflict", "Document update conflict.")
            }
            if revision != current.revision {
                // As CouchDB, the revision named is opened first: one the document never had is
                // `missing_rev` (CouchDB 3.3.3 answers it 409 with a `not_found` body), one without the
                // attachment to delete 404; another leaf (a conflict, a deleted branch) is edited as any
                // write may edit it, and an older revision conflicts.
                guard let named = try await db.document(withID: id, revision: revision) else {
                    throw CouchError(.conflict, "not_found", "missing_rev")
                }
                if request.method == .delete, named.attachments[name] == nil { throw CouchError.notFound("Document is missing attachment") }
                document = named
            } else {
                document = current
            }
        } else {
            guard revision == nil else { throw CouchError(.conflict, "conflict", "Document update conflict.") }
            guard request.method == .put else { throw CouchError.notFound() }
            document = Document(id: id)
        }
        try await checkWrite(&document, in: db, principal)
        if request.method == .put {
            // As CouchDB: the new attachment comes first (which the revision id reflects).
            let received = try await receiveAttachment(db, name: name, request)
            document.attachments.removeValue(forKey: name)
            document.attachments.updateValue(received, forKey: name, insertingAt: 0)
        } else {
            guard document.attachments.removeValue(forKey: name) != nil else {
                throw CouchError.notFound("Document is missing attachment")
            }
        }
        let saved = try await db.put(document)
        var headers: HTTPFields = [.eTag: "\"\(saved.revision!)\""]
        if request.method == .put { headers[.location] = request.location(db.name, id, name) }
        return Response.json(WriteResult(written: saved).json, status: request.method == .put ? .created : .ok, headers: headers)
    }

    /// Streams an uploaded attachment into the database: `Content-Encoding: gzip` bytes are kept as they
    /// are, a `Content-MD5` is checked, and more than ``ServerConfiguration/maximumAttachmentSize`` bytes
    /// get 413 `attachment_too_large`.
    private func receiveAttachment(_ db: Database, name: String, _ request: CouchRequest) async throws -> Attachment {
        let encoding: AttachmentEncoding
        switch request.header(.contentEncoding)?.lowercased() {
        case nil, "identity": encoding = .identity
        case "gzip": encoding = .gzip
        default:
            throw CouchError(.unsupportedMediaType, "bad_content_type", "Only gzip and identity content-encodings are supported")
        }
        let digest = request.header(HTTPField.Name("Content-MD5")!).map { "md5-" + $0.trimmingCharacters(in: .whitespaces) }
        let contentType = request.header(.contentType) ?? "application/octet-stream"
        // A compressible type sent as it is is compressed as it streams in, and stored gzip with the
        // digest of those bytes, as CouchDB stores it; a Content-MD5 is then checked against the bytes
        // as sent.
        let deflater = try (encoding == .identity ? compressionLevel(for: contentType) : nil).map { try GzipStream(.deflate, level: $0) }
        var sent = digest != nil && deflater != nil ? Insecure.MD5() : nil
        do {
            let writer = try db.attachmentWriter(contentType: contentType, encoding: deflater == nil ? encoding : .gzip,
                                                 digest: deflater == nil ? digest : nil,
                                                 encodedLength: deflater == nil ? request.header(.contentLength).flatMap(Int.init) : nil,
                                                 maximumLength: configuration.maximumAttachmentSize)
            do {
                try await request.readBody { chunk in
                    guard let deflater else { return try await writer.write(chunk) }
                    var compressed: [UInt8] = []
                    try Array(chunk).withUnsafeBytes { bytes in
                        sent?.update(bufferPointer: bytes)
                        try deflater.update(bytes) { compressed += $0 }
                    }
                    if !compressed.isEmpty { try await writer.write(compressed) }
                }
                if let deflater {
                    var tail: [UInt8] = []
                    try deflater.finish { tail += $0 }
                    try await writer.write(tail)
                }
                if let digest, let sent, "md5-" + Data(sent.finalize()).base64EncodedString() != digest {
                    throw DocStoreError(.digestMismatch, "The attachment's bytes do not match its digest \(digest)")
                }
                return try await writer.finish()
            } catch {
                await writer.cancel()
                throw error
            }
        } catch let error as DocStoreError where error.code == .attachmentTooLarge {
            throw CouchError(.contentTooLarge, "attachment_too_large", name)
        }
    }
}

/// The ranges of a `Range: bytes=…` header, as CouchDB serves them: one to nine satisfiable ranges;
/// ten or more (each still checked), or a header it does not parse, mean the whole content.
struct ByteRanges {
    let ranges: [Range<Int>]

    /// The ranges of `header` within a content of `length` bytes, or `nil` to send the whole content.
    /// - Throws: 416 `requested_range_not_satisfiable` for a range that starts past the end.
    init?(_ header: String, length: Int) throws {
        let text = header.trimmingCharacters(in: .whitespaces)
        guard text.lowercased().hasPrefix("bytes=") else { return nil }
        let specs = text.dropFirst("bytes=".count).split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        // A range from 0 to the end among them sends the whole content, as CouchDB 3.3.3 does.
        guard !specs.isEmpty, !specs.contains("0-") else { return nil }
        var ranges: [Range<Int>] = []
        for spec in specs {
            guard let dash = spec.firstIndex(of: "-") else { return nil }
            let first = spec[..<dash], last = spec[spec.index(after: dash)...]
            let from: Int, to: Int
            if first.isEmpty {
                guard let suffix = Int(last), suffix >= 0 else { return nil }
                (from, to) = (max(length - suffix, 0), length - 1)
            } else {
                guard let start = Int(first), start >= 0 else { return nil }
                if last.isEmpty {
                    (from, to) = (start, length - 1)
                } else {
                    guard let end = Int(last) else { return nil }
                    (from, to) = (start, min(end, length - 1))
                }
            }
            guard to >= from else {
                throw CouchError(.rangeNotSatisfiable, "requested_range_not_satisfiable", "Requested range not satisfiable")
            }
            ranges.append(from..<(to + 1))
        }
        // Ten or more, each checked, are answered with the whole content.
        guard ranges.count < 10 else { return nil }
        self.ranges = ranges
    }
}

extension CouchRequest {
    /// Whether `Accept-Encoding` lists `coding` with a non-zero quality.
    func acceptsEncoding(_ coding: String) -> Bool {
        guard let header = header(.acceptEncoding) else { return false }
        for item in header.split(separator: ",") {
            let parameters = item.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            guard parameters.first == coding || parameters.first == "*" else { continue }
            if let quality = parameters.dropFirst().first(where: { $0.hasPrefix("q=") }), Double(quality.dropFirst(2)) == 0 {
                return false
            }
            return true
        }
        return false
    }
}
