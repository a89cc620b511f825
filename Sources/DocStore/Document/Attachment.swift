import Crypto
import Foundation
import OrderedCollections

/// How an attachment's bytes are stored and carried: as they are, or gzip-compressed.
///
/// CouchDB stores compressible types (`text/*`, `application/json`, …) gzip-compressed and replicates
/// them that way; DocStore keeps such bytes as it receives them, so that their ``Attachment/digest``
/// (the MD5 of the stored bytes) stays valid.
public enum AttachmentEncoding: String, Sendable, Hashable {
    /// The bytes are the content.
    case identity
    /// The bytes are the content compressed with gzip.
    case gzip
}

/// A named binary blob saved with a document revision, as CouchDB's `_attachments`.
///
/// What the content *is* — ``contentType``, ``length``, ``digest``, ``revpos`` — is kept apart from
/// how it is *stored and carried*: ``encoding`` and ``encodedLength``. Create one from `Data` or a file
/// and put it in ``Document/attachments``; saving the document stores the content once per digest,
/// however many revisions or documents use it. Large contents can be streamed in beforehand with
/// ``Database/attachmentWriter(contentType:encoding:digest:encodedLength:length:maximumLength:)``. Attachments read back from the database are
/// *stubs* (metadata only); read their content with ``Database/attachmentData(_:)`` or stream it with
/// ``Database/attachmentContent(_:encoded:from:)``. An unchanged attachment is carried into the next
/// revision by leaving its stub in the document: a stub is matched by name (and `revpos`, when given)
/// with the attachments of the revision the edit is based on, as CouchDB does.
///
/// ```swift
/// var doc = Document(id: "photo-1")
/// doc.attachments["thumb.png"] = Attachment(data: pngData, contentType: "image/png")
/// doc = try await db.save(doc)
/// let bytes = try await db.attachmentData(doc.attachments["thumb.png"]!)
/// ```
public struct Attachment: Sendable, Hashable {
    /// The MIME type, e.g. `image/png`.
    public var contentType: String
    /// The length of the content in bytes (decoded, whatever the ``encoding``).
    public let length: Int
    /// `md5-<base64>` of the stored bytes, as CouchDB writes it: for a gzip-encoded attachment, the MD5
    /// of the gzip bytes. Empty for a stub that names an attachment only by name.
    public let digest: String
    /// The generation of the revision that added this content, once saved.
    public package(set) var revpos: Int?
    /// How the bytes are stored.
    public let encoding: AttachmentEncoding
    /// The number of stored bytes: ``length`` for `.identity`, the size of the gzip data for `.gzip`.
    public let encodedLength: Int
    /// Where the bytes are, if this value carries them.
    package let content: Content

    /// Where an attachment's bytes are.
    package enum Content: Sendable {
        /// Nowhere: a stub of content the database holds.
        case none
        /// In memory, in the attachment's ``Attachment/encoding``.
        case bytes(Data)
        /// In a file, as they are (identity), copied in chunks when the document is saved.
        case file(URL)
        /// Already streamed into a database (``AttachmentWriter``), adopted when the document is saved.
        case staged(StagedAttachmentContent)
        /// The stored bytes of this digest and encoding in another database (a replication source), read
        /// in chunks when the document is saved or sent.
        case stored(Database)
    }

    /// The decoded content, when this value carries it in memory; `nil` for a stub, and for content
    /// streamed into the database or read from a file (read those with ``Database/attachmentData(_:)``).
    public var data: Data? {
        guard case .bytes(let bytes) = content else { return nil }
        switch encoding {
        case .identity: return bytes
        case .gzip: return try? GzipStream.decompress(bytes)
        }
    }

    /// The stored bytes (in ``encoding``) when this value carries them in memory.
    package var encodedData: Data? {
        if case .bytes(let bytes) = content { return bytes }
        return nil
    }

    /// Whether this is metadata only, without content.
    public var isStub: Bool {
        if case .none = content { return true }
        return false
    }

    /// An attachment holding `data`.
    public init(data: Data, contentType: String) {
        self.init(contentType: contentType, length: data.count, digest: Attachment.digest(of: data), revpos: nil,
                  encoding: .identity, encodedLength: data.count, content: .bytes(data))
    }

    /// An attachment holding the contents of a file, which is read in chunks: now, to compute its digest,
    /// and again when the document is saved, to copy it into the database. The file must not change in
    /// between.
    /// - Throws: ``DocStoreError/Code/io`` if the file cannot be read.
    public init(contentsOf url: URL, contentType: String) throws {
        var md5 = Insecure.MD5()
        let length = try Attachment.readChunks(of: url) { chunk in md5.update(bufferPointer: chunk) }
        self.init(contentType: contentType, length: length, digest: Attachment.digest(md5.finalize()), revpos: nil,
                  encoding: .identity, encodedLength: length, content: .file(url))
    }

