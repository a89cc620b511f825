import CSQLite

/// One row of the `docs` table: a document's latest sequence, winning revision and its body, and the
/// whole revision tree.
struct DocumentRecord {
    /// The row's number (`docs.doc`), fixed for the document's life: the sequence of its first write.
    var row: Int64
    var sequence: Int64
    var id: String
    var winner: RevisionID
    var isDeleted: Bool
    var body: [UInt8]
    var tree: RevisionTree
    var created: Double
    var updated: Double
}

/// The first writes of documents in a write transaction whose `changes` log entries are still to be
/// inserted: a run of consecutive sequences, each its document's row number, with no predecessor.
/// A bulk insert logs its whole run with one statement when the transaction ends
/// (``DocumentRecords/flushFirstWrites()``), instead of one statement per document.
///
/// Used by one write transaction, on the writer's thread only.
final class PendingFirstWrites {
    var first: Int64 = 1
    var last: Int64 = 0
    var isEmpty: Bool { last < first }
}

/// The SQL of the document tables, over one connection. All values are bound with `?`.
struct DocumentRecords {
    let connection: SQLiteConnection
    /// In a write transaction, the first writes whose log entries are inserted at its end; `nil` for
    /// reads.
    var firstWrites: PendingFirstWrites? = nil

    static let selectColumns = "seq, id, rev, deleted, body, tree, created, updated, doc"
    /// One document's row by id; built once, as every write reads its document's row.
    static let fetchByID = "SELECT \(selectColumns) FROM docs WHERE id = ?"
    /// ``selectColumns`` of `docs` joined as `d`, e.g. with the `changes` log.
    static let joinedSelectColumns = "d.seq, d.id, d.rev, d.deleted, d.body, d.tree, d.created, d.updated, d.doc"

    /// The position of each column of ``selectColumns`` (and ``joinedSelectColumns``).
    enum Column {
        static let seq: Int32 = 0
        static let id: Int32 = 1
        static let rev: Int32 = 2
        static let deleted: Int32 = 3
        static let body: Int32 = 4
        static let tree: Int32 = 5
        static let created: Int32 = 6
        static let updated: Int32 = 7
        static let doc: Int32 = 8
    }

    /// Reads a full record from a statement positioned on a row selected with ``selectColumns``.
    static func record(from statement: SQLiteStatement) throws -> DocumentRecord {
        let tree = try statement.withBlob(Column.tree) { try RevisionTree(decoding: $0) }
        guard let winner = statement.revision(Column.rev) else {
            throw DocStoreError(.storage, "Corrupt revision id in database")
        }
        return DocumentRecord(row: statement.int64(Column.doc), sequence: statement.int64(Column.seq), id: statement.text(Column.id),
                              winner: winner, isDeleted: statement.int64(Column.deleted) != 0, body: statement.blob(Column.body),
                              tree: tree, created: statement.double(Column.created), updated: statement.double(Column.updated))
    }

    /// One entry of the changes feed as stored, its columns borrowed from SQLite for the duration of
    /// the callback that receives it.
    struct RawChange {
        let sequence: Int64
        let id: UnsafeRawBufferPointer
        /// The encoded revision tree.
        let tree: UnsafeRawBufferPointer
        /// The winning body; empty unless asked for.
        let body: UnsafeRawBufferPointer
        let created: Double
        let updated: Double
    }

    /// The changes log after `since` (up to `through`, when given), each entry joined to its document
    /// if the document is still at that sequence (superseded entries drop out), in sequence order, at
    /// most `limit`.
    /// - Returns: the number of entries read.
    @discardableResult
    func scanChanges(since: Int64, through: Int64? = nil, limit: Int?, descending: Bool, withBodies: Bool,
                     _ each: (RawChange) -> Void) throws -> Int {
        let columns = withBodies ? DocumentRecords.joinedSelectColumns : "d.seq, d.id, d.rev, d.deleted, NULL, d.tree, 0, 0"
        let statement = try connection.prepare(
            "SELECT \(columns) FROM changes c JOIN docs d ON d.doc = c.doc AND d.seq = c.seq WHERE c.seq > ? AND c.seq <= ? ORDER BY c.seq \(descending ? "DESC" : "") LIMIT ?")
        try statement.bind(since, at: 1)
        try statement.bind(through ?? Int64.max, at: 2)
        try statement.bind(limit.map(Int64.init) ?? -1, at: 3)
        var count = 0
        while try statement.step() {
            statement.withBlob(Column.id) { id in
                statement.withBlob(Column.tree) { tree in
                    statement.withBlob(Column.body) { body in
                        each(RawChange(sequence: statement.int64(Column.seq), id: id, tree: tree, body: body,
                                       created: statement.double(Column.created), updated: statement.double(Column.updated)))
                    }
                }
            }
            count += 1
        }
        return count
    }

