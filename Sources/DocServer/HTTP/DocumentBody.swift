import DocStore
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

extension DocServer {
    /// Reads a document from a request body: JSON, or `multipart/related` whose attachments are streamed
    /// into the database as they arrive (``MultipartDocumentReader``).
    /// - Throws: 400 for a malformed body or an attachment that does not match its announcement, 413
    ///   for a JSON part over the body limit or an attachment over the attachment limit, 415 for a first
    ///   part that is not JSON.
    func documentFromBody(_ request: CouchRequest, db: Database) async throws -> Document {
        let type = request.header(.contentType) ?? "application/json"
        guard Multipart.mediaType(of: type) == "multipart/related" else {
            do {
                let json = try request.jsonBody(documentDepth: 1)
                guard case .object = json else { throw CouchError.badRequest("Document must be a JSON object") }
                return try Document(couchJSON: json)
            } catch let error as DocStoreError {
                throw CouchError(error)
            }
        }
        guard let boundary = Multipart.boundary(from: type) else { throw CouchError.badRequest("multipart body without boundary") }
        // New edits store compressible attachments gzip, as CouchDB does; replicated revisions keep their bytes.
        let compresses = try request.bool("new_edits", default: true)
        var reader = MultipartDocumentReader(boundary: boundary, database: db, maximumJSONSize: configuration.maximumBodySize,
                                             maximumAttachmentSize: configuration.maximumAttachmentSize,
                                             compressionLevel: { [self] type in compresses ? compressionLevel(for: type) : nil }) { headers in
            if let type = headers["Content-Type"], Multipart.mediaType(of: type) != "application/json" {
                throw CouchError(.unsupportedMediaType, "bad_content_type", "Content-Type must be application/json")
            }
        }
        do {
            try await request.readBody { try await reader.read($0) }
            return try await reader.finish()
        } catch {
            await reader.abandon()
            switch error {
            case let error as DocStoreError where error.code == .attachmentTooLarge:
                throw CouchError(.contentTooLarge, "attachment_too_large", reader.currentName ?? error.reason)
            case let error as DocStoreError where error.code == .documentTooLarge:
                throw CouchError(.contentTooLarge, "too_large", error.reason)
            case let error as DocStoreError:
                throw CouchError(error)
            default:
                throw error
            }
        }
    }
}

extension DocServer {
    /// CouchDB's `[attachments]` `compressible_types` (default `text/*, application/javascript,
    /// application/json, application/xml`) and `compression_level` (default 8; 0 turns it off): an
    /// attachment of such a type that arrives whole in a JSON document is stored gzip-compressed, as
    /// CouchDB stores it — its `digest` is then the MD5 of the gzip bytes, `att_encoding_info` shows
    /// `encoding` and `encoded_length`, and clients that do not take gzip get it decoded. New edits only:
    /// a replicated revision keeps the bytes and digests its peer sent.
    func compressAttachments(of document: inout Document) {
        guard !document.attachments.isEmpty else { return }
        for (name, attachment) in document.attachments where attachment.encoding == .identity {
            guard let level = compressionLevel(for: attachment.contentType), let data = attachment.encodedData,
                let gzip = try? GzipStream.compress(data, level: level),
                var compressed = try? Attachment(encodedData: gzip, encoding: .gzip, contentType: attachment.contentType)
            else { continue }
            compressed.revpos = attachment.revpos
            document.attachments[name] = compressed
        }
    }

    /// The gzip level at which content of `contentType` is stored, or `nil` when it is stored as it is.
    func compressionLevel(for contentType: String) -> Int32? {
        let level = nodeConfiguration.integer("attachments", "compression_level", default: 8)
        guard level > 0 else { return nil }
        let types = (nodeConfiguration.value("attachments", "compressible_types")
            ?? "text/*, application/javascript, application/json, application/xml")
            .split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
        let type = (contentType.split(separator: ";").first.map(String.init) ?? contentType).trimmingCharacters(in: .whitespaces).lowercased()
        let compressible = types.contains { pattern in
            pattern.hasSuffix("*") ? type.hasPrefix(String(pattern.dropLast())) : type == pattern
        }
        return compressible ? Int32(min(level, 9)) : nil
    }
}
