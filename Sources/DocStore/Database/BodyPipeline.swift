import Crypto

/// A document body checked and encoded ahead of the writer.
struct PreparedBody: Sendable {
    /// Why the body cannot be stored (a reserved `_` member), found while preparing.
    var error: DocStoreError?
    /// The stored form of the body; `nil` for a document with attachments, whose stubs the writer
    /// must check against the database.
    var bytes: [UInt8]?
    /// The revision digest for a new edit whose parent is ``assumedParent`` — the revision the
    /// document carries, or none. The writer uses it when the parent it decides is that one.
    var digest: Insecure.MD5Digest?
    var assumedParent: RevisionID?
}

/// Checks and encodes the bodies of a large batch on another thread while the writer stores the
/// documents before them, so that a bulk save keeps two cores busy: one with JSON and MD5, one with
/// SQLite.
///
/// Chunks of ``chunkSize`` documents are prepared at most ``lookahead`` chunks ahead of the one the
/// writer is storing, which bounds the extra memory to a few hundred encoded bodies.
final class BodyPipeline {
    static let chunkSize = 128
    static let lookahead = 3

    private let documents: [Document]
    private let newEdits: Bool
    private var pending: [Int: BackgroundWork<[PreparedBody]>] = [:]
    private var nextChunkToStart = 0
    private var current: (chunk: Int, bodies: [PreparedBody]) = (-1, [])

    /// Starts preparing the first chunks of `documents`; `newEdits` says whether the writer makes new
    /// revisions (and so needs their digests) or stores replicated ones.
    init(_ documents: [Document], newEdits: Bool) {
        self.documents = documents
        self.newEdits = newEdits
        startChunks(through: BodyPipeline.lookahead)
    }

    /// Whether a batch is large enough for the pipeline to pay for its thread hand-offs.
    static func isWorthwhile(for count: Int) -> Bool {
        count >= 2 * chunkSize
    }

    private var chunkCount: Int { (documents.count + BodyPipeline.chunkSize - 1) / BodyPipeline.chunkSize }

    private func startChunks(through last: Int) {
        while nextChunkToStart <= min(last, chunkCount - 1) {
            let range = nextChunkToStart * BodyPipeline.chunkSize..<min(documents.count, (nextChunkToStart + 1) * BodyPipeline.chunkSize)
            pending[nextChunkToStart] = BackgroundWork { [documents, newEdits] in
                range.map { BodyPipeline.prepare(documents[$0], newEdits: newEdits) }
            }
            nextChunkToStart += 1
        }
    }

    /// The prepared body of `documents[position]`; waits for its chunk if it is not ready yet.
    /// Positions must be asked for in increasing order.
    func body(at position: Int) throws -> PreparedBody {
        let chunk = position / BodyPipeline.chunkSize
        if current.chunk != chunk {
            startChunks(through: chunk + BodyPipeline.lookahead)
            guard let work = pending.removeValue(forKey: chunk) else {
                preconditionFailure("BodyPipeline: chunk \(chunk) asked for out of order")
            }
            current = (chunk, try work.wait())
        }
        return current.bodies[position - chunk * BodyPipeline.chunkSize]
    }

    /// Waits for the chunks still being prepared, so that no work of this batch outlives it.
    func finish() {
        for work in pending.values { _ = try? work.wait() }
        pending = [:]
    }

    /// What the writer would compute first for `document`: the body check, the stored bytes and,
    /// for a new edit, the digest under the parent the document names.
    static func prepare(_ document: Document, newEdits: Bool) -> PreparedBody {
        var prepared = PreparedBody()
        do {
            try DocumentValidation.validateBody(document.body)
        } catch let error as DocStoreError {
            prepared.error = error
            return prepared
        } catch {
            preconditionFailure("validateBody throws only DocStoreError")
        }
        guard document.attachments.isEmpty else { return prepared }
        var writer = JSONWriter(capacity: 1024)
        do {
            try writer.writeObject(document.body)
        } catch {
            // The writer encodes it again and reports the error in its place.
            return prepared
        }
        prepared.bytes = writer.bytes
        if newEdits {
            prepared.assumedParent = document.revision
            prepared.digest = RevisionHash.digest(parent: document.revision, isDeleted: document.isDeleted, storedBody: writer.bytes)
        }
        return prepared
    }
}