    /// One document of ``changedDocuments(after:limit:withTrees:_:)``, read from the statement in place
    /// (valid only inside the callback).
    struct ChangedDocument {
        fileprivate let statement: SQLiteStatement
        fileprivate let withTrees: Bool
        var sequence: Int64 { statement.int64(0) }
        var id: String { statement.text(1) }
        /// The winning revision; `nil` if unreadable.
        var revision: RevisionID? { statement.revision(2) }
        var isDeleted: Bool { statement.int64(3) != 0 }
        /// Runs `body` over the winner's stored body, without copying it.
        func withBody<T>(_ body: (UnsafeRawBufferPointer) throws -> T) rethrows -> T { try statement.withBlob(4, body) }
        /// A copy of the winner's stored body.
        var body: [UInt8] { statement.blob(4) }
        var created: Double { statement.double(5) }
        var updated: Double { statement.double(6) }
        /// The document's row (`docs.doc`), stable for its life.
        var row: Int64 { statement.int64(7) }
        /// The conflicting leaves, live and deleted, when read `withTrees` (else empty).
        func otherLeaves() throws -> (conflicts: [RevisionID], deletedConflicts: [RevisionID]) {
            withTrees ? try statement.withBlob(8, RevisionTree.otherLeaves(decoding:)) : ([], [])
        }
    }

    /// The documents changed after `sequence`, at their latest sequences, in sequence order, at most
    /// `limit`; with their revision trees when `withTrees`.
    func changedDocuments(after sequence: Int64, limit: Int, withTrees: Bool, _ each: (ChangedDocument) throws -> Void) throws {
        let statement = try connection.prepare(
            "SELECT d.seq, d.id, d.rev, d.deleted, d.body, d.created, d.updated, d.doc\(withTrees ? ", d.tree" : "") FROM changes c JOIN docs d ON d.doc = c.doc AND d.seq = c.seq WHERE c.seq > ? ORDER BY c.seq LIMIT ?")
        try statement.bind(sequence, at: 1)
        try statement.bind(limit, at: 2)
        while try statement.step() { try each(ChangedDocument(statement: statement, withTrees: withTrees)) }
    }

    /// The purges after `sequence` (up to `through`, when given), in sequence order.
    func purges(after sequence: Int64, through upper: Int64?) throws -> [(sequence: Int64, id: String)] {
        let statement = try connection.prepare(
            upper != nil ? "SELECT seq, id FROM purges WHERE seq > ? AND seq <= ? ORDER BY seq"
                         : "SELECT seq, id FROM purges WHERE seq > ? ORDER BY seq")
        try statement.bind(sequence, at: 1)
        if let upper { try statement.bind(upper, at: 2) }
        var purges: [(sequence: Int64, id: String)] = []
        while try statement.step() { purges.append((statement.int64(0), statement.text(1))) }
        return purges
    }

    /// The live and deleted documents whose ids are at or after `lower` and before `upper` (byte
    /// order), and the bytes of their stored winning bodies.
    func figures(ofIDsFrom lower: String, below upper: String) throws -> (live: Int, deleted: Int, bodyBytes: Int) {
        let statement = try connection.prepare(
            "SELECT COALESCE(SUM(deleted = 0), 0), COALESCE(SUM(deleted), 0), COALESCE(SUM(length(body)), 0) FROM docs WHERE id >= ? AND id < ?")
        try statement.bind(lower, at: 1)
        try statement.bind(upper, at: 2)
        guard try statement.step() else { return (0, 0, 0) }
        return (Int(statement.int64(0)), Int(statement.int64(1)), Int(statement.int64(2)))
    }

