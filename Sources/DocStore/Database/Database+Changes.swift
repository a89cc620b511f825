import Foundation
import Synchronization

/// Figures about a database, as CouchDB's `GET /db`.
public struct DatabaseInfo: Sendable, Hashable {
    /// The database name.
    public let name: String
    /// Live documents.
    public let documentCount: Int
    /// Deleted documents (tombstones).
    public let deletedDocumentCount: Int
    /// The sequence of the latest change.
    public let updateSequence: Int64
    /// The size of the database file and its WAL, in bytes.
    public let fileSize: Int
    /// A UUID made when the file was created; stays with the file.
    public let uuid: String
    /// How many documents were purged (CouchDB's `purge_seq` counts them).
    public var purgeCount: Int = 0
}

extension Database {
    // MARK: Changes feed

    /// The changes feed: each document changed after `since`, once, at its latest sequence, in
    /// increasing sequence order, with its winning revision and all its leaf revisions — those that
    /// pass `filter`.
    ///
    /// - Parameters:
    ///   - since: the sequence to start after (0 for everything).
    ///   - limit: the most rows to return.
    ///   - filter: which documents to pass on; every change passes the default filter.
    ///   - includeDocuments: include the winning revision's document (tombstones included).
    ///   - descending: newest change first (`lastSequence` is then the sequence of the first row).
    /// - Returns: the rows and the sequence to continue from. The sequence moves past every change
    ///   the filter examined; when the page is not full it is the database's sequence at the call, so
    ///   changes that no row stands for (filtered out, purged) are not read again.
    /// - Complexity: O(changes examined) — the feed is a range scan of the changes log, in pages of
    ///   500 when a filter drops rows.
    public func changes(since: Int64 = 0, limit: Int? = nil, filter: ChangesFilter = ChangesFilter(),
                        includeDocuments: Bool = false, descending: Bool = false) async throws -> ChangesPage {
        if let limit, limit < 0 { throw DocStoreError(.badRequest, "limit must not be negative") }
        // A predicate is the app's code (a JavaScript filter waits for the engine), and a long range a
        // long read: both off the pool.
        let range = Int(clamping: max(0, notifier.committedSequence - since))
        let rows = descending ? (filter.passesEverything ? limit : nil) : min(limit ?? range, range)
        return try await running(on: filter.runsUserCode ? .userCode : .forReading(upTo: rows)) {
            try await filteredChanges(since: since, limit: limit, filter: filter, includeDocuments: includeDocuments, descending: descending)
        }
    }

    private func filteredChanges(since: Int64, limit: Int?, filter: ChangesFilter,
                                 includeDocuments: Bool, descending: Bool) async throws -> ChangesPage {
        let wanted = limit ?? Int.max
        let eachLeaf = filter.leafPredicate != nil
        if descending {
            // One read: a filter is applied to the rows of the whole range.
            let page = try await changesPage(since: since, limit: filter.passesEverything ? limit : nil,
                                             includeDocuments: includeDocuments || filter.needsDocuments, descending: true)
            var changes: [ChangesFeedRow] = []
            for change in page.changes where changes.count < wanted {
                if eachLeaf {
                    if let judged = try await judgingEachLeaf(change, filter) { changes.append(judged.keepingDocument(includeDocuments)) }
                } else if try filter.passes(try await withConflicts(change, for: filter)) {
                    changes.append(change.keepingDocument(includeDocuments))
                }
            }
            return ChangesPage(changes: changes, lastSequence: page.changes.first?.sequence ?? since)
        }
        if wanted == 0 { return ChangesPage(changes: [], lastSequence: since) }
        // Read before the pages: a commit after them stays above the sequence answered.
        let committed = notifier.committedSequence
        if filter.passesEverything {
            if (limit ?? Int.max) >= committed - since, committed - since >= Database.splitChangesRange {
                return try await changesInHalves(since: since, through: committed, includeDocuments: includeDocuments)
            }
            let page: ChangesPage
            if includeDocuments, let limit, limit >= Database.splitChangesPage, committed - since > limit,
               let split = try await changesPageInHalves(since: since, limit: limit, through: committed) {
                page = split
            } else {
                page = try await changesPage(since: since, limit: limit, includeDocuments: includeDocuments, descending: false)
            }
            let last = page.changes.count < wanted ? max(page.lastSequence, committed) : page.lastSequence
            return ChangesPage(changes: page.changes, lastSequence: last)
        }
        let pageSize = 500
        var cursor = since
        var changes: [ChangesFeedRow] = []
        pages: while true {
            let page = try await changesPage(since: cursor, limit: pageSize, includeDocuments: true, descending: false)
            for change in page.changes {
                cursor = change.sequence
                if eachLeaf {
                    guard let judged = try await judgingEachLeaf(change, filter) else { continue }
                    changes.append(judged.keepingDocument(includeDocuments))
                } else {
                    guard try filter.passes(try await withConflicts(change, for: filter)) else { continue }
                    changes.append(change.keepingDocument(includeDocuments))
                }
                if changes.count >= wanted { break pages }
            }
            if page.changes.count < pageSize { break }
        }
        if changes.count < wanted { cursor = max(cursor, committed) }
        return ChangesPage(changes: changes, lastSequence: cursor)
    }

