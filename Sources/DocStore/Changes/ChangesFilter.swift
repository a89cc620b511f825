/// Which changes a feed passes on: CouchDB's `_doc_ids`, `_selector` and `_design` filters,
/// Couchbase's channels, and a test of your own. A change passes when every filter that is set holds.
///
/// The same filter serves ``Database/changes(since:limit:filter:includeDocuments:descending:)``, a
/// server's `_changes` and a replication from a local database.
public struct ChangesFilter: Sendable {
    /// Only these documents, compared by exact bytes (the NFC and NFD spellings of an id are two
    /// documents).
    public var documentIDs: [String]? {
        didSet { exactIDs = documentIDs.map { Set($0.map(ExactString.init)) } }
    }
    /// Only documents in at least one of these channels (those the ``channelsField`` names).
    public var channels: [String]?
    /// The body field that holds a document's channels: `channels` unless set
    /// (``Document/channels(inField:)``).
    public var channelsField = "channels"
    /// Only live documents that match this selector (a deletion never matches, as in CouchDB). A
    /// `$text` in it is not applied (it needs a text index): refuse one with ``MangoSelector/withoutText(for:)``.
    public var selector: MangoSelector?
    /// Only design documents (`_design/…`).
    public var designDocumentsOnly: Bool
    /// Only documents for which this returns `true`; it sees each changed document, tombstones
    /// included. An error it throws fails the read (``Database/changes(since:limit:filter:includeDocuments:descending:)``,
    /// a replication), as CouchDB fails a `_changes` request whose filter function throws.
    public var predicate: (@Sendable (Document) throws -> Bool)?
    /// A test of each leaf revision of a change on its own, as CouchDB judges a filter with
    /// `style=all_docs`: a change that the rest of the filter passes is on the feed when one of its
    /// leaves passes this too, and its row's ``ChangesFeedRow/leafRevisions`` are the leaves that do.
    /// A conflicted document whose winner fails it but another leaf passes is on the feed with that
    /// leaf alone.
    public var leafPredicate: (@Sendable (Document) throws -> Bool)?

    private var exactIDs: Set<ExactString>?

    /// A filter of the given tests; those left `nil` (or `false`) pass everything.
    public init(documentIDs: [String]? = nil, channels: [String]? = nil, selector: MangoSelector? = nil,
                designDocumentsOnly: Bool = false, predicate: (@Sendable (Document) throws -> Bool)? = nil) {
        self.documentIDs = documentIDs
        self.exactIDs = documentIDs.map { Set($0.map(ExactString.init)) }
        self.channels = channels
        self.selector = selector
        self.designDocumentsOnly = designDocumentsOnly
        self.predicate = predicate
    }

    /// Whether every change passes.
    var passesEverything: Bool {
        documentIDs == nil && !designDocumentsOnly && !needsDocuments
    }

    /// Whether deciding needs each change's document.
    var needsDocuments: Bool { channels != nil || selector != nil || predicate != nil || leafPredicate != nil }

    /// Whether deciding runs code of the app's (which a JavaScript filter makes wait for its engine).
    var runsUserCode: Bool { predicate != nil || leafPredicate != nil }

    /// Whether `change` passes; a filter that needs documents expects `change.document` to be loaded.
    func passes(_ change: ChangesFeedRow) throws -> Bool {
        if let exactIDs, !exactIDs.contains(ExactString(change.id)) { return false }
        if designDocumentsOnly, !change.id.hasPrefix("_design/") { return false }
        guard needsDocuments else { return true }
        guard let document = change.document else { return false }
        return try passes(document)
    }

    /// This filter with its tests that read documents (`channels`, `selector`, `predicate`) judging each
    /// leaf on its own (``leafPredicate``), as a CouchDB source judges a filter for the replicator
    /// (`style=all_docs`).
    public var judgingEachLeaf: ChangesFilter {
        guard channels != nil || selector != nil || predicate != nil else { return self }
        var filter = ChangesFilter(documentIDs: documentIDs, designDocumentsOnly: designDocumentsOnly)
        let tests = self
        filter.leafPredicate = { document in
            guard try tests.passes(document) else { return false }
            return try tests.leafPredicate?(document) != false
        }
        return filter
    }

    /// Whether a revision passes `channels`, `selector` and `predicate` (not ``leafPredicate``).
    func passes(_ document: Document) throws -> Bool {
        if let channels, !document.channels(inField: channelsField).contains(where: channels.contains) { return false }
        if let selector, document.isDeleted || !selector.matches(document) { return false }
        if let predicate, try !predicate(document) { return false }
        return true
    }
}

extension ChangesFeedRow {
    /// The change without its document unless `keep`.
    func keepingDocument(_ keep: Bool) -> ChangesFeedRow {
        guard !keep, document != nil else { return self }
        var change = self
        change.document = nil
        return change
    }
}

/// Makes the ``ChangesFilter`` a filter name stands for (`design/name` with its parameters, as
/// CouchDB's `_changes?filter=design/name&param=…`); see ``Database/namedFilterResolver``.
package typealias NamedFilterResolver = @Sendable (_ name: String, _ parameters: [String: String]) async throws -> ChangesFilter
