import Foundation

/// The outcome of one document in a bulk write, like one row of CouchDB's `_bulk_docs` answer.
public struct SaveResult: Sendable {
    /// The document id (empty if the document had none and failed before one was generated).
    public let id: String
    /// The saved document, or why it was not saved.
    public let result: Result<Document, DocStoreError>

    /// The new revision, when saved.
    public var revision: RevisionID? { try? result.get().revision }
    /// The error, when not saved.
    public var error: DocStoreError? {
        if case .failure(let error) = result { return error }
        return nil
    }
    /// Whether the document was saved.
    public var isSuccess: Bool { error == nil }
}

extension Database {
    // MARK: Writing

    /// Saves a document: creates it, or updates it if it exists.
    ///
    /// A document that carries a revision (``Document/revision``, as read) updates that revision, and
    /// fails with a conflict if it is no longer a current leaf — someone else saved in between. A
    /// document without a revision whose id exists updates the current revision (the last writer
    /// wins); without an id it gets one from ``Document/idFactory``. ``add(_:)-(Document)`` and
    /// ``update(_:)-(Document)`` are the strict forms.
    ///
    /// - Returns: the saved document with its new revision, sequence and attachment stubs.
    /// - Throws: ``DocStoreError`` — ``DocStoreError/Code/conflict`` if the revision is not a current
    ///   leaf, ``DocStoreError/Code/invalidDocumentID``,
    ///   ``DocStoreError/Code/invalidDocument`` for reserved `_` body members,
    ///   ``DocStoreError/Code/invalidJSON`` for NaN or infinite numbers,
    ///   ``DocStoreError/Code/invalidAttachment`` for a stub of unknown content.
    @discardableResult
    public func save(_ document: Document) async throws -> Document {
        try await writeOne(document, policy: .upsert)
    }

    /// Creates or updates a document as CouchDB's `PUT /{db}/{id}` does (DocServer's write): an update
    /// must carry the revision it was read at, and an existing document saved without one is a
    /// ``DocStoreError/Code/conflict`` (where ``save(_:)-(Document)`` would update the current revision).
    @discardableResult
    package func put(_ document: Document) async throws -> Document {
        try await writeOne(document, policy: .put)
    }

    /// Creates a document; fails with ``DocStoreError/Code/conflict`` if a live document has its id
    /// (a deleted one is recreated).
    @discardableResult
    public func add(_ document: Document) async throws -> Document {
        try await writeOne(document, policy: .add)
    }

    /// Updates an existing document: at the revision it carries (a conflict if that is no longer a
    /// current leaf), or without one the current revision, as ``save(_:)-(Document)``; fails with
    /// ``DocStoreError/Code/notFound`` if there is no live document with its id.
    @discardableResult
    public func update(_ document: Document) async throws -> Document {
        try await writeOne(document, policy: .update)
    }

    /// Deletes a document by writing a tombstone revision on top of the revision it carries.
    ///
    /// The tombstone stays in the changes feed so the deletion replicates. Deleting a conflicting leaf
    /// revision is how a conflict is resolved.
    /// - Returns: the revision of the tombstone, as every `delete` answers.
    /// - Throws: ``DocStoreError/Code/notFound`` if the document does not exist or is already
    ///   deleted; ``DocStoreError/Code/conflict`` if the revision is not a current leaf.
    @discardableResult
    public func delete(_ document: Document) async throws -> RevisionID {
        guard let revision = document.revision else {
            throw DocStoreError.conflict("Deleting needs the document's current revision")
        }
        return try await delete(id: document.id, revision: revision)
    }

    /// Deletes the document `id` at `revision`. The tombstone keeps the revision's `channels`, so that
    /// channel-limited readers and replications see the deletion.
    /// - Returns: the revision of the tombstone.
    @discardableResult
    public func delete(id: String, revision: RevisionID) async throws -> RevisionID {
        var tombstone = Document(id: id, revision: revision)
        if let channels = try await document(withID: id, revision: revision)?["channels"] {
            tombstone["channels"] = channels
        }
        tombstone.isDeleted = true
        return try await writeOne(tombstone, policy: .update).revision!
    }

