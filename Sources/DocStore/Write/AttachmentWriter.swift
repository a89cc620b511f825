import Crypto
import Foundation

/// Streams an attachment's bytes into a database in bounded chunks, before the document that carries
/// it is saved — for contents too large to hold in memory (an HTTP upload, a replicated attachment).
///
/// Write the bytes in as many pieces as they come, then ``finish()``: the returned ``Attachment`` goes
/// into ``Document/attachments`` and the next save of that document adopts the content (a content the
/// database already has is kept once). Memory use does not grow with the content's size: every full
/// chunk is written to SQLite at once, in a short transaction of its own, so other writes go on
/// meanwhile. A content that is never saved is deleted when its ``Attachment`` values are gone, or
/// when the database is next opened.
///
/// ```swift
/// let writer = try db.attachmentWriter(contentType: "video/mp4")
/// for try await piece in upload { try await writer.write(piece) }
/// var doc = Document(id: "clip")
/// doc.attachments["clip.mp4"] = try await writer.finish()
/// try await db.save(doc)
/// ```
public actor AttachmentWriter {
    private let writer: DatabaseWriter
    private let contentType: String
    private let encoding: AttachmentEncoding
    private let expectedDigest: String?
    private let expectedLength: Int?
    private let decodedLength: Int?
    private let maximumLength: Int?
    private var md5 = Insecure.MD5()
    private var inflater: GzipStream?
    private var decoded = 0
    private var stored = 0
    private var buffer: [UInt8] = []
    private var staging: (key: Int64, token: String)?
    private var chunks = 0
    private var isDone = false
    /// A ``write(_:)`` or ``finish()`` is under way (it may be waiting for the database, when the actor
    /// takes other calls): bytes go in one call after the other, so another call is refused meanwhile.
    private var isBusy = false

    init(writer: DatabaseWriter, contentType: String, encoding: AttachmentEncoding, expectedDigest: String?,
         expectedLength: Int?, decodedLength: Int?, maximumLength: Int?) throws {
        self.writer = writer
        self.contentType = contentType
        self.encoding = encoding
        self.expectedDigest = expectedDigest
        self.expectedLength = expectedLength
        self.decodedLength = decodedLength
        self.maximumLength = maximumLength
        if encoding == .gzip { inflater = try GzipStream(.inflate) }
        if let expectedLength, let maximumLength, expectedLength > maximumLength {
            throw DocStoreError(.attachmentTooLarge, "The attachment has \(expectedLength) bytes, more than the limit of \(maximumLength)")
        }
    }

    deinit {
        if let staging, !isDone {
            let writer = self.writer
            Task { await writer.perform { writer.discardStaged(key: staging.key, token: staging.token) } }
        }
    }

    /// Appends bytes of the content (in the writer's encoding). Calls go one after the other.
    /// - Throws: ``DocStoreError/Code/attachmentTooLarge`` past the limit, or more bytes than announced;
    ///   ``DocStoreError/Code/invalidAttachment`` for invalid gzip data; storage errors;
    ///   ``DocStoreError/Code/badRequest`` while another call has not returned.
    public func write<Bytes: Collection & Sendable>(_ bytes: Bytes) async throws where Bytes.Element == UInt8 {
        guard !isDone else { throw DocStoreError(.badRequest, "The attachment writer has finished") }
        guard !bytes.isEmpty else { return }
        try beginCall()
        defer { isBusy = false }
        do {
            let added = try account(bytes)
            stored += added
            if let maximumLength, stored > maximumLength {
                throw DocStoreError(.attachmentTooLarge, "The attachment is larger than the limit of \(maximumLength) bytes")
            }
            if let expectedLength, stored > expectedLength {
                throw DocStoreError(.invalidAttachment, "The attachment is longer than the \(expectedLength) bytes announced")
            }
            // Up to a chunk stays buffered, so that a content of at most one chunk never reaches SQLite
            // before its document, and the last chunk of a larger one is never empty. A full buffer is
            // written when more bytes come, then refilled in the same storage.
            var start = bytes.startIndex
            while start != bytes.endIndex {
                if buffer.count == AttachmentStorage.chunkSize {
                    try await writeChunk(buffer)
                    buffer.removeAll(keepingCapacity: true)
                }
                let end = bytes.index(start, offsetBy: AttachmentStorage.chunkSize - buffer.count, limitedBy: bytes.endIndex) ?? bytes.endIndex
                buffer.append(contentsOf: bytes[start..<end])
                start = end
            }
        } catch {
            await abandon()
            throw error
        }
    }

    private func beginCall() throws {
        guard !isBusy else { throw DocStoreError(.badRequest, "The attachment writer is still taking the previous bytes") }
        isBusy = true
    }

    /// Hashes and (for gzip) decodes the new bytes; returns their count.
    private func account<Bytes: Collection>(_ bytes: Bytes) throws -> Int where Bytes.Element == UInt8 {
        if try bytes.withContiguousStorageIfAvailable({ try self.account(UnsafeRawBufferPointer($0)) }) == nil {
            try Array(bytes).withUnsafeBytes { try self.account($0) }
        }
        return bytes.count
    }

    private func account(_ pointer: UnsafeRawBufferPointer) throws {
        md5.update(bufferPointer: pointer)
        guard let inflater else {
            decoded += pointer.count
            return
        }
        var produced = 0
        do {
            try inflater.update(pointer) { produced += $0.count }
        } catch let error as DocStoreError {
            throw DocStoreError(.invalidAttachment, "The attachment's gzip data is invalid: \(error.reason)")
        }
        decoded += produced
    }

    private func writeChunk(_ chunk: [UInt8]) async throws {
        if staging == nil { staging = try await waitingForTheLock(of: writer) { try writer.beginStaging(encoding: encoding) } }
        let (key, position) = (staging!.key, chunks)
        try await waitingForTheLock(of: writer) { try writer.appendStagedChunk(to: key, at: position, chunk) }
        chunks += 1
    }

    /// Ends the content and returns its attachment, to put into a document and save.
    /// - Throws: ``DocStoreError/Code/digestMismatch`` if the bytes do not have the expected digest;
    ///   ``DocStoreError/Code/invalidAttachment`` if fewer bytes came than announced, or the gzip data
    ///   is incomplete or decodes to another length than announced.
    public func finish() async throws -> Attachment {
        guard !isDone else { throw DocStoreError(.badRequest, "The attachment writer has finished") }
        try beginCall()
        defer { isBusy = false }
        do {
            if let expectedLength, stored != expectedLength {
                throw DocStoreError(.invalidAttachment, "The attachment is shorter than the \(expectedLength) bytes announced")
            }
            if let inflater {
                var produced = 0
                defer { decoded += produced }
                do {
                    try inflater.finish { produced += $0.count }
                } catch let error as DocStoreError {
                    throw DocStoreError(.invalidAttachment, "The attachment's gzip data is invalid: \(error.reason)")
                }
            }
            if let decodedLength, decodedLength != decoded {
                throw DocStoreError(.invalidAttachment, "The attachment's content has \(decoded) bytes, not \(decodedLength)")
            }
            let digest = Attachment.digest(md5.finalize())
            if let expectedDigest, expectedDigest != digest {
                throw DocStoreError(.digestMismatch, "The attachment's bytes do not match its digest \(expectedDigest)")
            }
            isDone = true
            guard let staging else {
                return Attachment(contentType: contentType, length: decoded, digest: digest, revpos: nil, encoding: encoding,
                                  encodedLength: stored, content: .bytes(Data(buffer)))
            }
            if !buffer.isEmpty {
                let (position, last) = (chunks, buffer)
                try await waitingForTheLock(of: writer) { try writer.appendStagedChunk(to: staging.key, at: position, last) }
            }
            buffer = []
            let content = StagedAttachmentContent(writer: writer, key: staging.key, token: staging.token, digest: digest,
                                                  encoding: encoding, length: decoded, storedLength: stored)
            return Attachment(contentType: contentType, length: decoded, digest: digest, revpos: nil, encoding: encoding,
                              encodedLength: stored, content: .staged(content))
        } catch {
            await abandon()
            throw error
        }
    }

    /// Drops what was written; the writer cannot be used afterwards.
    public func cancel() async {
        await abandon()
    }

    private func abandon() async {
        guard !isDone else { return }
        isDone = true
        buffer = []
        if let staging { await writer.perform { [writer] in writer.discardStaged(key: staging.key, token: staging.token) } }
        staging = nil
    }
}

/// A content streamed into a database by an ``AttachmentWriter``, not yet adopted by a document write.
///
/// Its row has the digest ``token`` until a save adopts it (``AttachmentRecords/adopt(_:)``). When the
/// last ``Attachment`` value carrying it is gone, the row is deleted unless a save adopted it.
package final class StagedAttachmentContent: Sendable {
    let writer: DatabaseWriter
    let key: Int64
    let token: String
    let digest: String
    let encoding: AttachmentEncoding
    let length: Int
    let storedLength: Int

    init(writer: DatabaseWriter, key: Int64, token: String, digest: String, encoding: AttachmentEncoding, length: Int,
         storedLength: Int) {
        self.writer = writer
        self.key = key
        self.token = token
        self.digest = digest
        self.encoding = encoding
        self.length = length
        self.storedLength = storedLength
    }

    deinit {
        let (writer, key, token) = (self.writer, self.key, self.token)
        Task { await writer.perform { writer.discardStaged(key: key, token: token) } }
    }
}