    /// An attachment whose bytes are as a replication peer stores and sends them: `encoded` is the
    /// content in `encoding`, `digest` the MD5 the peer computed over those bytes.
    ///
    /// - Parameters:
    ///   - encoded: the bytes as the peer stores them.
    ///   - encoding: how `encoded` is encoded (gzip or not).
    ///   - contentType: the content's MIME type.
    ///   - digest: the MD5 the peer computed over `encoded` (`md5-<base64>`); computed when `nil`.
    ///   - length: the decoded length the peer reports; checked against the content.
    ///   - revpos: the generation that added the content, as the peer reports it.
    /// - Throws: ``DocStoreError/Code/digestMismatch`` if `digest` is not the MD5 of `encoded`;
    ///   ``DocStoreError/Code/invalidAttachment`` if gzip data is invalid or its content is not `length` bytes.
    public init(encodedData encoded: Data, encoding: AttachmentEncoding, contentType: String, digest: String? = nil,
                length: Int? = nil, revpos: Int? = nil) throws {
        let computed = Attachment.digest(of: encoded)
        if let digest, digest != computed {
            throw DocStoreError(.digestMismatch, "The attachment's bytes do not match its digest \(digest)")
        }
        var decodedLength = encoded.count
        if encoding == .gzip {
            decodedLength = 0
            do {
                let stream = try GzipStream(.inflate)
                try encoded.withUnsafeBytes { try stream.update($0) { decodedLength += $0.count } }
                try stream.finish { decodedLength += $0.count }
            } catch let error as DocStoreError {
                throw DocStoreError(.invalidAttachment, "The attachment's gzip data is invalid: \(error.reason)")
            }
        }
        if let length, length != decodedLength {
            throw DocStoreError(.invalidAttachment, "The attachment's content has \(decodedLength) bytes, not \(length)")
        }
        self.init(contentType: contentType, length: decodedLength, digest: computed, revpos: revpos,
                  encoding: encoding, encodedLength: encoded.count, content: .bytes(encoded))
    }

    /// A stub: metadata of content the database already holds.
    public init(stubWithContentType contentType: String, length: Int, digest: String, revpos: Int?,
                encoding: AttachmentEncoding = .identity, encodedLength: Int? = nil) {
        self.init(contentType: contentType, length: length, digest: digest, revpos: revpos, encoding: encoding,
                  encodedLength: encodedLength ?? length, content: .none)
    }

    package init(contentType: String, length: Int, digest: String, revpos: Int?, encoding: AttachmentEncoding,
                 encodedLength: Int, content: Content) {
        self.contentType = contentType
        self.length = length
        self.digest = digest
        self.revpos = revpos
        self.encoding = encoding
        self.encodedLength = encodedLength
        self.content = content
    }

    /// The same attachment without its content.
    public var stub: Attachment {
        Attachment(contentType: contentType, length: length, digest: digest, revpos: revpos, encoding: encoding,
                   encodedLength: encodedLength, content: .none)
    }

    /// The same attachment carrying `bytes`, its stored bytes.
    package func with(encodedData bytes: Data) -> Attachment {
        Attachment(contentType: contentType, length: length, digest: digest, revpos: revpos, encoding: encoding,
                   encodedLength: encodedLength, content: .bytes(bytes))
    }

    /// The same attachment, its bytes to be read from `database` (where this stub was read) when needed.
    package func readingContent(from database: Database) -> Attachment {
        Attachment(contentType: contentType, length: length, digest: digest, revpos: revpos, encoding: encoding,
                   encodedLength: encodedLength, content: .stored(database))
    }

    /// `md5-<base64>` of `data`, the digest format of CouchDB.
    public static func digest(of data: Data) -> String {
        digest(Insecure.MD5.hash(data: data))
    }

    package static func digest(_ md5: Insecure.MD5Digest) -> String {
        "md5-" + Data(md5).base64EncodedString()
    }

    public static func == (lhs: Attachment, rhs: Attachment) -> Bool {
        lhs.contentType == rhs.contentType && lhs.length == rhs.length && lhs.digest == rhs.digest
            && lhs.revpos == rhs.revpos && lhs.encoding == rhs.encoding && lhs.encodedLength == rhs.encodedLength
            && lhs.isStub == rhs.isStub
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(digest)
        hasher.combine(encoding)
        hasher.combine(revpos)
    }

    /// Reads a file in chunks of ``AttachmentStorage/chunkSize``; returns its length.
    static func readChunks(of url: URL, _ body: (UnsafeRawBufferPointer) throws -> Void) throws -> Int {
        let handle: FileHandle
        do {
            handle = try FileHandle(forReadingFrom: url)
        } catch {
            throw DocStoreError(.io, "Cannot read attachment file \(url.path)", cause: error)
        }
        defer { try? handle.close() }
        var length = 0
        while true {
            let chunk: Data?
            do {
                chunk = try handle.read(upToCount: AttachmentStorage.chunkSize)
            } catch {
                throw DocStoreError(.io, "Cannot read attachment file \(url.path)", cause: error)
            }
            guard let chunk, !chunk.isEmpty else { return length }
            length += chunk.count
            try chunk.withUnsafeBytes { try body($0) }
        }
    }
}

