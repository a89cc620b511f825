import CSQLite

/// SQLite's process-wide settings that DocStore makes.
///
/// DocStore turns off SQLite's memory statistics: their upkeep takes one process-wide mutex on every
/// SQLite allocation, which DocStore's writer, readers and long reads — each on a thread of its own
/// with a connection of its own — would otherwise contend for (a local replication took 40 % longer
/// with them on, Docs/Performance.md). SQLite takes such a setting only before it initializes, which
/// its first connection in the process does. DocStore makes it before opening its first connection;
/// a process that uses SQLite itself before that (another library, its own files) calls
/// ``Database/prepareProcessForService()`` first, early in `main`.
package enum SQLiteSettings {
    /// Whether the settings took effect: decided by the first call, in this process.
    private static let applied: Bool = csqlite_disable_memory_statistics() == SQLITE_OK

    /// Makes DocStore's SQLite settings for this process, if SQLite has not initialized yet.
    /// - Returns: Whether they are in effect: false when SQLite initialized before the first call (its
    ///   statistics then stay on for the life of the process).
    @discardableResult
    public static func apply() -> Bool { applied }
}
