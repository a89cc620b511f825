import CSQLite

/// One row of the `docs` table: a document's latest sequence, winning revision and its body, and the
/// whole revision tree.
struct DocumentRecord {
    var sequence: Int64
    var id: String
    var winner: RevisionID
    var isDeleted: Bool
    var body: [UInt8]
    var tree: RevisionTree
    var created: Double
    var updated: Double
}

/// The SQL of the document tables, over one connection. All values are bound with `?`.
struct DocumentRecords {
    let connection: SQLiteConnection

    static let selectColumns = "seq, id, rev, deleted, body, tree, created, updated"

    /// Reads a full record from a statement positioned on a row selected with ``selectColumns``.
    static func record(from statement: SQLiteStatement) throws -> DocumentRecord {
        let tree = try statement.withBlob(5) { try RevisionTree(decoding: $0) }
        guard let winner = statement.revision(2) else {
            throw DocStoreError(.storage, "Corrupt revision id in database")
        }
        return DocumentRecord(sequence: statement.int64(0), id: statement.text(1), winner: winner,
                              isDeleted: statement.int64(3) != 0, body: statement.blob(4), tree: tree,
                              created: statement.double(6), updated: statement.double(7))
    }

    func fetch(id: String) throws -> DocumentRecord? {
        let statement = try connection.prepare("SELECT \(DocumentRecords.selectColumns) FROM docs WHERE id = ?")
        try statement.bind(id, at: 1)
        guard try statement.step() else { return nil }
        return try DocumentRecords.record(from: statement)
    }

    /// The current revision of a live document, parsed straight from SQLite's buffer, without
    /// decoding the revision tree (the common read).
    func fetchCurrentDocument(id: String) throws -> Document? {
        let statement = try connection.prepare("SELECT seq, rev, body, created, updated FROM docs WHERE id = ? AND deleted = 0")
        defer { statement.reset() }
        try statement.bind(id, at: 1)
        guard try statement.step() else { return nil }
        guard let revision = statement.revision(1) else {
            throw DocStoreError(.storage, "Corrupt revision id in database")
        }
        return try statement.withBlob(2) { body in
            try Database.makeDocument(id: id, revision: revision, isDeleted: false, body: body, sequence: statement.int64(0),
                                      created: statement.double(3), updated: statement.double(4))
        }
    }

    /// Inserts a new row, or moves an existing one (`previousSequence`) to its new sequence.
    func write(_ record: DocumentRecord, replacing previousSequence: Int64?) throws {
        let statement: SQLiteStatement
        if let previousSequence {
            statement = try connection.prepare(
                "UPDATE docs SET seq = ?, rev = ?, deleted = ?, body = ?, tree = ?, updated = ? WHERE seq = ?")
            try statement.bind(previousSequence, at: 7)
            try statement.bind(record.sequence, at: 1)
            try statement.bind(record.winner, at: 2)
            try statement.bind(record.isDeleted ? 1 : 0, at: 3)
            try statement.bind(blob: record.body, at: 4)
            try statement.bind(blob: record.tree.encoded(), at: 5)
            try statement.bind(record.updated, at: 6)
        } else {
            statement = try connection.prepare(
                "INSERT INTO docs (seq, id, rev, deleted, body, tree, created, updated) VALUES (?, ?, ?, ?, ?, ?, ?, ?)")
            try statement.bind(record.sequence, at: 1)
            try statement.bind(record.id, at: 2)
            try statement.bind(record.winner, at: 3)
            try statement.bind(record.isDeleted ? 1 : 0, at: 4)
            try statement.bind(blob: record.body, at: 5)
            try statement.bind(blob: record.tree.encoded(), at: 6)
            try statement.bind(record.created, at: 7)
            try statement.bind(record.updated, at: 8)
        }
        _ = try statement.step()
    }

    func delete(sequence: Int64) throws {
        try connection.run("DELETE FROM docs WHERE seq = ?", [.integer(sequence)])
    }

    // MARK: Non-winning revision bodies