    /// Deletes the document `id`, whatever its current revision: the last writer wins, as with
    /// ``save(_:)-(Document)``. Its conflicting revisions, if any, stay (delete them with
    /// ``delete(id:revision:)``).
    ///
    /// - Returns: the revision of the tombstone.
    /// - Throws: ``DocStoreError/Code/notFound`` if there is no live document `id`;
    ///   ``DocStoreError/Code/conflict`` if others keep saving it faster than it can be deleted.
    @discardableResult
    public func delete(documentWithID id: String) async throws -> RevisionID {
        // A save in between makes the revision read here a non-leaf: read again and retry (a document
        // edited faster than it can be read and deleted stays a conflict).
        for attempt in 1...100 {
            guard let current = try await document(withID: id), let revision = current.revision else {
                throw DocStoreError.notFound("missing")
            }
            do {
                return try await delete(id: id, revision: revision)
            } catch let error as DocStoreError where error.code == .conflict && attempt < 100 {
                continue
            }
        }
        throw DocStoreError.conflict()
    }

    /// Saves many documents in one transaction, all or nothing, each as ``save(_:)-(Document)``
    /// would: the first document that fails rolls the whole batch back and its error names it
    /// (``DocStoreError/itemIndex``, ``DocStoreError/documentID``). ``save(each:)`` reports each document
    /// on its own instead.
    ///
    /// Documents marked deleted (``Document/isDeleted``) are written as tombstones.
    /// - Returns: the saved documents with their new revisions, in order.
    /// - Complexity: one transaction; O(n) documents.
    @discardableResult
    public func save(_ documents: [Document]) async throws -> [Document] {
        try ensureOpen()
        return try await waitingForTheLock(of: writer) { try writer.writeAll(documents, policy: .upsert) }
    }

    /// Saves many documents in one transaction, each on its own as ``save(_:)-(Document)`` would, as
    /// CouchDB's `_bulk_docs` does: the documents that fail are reported in their results and the
    /// others are committed together.
    ///
    /// Documents marked deleted (``Document/isDeleted``) are written as tombstones.
    /// - Returns: one result per document, in order.
    /// - Throws: only for failures of the whole batch (storage errors, a closed database); then
    ///   nothing of the batch is written.
    /// - Complexity: one transaction; O(n) documents.
    public func save(each documents: [Document]) async throws -> [SaveResult] {
        try ensureOpen()
        return try await waitingForTheLock(of: writer) { try writer.write(documents, policy: .upsert, newEdits: true, source: .local) }
    }

    /// Writes many documents in one transaction as CouchDB's `_bulk_docs` does: each as
    /// ``put(_:)`` would, with its own result; the documents that do not fail are committed together.
    /// - Throws: only for failures of the whole batch; then nothing of the batch is written.
    package func put(each documents: [Document]) async throws -> [SaveResult] {
        try ensureOpen()
        return try await waitingForTheLock(of: writer) { try writer.write(documents, policy: .put, newEdits: true, source: .local) }
    }

    private func writeOne(_ document: Document, policy: WritePolicy) async throws -> Document {
        try ensureOpen()
        let results = try await waitingForTheLock(of: writer, pointWrite: DatabaseWriter.isPointWrite(document)) {
            try writer.write([document], policy: policy, newEdits: true, source: .local)
        }
        return try results[0].result.get()
    }

    // MARK: Reading