    /// The number of purges made: those recorded, and those compaction dropped past the purge-record
    /// limit (``trimPurges(keeping:)``).
    func purgeCount() throws -> Int {
        Int(try connection.scalarInt("SELECT COUNT(*) FROM purges", []) ?? 0) + (try Schema.trimmedPurges(connection).count)
    }

    /// Drops the purge records older than the newest `keep` (CouchDB's compaction keeps
    /// `_purged_infos_limit` of them), remembering how many went and the sequence of the newest that
    /// went: an index behind that sequence can no longer learn what was purged, and is rebuilt.
    /// Returns how many went.
    func trimPurges(keeping keep: Int) throws -> Int {
        guard let cutoff = try connection.scalarInt("SELECT seq FROM purges ORDER BY seq DESC LIMIT 1 OFFSET ?",
                                                    [.integer(Int64(keep))]) else { return 0 }
        try connection.run("DELETE FROM purges WHERE seq <= ?", [.integer(cutoff)])
        let count = connection.changes
        let trimmed = try Schema.trimmedPurges(connection)
        try Schema.storeTrimmedPurges(connection, count: trimmed.count + count, through: max(trimmed.through, cutoff))
        return count
    }

    /// The sequence of the latest entry of the changes log.
    /// The documents whose latest change lies after `lower` and at or before `upper`, as change
    /// notifications from `source`, in sequence order: what another connection committed meanwhile.
    func latestChanges(after lower: Int64, through upper: Int64, source: DocumentChange.Source) throws -> [DocumentChange] {
        let statement = try connection.prepare(
            "SELECT d.seq, d.id, d.rev, d.deleted FROM changes c JOIN docs d ON d.doc = c.doc AND d.seq = c.seq WHERE c.seq > ? AND c.seq <= ? ORDER BY c.seq")
        try statement.bind(lower, at: 1)
        try statement.bind(upper, at: 2)
        var changes: [DocumentChange] = []
        while try statement.step() {
            guard let revision = statement.revision(2) else { continue }
            changes.append(DocumentChange(id: statement.text(1), revision: revision, sequence: statement.int64(0),
                                          isDeleted: statement.int64(3) != 0, source: source))
        }
        return changes
    }

    func lastChangeSequence() throws -> Int64 {
        try connection.scalarInt("SELECT max(seq) FROM changes") ?? 0
    }

    /// The sequence of the log entry `offset` entries past the first after `since`, at or below
    /// `through`, or `nil` when there are not that many: a narrow scan of the log alone. Superseded
    /// entries count, so the changes feed has at most `offset + 1` rows in `since...` that sequence.
    func changeLogSequence(after since: Int64, offset: Int, through: Int64) throws -> Int64? {
        try connection.scalarInt("SELECT seq FROM changes WHERE seq > ? AND seq <= ? ORDER BY seq LIMIT 1 OFFSET ?",
                                 [.integer(since), .integer(through), .integer(Int64(offset))])
    }

    /// How many documents changed after `since`: each has exactly one log entry after `since` whose
    /// superseded sequence is at or before it (or none).
    func pendingCount(since: Int64) throws -> Int {
        Int(try connection.scalarInt("SELECT count(*) FROM changes WHERE seq > ? AND (prev IS NULL OR prev <= ?)",
                                     [.integer(since), .integer(since)]) ?? 0)
    }

    /// How many documents have their latest change after `lower` and at or before `upper`: the log
    /// entries in that range whose document is still at that sequence.
    func latestChangeCount(after lower: Int64, through upper: Int64) throws -> Int {
        guard upper > lower else { return 0 }
        return Int(try connection.scalarInt("""
            SELECT count(*) FROM changes JOIN docs ON docs.doc = changes.doc AND docs.seq = changes.seq
            WHERE changes.seq > ? AND changes.seq <= ?
            """, [.integer(lower), .integer(upper)]) ?? 0)
    }

