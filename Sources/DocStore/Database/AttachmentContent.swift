import Foundation

/// An attachment's bytes as an asynchronous sequence of pieces of at most 256 KiB, read from the
/// database one chunk at a time — a content of any size is streamed without being held whole.
///
/// Get one with ``Database/attachmentContent(_:encoded:from:)``. With `encoded: false` the pieces are the
/// content itself (gzip-stored bytes are decompressed as they are read); with `encoded: true` they are
/// the stored bytes, e.g. to send a gzip-stored attachment on as it is (``isEncoded`` tells).
///
/// ```swift
/// let content = try await db.attachmentContent(doc.attachments["video.mp4"]!)
/// for try await piece in content { try output.write(contentsOf: piece) }
/// ```
///
/// While it is read, the content is kept even if compaction finds that no revision uses it any more.
public struct AttachmentContent: AsyncSequence, Sendable {
    public typealias Element = Data

    /// The attachment whose content this is.
    public let attachment: Attachment
    /// Whether the pieces are the stored bytes in ``Attachment/encoding`` rather than the decoded content.
    public let isEncoded: Bool
    private let source: Source

    enum Source: Sendable {
        case memory(Data)
        case stored(Database, StoredContent)
        /// The identity bytes of a file.
        case file(URL)
    }

    /// Where the stored bytes are read from (0 unless a later offset was asked for).
    let offset: Int

    init(attachment: Attachment, decode: Bool, source: Source, offset: Int = 0) {
        self.attachment = attachment
        self.isEncoded = !decode || attachment.encoding == .identity
        self.source = source
        self.offset = offset
    }

    /// The number of bytes the sequence yields: the content's length, or the stored length for encoded
    /// bytes (less the offset the stream starts at).
    public var byteCount: Int { (isEncoded ? attachment.encodedLength : attachment.length) - offset }

    public func makeAsyncIterator() -> Iterator {
        Iterator(reader: ChunkReader(source: source, attachment: attachment, decode: !isEncoded, offset: offset))
    }

    /// Reads the pieces in order.
    public struct Iterator: AsyncIteratorProtocol {
        let reader: ChunkReader

        public mutating func next() async throws -> Data? {
            try reader.next()
        }
    }

    /// The stored bytes of an attachment that carries them — in memory, in a file, or in another database
    /// (``Attachment/Content/stored(_:)``) — read in pieces, without a database of its own.
    /// - Throws: ``DocStoreError/Code/notFound`` for a stub, or content streamed in but not yet saved.
    package static func storedBytes(of attachment: Attachment) throws -> AttachmentContent {
        switch attachment.content {
        case .bytes(let bytes): return AttachmentContent(attachment: attachment, decode: false, source: .memory(bytes))
        case .file(let url): return AttachmentContent(attachment: attachment, decode: false, source: .file(url))
        case .stored(let database): return try database.attachmentContent(attachment.stub, encoded: true)
        case .none, .staged: throw DocStoreError.notFound("The attachment's content is not readable here")
        }
    }

    /// All of the content in one `Data` (what ``Database/attachmentData(_:)`` returns).
    func collect() throws -> Data {
        let reader = ChunkReader(source: source, attachment: attachment, decode: !isEncoded, offset: offset)
        var result = Data()
        result.reserveCapacity(byteCount)
        while let piece = try reader.next() { result.append(piece) }
        return result
    }
}

/// The reading state of one pass over a content. Owned by one iterator, used by one task at a time;
/// its lock only makes that safe to state. Pins the content while alive.
final class ChunkReader: Sendable {
    private struct State {
        /// The next chunk to read.
        var position = 0
        /// Bytes of the next stored piece to leave out (a stream that starts at an offset).
        var skip = 0
        var inflater: GzipStream?
    }

    private let source: AttachmentContent.Source
    private let attachment: Attachment
    private let state: Locked<State>

    init(source: AttachmentContent.Source, attachment: Attachment, decode: Bool, offset: Int = 0) {
        self.source = source
        self.attachment = attachment
        var state = State()
        state.position = offset / AttachmentStorage.chunkSize
        state.skip = offset % AttachmentStorage.chunkSize
        if decode { state.inflater = try? GzipStream(.inflate) }
        self.state = Locked(state)
        if case .stored(let database, let content) = source { database.writer.pins.pin(content.key) }
    }