    func revisionBody(id: String, revision: RevisionID) throws -> (isDeleted: Bool, body: [UInt8])? {
        let statement = try connection.prepare("SELECT deleted, body FROM revs WHERE id = ? AND rev = ?")
        try statement.bind(id, at: 1)
        try statement.bind(revision, at: 2)
        guard try statement.step() else { return nil }
        return (statement.int64(0) != 0, statement.blob(1))
    }

    func storeRevisionBody(id: String, revision: RevisionID, isDeleted: Bool, body: [UInt8]) throws {
        let statement = try connection.prepare(
            "INSERT OR REPLACE INTO revs (id, rev, deleted, body) VALUES (?, ?, ?, ?)")
        try statement.bind(id, at: 1)
        try statement.bind(revision, at: 2)
        try statement.bind(isDeleted ? 1 : 0, at: 3)
        try statement.bind(blob: body, at: 4)
        _ = try statement.step()
    }

    /// Removes a revision's row from `revs` (its body moved elsewhere, e.g. into `docs`).
    func removeRevisionBody(id: String, revision: RevisionID) throws {
        try connection.run("DELETE FROM revs WHERE id = ? AND rev = ?", [.text(id), .text(revision.description)])
    }

    /// Forgets a revision's body entirely: its `revs` row and its attachment references.
    func dropRevision(id: String, revision: RevisionID) throws {
        try removeRevisionBody(id: id, revision: revision)
        try dropAttachmentReferences(id: id, revision: revision)
    }

    /// Removes the references from a revision to attachment contents.
    func dropAttachmentReferences(id: String, revision: RevisionID) throws {
        try connection.run("DELETE FROM attachment_refs WHERE id = ? AND rev = ?", [.text(id), .text(revision.description)])
    }

    /// Forgets every stored body and attachment reference of a document (purge).
    func dropAllRevisions(id: String) throws {
        try connection.run("DELETE FROM revs WHERE id = ?", [.text(id)])
        try connection.run("DELETE FROM attachment_refs WHERE id = ?", [.text(id)])
    }

    /// Revisions of `id` that have a body in `revs`.
    func storedRevisions(id: String) throws -> [RevisionID] {
        let statement = try connection.prepare("SELECT rev FROM revs WHERE id = ?")
        try statement.bind(id, at: 1)
        var result: [RevisionID] = []
        while try statement.step() {
            if let revision = statement.revision(0) { result.append(revision) }
        }
        return result
    }

    // MARK: Attachments

    func hasAttachment(digest: String) throws -> Bool {
        try connection.scalarInt("SELECT 1 FROM attachments WHERE digest = ?", [.text(digest)]) != nil
    }

    func storeAttachment(digest: String, data: UnsafeRawBufferPointer) throws {
        let statement = try connection.prepare("INSERT OR IGNORE INTO attachments (digest, length, data) VALUES (?, ?, ?)")
        try statement.bind(digest, at: 1)
        try statement.bind(data.count, at: 2)
        try statement.bind(blob: data, at: 3)
        _ = try statement.step()
    }

    func addAttachmentReference(id: String, revision: RevisionID, digest: String) throws {
        let statement = try connection.prepare(
            "INSERT OR IGNORE INTO attachment_refs (id, rev, digest) VALUES (?, ?, ?)")
        try statement.bind(id, at: 1)
        try statement.bind(revision, at: 2)
        try statement.bind(digest, at: 3)
        _ = try statement.step()
    }

    func attachmentContent(digest: String) throws -> [UInt8]? {
        let statement = try connection.prepare("SELECT data FROM attachments WHERE digest = ?")
        try statement.bind(digest, at: 1)
        guard try statement.step() else { return nil }
        return statement.blob(0)
    }

    /// Deletes attachment contents no stored revision refers to any more; returns how many.
    @discardableResult
    func collectUnreferencedAttachments() throws -> Int {
        try connection.run(
            "DELETE FROM attachments WHERE NOT EXISTS (SELECT 1 FROM attachment_refs r WHERE r.digest = attachments.digest)")
        return connection.changes
    }
}
