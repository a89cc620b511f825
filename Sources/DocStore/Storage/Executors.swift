import Dispatch
import Foundation

// Where SQLite work runs, so that it never blocks Swift's cooperative thread pool (DESIGN.md §6): a
// SQLite call may wait for I/O, for another process's write lock (`busy_timeout`), or run a long scan
// or a user's map function, and the pool has one thread per core.
//
// - Each database's writer, and each index writer, is an actor whose executor is a
//   `SerialQueueExecutor`: a serial dispatch queue, as GRDB's `SerializedDatabase`. Its jobs run on
//   dispatch's overcommitting worker threads, which dispatch adds when one blocks — never the pool's.
// - Reads run with `ReaderThreads.shared` as their task executor preference: dedicated threads.

/// A serial executor on a dispatch queue of its own: an actor using it runs every job there, one at a
/// time, off the cooperative pool.
final class SerialQueueExecutor: SerialExecutor {
    let queue: DispatchQueue

    init(label: String) {
        queue = DispatchQueue(label: label)
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedSerialExecutor()
        queue.async { job.runSynchronously(on: executor) }
    }
}

/// A fixed set of threads of this process's own (not the cooperative pool's), started at once and kept
/// for the life of the process, that run submitted work in order of submission. Waiting is what these
/// threads do when there is nothing to run, and what the work they run may do (DESIGN.md §6).
final class DedicatedThreads: @unchecked Sendable {
    // `@unchecked Sendable`: the only mutable state, `work` and `head`, is read and written only while
    // `condition` is locked; everything else is immutable.
    private let condition = NSCondition()
    private var work: [@Sendable () -> Void] = []
    private var head = 0

    init(count: Int, name: String) {
        for index in 0..<count {
            let thread = Thread { [self] in self.run() }
            thread.name = "\(name)-\(index)"
            thread.stackSize = 1 << 20
            thread.start()
        }
    }

    /// Runs `item` on one of the threads, after the work submitted before it has started.
    func submit(_ item: @escaping @Sendable () -> Void) {
        condition.lock()
        work.append(item)
        condition.signal()
        condition.unlock()
    }

    private func next() -> @Sendable () -> Void {
        condition.lock()
        defer { condition.unlock() }
        while head == work.count { condition.wait() }
        let item = work[head]
        head += 1
        if head == work.count {
            work.removeAll(keepingCapacity: true)
            head = 0
        }
        return item
    }

    private func run() {
        while true { next()() }
    }
}

/// The threads that run the synchronous parts of reads: a task that prefers this executor
/// (`withTaskExecutorPreference(ReaderThreads.shared)`) runs there between its suspension points.
/// More reads than threads queue up in order; a read never waits for a write (WAL), so a queued read
/// waits only for other reads.
final class ReaderThreads: TaskExecutor {
    /// The process's reader threads: four, or two per core where there are more cores.
    static let shared = ReaderThreads(count: max(4, 2 * ProcessInfo.processInfo.activeProcessorCount))

    private let threads: DedicatedThreads

    init(count: Int) {
        threads = DedicatedThreads(count: count, name: "docstore.reader")
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        threads.submit { [self] in job.runSynchronously(on: asUnownedTaskExecutor()) }
    }
}
