import DocStore

/// A row of a source's changes feed.
struct ChangeRow: Sendable {
    let sequence: JSON
    let id: String
    let revisions: [RevisionID]
    let deleted: Bool
}

/// How a source's changes are filtered.
struct ChangesFilter: Sendable {
    var documentIDs: [String]?
    var channels: [String]?
    var selector: Selector?
    var named: (name: String, parameters: [String: String])?
}

/// What a replication needs from either side; implemented over a local `Database` and over HTTP.
protocol ReplicationPeer: Sendable {
    /// A stable identity for replication ids: no credentials.
    func identity() async throws -> String
    /// Checks the database exists, creating it when asked.
    func prepare(create: Bool) async throws
    /// Changes after `since`, at most `limit`; with `wait`, blocks until there is one or `wait` passes.
    func changes(since: JSON, limit: Int, filter: ChangesFilter, wait: Duration?) async throws -> (rows: [ChangeRow], last: JSON)
    /// A continuous feed of changes after `since`, if this side streams them (HTTP); `nil` otherwise.
    func openContinuousFeed(since: JSON, filter: ChangesFilter, heartbeat: Duration) async throws -> ChangeFeed?
    /// Which of the offered revisions this side lacks.
    func missingRevisions(_ offered: [(id: String, revisions: [RevisionID])]) async throws -> [RevisionDifference]
    /// The given revisions with their history and the attachment contents newer than `attsSince`.
    func fetch(_ requests: [(id: String, revision: RevisionID, attsSince: [RevisionID])]) async throws -> [Document]
    /// Stores revisions as they are (`new_edits=false`); returns the failures as (id, reason).
    func store(_ documents: [Document]) async throws -> [(id: String, reason: String)]
    /// The `_local/<id>` checkpoint document, with its `_rev` as `revision`.
    func checkpoint(_ id: String) async throws -> (body: JSONObject, revision: String)?
    /// Writes the checkpoint; returns its new revision.
    func saveCheckpoint(_ id: String, body: JSONObject, revision: String?) async throws -> String
    /// Releases what the peer holds (an HTTP peer's URL session) once the replication has ended.
    func close()
}

extension ReplicationPeer {
    func close() {}
}

/// Compares two sequences as the integers DocStore and DocServer use, or leaves them opaque.
func sequenceNumber(_ value: JSON) -> Int64? {
    switch value {
    case .integer(let n): return Int64(n)
    case .string(let text): return Int64(text.split(separator: "-").first ?? "")
    default: return nil
    }
}
