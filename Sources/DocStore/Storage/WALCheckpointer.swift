import CSQLite
import Dispatch
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Synchronization

/// Runs the WAL checkpoints of one database file on a thread of its own, so that the writer's commits
/// do not wait for them.
///
/// By default SQLite checkpoints inside the commit that takes the WAL past 1000 pages: that commit
/// copies every page the WAL holds back into the database file and waits for `fdatasync`, which for
/// small transactions costs more than the transactions themselves. SQLite's documentation on WAL
/// suggests the alternative used here: turn the automatic checkpoint off on the writer
/// (`wal_autocheckpoint = 0`), watch the WAL's size with `sqlite3_wal_hook`, and run
/// `SQLITE_CHECKPOINT_PASSIVE` checkpoints from another connection. A passive checkpoint never blocks
/// the writer or the readers; it copies what no reader still needs and leaves the rest for the next
/// one, and a later write transaction starts the WAL over once everything has been copied.
///
/// Should writes outpace the checkpoints — the WAL still at ``hardLimitPages`` or more at a second
/// commit in a row — the writer runs a passive checkpoint itself, as SQLite's automatic checkpoint
/// would, so the WAL cannot grow without bound. One large transaction that alone takes the WAL past
/// the limit (a bulk insert) leaves its copy to the background like any other, so its commit does not
/// wait for it. Durability is unchanged: a commit is durable when it is in the WAL, whenever it is
/// copied.
final class WALCheckpointer: Sendable {
    /// Pages written to the WAL between two background checkpoints (SQLite's own default threshold).
    let thresholdPages: Int32
    /// WAL size, in pages, at which the writer checkpoints in its own commit.
    let hardLimitPages: Int32

    private let connection: SQLiteConnection
    private let queue: DispatchQueue
    /// Set while a checkpoint is queued or running; a commit that sees it set asks for nothing more.
    private let isScheduled = Atomic<Bool>(false)
    /// The WAL's size, in pages, when the last checkpoint was asked for.
    private let lastRequestPages = Atomic<Int32>(0)
    /// The writer's connection, whose WAL hook points at this object until ``close()``.
    private let writer: SQLiteConnection
    /// The WAL's size, in pages, after the writer's previous commit.
    private let previousCommitPages = Atomic<Int32>(0)

    /// Opens a second connection to `writer`'s file and takes over its checkpoints.
    ///
    /// - Parameters:
    ///   - synchronous: the writer's `PRAGMA synchronous` value, so that checkpoints sync as the
    ///     writer would.
    ///   - thresholdPages: pages written to the WAL between two background checkpoints.
    ///   - hardLimitPages: the WAL size at which the writer checkpoints itself.
    init(writer: SQLiteConnection, synchronous: String, thresholdPages: Int32 = 1000,
         hardLimitPages: Int32 = 16_000) throws {
        let connection = try SQLiteConnection(path: writer.path)
        do {
            try connection.execute("PRAGMA synchronous = \(synchronous)")
        } catch {
            connection.close()
            throw error
        }
        self.connection = connection
        self.writer = writer
        self.thresholdPages = thresholdPages
        self.hardLimitPages = hardLimitPages
        self.queue = DispatchQueue(label: "docstore.checkpoint")
        try writer.execute("PRAGMA wal_autocheckpoint = 0")
        sqlite3_wal_hook(writer.handle, walHook, Unmanaged.passUnretained(self).toOpaque())
    }

    /// Called by SQLite on the writer's thread after each commit, with the WAL's size in pages.
    fileprivate func committed(walPages: Int32) {
        let previous = previousCommitPages.exchange(walPages, ordering: .relaxed)
        if walPages >= hardLimitPages && previous >= hardLimitPages {
            // Another checkpoint running makes this one return SQLITE_BUSY at once; either way the
            // WAL is being copied.
            sqlite3_wal_checkpoint_v2(writer.handle, nil, SQLITE_CHECKPOINT_PASSIVE, nil, nil)
            return
        }
        // One checkpoint per `thresholdPages` pages written (each costs two fsyncs), counted from the
        // WAL's size when the last one was asked for; a WAL that started over counts from zero.
        let last = lastRequestPages.load(ordering: .relaxed)
        let written = walPages >= last ? walPages - last : walPages
        guard written >= thresholdPages,
            isScheduled.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
        else { return }
        lastRequestPages.store(walPages, ordering: .relaxed)
        queue.async { [self] in
            // The checkpointer's connection is only used on this serial queue (and by close(), after
            // the queue has drained).
            sqlite3_wal_checkpoint_v2(connection.handle, nil, SQLITE_CHECKPOINT_PASSIVE, nil, nil)
            isScheduled.store(false, ordering: .releasing)
        }
    }

    /// Copies what the WAL holds into the database file now — after a background checkpoint that
    /// is queued or running — and returns when it is done (a passive checkpoint: frames that a reader
    /// of an older snapshot still needs stay).
    func checkpointNow() async throws {
        let connection = self.connection
        let status = await withCheckedContinuation { (continuation: CheckedContinuation<Int32, Never>) in
            queue.async {
                // SQLITE_BUSY: the writer is running its own checkpoint (past the hard limit); try
                // again shortly, for up to a second — on this queue's thread, never the caller's.
                var status = SQLITE_OK
                for _ in 0..<100 {
                    status = sqlite3_wal_checkpoint_v2(connection.handle, nil, SQLITE_CHECKPOINT_PASSIVE, nil, nil)
                    guard status & 0xFF == SQLITE_BUSY else { break }
                    usleep(10_000)
                }
                continuation.resume(returning: status)
            }
        }
        guard status == SQLITE_OK else { throw connection.error(status, sql: "PRAGMA wal_checkpoint(PASSIVE)") }
    }

    /// Detaches from the writer, waits (without blocking the caller's thread) for a running
    /// checkpoint and closes the second connection. Call it on the writer's executor, before the
    /// writer's connection closes.
    func close() async {
        sqlite3_wal_hook(writer.handle, nil, nil)
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            queue.async { continuation.resume() }
        }
        connection.close()
    }
}

/// The `sqlite3_wal_hook` callback: `context` is an unretained ``WALCheckpointer`` that outlives the
/// hook (``WALCheckpointer/close()`` removes the hook first).
private func walHook(_ context: UnsafeMutableRawPointer?, _ db: OpaquePointer?, _ name: UnsafePointer<CChar>?,
                     _ pages: Int32) -> Int32 {
    guard let context else { return SQLITE_OK }
    Unmanaged<WALCheckpointer>.fromOpaque(context).takeUnretainedValue().committed(walPages: pages)
    return SQLITE_OK
}
