import DocStore

/// A document as it travels with its attachments: its JSON, and the attachments whose bytes follow
/// it as parts of their own (`"follows": true`) in a `multipart/related` body — a `PUT
/// /db/id?new_edits=false` from the replicator, `GET /db/id` with `attachments=true`, and each
/// document of a multipart `open_revs` or `_bulk_get` answer.
///
/// This type builds the JSON half; ``DocStore/MultipartBody/appendRelated(json:following:boundary:)``
/// frames the parts, and ``DocStore/MultipartDocumentReader`` reads such a body back, streaming each
/// part into the database (both live in DocStore because the store reads and writes attachment bytes).
package struct MultipartDocument: Sendable {
    /// The document's JSON with its `_attachments`.
    package var json: JSON
    /// The attachments whose stored bytes follow the JSON, in the order of `_attachments`.
    package var following: [(name: String, attachment: Attachment)] = []

    /// How one attachment is written.
    package enum AttachmentForm {
        /// Metadata only: the receiver has the bytes.
        case stub
        /// The stored bytes follow as a part of their own.
        case follows
        /// The decoded bytes inline in base64; the attachment given carries them.
        case inline(Attachment)
    }

    /// A document without attachment bytes to send.
    package init(json: JSON) { self.json = json }

    /// `document`'s JSON in CouchDB's member order: `_id`, `_rev`, the body, `_deleted`, `_revisions`
    /// (with `revisions`), then `members` (`_revs_info`, `_conflicts`, …), then `_attachments` in the document's order,
    /// each in the form `form` chooses.
    /// - Parameter encodingInfo: `encoding` and `encoded_length` in stubs and inline members (always in
    ///   following ones, whose parts carry the stored bytes).
    package init(_ document: Document, revisions: Bool, members: JSONObject = [:], encodingInfo: Bool,
                 form: (Attachment) throws -> AttachmentForm) rethrows {
        var bare = document
        bare.attachments = [:]
        guard case .object(var object) = bare.json(revisions: revisions) else {
            self.init(json: bare.json())
            return
        }
        for (key, value) in members { object[key] = value }
        var following: [(name: String, attachment: Attachment)] = []
        if !document.attachments.isEmpty {
            var attachments = JSONObject()
            for name in document.attachments.keys {
                let attachment = document.attachments[name]!
                switch try form(attachment) {
                case .stub:
                    attachments[name] = attachment.json(.stub, encodingInfo: encodingInfo)
                case .follows:
                    attachments[name] = attachment.json(.follows, encodingInfo: true)
                    following.append((name, attachment))
                case .inline(let loaded):
                    attachments[name] = loaded.json(.inline, encodingInfo: encodingInfo)
                }
            }
            object["_attachments"] = .object(attachments)
        }
        self.init(json: .object(object))
        self.following = following
    }

    /// Appends this document as a `multipart/related` body: the JSON, then each following attachment.
    package func appendRelated(to body: inout MultipartBody, boundary: String) {
        body.appendRelated(json: (try? json.serialized()) ?? [], following: following, boundary: boundary)
    }
}