    deinit {
        if case .stored(let database, let content) = source { database.writer.pins.unpin(content.key) }
    }

    /// The next piece, or `nil` at the end.
    func next() throws -> Data? {
        try state.withLock { state in
            guard let inflater = state.inflater else { return try nextStored(&state) }
            while true {
                let piece = try decoding { try inflater.produce(maximum: AttachmentStorage.chunkSize) }
                if !piece.isEmpty { return piece }
                if inflater.isFinished {
                    // Bytes stored after the end of the gzip data would be a corrupt content.
                    if let extra = try nextStored(&state), !extra.isEmpty {
                        throw DocStoreError(.storage, "Attachment content \(attachment.digest) continues after its gzip data")
                    }
                    return nil
                }
                guard inflater.needsInput else {
                    throw DocStoreError(.storage, "Attachment content \(attachment.digest) could not be decompressed")
                }
                guard let input = try nextStored(&state) else {
                    throw DocStoreError(.storage, "The gzip data of attachment content \(attachment.digest) ends early")
                }
                inflater.feed(input)
            }
        }
    }

    private func decoding<T>(_ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as DocStoreError {
            throw DocStoreError(.storage, "Attachment content \(attachment.digest) is corrupt: \(error.reason)")
        }
    }

    /// Piece `position` of bytes in memory (an empty content is one empty piece).
    private static func piece(_ position: Int, of bytes: Data) -> Data? {
        let start = position * AttachmentStorage.chunkSize
        guard start < bytes.count || (position == 0 && bytes.isEmpty) else { return nil }
        return bytes[(bytes.startIndex + start)..<(bytes.startIndex + min(start + AttachmentStorage.chunkSize, bytes.count))]
    }

    /// The next stored chunk: every one but the last is ``AttachmentStorage/chunkSize`` bytes, whether
    /// the bytes are in memory, in one row or in chunk rows.
    private func nextStored(_ state: inout State) throws -> Data? {
        let position = state.position
        let chunkSize = AttachmentStorage.chunkSize
        var chunk: Data
        switch source {
        case .memory(let bytes):
            guard let piece = ChunkReader.piece(position, of: bytes) else { return nil }
            chunk = piece
        case .file(let url):
            let piece: Data
            do {
                let handle = try FileHandle(forReadingFrom: url)
                defer { try? handle.close() }
                try handle.seek(toOffset: UInt64(position * chunkSize))
                piece = try handle.read(upToCount: chunkSize) ?? Data()
            } catch {
                throw DocStoreError(.io, "Cannot read attachment file \(url.path)", cause: error)
            }
            guard !piece.isEmpty else { return nil }
            chunk = piece
        case .stored(let database, let content):
            if let inline = content.inline {
                // Version 2 stored contents of any size in one row; they are read in chunk-size pieces too.
                guard let piece = ChunkReader.piece(position, of: Data(inline)) else { return nil }
                chunk = piece
            } else {
                guard position < content.chunkCount else { return nil }
                chunk = try database.readNow { connection in
                    try AttachmentRecords(connection: connection).withChunk(of: content.key, at: position) { Data($0) }
                }
            }
        }
        state.position += 1
        if state.skip > 0 {
            chunk = chunk.dropFirst(state.skip)
            state.skip = 0
        }
        return chunk
    }
}

/// Contents being read, by `attachments.content`, with a count of readers each; purge and compaction
/// keep them.
final class ContentPins: Sendable {
    private let counts = Locked<[Int64: Int]>([:])

    func pin(_ key: Int64) { counts.withLock { $0[key, default: 0] += 1 } }

    func unpin(_ key: Int64) {
        counts.withLock { counts in
            let left = (counts[key] ?? 1) - 1
            counts[key] = left > 0 ? left : nil
        }
    }

    var keys: Set<Int64> { counts.withLock { Set($0.keys) } }
}

extension Database {
    // MARK: Attachments