    /// The current (winning) revision of a document, or a given revision.
    ///
    /// - Parameters:
    ///   - id: the document id (compared as exact bytes).
    ///   - revision: a specific revision to read, which may be a conflict, an ancestor whose body has
    ///     not been compacted away, or a tombstone. `nil` reads the winner.
    ///   - includeConflicts: fill ``Document/conflicts`` with the other live leaf revisions.
    ///   - includeRevisionHistory: fill ``Document/revisionHistory`` (for replication).
    /// - Returns: the document, or `nil` if it does not exist, is deleted (when reading the winner) or
    ///   the revision's body is not available.
    public func document(withID id: String, revision: RevisionID? = nil, includeConflicts: Bool = false,
                         includeRevisionHistory: Bool = false) async throws -> Document? {
        if revision == nil && !includeConflicts && !includeRevisionHistory {
            return try await readPoint { connection in try DocumentRecords(connection: connection).fetchCurrentDocument(id: id) }
        }
        return try await readByKey(consistent: revision != nil) { connection in
            let records = DocumentRecords(connection: connection)
            guard let record = try records.fetch(id: id) else { return nil }
            var document: Document
            if let revision, revision != record.winner {
                guard let node = record.tree.index(of: revision).map({ record.tree.nodes[$0] }),
                    let stored = try records.revisionBody(id: id, revision: revision)
                else { return nil }
                document = try Database.makeDocument(id: id, revision: revision, isDeleted: node.isDeleted,
                                                     body: stored.body, record: record)
            } else {
                if revision == nil && record.isDeleted { return nil }
                document = try Database.makeDocument(id: id, revision: record.winner, isDeleted: record.isDeleted,
                                                     body: record.body, record: record)
            }
            if includeConflicts { document.conflicts = record.tree.conflicts }
            if includeRevisionHistory, let rev = document.revision {
                document.revisionHistory = Array(record.tree.history(of: rev).dropFirst())
            }
            return document
        }
    }

    /// Given revisions of documents, each with its revision history (``Document/revisionHistory``), read
    /// in one snapshot — what a replication source
    /// answers for the revisions a target is missing (CouchDB's `_bulk_get`). An entry is `nil` when
    /// the document, the revision or its body is not there.
    /// - Complexity: O(total size of the revisions' bodies and trees).
    package func documentsWithHistory(_ requests: [(id: String, revision: RevisionID)]) async throws -> [Document?] {
        let (documents, positions) = try await readRevisions(requests.map { ($0.id, $0.revision) }, latest: false)
        return positions.map { $0.isEmpty ? nil : documents[$0.lowerBound] }
    }

    /// For each request, the revision asked for (for `nil` every leaf, deleted ones too, as CouchDB's
    /// `open_revs=all`) with its revision history — or with `latest`, for a revision that is no longer
    /// a leaf, every leaf that descends from it, as CouchDB's `latest=true` — all read in one snapshot;
    /// several leaves come in CouchDB's order (``RevisionTree/leavesInWalkOrder``). An entry is empty
    /// when the document, the revision or its body is not there.
    /// - Complexity: O(total size of the revisions' bodies and trees).
    package func revisionsWithHistory(_ requests: [(id: String, revision: RevisionID?)], latest: Bool) async throws -> [[Document]] {
        let (documents, positions) = try await readRevisions(requests, latest: latest)
        return positions.map { Array(documents[$0]) }
    }

