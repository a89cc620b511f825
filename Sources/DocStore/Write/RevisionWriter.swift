import Crypto
import Foundation

/// What the writer does with each document of a write, inside its transaction: the edit decision
/// (``EditDecision``) or the merge of a replicated history, the stored body (``StoredBody``), the new
/// revision's id (``RevisionHash``), stemming, attachment contents and references, and the rows of
/// `docs`, `revs` and `changes` through ``DocumentRecords``. Made by ``DatabaseWriter`` for one
/// transaction; the sequences it takes go back to the writer with ``lastSequence``.
struct RevisionWriter {
    let records: DocumentRecords
    /// The writer whose transaction this is: a streamed-in content must have been staged by it.
    let owner: DatabaseWriter
    /// The sequence of the latest write, advanced by each stored revision.
    var lastSequence: Int64
    let revisionsLimit: Int
    let keepsAncestorBodies: Bool
    /// The time of the transaction, for `created` and `updated`.
    let now: Double
    let source: DocumentChange.Source
    /// The documents to which a replicated revision added a conflict (a second live leaf), in order:
    /// those a property-history merge may resolve.
    var conflicted: [String] = []
    /// The database's validator (CouchDB's `validate_doc_update`) and the design documents it runs.
    let validation: WriteValidation

    /// A local edit: the new revision is a child of the given (leaf) revision.
    mutating func applyEdit(_ input: Document, prepared: PreparedBody?, policy: WritePolicy) throws -> (Document, DocumentChange?) {
        var document = input
        if !document.hasID { document.id = Document.idFactory() }
        try DocumentValidation.validateID(document.id, allowDesign: true)
        let prepared = try prepare(&document, prepared, replicated: false)
        try validateBody(of: document, prepared: prepared)
        let existing = try records.fetch(id: document.id)
        var tree = existing?.tree ?? RevisionTree()
        let parent = try EditDecision.parent(
            stored: existing.map { EditDecision.Stored(tree: $0.tree, winner: $0.winner, isDeleted: $0.isDeleted) },
            named: document.revision, policy: policy, isDeletion: document.isDeleted)
        // As CouchDB: a document made again after its deletion, without naming a revision, is new to
        // validation functions (no old document).
        let recreated = document.revision == nil && (existing?.isDeleted ?? false)
        try validate(document, replacing: recreated ? nil : parent, of: existing, replicated: false)
        let generation = (parent?.generation ?? 0) + 1
        let (body, contents) = try prepared?.bytes.map { ($0, []) }
            ?? StoredBody.encode(&document, generation: generation, newEdits: true) {
                // Stubs name attachments of the revision this edit replaces.
                guard let parent, let existing else { return [:] }
                return try storedAttachments(of: parent, in: existing) ?? [:]
            }
        let digest = prepared?.revisionDigest(parent: parent, of: document)
            ?? RevisionHash.digest(parent: parent, isDeleted: document.isDeleted, body: document.body, attachments: document.attachments)
        let revision = RevisionID(generation: generation, digest16: digest)
        if let parent, !tree.contains(parent) {
            // A new document naming the revision it descends from (``EditDecision``): an ancestor the
            // database never had.
            try tree.merge(history: [revision, parent], isDeleted: document.isDeleted)
        } else {
            tree.addRevision(revision, parent: parent, isDeleted: document.isDeleted)
        }
        document.revision = revision
        document.revisionHistory = nil
        document.conflicts = []
        try store(&document, existing: existing, tree: &tree, body: body, contents: contents)
        return (document, DocumentChange(id: document.id, revision: revision, sequence: document.sequence!,
                                         isDeleted: document.isDeleted, source: source))
    }

    /// A replicated revision (`new_edits=false`): merged into the tree with its history; a revision
    /// the tree already has is accepted and changes nothing.
    mutating func applyReplicated(_ input: Document, prepared: PreparedBody?) throws -> (Document, DocumentChange?) {
        var document = input
        guard document.hasID else { throw DocStoreError(.invalidDocumentID, "Document id is required") }
        try DocumentValidation.validateID(document.id, allowDesign: true)
        guard let revision = document.revision else {
            throw DocStoreError(.invalidRevision, "A replicated document needs its _rev")
        }
        let prepared = try prepare(&document, prepared, replicated: true)
        try validateBody(of: document, prepared: prepared)
        let existing = try records.fetch(id: document.id)
        var tree = existing?.tree ?? RevisionTree()
        let history = [revision] + (document.revisionHistory ?? [])
        guard try tree.merge(history: history, isDeleted: document.isDeleted) else {
            return (document, nil)
        }
        let ancestry = document.revisionHistory ?? []
        try validate(document, replacing: ancestry.first { existing?.tree.contains($0) ?? false }, of: existing, replicated: true)
        let (body, contents) = try prepared?.bytes.map { ($0, []) }
            ?? StoredBody.encode(&document, generation: revision.generation, newEdits: false) {
                // Stubs name attachments of the nearest ancestor, in the revision's history, whose body
                // this database holds (CouchDB's rule for replicated writes).
                guard let existing else { return [:] }
                for ancestor in ancestry where existing.tree.contains(ancestor) {
                    if let attachments = try storedAttachments(of: ancestor, in: existing) {
                        return attachments
                    }
                }
                return [:]
            }
        try store(&document, existing: existing, tree: &tree, body: body, contents: contents)
        if !document.isDeleted && tree.leaves.lazy.filter({ !$0.isDeleted }).count > 1 { conflicted.append(document.id) }
        return (document, DocumentChange(id: document.id, revision: revision, sequence: document.sequence!,
                                         isDeleted: document.isDeleted, source: source))
    }