    /// `change` as `filter`'s predicate sees it: a document with other leaves gets its `_conflicts`, as
    /// CouchDB gives filter functions (a read of its revision tree, only for such a change).
    private func withConflicts(_ change: ChangesFeedRow, for filter: ChangesFilter) async throws -> ChangesFeedRow {
        guard filter.predicate != nil, !change.otherLeaves.isEmpty, var document = change.document, !document.isDeleted else { return change }
        document.conflicts = try await revisionTree(ofDocumentWithID: change.id)?.conflicts ?? []
        var judged = change
        judged.document = document
        return judged
    }

    /// `change`, if the rest of `filter` passes it, with the leaves its `leafPredicate` passes (the
    /// winner's document is the change's, the others read one by one), or `nil` when none does.
    private func judgingEachLeaf(_ change: ChangesFeedRow, _ filter: ChangesFilter) async throws -> ChangesFeedRow? {
        guard try filter.passes(change), let leafPasses = filter.leafPredicate else { return nil }
        var passing: [RevisionID] = []
        for leaf in [change.revision] + change.otherLeaves {
            let document = leaf == change.revision ? change.document : try await document(withID: change.id, revision: leaf)
            if let document, try leafPasses(document) { passing.append(leaf) }
        }
        guard !passing.isEmpty else { return nil }
        var judged = change
        judged.passingLeaves = passing
        return judged
    }

    /// The range of sequences past which a whole-range read of the changes log is read in two halves
    /// at once (``changesInHalves(since:through:includeDocuments:)``).
    static let splitChangesRange: Int64 = 16384

    /// Every change after `since` up to `committed`, a sequence committed before the call: the two
    /// halves of the range are read at the same time on two reader connections (two long-read
    /// threads), each building its own rows, so that a long feed uses both cores for SQLite too.
    ///
    /// The two reads see two snapshots, both taken after `committed` was: they differ only by commits
    /// after it, whose sequences are all above `committed`, outside both ranges. So a document stands
    /// in at most one half (at the sequence either snapshot has it at, if that is at or below
    /// `committed`), and a document that moved past `committed` meanwhile is left to the next page
    /// (`lastSequence` is `committed`) — as one read of a later snapshot would have answered.
    private func changesInHalves(since: Int64, through committed: Int64, includeDocuments: Bool) async throws -> ChangesPage {
        let middle = since + (committed - since) / 2
        let halves = try await readHalves(since: since, split: middle, through: committed, secondLimit: nil,
                                          includeDocuments: includeDocuments, reserving: Int(committed - since))
        return ChangesPage(changes: halves.changes, lastSequence: committed)
    }

    /// The rows of `since...split` and of `split...through` (at most `secondLimit` of these), read at
    /// the same time on two reader connections, each half building its own rows. The first half is read
    /// into an array with room for `reserving` rows, which this task owns: the second half is appended to
    /// it, instead of both being copied (each row retained) into a third.
    private func readHalves(since: Int64, split: Int64, through: Int64, secondLimit: Int?, includeDocuments: Bool,
                            reserving: Int) async throws -> (changes: [ChangesFeedRow], firstCount: Int, secondCount: Int) {
        async let second = readChangesPage(since: split, through: through, limit: secondLimit, includeDocuments: includeDocuments,
                                           descending: false, helped: false)
        var changes = try await readChangesPage(since: since, through: split, limit: nil, includeDocuments: includeDocuments,
                                                descending: false, helped: false, reserving: reserving).changes
        let firstCount = changes.count
        changes.append(contentsOf: try await second.changes)
        return (changes, firstCount, changes.count - firstCount)
    }

    /// The smallest page with documents that ``changesPageInHalves(since:limit:through:)`` reads in two
    /// halves: below it, one reading thread and a helper building the rows do as well.
    static let splitChangesPage = 512

