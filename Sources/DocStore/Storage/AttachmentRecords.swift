import CSQLite
import Foundation

/// Constants of attachment storage.
enum AttachmentStorage {
    /// Contents are written and read in pieces of this size: a content of at most one chunk is one row
    /// of `attachments`, a larger one one row of `attachment_chunks` per chunk.
    static let chunkSize = 256 * 1024
    /// The digest of a content while it is streamed in, before a document write adopts it.
    static let stagingPrefix = "staging:"
}

/// Where a stored content's bytes are.
struct StoredContent: Sendable {
    /// `attachments.content`.
    let key: Int64
    /// The decoded length.
    let length: Int
    /// The number of stored bytes.
    let storedLength: Int
    /// The stored bytes of a content of at most one chunk; `nil` when they are in `attachment_chunks`.
    let inline: [UInt8]?

    /// The number of chunks of a chunked content.
    var chunkCount: Int { (storedLength + AttachmentStorage.chunkSize - 1) / AttachmentStorage.chunkSize }
}

/// The SQL of attachment contents (`attachments`, `attachment_chunks`), over one connection.
struct AttachmentRecords {
    let connection: SQLiteConnection

    /// The stored content with this digest and encoding.
    func content(digest: String, encoding: AttachmentEncoding) throws -> StoredContent? {
        let statement = try connection.prepare(
            "SELECT content, length, stored_length, data FROM attachments WHERE digest = ? AND encoding = ?")
        defer { statement.reset() }
        try statement.bind(digest, at: 1)
        try statement.bind(encoding.rawValue, at: 2)
        guard try statement.step() else { return nil }
        return StoredContent(key: statement.int64(0), length: statement.int(1), storedLength: statement.int(2),
                             inline: statement.isNull(3) ? nil : statement.blob(3))
    }

    func hasContent(digest: String, encoding: AttachmentEncoding) throws -> Bool {
        try connection.scalarInt("SELECT 1 FROM attachments WHERE digest = ? AND encoding = ?",
                                 [.text(digest), .text(encoding.rawValue)]) != nil
    }

    /// Chunk `position` of a chunked content, handed to `body` straight from SQLite's buffer.
    func withChunk<T>(of key: Int64, at position: Int, _ body: (UnsafeRawBufferPointer) throws -> T) throws -> T {
        let statement = try connection.prepare("SELECT data FROM attachment_chunks WHERE content = ? AND position = ?")
        defer { statement.reset() }
        try statement.bind(key, at: 1)
        try statement.bind(position, at: 2)
        guard try statement.step() else {
            throw DocStoreError(.storage, "Attachment content \(key) has no chunk \(position)")
        }
        return try statement.withBlob(0, body)
    }

    /// Stores a content whose bytes are in memory, unless one with its digest and encoding exists: in
    /// `attachments` when it fits one chunk, else in chunks.
    func insert(digest: String, encoding: AttachmentEncoding, length: Int, bytes: UnsafeRawBufferPointer) throws {
        guard try !hasContent(digest: digest, encoding: encoding) else { return }
        if bytes.count <= AttachmentStorage.chunkSize {
            let statement = try connection.prepare(
                "INSERT INTO attachments (digest, encoding, length, stored_length, data) VALUES (?, ?, ?, ?, ?)")
            try statement.bind(digest, at: 1)
            try statement.bind(encoding.rawValue, at: 2)
            try statement.bind(length, at: 3)
            try statement.bind(bytes.count, at: 4)
            try statement.bind(blob: bytes, at: 5)
            _ = try statement.step()
            return
        }
        try insertChunked(digest: digest, encoding: encoding, length: length, storedLength: bytes.count) { append in
            var offset = 0
            while offset < bytes.count {
                let end = min(offset + AttachmentStorage.chunkSize, bytes.count)
                try append(UnsafeRawBufferPointer(rebasing: bytes[offset..<end]))
                offset = end
            }
        }
    }