    /// Merges a conflict between revisions that all carry a property history (``PropertyHistory``):
    /// writes the merged body as a child of the winner (unless it is the winner's body already) and
    /// a tombstone on every other live leaf. Both depend only on the conflicting revisions, so every
    /// database that merges the same conflict writes the same revisions. Does nothing without a
    /// conflict, or when a live leaf has no history or no body.
    mutating func mergePropertyHistories(id: String) throws -> [DocumentChange] {
        guard let record = try records.fetch(id: id), !record.isDeleted else { return [] }
        let others = record.tree.leaves.filter { !$0.isDeleted && $0.revision != record.winner }.map(\.revision)
        guard !others.isEmpty else { return [] }
        let winner = try Database.makeDocument(id: id, revision: record.winner, isDeleted: false, body: record.body,
                                               record: record)
        var bodies = [winner.body]
        for revision in others {
            guard let stored = try records.revisionBody(id: id, revision: revision) else { return [] }
            bodies.append(try Database.makeDocument(id: id, revision: revision, isDeleted: false, body: stored.body,
                                                    record: record).body)
        }
        guard let merged = PropertyHistory.merged(bodies) else { return [] }
        var changes: [DocumentChange] = []
        for (revision, body) in zip(others, bodies.dropFirst()) {
            // The tombstone keeps the leaf's channels (as `Database.delete` does), so that
            // channel-limited readers see the branch close; a function of the leaf, like the rest.
            var tombstone = Document(id: id, revision: revision)
            if let channels = body["channels"] { tombstone["channels"] = channels }
            tombstone.isDeleted = true
            if let change = try applyEdit(tombstone, prepared: nil, policy: .put).1 { changes.append(change) }
        }
        if merged != winner.body {
            var edit = winner
            edit.body = merged
            if let change = try applyEdit(edit, prepared: nil, policy: .put).1 { changes.append(change) }
        }
        return changes
    }

    /// Runs the database's preparer (CouchDB's `before_doc_update`) on `document`; the body prepared
    /// ahead no longer holds for a document it changed.
    private func prepare(_ document: inout Document, _ prepared: PreparedBody?, replicated: Bool) throws -> PreparedBody? {
        guard let preparer = validation.preparer, try preparer(&document, replicated, WriteContext.current) else {
            return prepared
        }
        return nil
    }

    /// Asks the database's validator whether `document` may replace revision `old` of `existing`.
    /// Without a validator, or without a design document that validates, it costs nothing. A design
    /// document is always shown to the validator (which may check that its functions compile), and
    /// makes the validating design documents be read again.
    private func validate(_ document: Document, replacing old: RevisionID?, of existing: DocumentRecord?,
                          replicated: Bool) throws {
        let isDesign = document.id.hasPrefix("_design/")
        if isDesign { validation.designDocumentWritten() }
        guard let validator = validation.validator else { return }
        let designs = isDesign ? [] : try validation.designDocuments { try records.validatingDesignDocuments() }
        guard isDesign || !designs.isEmpty else { return }
        var oldDocument: Document? = nil
        if let old, let existing {
            if old == existing.winner {
                oldDocument = try Database.makeDocument(id: existing.id, revision: old, isDeleted: existing.isDeleted,
                                                        body: existing.body, record: existing)
            } else if let stored = try records.revisionBody(id: existing.id, revision: old) {
                oldDocument = try Database.makeDocument(id: existing.id, revision: old, isDeleted: stored.isDeleted,
                                                        body: stored.body, record: existing)
            }
        }
        try validator(ValidatedWrite(newDocument: document, oldDocument: oldDocument, isReplicated: replicated,
                                     context: WriteContext.current, validatingDesignDocuments: designs))
    }

    /// Checks the body's members, or takes the pipeline's verdict on them.
    private func validateBody(of document: Document, prepared: PreparedBody?) throws {
        if let prepared {
            if let error = prepared.error { throw error }
        } else {
            try DocumentValidation.validateBody(document.body)
        }
    }

    /// The attachments of a stored revision of `existing`, or `nil` if its body is not stored.
    private func storedAttachments(of revision: RevisionID, in existing: DocumentRecord) throws -> Attachments? {
        let body: [UInt8]
        if revision == existing.winner {
            body = existing.body
        } else if let stored = try records.revisionBody(id: existing.id, revision: revision) {
            body = stored.body
        } else {
            return nil
        }
        guard StoredBody.mayHaveAttachmentStubs(body) else { return [:] }
        return try Database.makeDocument(id: existing.id, revision: revision, isDeleted: false, body: body,
                                         record: existing).attachments
    }