    /// A page of `limit` changes with their documents, up to `committed` (a sequence committed before the
    /// call), read as two halves at once (``readHalves(since:split:through:secondLimit:includeDocuments:reserving:)``):
    /// with documents, the reading thread is the long pole of a page read once (its steps and page
    /// reads), and two halves put SQLite's work on both cores too. `nil` when the log holds fewer than
    /// half a page of entries up to `committed` (one read does). The page's `lastSequence` is its last
    /// row's, as ``changesPage(since:limit:includeDocuments:descending:)`` answers.
    ///
    /// The split is the log entry `limit / 2` entries after `since`, found in the log alone; superseded
    /// entries count there, so the first half may hold fewer rows than that, and the rows it lacks are
    /// read after the second half. As in ``changesInHalves(since:through:includeDocuments:)``, both
    /// snapshots were taken after `committed`, so a document stands in at most one half, and one that
    /// moved past `committed` meanwhile is left to the next page.
    private func changesPageInHalves(since: Int64, limit: Int, through committed: Int64) async throws -> ChangesPage? {
        let firstLimit = limit / 2
        let split = try await read { try DocumentRecords(connection: $0).changeLogSequence(after: since, offset: firstLimit - 1, through: committed) }
        guard let split, split < committed else { return nil }
        let secondLimit = limit - firstLimit
        var halves = try await readHalves(since: since, split: split, through: committed, secondLimit: secondLimit,
                                          includeDocuments: true, reserving: limit)
        if halves.firstCount < firstLimit, halves.secondCount == secondLimit, let after = halves.changes.last?.sequence {
            // The first half's range held superseded entries: the page's remaining rows come after the second's.
            halves.changes += try await readChangesPage(since: after, through: committed, limit: firstLimit - halves.firstCount,
                                                        includeDocuments: true, descending: false).changes
        }
        return ChangesPage(changes: halves.changes, lastSequence: halves.changes.last?.sequence ?? since)
    }

    /// One range of the changes log, every row kept. A short ascending range up to the newest commit
    /// is read once for every feed that asks for it (``ChangesTail``).
    private func changesPage(since: Int64, limit: Int?, includeDocuments: Bool, descending: Bool) async throws -> ChangesPage {
        let committed = notifier.committedSequence
        // Shared only when the whole range up to the commit is wanted: a page with a smaller limit
        // reads no further than it needs.
        guard !descending, since < committed, committed - since <= ChangesTail.span, limit.map({ $0 >= committed - since }) ?? true else {
            return try await readChangesPage(since: since, limit: limit, includeDocuments: includeDocuments, descending: descending)
        }
        let (shared, isOwn) = changesTail.read(since: since, committed: committed, includeDocuments: includeDocuments) {
            Task(executorPreference: BlockingWorkThreads.longReads) {
                try await self.readChangesPage(since: since, limit: nil, includeDocuments: includeDocuments, descending: false)
            }
        }
        let page: ChangesPage
        do {
            page = try await shared.read.value
        } catch {
            changesTail.forget(shared)
            throw error
        }
        if isOwn && limit == nil { return page }
        let rows = page.changes.drop { $0.sequence <= since }.prefix(limit ?? Int.max).map { $0.keepingDocument(includeDocuments) }
        return ChangesPage(changes: rows, lastSequence: rows.last?.sequence ?? since)
    }

    /// One range of the changes log (after `since`, up to `through` when given), read from the file;
    /// its rows built with a helper thread when `helped`, into an array with room for `reserving` rows
    /// when given (up to a bound).
    private func readChangesPage(since: Int64, through: Int64? = nil, limit: Int?, includeDocuments: Bool,
                                 descending: Bool, helped: Bool = true, reserving: Int? = nil) async throws -> ChangesPage {
        try await read { connection in
            // At most one row per sequence after `since`: room for the whole page up front (up to a
            // bound), instead of growing a long feed's array step by step. Read from the file, not
            // the writer, so that a long write never holds up a read.
            let records = DocumentRecords(connection: connection)
            let lastSequence = min(try records.lastChangeSequence(), through ?? Int64.max)
            let bound = Int(max(0, lastSequence - since))
            let expectedRows = min(reserving ?? min(limit ?? bound, bound), 1 << 17)
            // The reading thread only copies the columns out; the rows are built with a helper (or,
            // not `helped`, chunk by chunk on this thread).
            var rows = SharedChangeParse(includeDocuments: includeDocuments, expectedRows: expectedRows, helped: helped)
            var last = since
            do {
                try records.scanChanges(since: since, through: through, limit: limit, descending: descending,
                                        withBodies: includeDocuments) { change in
                    rows.append(change)
                    last = change.sequence
                }
            } catch {
                rows.abandon()
                throw error
            }
            let changes = try rows.finish()
            return ChangesPage(changes: changes, lastSequence: last)
        }
    }

