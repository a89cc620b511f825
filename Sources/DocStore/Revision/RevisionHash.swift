import Crypto

/// How DocStore names a new revision: generation `parent + 1`, and as digest the MD5 of the parent
/// revision's text, the deletion flag and the stored body — so two peers making the identical edit
/// produce the identical revision, and CouchDB's replicator sees one revision, not a conflict.
enum RevisionHash {
    static func digest(parent: RevisionID?, isDeleted: Bool, storedBody body: [UInt8]) -> Insecure.MD5Digest {
        var md5 = Insecure.MD5()
        if let parent {
            var text = parent.description
            text.withUTF8 { md5.update(bufferPointer: UnsafeRawBufferPointer($0)) }
        }
        withUnsafeBytes(of: (UInt8(0), UInt8(isDeleted ? 1 : 0))) { md5.update(bufferPointer: $0) }
        body.withUnsafeBytes { md5.update(bufferPointer: $0) }
        return md5.finalize()
    }

    /// The revision a new edit of `parent` gets.
    static func revision(parent: RevisionID?, isDeleted: Bool, storedBody body: [UInt8]) -> RevisionID {
        RevisionID(generation: (parent?.generation ?? 0) + 1, digest16: digest(parent: parent, isDeleted: isDeleted, storedBody: body))
    }
}