    /// Keeps an attachment's content: stores bytes in memory or copies a file (unless the database
    /// has that content), or adopts a content streamed in by an ``AttachmentWriter``.
    private func storeContent(of attachment: Attachment, records: AttachmentRecords) throws {
        switch attachment.content {
        case .none:
            break
        case .bytes(let bytes):
            try bytes.withUnsafeBytes {
                try records.insert(digest: attachment.digest, encoding: attachment.encoding, length: attachment.length, bytes: $0)
            }
        case .file(let url):
            try records.insertChunked(digest: attachment.digest, encoding: attachment.encoding, length: attachment.length,
                                      storedLength: attachment.encodedLength) { append in
                var md5 = Insecure.MD5()
                let length = try Attachment.readChunks(of: url) { chunk in
                    md5.update(bufferPointer: chunk)
                    try append(chunk)
                }
                guard length == attachment.encodedLength, Attachment.digest(md5.finalize()) == attachment.digest else {
                    throw DocStoreError(.io, "The attachment file \(url.path) changed after the attachment was made")
                }
            }
        case .staged(let staged):
            guard staged.writer === owner else {
                throw DocStoreError(.invalidAttachment, "The attachment was streamed into another database")
            }
            try records.adopt(staged)
        case .stored(let source):
            guard source.writer !== owner else { return }
            let content = try source.attachmentContent(attachment, encoded: true)
            try records.insertChunked(digest: attachment.digest, encoding: attachment.encoding, length: attachment.length,
                                      storedLength: attachment.encodedLength) { append in
                // The source's chunks, read one at a time on this thread, from another file.
                let reader = content.makeAsyncIterator().reader
                while let piece = try reader.next() { try piece.withUnsafeBytes { try append($0) } }
            }
        }
    }

    /// Writes a revision whose place in `tree` is already decided: stems the tree, stores attachment
    /// contents and references, keeps the winner's body in `docs` and the others in `revs`, and moves
    /// the document to a new sequence.
    private mutating func store(_ document: inout Document, existing: DocumentRecord?, tree: inout RevisionTree,
                                body: [UInt8], contents: [Attachment]) throws {
        let id = document.id
        let revision = document.revision!
        for removed in tree.stem(limit: revisionsLimit) {
            try records.dropRevision(id: id, revision: removed)
        }
        if !contents.isEmpty {
            let attachmentRecords = AttachmentRecords(connection: records.connection)
            for attachment in contents { try storeContent(of: attachment, records: attachmentRecords) }
        }
        for attachment in document.attachments.values {
            try records.addAttachmentReference(id: id, revision: revision, digest: attachment.digest)
        }
        guard let winner = tree.winner else { throw DocStoreError(.storage, "Empty revision tree for \(id)") }
        var winnerBody = body
        if let existing {
            // Leaves that this revision turned into ancestors lose their body unless ancestors keep theirs.
            var formerLeaves: [RevisionID] = []
            if !keepsAncestorBodies {
                for leaf in existing.tree.leaves where tree.contains(leaf.revision) && !tree.isLeaf(leaf.revision) {
                    formerLeaves.append(leaf.revision)
                    if leaf.revision == existing.winner {
                        // The winner's body lives in `docs` only, never in `revs`; it has attachment
                        // references only if its body has stubs.
                        if StoredBody.mayHaveAttachmentStubs(existing.body) {
                            try records.dropAttachmentReferences(id: id, revision: leaf.revision)
                        }
                    } else {
                        try records.dropRevision(id: id, revision: leaf.revision)
                    }
                }
            }
            if winner.revision == existing.winner {
                try records.storeRevisionBody(id: id, revision: revision, isDeleted: document.isDeleted, body: body)
                winnerBody = existing.body
            } else {
                if tree.contains(existing.winner) && !formerLeaves.contains(existing.winner) {
                    try records.storeRevisionBody(id: id, revision: existing.winner, isDeleted: existing.isDeleted,
                                                  body: existing.body)
                }
                if winner.revision != revision {
                    guard let stored = try records.revisionBody(id: id, revision: winner.revision) else {
                        throw DocStoreError(.storage, "Missing body of leaf revision \(winner.revision) of \(id)")
                    }
                    winnerBody = stored.body
                    try records.removeRevisionBody(id: id, revision: winner.revision)
                    try records.storeRevisionBody(id: id, revision: revision, isDeleted: document.isDeleted, body: body)
                }
            }
        }
        lastSequence += 1
        let record = DocumentRecord(row: existing?.row ?? lastSequence, sequence: lastSequence, id: id,
                                    winner: winner.revision, isDeleted: winner.isDeleted,
                                    body: winnerBody, tree: tree, created: existing?.created ?? now, updated: now)
        try records.write(record, replacing: existing)
        document.sequence = lastSequence
        document.createDate = Date(timeIntervalSince1970: record.created)
        document.lastChange = Date(timeIntervalSince1970: now)
    }
}