    /// The number of live documents, and of deleted ones.
    func counts() throws -> (live: Int, deleted: Int) {
        (Int(try connection.scalarInt("SELECT count(*) FROM docs WHERE deleted = 0") ?? 0),
         Int(try connection.scalarInt("SELECT count(*) FROM docs WHERE deleted = 1") ?? 0))
    }

    /// Live documents in id order (byte order) between the bounds, `skip` then at most `limit`: the
    /// record when `full`, else only sequence, id and winner (the record's other fields empty).
    func liveDocuments(from lower: (id: String, inclusive: Bool)?, to upper: (id: String, inclusive: Bool)?, descending: Bool,
                       limit: Int?, skip: Int, full: Bool) throws -> [DocumentRecord] {
        var conditions = ["deleted = 0"]
        var bindings: [SQLiteValue] = []
        if let lower {
            conditions.append(lower.inclusive ? "id >= ?" : "id > ?")
            bindings.append(.text(lower.id))
        }
        if let upper {
            conditions.append(upper.inclusive ? "id <= ?" : "id < ?")
            bindings.append(.text(upper.id))
        }
        let columns = full ? DocumentRecords.selectColumns : "seq, id, rev"
        let statement = try connection.prepare(
            "SELECT \(columns) FROM docs WHERE \(conditions.joined(separator: " AND ")) ORDER BY id \(descending ? "DESC" : "ASC") LIMIT ? OFFSET ?")
        try statement.bind(bindings + [.integer(Int64(limit ?? -1)), .integer(Int64(skip))])
        var records: [DocumentRecord] = []
        while try statement.step() {
            if full {
                records.append(try DocumentRecords.record(from: statement))
                continue
            }
            let id = statement.text(Column.id)
            guard let revision = statement.revision(Column.rev) else { throw DocStoreError(.storage, "Corrupt revision id of \(id)") }
            records.append(DocumentRecord(row: 0, sequence: statement.int64(Column.seq), id: id, winner: revision, isDeleted: false,
                                          body: [], tree: RevisionTree(), created: 0, updated: 0))
        }
        return records
    }

    /// How many live documents sort before `id` (after it, `descending`).
    func countLive(before id: String, descending: Bool) throws -> Int {
        Int(try connection.scalarInt("SELECT count(*) FROM docs WHERE deleted = 0 AND \(descending ? "id > ?" : "id < ?")", [.text(id)]) ?? 0)
    }

    func fetch(id: String) throws -> DocumentRecord? {
        let statement = try connection.prepare(DocumentRecords.fetchByID)
        try statement.bind(id, at: 1)
        guard try statement.step() else { return nil }
        return try DocumentRecords.record(from: statement)
    }

    /// The live design documents whose body has a `validate_doc_update` member, in id order (the ids
    /// between `_design/` and `_design0`, the next string after the `/`).
    func validatingDesignDocuments() throws -> [Document] {
        let statement = try connection.prepare(
            "SELECT id, \(Self.currentColumns()) FROM docs WHERE id >= '_design/' AND id < '_design0' AND deleted = 0 ORDER BY id")
        defer { statement.reset() }
        var documents: [Document] = []
        while try statement.step() {
            let document = try Self.currentDocument(statement, id: statement.text(0), from: 1)
            if document.body["validate_doc_update"] != nil { documents.append(document) }
        }
        return documents
    }

    /// The current revision of a live document, parsed straight from SQLite's buffer, without
    /// decoding the revision tree (the common read).
    func fetchCurrentDocument(id: String) throws -> Document? {
        let statement = try connection.prepare(Self.fetchCurrentSQL)
        defer { statement.reset() }
        try statement.bind(id, at: 1)
        guard try statement.step() else { return nil }
        return try Self.currentDocument(statement, id: id, from: 0)
    }

    /// ``fetchCurrentDocument(id:)``'s statement, made once: a point read (every `GET /{db}/{id}`) looks
    /// its prepared statement up by this text.
    private static let fetchCurrentSQL = "SELECT \(currentColumns()) FROM docs WHERE id = ? AND deleted = 0"

    /// The columns of `docs` that ``currentDocument(_:id:from:)`` reads, each prefixed with `table`.
    static func currentColumns(of table: String = "") -> String {
        ["seq", "rev", "body", "created", "updated"].map { table + $0 }.joined(separator: ", ")
    }