    /// The revisions of ``revisionsWithHistory(_:latest:)``, and for each request the range of them
    /// that answers it.
    private func readRevisions(_ requests: [(id: String, revision: RevisionID?)],
                               latest: Bool) async throws -> (documents: [Document], positions: [Range<Int>]) {
        try await readApart(consistent: true) { connection in
            let records = DocumentRecords(connection: connection)
            var stored: [StoredDocument] = []
            var histories: [[RevisionID]] = []
            var positions: [Range<Int>] = []
            for (id, requested) in requests {
                let first = stored.count
                defer { positions.append(first..<stored.count) }
                guard let record = try records.fetch(id: id) else { continue }
                var revisions = requested.map { [$0] } ?? record.tree.leavesInWalkOrder
                if latest, let requested, record.tree.contains(requested), !record.tree.isLeaf(requested) {
                    revisions = record.tree.leavesInWalkOrder.filter { record.tree.history(of: $0).contains(requested) }
                }
                for revision in revisions {
                    let body: [UInt8], isDeleted: Bool
                    if revision == record.winner {
                        (body, isDeleted) = (record.body, record.isDeleted)
                    } else {
                        guard let node = record.tree.index(of: revision).map({ record.tree.nodes[$0] }),
                            let found = try records.revisionBody(id: id, revision: revision) else { continue }
                        (body, isDeleted) = (found.body, node.isDeleted)
                    }
                    stored.append(StoredDocument(id: id, revision: revision, isDeleted: isDeleted, body: body,
                                                 sequence: record.sequence, created: record.created, updated: record.updated))
                    histories.append(Array(record.tree.history(of: revision).dropFirst()))
                }
            }
            var documents = try Database.makeDocuments(stored)
            for index in documents.indices { documents[index].revisionHistory = histories[index] }
            return (documents, positions)
        }
    }

    /// The current revision of the document `id`, or `nil` if there is none or it is deleted (as
    /// ``document(withID:revision:includeConflicts:includeRevisionHistory:)`` without options).
    public func fetchDocument(_ id: String) async throws -> Document? {
        try await document(withID: id)
    }