    /// The content of an attachment, whole and decoded.
    /// - Throws: ``DocStoreError/Code/notFound`` if the database does not hold that content.
    /// - Complexity: O(length); the content is held in memory — stream large ones with
    ///   ``attachmentContent(_:encoded:from:)``.
    public func attachmentData(_ attachment: Attachment) async throws -> Data {
        if let data = attachment.data { return data }
        return try attachmentContent(attachment).collect()
    }

    /// The content of attachment `name` of document `id` (current revision, or `revision`).
    /// - Throws: ``DocStoreError/Code/notFound`` if the document, revision or attachment is missing.
    public func attachmentData(named name: String, documentID id: String, revision: RevisionID? = nil) async throws -> Data {
        guard let document = try await document(withID: id, revision: revision) else {
            throw DocStoreError.notFound(revision == nil ? "missing" : "missing revision")
        }
        guard let attachment = document.attachments[name] else {
            throw DocStoreError.notFound("Document is missing attachment")
        }
        return try await attachmentData(attachment)
    }

    /// An attachment's bytes as a stream of bounded pieces.
    /// - Parameter attachment: an attachment of a document read from this database.
    /// - Parameter encoded: yield the stored bytes (gzip data for a gzip-encoded attachment) instead of
    ///   the decoded content.
    /// - Throws: ``DocStoreError/Code/notFound`` if the database does not hold that content.
    /// - Parameter offset: with `encoded` (or an attachment stored as it is), the byte of the stored
    ///   bytes to start at, e.g. for a byte range.
    public func attachmentContent(_ attachment: Attachment, encoded: Bool = false, from offset: Int = 0) throws -> AttachmentContent {
        precondition(offset == 0 || encoded || attachment.encoding == .identity, "an offset into decoded gzip content")
        precondition(offset >= 0 && offset <= attachment.encodedLength, "an offset past the end")
        switch attachment.content {
        case .bytes(let bytes):
            return AttachmentContent(attachment: attachment, decode: !encoded, source: .memory(bytes), offset: offset)
        case .stored(let source) where source !== self:
            return try source.attachmentContent(attachment.stub, encoded: encoded, from: offset)
        default:
            break
        }
        let stored = try readNow { connection in
            try AttachmentRecords(connection: connection).content(digest: attachment.digest, encoding: attachment.encoding)
        }
        guard let stored else { throw DocStoreError.notFound("Document is missing attachment") }
        return AttachmentContent(attachment: attachment, decode: !encoded, source: .stored(self, stored), offset: offset)
    }

    /// The attachment with its stored bytes in memory (``Attachment/encodedData``), e.g. to send it
    /// inline or to another database.
    package func loadingContent(of attachment: Attachment) throws -> Attachment {
        guard attachment.isStub else { return attachment }
        return attachment.with(encodedData: try attachmentContent(attachment, encoded: true).collect())
    }

    /// Starts streaming an attachment's bytes into the database (see ``AttachmentWriter``).
    ///
    /// - Parameters:
    ///   - contentType: the attachment's MIME type.
    ///   - encoding: the encoding of the bytes that will be written (`.gzip` for gzip data, whose
    ///     content length is counted as it is decoded).
    ///   - digest: the `md5-<base64>` digest the bytes must have, if known (e.g. sent by a peer).
    ///   - encodedLength: the number of bytes that will be written, if known.
    ///   - length: the decoded length the content must have, if known.
    ///   - maximumLength: the most bytes accepted.
    /// - Throws: ``DocStoreError/Code/attachmentTooLarge`` if `encodedLength` exceeds `maximumLength`.
    public func attachmentWriter(contentType: String, encoding: AttachmentEncoding = .identity, digest: String? = nil,
                                 encodedLength: Int? = nil, length: Int? = nil,
                                 maximumLength: Int? = nil) throws -> AttachmentWriter {
        try ensureOpen()
        return try AttachmentWriter(writer: writer, contentType: contentType, encoding: encoding, expectedDigest: digest,
                                    expectedLength: encodedLength, decodedLength: length, maximumLength: maximumLength)
    }
}
