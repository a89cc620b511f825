/// For one document: the revisions a peer offered that this database lacks (CouchDB's `_revs_diff`).
public struct RevisionDifference: Sendable, Hashable {
    /// The document id.
    public let id: String
    /// The offered revisions this database does not have.
    public let missing: [RevisionID]
    /// Leaf revisions this database has that could be ancestors of the missing ones.
    public let possibleAncestors: [RevisionID]

    /// A difference, as a peer reports it.
    public init(id: String, missing: [RevisionID], possibleAncestors: [RevisionID]) {
        self.id = id
        self.missing = missing
        self.possibleAncestors = possibleAncestors
    }
}

extension Database {
    /// Inserts revisions received from a peer, each with its history (``Document/revisionHistory``),
    /// as CouchDB's `_bulk_docs` with `new_edits=false`: revisions keep their ids, branches become
    /// conflicts, and revisions the database already has are accepted without change. One transaction;
    /// each document gets its own result. Changes are published with `source`.
    public func insertRevisions(_ documents: [Document], source: DocumentChange.Source = .replication) async throws -> [SaveResult] {
        try ensureOpen()
        return try await waitingForTheLock(of: writer) { try await writer.write(documents, policy: .put, newEdits: false, source: source) }
    }

    /// For each document, which of the given revisions this database lacks.
    /// Documents with nothing missing are left out, as in CouchDB.
    public func missingRevisions(_ offered: [(id: String, revisions: [RevisionID])]) async throws -> [RevisionDifference] {
        try await read(consistent: true) { connection in
            let records = DocumentRecords(connection: connection)
            var differences: [RevisionDifference] = []
            for (id, revisions) in offered {
                let tree = try records.fetch(id: id)?.tree ?? RevisionTree()
                var seen = Set<RevisionID>()
                let missing = revisions.filter { !tree.contains($0) && seen.insert($0).inserted }
                guard !missing.isEmpty else { continue }
                let highest = missing.map(\.generation).max() ?? 0
                let ancestors = tree.leaves.map(\.revision).filter { $0.generation < highest }
                differences.append(RevisionDifference(id: id, missing: missing, possibleAncestors: ancestors))
            }
            return differences
        }
    }

    /// The revision tree of a document (deleted documents included), or `nil` if it does not exist.
    public func revisionTree(ofDocumentWithID id: String) async throws -> RevisionTree? {
        try await read { connection in try DocumentRecords(connection: connection).fetch(id: id)?.tree }
    }
}
