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
        return try await waitingForTheLock(of: writer) { try writer.write(documents, policy: .put, newEdits: false, source: source) }
    }

    /// For each document, which of the given revisions this database lacks, as CouchDB 3.3 answers:
    /// for a document it does not have, all of them as given; else in ascending order (generation,
    /// then hash), each revision it has taking out one offer of it (one offered twice is answered
    /// missing once). Documents with nothing missing are left out, as in CouchDB.
    public func missingRevisions(_ offered: [(id: String, revisions: [RevisionID])]) async throws -> [RevisionDifference] {
        try await readApart(consistent: true) { connection in
            let records = DocumentRecords(connection: connection)
            var differences: [RevisionDifference] = []
            for (id, revisions) in offered {
                guard let tree = try records.fetch(id: id)?.tree else {
                    if !revisions.isEmpty { differences.append(RevisionDifference(id: id, missing: revisions, possibleAncestors: [])) }
                    continue
                }
                // As CouchDB 3.3 (`couch_key_tree:find_missing`): in ascending order, each revision the
                // tree holds taking out one of the offers of it.
                var found = Set<RevisionID>()
                let missing = revisions.sorted().filter { !(tree.contains($0) && found.insert($0).inserted) }
                guard !missing.isEmpty else { continue }
                let highest = missing.map(\.generation).max() ?? 0
                let ancestors = tree.rankedLeaves.map(\.revision).filter { $0.generation < highest }
                differences.append(RevisionDifference(id: id, missing: missing, possibleAncestors: ancestors))
            }
            return differences
        }
    }

    /// The revision tree of a document (deleted documents included), or `nil` if it does not exist.
    public func revisionTree(ofDocumentWithID id: String) async throws -> RevisionTree? {
        try await readByKey { connection in try DocumentRecords(connection: connection).fetch(id: id)?.tree }
    }
}
