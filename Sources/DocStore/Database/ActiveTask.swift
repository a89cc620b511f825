import Foundation

/// Long work a database is doing now — an index built or brought up to date, the index file or the
/// database file compacted — with how far it has come: what CouchDB lists in `_active_tasks`.
///
/// ``Database/activeTasks`` lists the work running; a task is gone from it once its work ends.
///
/// ```swift
/// let progress = Task {
///     while !Task.isCancelled {
///         for task in db.activeTasks { print(task.kind, "\(task.progress) %") }
///         try await Task.sleep(for: .seconds(1))
///     }
/// }
/// _ = try await db.query("by-colour")   // builds the index first
/// progress.cancel()
/// ```
public struct ActiveTask: Sendable, Hashable, Identifiable {
    /// What the work is.
    public enum Kind: Sendable, Hashable {
        /// The index `indexName` being built, or brought up to date with many changes (CouchDB's
        /// `indexer`). An update of fewer than a few hundred changes ends too soon to be listed.
        case indexing(indexName: String)
        /// The index file being compacted (``Database/compactIndexes()``, CouchDB's `view_compaction`).
        case indexCompaction
        /// The database file being compacted (``Database/compact()``, CouchDB's `database_compaction`).
        case databaseCompaction
    }

    /// Unique among the tasks of this process.
    public let id: Int
    /// The name of the database doing the work.
    public let database: String
    /// What the work is.
    public let kind: Kind
    /// How much of the work is done, in the unit of ``totalChanges``: documents mapped (indexing),
    /// documents compacted (database compaction). An index file's compaction is one SQLite step, which
    /// reports nothing until it ends: it stays at 0.
    public internal(set) var changesDone: Int
    /// How much work there is: documents changed since the index's last update (indexing), documents
    /// with revisions stored (database compaction), rows in the index file (index compaction).
    public internal(set) var totalChanges: Int
    /// When the work began.
    public let started: Date
    /// When its figures last changed.
    public internal(set) var updated: Date

    /// The share done, 0 to 100 (CouchDB's `progress`).
    public var progress: Int {
        totalChanges > 0 ? min(100, changesDone * 100 / totalChanges) : 0
    }
}

/// The ``ActiveTask``s of one database: begun and advanced by the work they describe, read by
/// ``Database/activeTasks`` from any thread.
final class ActiveTaskList: Sendable {
    private let database: String
    private let tasks = Locked<[Int: ActiveTask]>([:])
    private static let lastID = Locked(0)

    init(database: String) {
        self.database = database
    }

    /// Lists a new task; the number given is what ``advance(_:to:)`` and ``end(_:)`` take.
    func begin(_ kind: ActiveTask.Kind, total: Int) -> Int {
        let id = ActiveTaskList.lastID.withLock { last in
            last += 1
            return last
        }
        let now = Date()
        let task = ActiveTask(id: id, database: database, kind: kind, changesDone: 0, totalChanges: max(total, 0), started: now, updated: now)
        tasks.withLock { $0[id] = task }
        return id
    }

    /// Task `id` has done `done`. Work that found more than it expected (documents written while an
    /// index builds) counts its total up with it.
    func advance(_ id: Int, to done: Int) {
        let now = Date()
        tasks.withLock { tasks in
            guard var task = tasks[id] else { return }
            task.changesDone = done
            task.totalChanges = max(task.totalChanges, done)
            task.updated = now
            tasks[id] = task
        }
    }

    /// Task `id` is over, done or not.
    func end(_ id: Int) {
        _ = tasks.withLock { $0.removeValue(forKey: id) }
    }

    /// The tasks running, oldest first.
    var current: [ActiveTask] {
        tasks.withLock { Array($0.values) }.sorted { $0.id < $1.id }
    }
}

extension Database {
    /// The long work running on this database now, oldest first: index builds (and updates with
    /// many changes), compactions of the index file and of the database. Reading it waits for nothing.
    public var activeTasks: [ActiveTask] { activeTaskList.current }
}
