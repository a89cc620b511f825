import Crypto

/// A document body checked and encoded ahead of the writer.
struct PreparedBody: Sendable {
    /// Why the body cannot be stored (a reserved `_` member), found while preparing.
    var error: DocStoreError?
    /// The stored form of the body; `nil` for a document with attachments, whose stubs the writer
    /// must check against the database.
    var bytes: [UInt8]?
    /// For a new edit, the revision digest under the parent the document names (none, for a new
    /// document): the writer's parent in all but conflicts and recreations of deleted documents.
    private var digest: (parent: RevisionID?, isDeleted: Bool, value: Insecure.MD5Digest)?

    /// The digest of a new revision of `parent` with `document`'s body: the one computed ahead when the
    /// writer decided the parent that was assumed, else computed now.
    func revisionDigest(parent: RevisionID?, of document: Document) -> Insecure.MD5Digest {
        if let digest, digest.parent == parent, digest.isDeleted == document.isDeleted { return digest.value }
        return RevisionHash.digest(parent: parent, isDeleted: document.isDeleted, body: document.body, attachments: document.attachments)
    }

    /// What the writer would compute first for `document`: the body check, the stored bytes and,
    /// for a new edit, the digest under the parent the document names.
    init(_ document: Document, newEdits: Bool) {
        do {
            try DocumentValidation.validateBody(document.body)
        } catch let error as DocStoreError {
            self.error = error
            return
        } catch {
            preconditionFailure("validateBody throws only DocStoreError")
        }
        guard document.attachments.isEmpty else { return }
        var writer = JSONWriter(capacity: 1024)
        // On failure the writer encodes it again and reports the error in its place.
        guard (try? writer.writeObject(document.body)) != nil else { return }
        bytes = writer.bytes
        if newEdits {
            digest = (document.revision, document.isDeleted,
                      RevisionHash.digest(parent: document.revision, isDeleted: document.isDeleted, body: document.body, attachments: [:]))
        }
    }
}

/// Checks and encodes the bodies of a large batch on a helper thread (``HelpedMap``) while the writer
/// stores the documents before them, so that a bulk save keeps two cores busy: one with JSON and MD5,
/// one with SQLite.
///
/// Chunks of ``chunkSize`` documents are submitted at most ``lookahead`` chunks ahead of the one the
/// writer is storing, which bounds the extra memory to a few hundred encoded bodies.
final class BodyPipeline {
    static let chunkSize = 128
    static let lookahead = 3

    private let documents: [Document]
    private let map: HelpedMap<Range<Int>, [PreparedBody]>
    private var current: (chunk: Int, bodies: [PreparedBody]) = (-1, [])

    /// Starts preparing the first chunks of `documents`; `newEdits` says whether the writer makes new
    /// revisions (and so needs their digests) or stores replicated ones.
    init(_ documents: [Document], newEdits: Bool) {
        self.documents = documents
        map = HelpedMap(.bodyEncoding) { [documents] range in range.map { PreparedBody(documents[$0], newEdits: newEdits) } }
        submitChunks(through: BodyPipeline.lookahead)
    }

    /// Whether a batch is large enough for the pipeline to pay for its thread hand-offs.
    static func isWorthwhile(for count: Int) -> Bool {
        count >= 2 * chunkSize
    }

    private var chunkCount: Int { (documents.count + BodyPipeline.chunkSize - 1) / BodyPipeline.chunkSize }

    private func submitChunks(through last: Int) {
        while map.submitted <= min(last, chunkCount - 1) {
            let chunk = map.submitted
            map.submit(chunk * BodyPipeline.chunkSize..<min(documents.count, (chunk + 1) * BodyPipeline.chunkSize))
        }
    }

    /// The prepared body of `documents[position]`; prepares its chunk here if the helper has not
    /// started it. Positions must be asked for in increasing order.
    func body(at position: Int) throws -> PreparedBody {
        let chunk = position / BodyPipeline.chunkSize
        if current.chunk != chunk {
            submitChunks(through: chunk + BodyPipeline.lookahead)
            current = (chunk, try map.output(at: chunk))
        }
        return current.bodies[position - chunk * BodyPipeline.chunkSize]
    }

    /// Stops the helper, so that no work of this batch outlives it.
    func finish() {
        map.stop()
    }
}