// MARK: - CouchDB JSON

extension Attachment {
    /// The forms of an `_attachments` member in CouchDB's JSON.
    package enum JSONForm {
        /// Metadata with `"stub": true`.
        case stub
        /// Metadata with the decoded content in base64 `data` (no `length`, as CouchDB writes it).
        case inline
        /// Metadata with `"follows": true`: the bytes come in a multipart part of their own.
        case follows
    }

    /// The CouchDB JSON of this attachment: a stub, or with `data` in base64 when `includeData` is set
    /// and the content is in memory.
    public func json(includeData: Bool = false) -> JSON {
        json(includeData && data != nil ? .inline : .stub, encodingInfo: false)
    }

    /// The CouchDB JSON of this attachment in `form`, with CouchDB's member order. `encodingInfo` adds
    /// `encoding` and `encoded_length` for encoded content (CouchDB's `att_encoding_info=true`, and always
    /// in multipart documents).
    package func json(_ form: JSONForm, encodingInfo: Bool) -> JSON {
        var object: JSONObject = ["content_type": .string(contentType)]
        object.reserveCapacity(7)
        if let revpos { object["revpos"] = .integer(revpos) }
        if !digest.isEmpty { object["digest"] = .string(digest) }
        switch form {
        case .stub:
            object["length"] = .integer(length)
            object["stub"] = true
        case .follows:
            object["length"] = .integer(length)
            object["follows"] = true
        case .inline:
            object["data"] = .string((data ?? Data()).base64EncodedString())
        }
        if encodingInfo && encoding != .identity {
            object["encoding"] = .string(encoding.rawValue)
            object["encoded_length"] = .integer(encodedLength)
        }
        return .object(object)
    }

    /// Refuses a name CouchDB reserves: one starting with `_`.
    /// - Throws: ``DocStoreError/Code/invalidAttachment`` with CouchDB's reason.
    public static func checkName(_ name: String) throws {
        if name.hasPrefix("_") {
            throw DocStoreError(.invalidAttachment, "Attachment name '\(name)' starts with prohibited character '_'")
        }
    }

    /// Strict base64, as CouchDB decodes attachment data: whole groups of four (padded), `=` only at the
    /// end. (Foundation alone takes some malformed text, such as `notBase64Encoded=`.)
    static func decodeBase64(_ text: String) -> Data? {
        let bytes = Array(text.utf8)
        guard bytes.count % 4 == 0 else { return nil }
        let padding = bytes.reversed().prefix { $0 == UInt8(ascii: "=") }.count
        guard padding <= 2, !bytes.dropLast(padding).contains(UInt8(ascii: "=")) else { return nil }
        return Data(base64Encoded: text)
    }

    /// Reads one `_attachments` member in CouchDB's JSON form: a stub (`"stub": true`, matched by name
    /// when saved, so its other members may be absent) or inline content (`"data"` in base64, the
    /// decoded content: as CouchDB, a given `digest` or `encoding` is ignored and the digest is computed).
    /// - Throws: ``DocStoreError/Code/invalidAttachment`` if the member is malformed.
    public init(name: String, json: JSON) throws {
        guard let object = json.objectValue else {
            throw DocStoreError(.invalidAttachment, "Attachment \"\(name)\" must be a JSON object")
        }
        let contentType = object["content_type"]?.stringValue ?? "application/octet-stream"
        let revpos = object["revpos"]?.intValue
        if let base64 = object["data"] {
            guard let text = base64.stringValue, let data = Attachment.decodeBase64(text) else {
                throw DocStoreError(.invalidAttachment, "Invalid attachment data for \(name)")
            }
            self.init(data: data, contentType: contentType)
            self.revpos = revpos
        } else if object["stub"]?.boolValue == true {
            let length = object["length"]?.intValue ?? 0
            let encoding = object["encoding"]?.stringValue.flatMap(AttachmentEncoding.init(rawValue:)) ?? .identity
            self.init(stubWithContentType: contentType, length: length, digest: object["digest"]?.stringValue ?? "",
                      revpos: revpos, encoding: encoding, encodedLength: object["encoded_length"]?.intValue)
        } else {
            throw DocStoreError(.invalidAttachment, "Attachment \"\(name)\" has neither data nor stub")
        }
    }
}

/// A document's attachments by name, in the order they were given — as CouchDB keeps them, which
/// orders multipart answers and the revision id. (swift-collections' `OrderedDictionary`: subscript,
/// iterate and `removeValue(forKey:)` as a dictionary; `import OrderedCollections` to name it.)
public typealias Attachments = OrderedDictionary<String, Attachment>
