import Crypto
import Foundation

/// A named binary blob saved with a document revision, as CouchDB's `_attachments`.
///
/// Create one from `Data` (or a file) and put it in ``Document/attachments``; saving the document
/// stores the content once per digest, however many revisions or documents use it. Attachments read
/// back from the database are *stubs* (metadata only); load their content with
/// ``Database/attachmentData(_:)``. An unchanged attachment is carried into the next revision by
/// leaving its stub in the document.
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
    /// The content length in bytes.
    public let length: Int
    /// `md5-<base64>` of the content as CouchDB writes it (for replicated attachments: the digest the
    /// peer sent, which may be of the compressed bytes it stores).
    public let digest: String
    /// The generation of the revision that added this content, once saved.
    public internal(set) var revpos: Int?
    /// The content, when it was created from data or loaded with the document; `nil` for a stub.
    public let data: Data?

    /// Whether this is metadata only, without content.
    public var isStub: Bool { data == nil }

    /// An attachment holding `data`.
    public init(data: Data, contentType: String) {
        self.contentType = contentType
        self.length = data.count
        self.digest = Attachment.digest(of: data)
        self.revpos = nil
        self.data = data
    }

    /// An attachment holding the contents of a file.
    /// - Throws: ``DocStoreError/Code/io`` if the file cannot be read.
    public init(contentsOf url: URL, contentType: String) throws {
        do {
            self.init(data: try Data(contentsOf: url, options: .mappedIfSafe), contentType: contentType)
        } catch {
            throw DocStoreError(.io, "Cannot read attachment file \(url.path)", cause: error)
        }
    }

    /// An attachment received from a replication peer, keeping the peer's digest and revpos.
    public init(data: Data, contentType: String, digest: String, revpos: Int?) {
        self.contentType = contentType
        self.length = data.count
        self.digest = digest
        self.revpos = revpos
        self.data = data
    }

    /// A stub: metadata of content the database already holds.
    public init(stubWithContentType contentType: String, length: Int, digest: String, revpos: Int?) {
        self.contentType = contentType
        self.length = length
        self.digest = digest
        self.revpos = revpos
        self.data = nil
    }

    /// The same attachment without its content.
    public var stub: Attachment {
        Attachment(stubWithContentType: contentType, length: length, digest: digest, revpos: revpos)
    }

    /// `md5-<base64>` of `data`, the digest format of CouchDB.
    public static func digest(of data: Data) -> String {
        "md5-" + Data(Insecure.MD5.hash(data: data)).base64EncodedString()
    }

    /// The CouchDB JSON of this attachment: a stub, or with `data` in base64 when `includeData` is set
    /// and the content is present.
    public func json(includeData: Bool = false) -> JSON {
        var object: JSONObject = ["content_type": .string(contentType), "digest": .string(digest)]
        if includeData, let data {
            object["data"] = .string(data.base64EncodedString())
        } else {
            object["length"] = .integer(length)
        }
        if let revpos { object["revpos"] = .integer(revpos) }
        if !includeData || data == nil { object["stub"] = true }
        return .object(object)
    }

    /// Reads one `_attachments` member in CouchDB's JSON form: a stub (`"stub": true`) or inline content
    /// (`"data"` in base64).
    /// - Throws: ``DocStoreError/Code/invalidAttachment`` if the member is malformed.
    public init(name: String, json: JSON) throws {
        guard let object = json.objectValue else {
            throw DocStoreError(.invalidAttachment, "Attachment \"\(name)\" must be a JSON object")
        }
        let contentType = object["content_type"]?.stringValue ?? "application/octet-stream"
        let revpos = object["revpos"]?.intValue
        if let base64 = object["data"] {
            guard let text = base64.stringValue, let data = Data(base64Encoded: text) else {
                throw DocStoreError(.invalidAttachment, "Attachment \"\(name)\" has invalid base64 data")
            }
            if let digest = object["digest"]?.stringValue {
                self.init(data: data, contentType: contentType, digest: digest, revpos: revpos)
            } else {
                self.init(data: data, contentType: contentType)
                self.revpos = revpos
            }
        } else if object["stub"]?.boolValue == true {
            guard let digest = object["digest"]?.stringValue else {
                throw DocStoreError(.invalidAttachment, "Attachment stub \"\(name)\" has no digest")
            }
            let length = object["length"]?.intValue ?? 0
            self.init(stubWithContentType: contentType, length: length, digest: digest, revpos: revpos)
        } else {
            throw DocStoreError(.invalidAttachment, "Attachment \"\(name)\" has neither data nor stub")
        }
    }
}