    /// How many documents changed after `since` (CouchDB's `pending`).
    ///
    /// Each such document has exactly one entry in the changes log after `since` whose superseded
    /// sequence is at or before `since` (or none), so this counts narrow log entries without looking
    /// at the documents. A reader paging through the feed asks again after each page: when nothing
    /// was written or purged since an earlier count at or before `since`, the new count is that one
    /// less the documents whose latest change lies between the two — the page just read — so a
    /// replication that pages through a large database does not count what is left on every page.
    /// - Complexity: O(log entries between the nearest earlier count and `since`) when nothing was
    ///   written since that count; otherwise O(log entries after `since`).
    public func pendingChangeCount(since: Int64) async throws -> Int {
        let known = pendingCounts.withLock { $0 }
        let (count, head) = try await readApart(consistent: true) { connection -> (Int, Int64) in
            let records = DocumentRecords(connection: connection)
            let head = try records.lastSequence()
            let base = known.filter { $0.head == head && $0.since <= since }.max { $0.since < $1.since }
            guard let base else { return (try records.pendingCount(since: since), head) }
            return (base.count - (try records.latestChangeCount(after: base.since, through: since)), head)
        }
        pendingCounts.withLock { counts in
            counts.removeAll { $0.head != head || $0.since == since }
            counts.append(PendingCount(since: since, head: head, count: count))
            if counts.count > PendingCount.kept { counts.removeFirst(counts.count - PendingCount.kept) }
        }
        return count
    }

    /// The sequence of the latest change (CouchDB's `update_seq`).
    public var updateSequence: Int64 {
        get async { writer.notifier.committedSequence }
    }

    // MARK: Info

    /// Document counts, sequence, size and identity of the database.
    public func info() async throws -> DatabaseInfo {
        let sequence = writer.notifier.committedSequence
        return try await readApart(consistent: true) { connection in
            let (live, deleted) = try DocumentRecords(connection: connection).counts()
            let uuid = try Schema.uuid(connection)
            var size = 0
            for suffix in ["", "-wal"] {
                let attributes = try? FileManager.default.attributesOfItem(atPath: fileURL.path + suffix)
                size += (attributes?[.size] as? NSNumber)?.intValue ?? 0
            }
            var info = DatabaseInfo(name: name, documentCount: live, deletedDocumentCount: deleted,
                                    updateSequence: sequence, fileSize: size, uuid: uuid)
            info.purgeCount = try DocumentRecords(connection: connection).purgeCount()
            return info
        }
    }
}

/// The newest changes read, shared by the changes feeds that wake on the same commit.
///
/// A server's continuous and long-poll `_changes` listeners all wait for the next commit, wake
/// together and each ask for the changes after the sequence it last saw — usually the same one. The
/// first to ask reads the range up to the newest commit; the others, asking after a sequence at or
/// past its start, take their rows from that read (awaiting it while it runs) instead of reading the
/// log again: one read per commit instead of one per listener. A read is used only while no newer
/// commit has been announced, so every answer is a snapshot as fresh as a read of its own would
/// have been at the moment it was asked.
final class ChangesTail: Sendable {
    /// The widest range (in sequences) shared; a listener further behind reads on its own.
    static let span: Int64 = 1000

    struct Entry: Sendable {
        let since: Int64
        let committed: Int64
        let includeDocuments: Bool
        let read: Task<ChangesPage, any Error>
    }

    private let entries = Locked<[Entry]>([])
    /// How many reads were started (for tests).
    let readsStarted = Atomic<Int>(0)

    /// The read that answers a range after `since` (and whether it is the caller's own, just made by
    /// `start`): one made for the same commit, from at or before `since`, with the documents if they
    /// are wanted; else a new one, which replaces the reads of older commits.
    func read(since: Int64, committed: Int64, includeDocuments: Bool,
              start: () -> Task<ChangesPage, any Error>) -> (entry: Entry, isOwn: Bool) {
        entries.withLock { entries in
            if let found = entries.first(where: { $0.committed == committed && $0.since <= since && ($0.includeDocuments || !includeDocuments) }) {
                return (found, false)
            }
            let entry = Entry(since: since, committed: committed, includeDocuments: includeDocuments, read: start())
            readsStarted.add(1, ordering: .relaxed)
            entries.removeAll { $0.committed < committed }
            // At most a few reads per commit are kept: with and without documents, from different starts.
            if entries.count >= 4 { entries.removeFirst() }
            entries.append(entry)
            return (entry, true)
        }
    }

    /// Forgets a read that failed, so that the next caller reads again.
    func forget(_ entry: Entry) {
        entries.withLock { entries in entries.removeAll { $0.read == entry.read } }
    }
}

/// A count of ``Database/pendingChangeCount(since:)``: the documents whose latest change is after
/// `since`, counted when the latest change or purge was `head`.
struct PendingCount: Sendable {
    /// How many counts a database keeps (one per reader paging at once, the oldest dropped first).
    static let kept = 8

    let since: Int64
    let head: Int64
    let count: Int
}
