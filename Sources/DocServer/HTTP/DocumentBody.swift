import DocStore
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

extension DocServer {
    /// Reads a document from a request body: JSON, or `multipart/related` whose first part is the JSON
    /// and whose next parts are the bytes of the attachments marked `"follows": true`, in that order —
    /// streamed into the database as they arrive, each checked against the `length`, `encoded_length`,
    /// `encoding` and `digest` its JSON announces (CouchDB's replicator sends gzip-stored attachments
    /// gzip-encoded this way).
    /// - Throws: 400 for a malformed body or an attachment that does not match its announcement, 413
    ///   for a JSON part over the body limit or an attachment over the attachment limit, 415 for a first
    ///   part that is not JSON.
    func documentFromBody(_ request: CouchRequest, db: Database) async throws -> Document {
        let type = request.header(.contentType) ?? "application/json"
        guard Multipart.mediaType(of: type) == "multipart/related" else {
            do {
                return try Document(json: try request.jsonBody())
            } catch let error as DocStoreError {
                throw CouchError(error)
            }
        }
        guard let boundary = Multipart.boundary(from: type) else { throw CouchError.badRequest("multipart body without boundary") }
        var reader = MultipartDocumentReader(boundary: boundary, database: db, maximumJSONSize: configuration.maximumBodySize,
                                             maximumAttachmentSize: configuration.maximumAttachmentSize)
        do {
            if let stream = request.bodyStream {
                for try await buffer in stream { try await reader.read(buffer.readableBytesView) }
            } else {
                try await reader.read(request.body)
            }
            return try await reader.finish()
        } catch {
            await reader.abandon()
            switch error {
            case let error as DocStoreError where error.code == .attachmentTooLarge:
                throw CouchError(.contentTooLarge, "attachment_too_large", reader.currentName ?? error.reason)
            case let error as DocStoreError:
                throw CouchError(error)
            default:
                throw error
            }
        }
    }
}

/// Reads a `multipart/related` document as its bytes arrive.
struct MultipartDocumentReader {
    private var parser: MultipartParser
    private let database: Database
    private let maximumJSONSize: Int
    private let maximumAttachmentSize: Int
    /// The JSON part's bytes, until it ends.
    private var json: [UInt8] = []
    /// The document, once its JSON part has ended.
    private var document: Document?
    /// The attachments announced with `"follows": true`, in order, and how many have arrived.
    private var following: [(name: String, meta: JSONObject)] = []
    private var received = 0
    private var part = 0
    private var writer: AttachmentWriter?

    init(boundary: String, database: Database, maximumJSONSize: Int, maximumAttachmentSize: Int) {
        parser = MultipartParser(boundary: boundary)
        self.database = database
        self.maximumJSONSize = maximumJSONSize
        self.maximumAttachmentSize = maximumAttachmentSize
    }

    /// The name of the attachment being read.
    var currentName: String? { part > 1 && received < following.count ? following[received].name : nil }

    mutating func read<Bytes: Collection>(_ bytes: Bytes) async throws where Bytes.Element == UInt8 {
        for event in try parser.parse(bytes) {
            switch event {
            case .headers(let headers):
                part += 1
                if part == 1 {
                    if let type = headers["Content-Type"], Multipart.mediaType(of: type) != "application/json" {
                        throw CouchError(.unsupportedMediaType, "bad_content_type", "Content-Type must be application/json")
                    }
                } else {
                    guard received < following.count else {
                        throw CouchError.badRequest("The multipart document has more parts than attachments that follow")
                    }
                    writer = try startAttachment(following[received].meta)
                }
            case .body(let piece):
                if let writer {
                    try await writer.write(piece)
                } else if part == 1 {
                    json += piece
                    if json.count > maximumJSONSize {
                        throw CouchError(.contentTooLarge, "too_large", "the request entity is too large")
                    }
                }
            case .partEnd:
                if part == 1 {
                    try readJSON()
                } else if let current = writer {
                    writer = nil
                    var attachment = try await current.finish()
                    let (name, meta) = following[received]
                    attachment.revpos = meta["revpos"]?.intValue
                    document?.attachments[name] = attachment
                    received += 1
                }
            case .end:
                break
            }
        }
    }

    /// The JSON part: the document, with the attachments that follow taken out of its `_attachments`.
    private mutating func readJSON() throws {
        guard case .object(var object)? = try? JSON(parsing: json) else {
            throw CouchError.badRequest("The first part of a multipart document must be its JSON object")
        }
        json = []
        if case .object(var stubs)? = object["_attachments"] {
            for (name, stub) in stubs {
                if case .object(let meta) = stub, meta["follows"]?.boolValue == true {
                    following.append((name, meta))
                    stubs.removeValue(forKey: name)
                }
            }
            object["_attachments"] = stubs.isEmpty ? nil : .object(stubs)
        }
        do {
            document = try Document(json: .object(object))
        } catch let error as DocStoreError {
            throw CouchError(error)
        }
    }

    /// A writer for the attachment that `meta` announces: `length` is its content's length,
    /// `encoded_length` (with `encoding`) the number of bytes that follow.
    private func startAttachment(_ meta: JSONObject) throws -> AttachmentWriter {
        let encoding: AttachmentEncoding
        switch meta["encoding"]?.stringValue {
        case nil, "identity": encoding = .identity
        case "gzip": encoding = .gzip
        case let other?: throw CouchError(.unsupportedMediaType, "bad_content_type", "Unsupported attachment encoding \(other)")
        }
        let length = meta["length"]?.intValue
        let storedLength = encoding == .identity ? length : meta["encoded_length"]?.intValue ?? length
        return try database.attachmentWriter(contentType: meta["content_type"]?.stringValue ?? "application/octet-stream",
                                             encoding: encoding, digest: meta["digest"]?.stringValue,
                                             encodedLength: storedLength, length: encoding == .gzip ? length : nil,
                                             maximumLength: maximumAttachmentSize)
    }

    /// The document with its attachments, once the whole body has been read.
    mutating func finish() async throws -> Document {
        try parser.finish()
        guard let document else { throw CouchError.badRequest("The multipart document has no JSON part") }
        guard received == following.count else {
            throw CouchError.badRequest("Expected \(following.count) attachment parts, got \(received)")
        }
        return document
    }

    /// Drops what a failed read streamed in.
    mutating func abandon() async {
        await writer?.cancel()
        writer = nil
        document = nil
    }
}
