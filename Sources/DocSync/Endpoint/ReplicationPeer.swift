import CouchProtocol
import DocStore

/// A revision a target lacks, with the target's leaves that may be its ancestors (`_revs_diff`'s
/// `possible_ancestors`).
struct FetchRequest: Sendable {
    let id: String
    let revision: RevisionID
    let possibleAncestors: [RevisionID]
}

/// What a target did with a batch of revisions.
struct StoreOutcome: Sendable {
    /// Revisions refused, with the reason.
    var failures: [(id: String, revision: RevisionID?, reason: String)] = []
    /// Revisions refused because a stub named an attachment the target lacks on that revision's
    /// history (`missing_stub`): fetched again with every attachment's content, they are stored again.
    var missingStubs: [Document] = []
}

/// How a source's changes are filtered: what a local source's ``ChangesFilter`` does, or a filter
/// function the remote source defines (`named`).
struct SourceFilter: Sendable {
    var documentIDs: [String]?
    var channels: [String]?
    var selector: MangoSelector?
    var named: (name: String, parameters: [String: String])?

    /// The filter of a local source (which has no named filters).
    var changesFilter: ChangesFilter {
        ChangesFilter(documentIDs: documentIDs, channels: channels, selector: selector)
    }
}

/// What a replication needs from either side; implemented over a local `Database` and over HTTP.
protocol ReplicationPeer: Sendable {
    /// A stable identity for replication ids: no credentials.
    func identity() async throws -> String
    /// Checks the database exists, creating it when asked.
    func prepare(create: Bool) async throws
    /// Changes after `since`, at most `limit`, and how many the source has after them (its `pending`,
    /// when it says); with `wait`, blocks until there is one or `wait` passes.
    func changes(since: JSON, limit: Int, filter: SourceFilter, wait: Duration?) async throws -> (rows: [ChangesRow], last: JSON, pending: Int?)
    /// A continuous feed of changes after `since`, if this side streams them (HTTP); `nil` otherwise.
    func openContinuousFeed(since: JSON, filter: SourceFilter, heartbeat: Duration) async throws -> ChangeFeed?
    /// Which of the offered revisions this side lacks.
    func missingRevisions(_ offered: [(id: String, revisions: [RevisionID])]) async throws -> [RevisionDifference]
    /// The given revisions, each with its history and complete for the target: an attachment the
    /// target has on that revision's history (it was added no later than the newest of the request's
    /// possible ancestors on that history) is a stub, every other one carries its content — in memory,
    /// streamed into `stagingDatabase` (the local target of a pull, so that no attachment is held whole),
    /// or readable from this peer's database.
    func fetch(_ requests: [FetchRequest], stagingInto stagingDatabase: Database?) async throws -> [Document]
    /// Stores revisions as they are (`new_edits=false`).
    func store(_ documents: [Document]) async throws -> StoreOutcome
    /// The `_local/<id>` checkpoint document, with its `_rev` as `revision`.
    func checkpoint(_ id: String) async throws -> Checkpointer.Record?
    /// Writes the checkpoint over `revision`; returns its new revision.
    func saveCheckpoint(_ id: String, checkpoint: ReplicationCheckpoint, revision: String?) async throws -> String
    /// Releases what the peer holds (an HTTP peer's URL session) once the replication has ended.
    func close()
    /// The source of filter function `name` (`design/function`) of this database's design documents,
    /// `nil` when there is none: replications by a named filter checkpoint under its code.
    func filterCode(_ name: String) async throws -> String?
    /// Revisions ``fetch(_:stagingInto:)`` has asked for with `_bulk_get`, and read from its answers.
    var bulkGetFigures: (attempts: Int, documents: Int) { get }
}

extension ReplicationPeer {
    func close() {}
    var bulkGetFigures: (attempts: Int, documents: Int) { (0, 0) }
}

/// Compares two sequences as the integers DocStore and DocServer use, or leaves them opaque.
/// A design document function's name `design/function` in its two parts, `nil` for another form.
func designFunction(_ name: String) -> (design: String, function: String)? {
    let parts = name.split(separator: "/", maxSplits: 1).map(String.init)
    return parts.count == 2 ? (parts[0], parts[1]) : nil
}

func sequenceNumber(_ value: JSON) -> Int64? {
    switch value {
    case .integer(let n): return Int64(n)
    case .string(let text): return Int64(text.split(separator: "-").first ?? "")
    default: return nil
    }
}
