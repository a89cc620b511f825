import Foundation

/// The stored form of a revision body, as `docs.body` and `revs.body` hold it and as its revision is
/// hashed from: the body members in their order, then `_attachments` as stubs with their encoding.
enum StoredBody {
    /// Encodes `document`'s body. Each stub is resolved by name — and by `revpos`, when it has one — against the
    /// attachments that `previous` returns, as CouchDB merges stubs; attachments with content get their
    /// `revpos` (this generation for an edit, as given or 0 for a replicated revision) and are returned
    /// for the writer to keep.
    /// - Throws: ``DocStoreError/Code/missingStub`` for a stub that names no such attachment.
    static func encode(_ document: inout Document, generation: Int, newEdits: Bool,
                       previous: () throws -> [String: Attachment]) throws -> (body: [UInt8], contents: [Attachment]) {
        var writer = JSONWriter(capacity: 1024)
        guard !document.attachments.isEmpty else {
            try writer.writeObject(document.body)
            return (writer.bytes, [])
        }
        var stubs = JSONObject()
        var contents: [Attachment] = []
        var previousAttachments: [String: Attachment]?
        for name in document.attachments.keys.sorted() {
            var attachment = document.attachments[name]!
            if attachment.isStub {
                if previousAttachments == nil { previousAttachments = try previous() }
                guard let stored = previousAttachments![name], attachment.revpos == nil || attachment.revpos == stored.revpos else {
                    throw DocStoreError(.missingStub, "Invalid attachment stub in \(document.id) for \(name)")
                }
                attachment = stored
            } else {
                if newEdits {
                    attachment.revpos = generation
                } else if attachment.revpos == nil {
                    attachment.revpos = 0
                }
                contents.append(attachment)
                attachment = attachment.stub
            }
            document.attachments[name] = attachment
            stubs[name] = attachment.json(.stub, encodingInfo: true)
        }
        try writer.writeObject(document.body, appending: [("_attachments", .object(stubs))])
        return (writer.bytes, contents)
    }

    /// Whether a stored body may have an `_attachments` member: false only when the bytes
    /// `"_attachments":` — a key, as a string value would have its quotes escaped — appear nowhere.
    static func mayHaveAttachmentStubs(_ body: [UInt8]) -> Bool {
        let key: StaticString = #""_attachments":"#
        let keyCount = key.utf8CodeUnitCount
        return body.withUnsafeBufferPointer { bytes in
            guard let base = bytes.baseAddress, bytes.count >= keyCount else { return false }
            for offset in 0...(bytes.count - keyCount)
            where base[offset] == UInt8(ascii: "\"") && base[offset + 1] == UInt8(ascii: "_")
                && memcmp(base + offset, key.utf8Start, keyCount) == 0 {
                return true
            }
            return false
        }
    }
}
