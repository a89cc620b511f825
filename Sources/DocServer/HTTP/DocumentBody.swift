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
                let json = try request.jsonBody()
                guard case .object = json else { throw CouchError.badRequest("Document must be a JSON object") }
                return try Document(json: json)
            } catch let error as DocStoreError {
                throw CouchError(error)
            }
        }
        guard let boundary = Multipart.boundary(from: type) else { throw CouchError.badRequest("multipart body without boundary") }
        var reader = MultipartDocumentReader(boundary: boundary, database: db, maximumJSONSize: configuration.maximumBodySize,
                                             maximumAttachmentSize: configuration.maximumAttachmentSize) { headers in
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
