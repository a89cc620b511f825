import Foundation

/// Sees other processes' commits promptly: while anyone waits for a database's changes (a longpoll or
/// continuous feed, a live query, a continuous replication, any ``Database/observeChanges()``
/// stream), one thread asks that database's file every ``interval`` whether another connection
/// committed (`PRAGMA data_version` on the writer's connection, ``DatabaseWriter/pollOtherConnections()``)
/// and publishes what it did. A database nobody waits on is never asked; with no such database the
/// thread sleeps until a wait begins.
final class CommitWatch: @unchecked Sendable {
    // `@unchecked Sendable`: `entries` and `isRunning` are read and written only while `condition` is
    // locked; `run()` calls the writers outside it.
    static let shared = CommitWatch()

    /// How often a watched database's file is asked: other processes' commits are seen within it.
    static let interval = Duration.milliseconds(50)

    private struct Entry {
        weak var writer: DatabaseWriter?
        weak var notifier: ChangeNotifier?
    }

    private let condition = NSCondition()
    private var entries: [ObjectIdentifier: Entry] = [:]
    private var isRunning = false
    /// The watch's thread, one of DocStore's own: `run()` is its only work, for the process's life.
    private let thread = DedicatedThreads(count: 1, name: "docstore.commit-watch")

    /// Watches `writer`'s file whenever its `notifier` has a wait that wants other connections' commits.
    func register(_ writer: DatabaseWriter, notifier: ChangeNotifier) {
        notifier.onFirstWatcher.withLock { $0 = { [weak self] in self?.wake() } }
        condition.withLock {
            entries[ObjectIdentifier(writer)] = Entry(writer: writer, notifier: notifier)
            if !isRunning {
                isRunning = true
                thread.submit { [self] in run() }
            }
        }
        if notifier.isWatched { wake() }
    }

    func unregister(_ writer: DatabaseWriter) {
        condition.withLock { entries[ObjectIdentifier(writer)] = nil }
    }

    /// A wait began: look at once, and keep looking.
    func wake() {
        condition.withLock { condition.broadcast() }
    }

    private func run() {
        let seconds = Double(Self.interval.components.attoseconds) / 1e18 + Double(Self.interval.components.seconds)
        while true {
            condition.lock()
            // A database released without being closed leaves an entry whose writer is gone.
            entries = entries.filter { $0.value.writer != nil && $0.value.notifier != nil }
            let watched = entries.values.filter { $0.notifier?.isWatched == true }.compactMap(\.writer)
            if watched.isEmpty {
                condition.wait()
                condition.unlock()
                continue
            }
            condition.unlock()
            for writer in watched { writer.pollOtherConnections() }
            condition.lock()
            _ = condition.wait(until: Date(timeIntervalSinceNow: seconds))
            condition.unlock()
        }
    }
}