    /// The current revision of document `id` from a row of ``currentColumns(of:)`` starting at column
    /// `first` (read straight from SQLite's buffer).
    static func currentDocument(_ statement: SQLiteStatement, id: String, from first: Int32) throws -> Document {
        let revision = try currentRevision(statement, at: first + 1)
        return try statement.withBlob(first + 2) { body in
            try Database.makeDocument(id: id, revision: revision, isDeleted: false, body: body, sequence: statement.int64(first),
                                      created: statement.double(first + 3), updated: statement.double(first + 4))
        }
    }

    private static func currentRevision(_ statement: SQLiteStatement, at column: Int32) throws -> RevisionID {
        guard let revision = statement.revision(column) else {
            throw DocStoreError(.storage, "Corrupt revision id in database")
        }
        return revision
    }

    /// Inserts a new document's row, or updates the row of an existing one (`previous`) in place, and
    /// appends the new sequence to the `changes` log, linked to the sequence it supersedes.
    func write(_ record: DocumentRecord, replacing previous: DocumentRecord?) throws {
        let statement: SQLiteStatement
        if let previous {
            statement = try connection.prepare(
                "UPDATE docs SET seq = ?, rev = ?, deleted = ?, body = ?, tree = ?, updated = ? WHERE doc = ?")
            try statement.bind(previous.row, at: 7)
            try statement.bind(record.sequence, at: 1)
            try statement.bind(record.winner, at: 2)
            try statement.bind(record.isDeleted ? 1 : 0, at: 3)
            try statement.bind(blob: record.body, at: 4)
            try statement.bind(blob: record.tree.encoded(), at: 5)
            try statement.bind(record.updated, at: 6)
        } else {
            statement = try connection.prepare(
                "INSERT INTO docs (doc, seq, id, rev, deleted, body, tree, created, updated) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)")
            try statement.bind(record.row, at: 1)
            try statement.bind(record.sequence, at: 2)
            try statement.bind(record.id, at: 3)
            try statement.bind(record.winner, at: 4)
            try statement.bind(record.isDeleted ? 1 : 0, at: 5)
            try statement.bind(blob: record.body, at: 6)
            try statement.bind(blob: record.tree.encoded(), at: 7)
            try statement.bind(record.created, at: 8)
            try statement.bind(record.updated, at: 9)
        }
        _ = try statement.step()
        if previous == nil, record.row == record.sequence, let firstWrites {
            if !firstWrites.isEmpty && record.sequence != firstWrites.last + 1 { try flushFirstWrites() }
            if firstWrites.isEmpty { firstWrites.first = record.sequence }
            firstWrites.last = record.sequence
            return
        }
        let log = try connection.prepare("INSERT INTO changes (seq, doc, prev) VALUES (?, ?, ?)")
        try log.bind(record.sequence, at: 1)
        try log.bind(record.row, at: 2)
        if let previous { try log.bind(previous.sequence, at: 3) } else { try log.bindNull(at: 3) }
        _ = try log.step()
    }

    /// Inserts the log entries of the pending run of first writes (``PendingFirstWrites``): one entry
    /// per sequence, each the document's own row, with no predecessor. Must run before the
    /// transaction commits.
    func flushFirstWrites() throws {
        guard let firstWrites, !firstWrites.isEmpty else { return }
        defer {
            firstWrites.first = 1
            firstWrites.last = 0
        }
        if firstWrites.first == firstWrites.last {
            // One document: a plain insert costs less than setting up the recursive query.
            try connection.run("INSERT INTO changes (seq, doc, prev) VALUES (?, ?, NULL)",
                               [.integer(firstWrites.first), .integer(firstWrites.first)])
            return
        }
        try connection.run("""
            WITH RECURSIVE run(seq) AS (VALUES (?) UNION ALL SELECT seq + 1 FROM run WHERE seq < ?)
            INSERT INTO changes (seq, doc, prev) SELECT seq, seq, NULL FROM run
            """, [.integer(firstWrites.first), .integer(firstWrites.last)])
    }

