import Foundation

/// The stored form of a revision body, as `docs.body` and `revs.body` hold it and as its revision is
/// hashed from: the body members in their order, then `_attachments` as stubs with their encoding.
enum StoredBody {
    /// Encodes `document`'s body. Each stub is resolved by name — and by `revpos`, when it has one — against the
    /// attachments that `previous` returns, as CouchDB merges stubs; attachments with content get their
    /// `revpos` (this generation for an edit, as given or 0 for a replicated revision) and are returned
    /// for the writer to keep.
    /// - Throws: ``DocStoreError/Code/missingStub`` for a stub that names no such attachment,
    ///   ``DocStoreError/Code/invalidAttachment`` for a name starting with `_`.
    static func encode(_ document: inout Document, generation: Int, newEdits: Bool,
                       previous: () throws -> Attachments) throws -> (body: [UInt8], contents: [Attachment]) {
        var writer = JSONWriter(capacity: 1024)
        guard !document.attachments.isEmpty else {
            try writer.writeObject(document.body)
            return (writer.bytes, [])
        }
        var stubs = JSONObject()
        var contents: [Attachment] = []
        var previousAttachments: Attachments?
        for name in document.attachments.keys {
            // CouchDB reserves names starting with `_`, on every write path.
            try Attachment.checkName(name)
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
        body.withUnsafeBytes { mayHaveAttachmentStubs($0) }
    }

    static func mayHaveAttachmentStubs(_ body: UnsafeRawBufferPointer) -> Bool {
        let key: StaticString = #""_attachments":"#
        let keyCount = key.utf8CodeUnitCount
        let bytes = body.bindMemory(to: UInt8.self)
        guard let base = bytes.baseAddress, bytes.count >= keyCount else { return false }
        // memchr finds each underscore (rare in bodies) at memory speed; only those after a quote compare.
        var offset = 1
        let last = bytes.count - keyCount + 1
        while offset <= last, let hit = memchr(base + offset, Int32(UInt8(ascii: "_")), last - offset + 1) {
            let at = base.distance(to: hit.assumingMemoryBound(to: UInt8.self))
            if base[at - 1] == UInt8(ascii: "\""), memcmp(base + at - 1, key.utf8Start, keyCount) == 0 { return true }
            offset = at + 1
        }
        return false
    }
}
