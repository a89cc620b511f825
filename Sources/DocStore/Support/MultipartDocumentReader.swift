import Foundation

/// Reads a `multipart/related` document as its bytes arrive: the first part is the document's JSON,
/// the next ones are the bytes of the attachments its `_attachments` marks `"follows": true`, in that
/// order (CouchDB's replicator, and CouchDB answering `open_revs` or `attachments=true`, send documents
/// this way; gzip-stored attachments come gzip-encoded). Each attachment is checked against the
/// `length`, `encoded_length`, `encoding` and `digest` its JSON announces, and streamed into `database`
/// with an ``AttachmentWriter`` — or, without a database, collected in memory.
package struct MultipartDocumentReader {
    private var parser: MultipartParser
    private let database: Database?
    private let maximumJSONSize: Int
    private let maximumAttachmentSize: Int
    private let checkFirstPart: (MultipartHeaders) throws -> Void
    /// The JSON part's bytes, until it ends.
    private var json: [UInt8] = []
    /// The document, once its JSON part has ended.
    private var document: Document?
    /// The attachments announced with `"follows": true`, in order, and how many have arrived.
    private var following: [(name: String, meta: JSONObject)] = []
    /// The names of `_attachments` in the JSON's order, which the document keeps.
    private var order: [String] = []
    private var received = 0
    private var part = 0
    private var writer: AttachmentWriter?
    /// The bytes of the attachment being read, without a database.
    private var bytes: [UInt8]?
    /// The gzip level each content type is stored at (`nil`: as it comes), for new edits.
    private let compressionLevel: (String) -> Int32?
    /// Compresses the attachment being read, with the length it announced and the bytes seen so far.
    private var deflater: (stream: GzipStream, announced: Int?, seen: Int)?

    /// - Parameters:
    ///   - database: where attachments are streamed to; `nil` collects them in memory.
    ///   - maximumJSONSize: the most bytes the JSON part may have.
    ///   - maximumAttachmentSize: the most bytes an attachment may have.
    ///   - checkFirstPart: inspects the JSON part's headers, e.g. to refuse one that is not JSON.
    ///   - compressionLevel: the gzip level at which an attachment of a content type is stored when it
    ///     arrives as it is and without a digest vouching for its bytes (CouchDB's compressible types),
    ///     `nil` to store it as it comes.
    package init(boundary: String, database: Database?, maximumJSONSize: Int, maximumAttachmentSize: Int,
                 compressionLevel: @escaping (String) -> Int32? = { _ in nil },
                 checkFirstPart: @escaping (MultipartHeaders) throws -> Void = { _ in }) {
        self.compressionLevel = compressionLevel
        parser = MultipartParser(boundary: boundary)
        self.database = database
        self.maximumJSONSize = maximumJSONSize
        self.maximumAttachmentSize = maximumAttachmentSize
        self.checkFirstPart = checkFirstPart
    }

    /// The name of the attachment being read.
    package var currentName: String? { part > 1 && received < following.count ? following[received].name : nil }

    /// Reads the next bytes of the body.
    /// - Throws: ``DocStoreError`` — `badRequest` for a malformed body, `tooLarge`-like codes for limits,
    ///   the attachment checks of ``AttachmentWriter``.
    package mutating func read<Bytes: Collection>(_ input: Bytes) async throws where Bytes.Element == UInt8 {
        for event in try parser.parse(input) {
            switch event {
            case .headers(let headers):
                part += 1
                if part == 1 {
                    try checkFirstPart(headers)
                } else {
                    guard received < following.count else {
                        throw DocStoreError(.badRequest, "The multipart document has more parts than attachments that follow")
                    }
                    try startAttachment(following[received].meta)
                }
            case .body(let piece):
                if let writer, let deflater {
                    let seen = deflater.seen + piece.count
                    self.deflater?.seen = seen
                    // The bytes as sent are bounded as they arrive, not only once compressed.
                    if let announced = deflater.announced, seen > announced {
                        throw DocStoreError(.invalidAttachment, "Attachment \(following[received].name) has more than the \(announced) bytes announced")
                    }
                    if seen > maximumAttachmentSize {
                        throw DocStoreError(.attachmentTooLarge, "The attachment is larger than the limit of \(maximumAttachmentSize) bytes")
                    }
                    var compressed: [UInt8] = []
                    try Array(piece).withUnsafeBytes { try deflater.stream.update($0) { compressed += $0 } }
                    if !compressed.isEmpty { try await writer.write(compressed) }
                } else if let writer {
                    try await writer.write(piece)
                } else if bytes != nil {
                    bytes! += piece
                    if bytes!.count > maximumAttachmentSize {
                        throw DocStoreError(.attachmentTooLarge, "The attachment is larger than the limit of \(maximumAttachmentSize) bytes")
                    }
                } else if part == 1 {
                    json += piece
                    if json.count > maximumJSONSize {
                        throw DocStoreError(.documentTooLarge, "the request entity is too large")
                    }
                }
            case .partEnd:
                if part == 1 {
                    try readJSON()
                } else if part - 2 == received {
                    try await finishAttachment()
                }
            case .end:
                break
            }
        }
    }

    private mutating func finishAttachment() async throws {
        let (name, meta) = following[received]
        var attachment: Attachment
        if let current = writer {
            writer = nil
            if let deflater {
                self.deflater = nil
                if let announced = deflater.announced, announced != deflater.seen {
                    await current.cancel()
                    throw DocStoreError(.invalidAttachment, "Attachment \(name) has \(deflater.seen) bytes, not the \(announced) announced")
                }
                var tail: [UInt8] = []
                try deflater.stream.finish { tail += $0 }
                try await current.write(tail)
            }
            attachment = try await current.finish()
        } else {
            let collected = Data(bytes ?? [])
            bytes = nil
            let (encoding, length, storedLength) = try MultipartDocumentReader.announcement(meta)
            if let storedLength, storedLength != collected.count {
                throw DocStoreError(.invalidAttachment, "Attachment \(name) has \(collected.count) bytes, not the \(storedLength) announced")
            }
            attachment = try Attachment(encodedData: collected, encoding: encoding,
                                        contentType: meta["content_type"]?.stringValue ?? "application/octet-stream",
                                        digest: meta["digest"]?.stringValue, length: encoding == .gzip ? length : nil)
        }
        attachment.revpos = meta["revpos"]?.intValue
        document?.attachments[name] = attachment
        received += 1
    }

    /// The JSON part: the document, with the attachments that follow taken out of its `_attachments`.
    private mutating func readJSON() throws {
        guard case .object(var object)? = try? JSON(parsing: json) else {
            throw DocStoreError(.badRequest, "The first part of a multipart document must be its JSON object")
        }
        json = []
        if case .object(var stubs)? = object["_attachments"] {
            order = Array(stubs.keys)
            for (name, stub) in stubs {
                if case .object(let meta) = stub, meta["follows"]?.boolValue == true {
                    following.append((name, meta))
                    stubs.removeValue(forKey: name)
                }
            }
            object["_attachments"] = stubs.isEmpty ? nil : .object(stubs)
        }
        document = try Document(couchJSON: .object(object))
    }

    /// What an attachment's JSON announces: its encoding, content length, and the number of bytes that
    /// follow (`encoded_length` with an encoding, else `length`).
    private static func announcement(_ meta: JSONObject) throws -> (AttachmentEncoding, length: Int?, stored: Int?) {
        let encoding: AttachmentEncoding
        switch meta["encoding"]?.stringValue {
        case nil, "identity": encoding = .identity
        case "gzip": encoding = .gzip
        case let other?: throw DocStoreError(.invalidAttachment, "Unsupported attachment encoding \(other)")
        }
        let length = meta["length"]?.intValue
        return (encoding, length, encoding == .identity ? length : meta["encoded_length"]?.intValue ?? length)
    }

    /// Starts reading the attachment that `meta` announces: streamed into the database, or collected.
    private mutating func startAttachment(_ meta: JSONObject) throws {
        let (encoding, length, storedLength) = try MultipartDocumentReader.announcement(meta)
        if let storedLength, storedLength > maximumAttachmentSize {
            throw DocStoreError(.attachmentTooLarge, "The attachment has \(storedLength) bytes, more than the limit of \(maximumAttachmentSize)")
        }
        guard let database else {
            bytes = []
            return
        }
        let contentType = meta["content_type"]?.stringValue ?? "application/octet-stream"
        if encoding == .identity, meta["digest"] == nil, let level = compressionLevel(contentType) {
            deflater = (try GzipStream(.deflate, level: level), length, 0)
            writer = try database.attachmentWriter(contentType: contentType, encoding: .gzip, digest: nil, encodedLength: nil,
                                                   length: nil, maximumLength: maximumAttachmentSize)
            return
        }
        writer = try database.attachmentWriter(contentType: contentType,
                                               encoding: encoding, digest: meta["digest"]?.stringValue,
                                               encodedLength: storedLength, length: encoding == .gzip ? length : nil,
                                               maximumLength: maximumAttachmentSize)
    }

    /// The document with its attachments, once the whole body has been read.
    package mutating func finish() async throws -> Document {
        try parser.finish()
        guard let document else { throw DocStoreError(.badRequest, "The multipart document has no JSON part") }
        guard received == following.count else {
            throw DocStoreError(.badRequest, "Expected \(following.count) attachment parts, got \(received)")
        }
        var ordered = document
        ordered.attachments = Attachments(uniqueKeysWithValues: order.compactMap { name in
            document.attachments[name].map { (name, $0) }
        })
        return ordered
    }

    /// Drops what a failed read streamed in.
    package mutating func abandon() async {
        await writer?.cancel()
        writer = nil
        document = nil
    }
}