    /// Deletes a document's row and every entry of its history in the `changes` log, following the
    /// links back from its latest sequence (compaction deletes the older entries and clears the link
    /// of the one it keeps, so the chain ends where compaction left it).
    func delete(_ record: DocumentRecord) throws {
        try connection.run("DELETE FROM docs WHERE doc = ?", [.integer(record.row)])
        let previous = try connection.prepare("SELECT prev FROM changes WHERE seq = ?")
        let delete = try connection.prepare("DELETE FROM changes WHERE seq = ?")
        var sequence: Int64? = record.sequence
        while let current = sequence {
            try previous.bind(current, at: 1)
            guard try previous.step() else { break }
            sequence = previous.isNull(0) ? nil : previous.int64(0)
            previous.reset()
            try delete.bind(current, at: 1)
            _ = try delete.step()
            delete.reset()
        }
        previous.reset()
    }

    /// Deletes the entries of the `changes` log that a later write of the same document superseded
    /// (the feed skips them anyway). Each remaining entry is then its document's only one, so its link
    /// to a superseded sequence is cleared: `pending` counts an entry whose link is at or before
    /// `since`, and a link to a deleted entry would hide its document. Returns how many were deleted.
    func pruneChangesLog() throws -> Int {
        try connection.run("""
            DELETE FROM changes WHERE NOT EXISTS (
                SELECT 1 FROM docs WHERE docs.doc = changes.doc AND docs.seq = changes.seq)
            """)
        let deleted = connection.changes
        try connection.run("UPDATE changes SET prev = NULL WHERE prev IS NOT NULL")
        return deleted
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

    /// The sequence of the latest change or purge.
    func lastSequence() throws -> Int64 {
        max(try lastChangeSequence(), try connection.scalarInt("SELECT max(seq) FROM purges") ?? 0)
    }

    /// Records that `id` was purged at `sequence` (a purge takes a sequence, as CouchDB's `purge_seq`).
    func recordPurge(id: String, sequence: Int64) throws {
        try connection.run("INSERT INTO purges (seq, id) VALUES (?, ?)", [.integer(sequence), .text(id)])
    }

    /// The ids of documents with bodies of non-winning revisions stored.
    /// Stems every document's revision tree to `limit` generations (compaction after `_revs_limit` was
    /// lowered, as CouchDB's compaction does); returns how many trees changed.
    func stemAllTrees(limit: Int) throws -> Int {
        let select = try connection.prepare("SELECT id, tree FROM docs")
        var stemmed: [(id: String, tree: [UInt8])] = []
        while try select.step() {
            var tree = try select.withBlob(1) { try RevisionTree(decoding: $0) }
            if !tree.stem(limit: limit).isEmpty { stemmed.append((select.text(0), tree.encoded())) }
        }
        for (id, tree) in stemmed {
            try connection.run("UPDATE docs SET tree = ? WHERE id = ?", [.blob(tree), .text(id)])
        }
        return stemmed.count
    }

    func idsWithStoredRevisions() throws -> [String] {
        let statement = try connection.prepare("SELECT DISTINCT id FROM revs")
        var ids: [String] = []
        while try statement.step() { ids.append(statement.text(0)) }
        return ids
    }

    #if DEBUG
    /// Overwrites a document's stored tree or body with the given bytes; lets tests check how
    /// corruption is reported.
    func overwriteForTesting(id: String, tree: [UInt8]? = nil, body: [UInt8]? = nil) throws {
        if let tree { try connection.run("UPDATE docs SET tree = ? WHERE id = ?", [.blob(tree), .text(id)]) }
        if let body { try connection.run("UPDATE docs SET body = ? WHERE id = ?", [.blob(body), .text(id)]) }
    }
    #endif

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

    // MARK: Attachment references

    func addAttachmentReference(id: String, revision: RevisionID, digest: String) throws {
        let statement = try connection.prepare(
            "INSERT OR IGNORE INTO attachment_refs (id, rev, digest) VALUES (?, ?, ?)")
        try statement.bind(id, at: 1)
        try statement.bind(revision, at: 2)
        try statement.bind(digest, at: 3)
        _ = try statement.step()
    }
}