    /// The current revisions of the live documents among `ids`, by id; missing and deleted documents
    /// are left out. Reads one consistent snapshot (as ``documents(withIDs:)``, which keeps the order).
    ///
    /// Swift's `String` keys are compared by canonical equivalence: of two documents whose ids differ
    /// only in their Unicode normalization (two documents for CouchDB and DocStore), the dictionary
    /// keeps the first. ``documents(withIDs:)`` keeps both.
    public func fetchDocuments(_ ids: [String]) async throws -> [String: Document] {
        let found = try await documents(withIDs: ids)
        return Dictionary(found.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
    }

    /// The current revisions of the live documents among `ids`, in the order of `ids`; missing and
    /// deleted documents are simply absent. Reads one consistent snapshot.
    public func documents(withIDs ids: [String]) async throws -> [Document] {
        try await readApart(consistent: true) { connection in
            let records = DocumentRecords(connection: connection)
            var documents: [Document] = []
            documents.reserveCapacity(ids.count)
            // The current revision only: no revision tree to decode.
            for id in ids {
                if let document = try records.fetchCurrentDocument(id: id) { documents.append(document) }
            }
            return documents
        }
    }

    /// Builds the documents of `stored`, in order, on this thread: sharing the parsing with a helper
    /// thread measured slower here, as these lists are a
    /// replication batch or a `_bulk_get`, whose other work already keeps the second core busy.
    /// - Complexity: O(total body size).
    static func makeDocuments(_ stored: [StoredDocument]) throws -> [Document] {
        try stored.map { try $0.makeDocument() }
    }

    /// Builds a document from a stored body (body members plus `_attachments` stubs).
    static func makeDocument(id: String, revision: RevisionID, isDeleted: Bool, body: [UInt8],
                             record: DocumentRecord) throws -> Document {
        try makeDocument(id: id, revision: revision, isDeleted: isDeleted, body: body, sequence: record.sequence,
                         created: record.created, updated: record.updated)
    }

    /// Builds a document from a stored body already copied out of SQLite: a body without attachment
    /// stubs becomes the document's unparsed body as it is, without another copy.
    static func makeDocument(id: String, revision: RevisionID, isDeleted: Bool, body: [UInt8], sequence: Int64,
                             created: Double, updated: Double) throws -> Document {
        let (object, attachments) = try body.withUnsafeBytes { try storedObject(id: id, body: $0, unparsed: { body }) }
        return Document(id: id, body: object, attachments: attachments, revision: revision, isDeleted: isDeleted,
                        sequence: sequence, created: created, updated: updated)
    }

    /// Builds a document from stored body bytes (e.g. SQLite's own buffer): a body without attachment
    /// stubs is copied, to be parsed when first read (a member read alone is found by a scan).
    static func makeDocument(id: String, revision: RevisionID, isDeleted: Bool, body: UnsafeRawBufferPointer,
                             sequence: Int64, created: Double, updated: Double) throws -> Document {
        let (object, attachments) = try storedObject(id: id, body: body, unparsed: { Array(body) })
        return Document(id: id, body: object, attachments: attachments, revision: revision, isDeleted: isDeleted,
                        sequence: sequence, created: created, updated: updated)
    }

    /// A stored body's members and attachments: without attachment stubs, the object stays the bytes
    /// `unparsed` gives until a member is read (``JSONObject/init(storedJSON:)``); with them, it is
    /// parsed and the stubs taken out.
    private static func storedObject(id: String, body: UnsafeRawBufferPointer,
                                     unparsed: () -> [UInt8]) throws -> (JSONObject, Attachments) {
        guard StoredBody.mayHaveAttachmentStubs(body) else {
            guard body.first == UInt8(ascii: "{"), body.last == UInt8(ascii: "}") else {
                throw DocStoreError(.storage, "Stored body of \(id) is not an object")
            }
            return (JSONObject(storedJSON: unparsed()), [:])
        }
        let tree: JSON
        do {
            tree = try JSONParser.parse(body.bindMemory(to: UInt8.self))
        } catch {
            throw DocStoreError(.storage, "Stored body of \(id) is corrupt: \(error)")
        }
        guard case .object(var members) = tree else {
            throw DocStoreError(.storage, "Stored body of \(id) is not an object")
        }
        var attachments: Attachments = [:]
        // Only `_attachments` may start with "_" in a stored body; most bodies have no such key.
        if members.members.contains(where: { $0.key.utf8.first == UInt8(ascii: "_") }),
            case .object(let stubs)? = members.removeValue(forKey: "_attachments") {
            for (name, stub) in stubs { attachments[name] = try Attachment(name: name, json: stub) }
        }
        return (members, attachments)
    }

    // MARK: Codable

    /// A new document whose body is the JSON encoding of `value`, with dates in the database's
    /// ``DatabaseConfiguration/dateFormat``. An `_id` property of `value` becomes the id.
    public func makeDocument<T: Encodable>(from value: T, id: String? = nil) throws -> Document {
        try Document(id: id, from: value, dateFormat: configuration.dateFormat)
    }

    /// Decodes a document's body as `T`, reading dates in the database's ``DatabaseConfiguration/dateFormat``.
    public func decode<T: Decodable>(_ document: Document, as type: T.Type) throws -> T {
        try document.decode(as: type, dateFormat: configuration.dateFormat)
    }
}

/// A document's stored body and metadata, copied out of SQLite, to be parsed later or elsewhere.
struct StoredDocument: Sendable {

    var id: String
    var revision: RevisionID
    var isDeleted: Bool
    var body: [UInt8]
    var sequence: Int64
    var created: Double
    var updated: Double

    func makeDocument() throws -> Document {
        try Database.makeDocument(id: id, revision: revision, isDeleted: isDeleted, body: body, sequence: sequence,
                                  created: created, updated: updated)
    }
}

extension Document {
    /// A document read from the database, with its stored metadata.
    fileprivate init(id: String, body: JSONObject, attachments: Attachments, revision: RevisionID, isDeleted: Bool,
                     sequence: Int64, created: Double, updated: Double) {
        self.id = id
        hasID = true
        self.revision = revision
        self.body = body
        self.attachments = attachments
        self.isDeleted = isDeleted
        conflicts = []
        revisionHistory = nil
        self.sequence = sequence
        createDate = Date(timeIntervalSince1970: created)
        lastChange = Date(timeIntervalSince1970: updated)
    }
}