    /// Stores a content whose bytes `produce` hands over in pieces of any size (stored in chunks of
    /// ``AttachmentStorage/chunkSize``), unless one with its digest and encoding exists.
    func insertChunked(digest: String, encoding: AttachmentEncoding, length: Int, storedLength: Int,
                       produce: ((UnsafeRawBufferPointer) throws -> Void) throws -> Void) throws {
        guard try !hasContent(digest: digest, encoding: encoding) else { return }
        try connection.run(
            "INSERT INTO attachments (digest, encoding, length, stored_length, data) VALUES (?, ?, ?, ?, NULL)",
            [.text(digest), .text(encoding.rawValue), .integer(Int64(length)), .integer(Int64(storedLength))])
        let key = connection.lastInsertedRow
        var position = 0
        var buffer: [UInt8] = []
        buffer.reserveCapacity(AttachmentStorage.chunkSize)
        try produce { piece in
            var rest = piece
            while !rest.isEmpty {
                let taken = min(AttachmentStorage.chunkSize - buffer.count, rest.count)
                buffer.append(contentsOf: rest.prefix(taken))
                rest = UnsafeRawBufferPointer(rebasing: rest.dropFirst(taken))
                if buffer.count == AttachmentStorage.chunkSize {
                    try buffer.withUnsafeBytes { try appendChunk(to: key, at: position, $0) }
                    position += 1
                    buffer.removeAll(keepingCapacity: true)
                }
            }
        }
        if !buffer.isEmpty {
            try buffer.withUnsafeBytes { try appendChunk(to: key, at: position, $0) }
        }
    }

    /// Starts streaming a content in: a row whose digest is `token` (``AttachmentStorage/stagingPrefix``).
    func beginStaging(token: String, encoding: AttachmentEncoding) throws -> Int64 {
        try connection.run(
            "INSERT INTO attachments (digest, encoding, length, stored_length, data) VALUES (?, ?, 0, 0, NULL)",
            [.text(token), .text(encoding.rawValue)])
        return connection.lastInsertedRow
    }

    func appendChunk(to key: Int64, at position: Int, _ bytes: UnsafeRawBufferPointer) throws {
        let statement = try connection.prepare("INSERT INTO attachment_chunks (content, position, data) VALUES (?, ?, ?)")
        try statement.bind(key, at: 1)
        try statement.bind(position, at: 2)
        try statement.bindingInPlace(blob: bytes, at: 3) { _ = try statement.step() }
    }

    /// Makes a streamed-in content a stored one with its final digest and lengths; if the database
    /// already has that content, drops the streamed copy instead. Does nothing if a write adopted it
    /// before.
    /// - Throws: ``DocStoreError/Code/notFound`` if neither the streamed copy nor the content exists.
    func adopt(_ staged: StagedAttachmentContent) throws {
        if try hasContent(digest: staged.digest, encoding: staged.encoding) {
            try discard(key: staged.key, token: staged.token)
            return
        }
        try connection.run("""
            UPDATE attachments SET digest = ?, length = ?, stored_length = ? WHERE content = ? AND digest = ?
            """, [.text(staged.digest), .integer(Int64(staged.length)), .integer(Int64(staged.storedLength)),
                  .integer(staged.key), .text(staged.token)])
        guard connection.changes == 1 else {
            throw DocStoreError.notFound("The streamed attachment content \(staged.digest) is no longer in the database")
        }
    }

    /// Deletes a streamed-in content that no write adopted (a no-op once adopted: its digest changed).
    func discard(key: Int64, token: String) throws {
        try connection.run("DELETE FROM attachments WHERE content = ? AND digest = ?", [.integer(key), .text(token)])
        if connection.changes > 0 {
            try connection.run("DELETE FROM attachment_chunks WHERE content = ?", [.integer(key)])
        }
    }

    /// Deletes every streamed-in content (left by a process that stopped before saving its document).
    func discardAllStaged() throws {
        let prefix = AttachmentStorage.stagingPrefix
        let statement = try connection.prepare("SELECT content, digest FROM attachments WHERE digest >= ? AND digest < ?")
        try statement.bind(prefix, at: 1)
        try statement.bind(String(prefix.dropLast()) + ";", at: 2)
        var staged: [(Int64, String)] = []
        while try statement.step() { staged.append((statement.int64(0), statement.text(1))) }
        statement.reset()
        for (key, token) in staged { try discard(key: key, token: token) }
    }

    /// Deletes contents no stored revision refers to, except streamed-in ones and those in `pinned`
    /// (being read); returns how many.
    @discardableResult
    func collectUnreferenced(pinned: Set<Int64>) throws -> Int {
        let prefix = AttachmentStorage.stagingPrefix
        let statement = try connection.prepare("""
            SELECT content FROM attachments
            WHERE NOT (digest >= ? AND digest < ?)
              AND NOT EXISTS (SELECT 1 FROM attachment_refs r WHERE r.digest = attachments.digest)
            """)
        try statement.bind(prefix, at: 1)
        try statement.bind(String(prefix.dropLast()) + ";", at: 2)
        var keys: [Int64] = []
        while try statement.step() {
            let key = statement.int64(0)
            if !pinned.contains(key) { keys.append(key) }
        }
        statement.reset()
        for key in keys {
            try connection.run("DELETE FROM attachment_chunks WHERE content = ?", [.integer(key)])
            try connection.run("DELETE FROM attachments WHERE content = ?", [.integer(key)])
        }
        return keys.count
    }
}
