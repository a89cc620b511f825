/// A notification that a document got a new revision: the event of one write, as observers
/// (``Database/observeChanges()``, ``DatabaseChangeDelegate``, and typed as ``ModelChange`` by
/// ``Database/observeChanges(of:)``) hear of it when it commits.
///
/// Not to be confused with ``ChangesFeedRow``, a row that *reading* the changes feed returns: a
/// notification names the revision that was written (a replicated conflict branch is not the winner)
/// and who wrote it, and it is never read back; a feed row names the document's winning revision and
/// every leaf at its latest sequence, whatever wrote them, and can be read again from any `since`.
public struct DocumentChange: Sendable, Hashable {
    /// Where a change came from.
    public enum Source: String, Sendable, Hashable {
        /// A write through this process's API.
        case local
        /// A revision inserted by replication (`new_edits=false`).
        case replication
        /// A write committed by another connection to the same database file — another process's
        /// (a `docstore` command, an app's helper) — seen once it committed. One change per document,
        /// at its latest revision.
        case otherConnection
    }

    /// The document id.
    public let id: String
    /// The revision that was written.
    public let revision: RevisionID
    /// The sequence the document is now at.
    public let sequence: Int64
    /// Whether the written revision is a deletion.
    public let isDeleted: Bool
    /// Whether the change was made locally, by replication or by another connection.
    public let source: DocumentChange.Source
}

/// One row of the changes feed (``Database/changes(since:limit:filter:includeDocuments:descending:)``):
/// a document at its latest sequence, with its winning revision and every leaf, as CouchDB's `_changes`
/// reports it. For the notification of a single write, see ``DocumentChange``.
public struct ChangesFeedRow: Sendable, Hashable {
    /// The sequence of the document's latest change.
    public let sequence: Int64
    /// The document id.
    public let id: String
    /// The winning revision.
    public let revision: RevisionID
    /// The other leaf revisions (conflicts and deleted branches), in CouchDB's order.
    let otherLeaves: [RevisionID]
    /// Whether the winning revision is a deletion.
    public let isDeleted: Bool
    /// The winning revision's document, when asked for.
    public internal(set) var document: Document? {
        get { documentBox?.document }
        set { documentBox = newValue.map(DocumentBox.init) }
    }
    /// The document out of line: a feed of a million rows without documents is then a third of the
    /// memory (a `Document` is larger than the rest of the row), and as many fewer bytes to move.
    private var documentBox: DocumentBox?

    init(sequence: Int64, id: String, revision: RevisionID, otherLeaves: [RevisionID], isDeleted: Bool, document: Document?) {
        self.sequence = sequence
        self.id = id
        self.revision = revision
        self.otherLeaves = otherLeaves
        self.isDeleted = isDeleted
        self.documentBox = document.map(DocumentBox.init)
    }

    /// All leaf revisions, the winner first (CouchDB's `style=all_docs`) — or, from a filter that
    /// judges each leaf (``ChangesFilter/leafPredicate``), those that pass it.
    public var leafRevisions: [RevisionID] { passingLeaves ?? ([revision] + otherLeaves) }
    /// The leaves a filter that judges each leaf passed, when one did.
    var passingLeaves: [RevisionID]?
}

/// A feed row's document, held by reference; equal and hashed as the document.
private final class DocumentBox: Sendable, Hashable {
    let document: Document

    init(_ document: Document) {
        self.document = document
    }

    static func == (lhs: DocumentBox, rhs: DocumentBox) -> Bool { lhs.document == rhs.document }

    func hash(into hasher: inout Hasher) { hasher.combine(document) }
}

/// A page of the changes feed.
public struct ChangesPage: Sendable {
    /// The changes, in increasing sequence order.
    public let changes: [ChangesFeedRow]
    /// The sequence to pass as `since` to continue after this page.
    public let lastSequence: Int64
}
