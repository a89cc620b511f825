import Foundation

/// Contents an ``AttachmentWriter`` streams in before the document that carries them is saved: each
/// chunk in a short transaction of its own, over the writer's transaction primitive.
extension DatabaseWriter {
    /// Starts a content streamed in by an ``AttachmentWriter``; returns its row and token.
    nonisolated func beginStaging(encoding: AttachmentEncoding) throws -> (key: Int64, token: String) {
        try plainTransaction { connection in
            let token = AttachmentStorage.stagingPrefix + UUID().uuidString.lowercased()
            return (try AttachmentRecords(connection: connection).beginStaging(token: token, encoding: encoding), token)
        }
    }

    /// Appends the next chunk of a streamed-in content, in a transaction of its own.
    nonisolated func appendStagedChunk(to key: Int64, at position: Int, _ bytes: [UInt8]) throws {
        try plainTransaction { connection in
            try bytes.withUnsafeBytes { try AttachmentRecords(connection: connection).appendChunk(to: key, at: position, $0) }
        }
    }

    /// Deletes a streamed-in content no write adopted; does nothing once adopted, or when closed (the
    /// next open deletes it).
    nonisolated func discardStaged(key: Int64, token: String) {
        // Closed, plainTransaction throws: nothing is done.
        try? plainTransaction { connection in try AttachmentRecords(connection: connection).discard(key: key, token: token) }
    }
}
