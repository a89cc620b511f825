import Dispatch
import Foundation

// Threads of DocStore's own, for work that waits and must not hold a thread of Swift's cooperative
// pool (Docs/Architecture.md): the database writers and index writers (each on a serial executor of its
// own; the index writers run the app's map functions), `HelpedMap` helpers (which wait for their owner's
// next input), and the `BlockingWorkThreads` that tasks prefer for opening and deleting files, long
// reads, the app's code and a server's requests that write.

/// A serial executor on a dispatch queue of its own: an actor using it runs every job there, one at a
/// time, off the cooperative pool (as GRDB's `SerializedDatabase`); dispatch adds worker threads when
/// one blocks.
final class SerialQueueExecutor: SerialExecutor {
    let queue: DispatchQueue

    init(label: String) {
        queue = DispatchQueue(label: label)
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedSerialExecutor()
        queue.async { ThreadRule.asOwnThread { job.runSynchronously(on: executor) } }
    }
}

/// A fixed set of threads of this process's own (not the cooperative pool's), started at once, that
/// run submitted work in order of submission until ``finish(eachThreadLast:afterAll:)``. Waiting is
/// what these threads do when there is nothing to run, and what the work they run may do (Docs/Architecture.md).
package final class DedicatedThreads: @unchecked Sendable {
    // `@unchecked Sendable`: the mutable state — `work`, `head`, `finishing`, `running` and the two
    // closures — is read and written only while `condition` is locked; everything else is immutable.
    private let condition = NSCondition()
    private var work: [@Sendable () -> Void] = []
    private var head = 0
    private var finishing = false
    private var running: Int
    private var eachThreadLast: @Sendable () -> Void = {}
    private var afterAll: @Sendable () -> Void = {}

    /// Starts `count` threads named `name`-0, `name`-1, …, each with a stack of `stackSize` bytes.
    package init(count: Int, name: String, stackSize: Int = 1 << 20) {
        running = count
        for index in 0..<count {
            let threadName = "\(name)-\(index)"
            let thread = Thread { [self] in
                DedicatedThreads.nameCurrentThread(threadName)
                ThreadRule.markOwnThread()
                self.run()
            }
            thread.name = threadName
            thread.stackSize = stackSize
            thread.start()
        }
    }

    /// Names the calling thread as the system shows it (`ps`, `perf`, `gdb`): a Linux thread otherwise
    /// keeps the name of the thread that started it, whatever `Thread.name` says. Linux keeps 15 bytes.
    private static func nameCurrentThread(_ name: String) {
        #if os(Linux)
        // `pthread_setname_np` is not in Swift's Glibc module; the thread's own `comm` file is the same.
        if let file = FileHandle(forWritingAtPath: "/proc/thread-self/comm") {
            try? file.write(contentsOf: Data(name.utf8.prefix(15)))
            try? file.close()
        }
        #elseif canImport(Darwin)
        _ = pthread_setname_np(name)
        #endif
    }

    /// Runs `item` on one of the threads, after the work submitted before it has started.
    /// - Precondition: ``finish(eachThreadLast:afterAll:)`` was not called.
    package func submit(_ item: @escaping @Sendable () -> Void) {
        condition.lock()
        precondition(!finishing, "work submitted to finished threads")
        work.append(item)
        condition.signal()
        condition.unlock()
    }

    /// Lets the threads end once the work submitted so far has run: each runs `eachThreadLast` as the
    /// last thing it does, and the last of them then runs `afterAll`. Returns at once.
    package func finish(eachThreadLast: @escaping @Sendable () -> Void = {}, afterAll: @escaping @Sendable () -> Void = {}) {
        condition.lock()
        finishing = true
        self.eachThreadLast = eachThreadLast
        self.afterAll = afterAll
        condition.broadcast()
        condition.unlock()
    }

    /// The next item to run, or `nil` when the threads are finishing and nothing is left.
    private func next() -> (@Sendable () -> Void)? {
        condition.lock()
        defer { condition.unlock() }
        while head == work.count {
            if finishing { return nil }
            condition.wait()
        }
        let item = work[head]
        head += 1
        if head == work.count {
            work.removeAll(keepingCapacity: true)
            head = 0
        }
        return item
    }

    private func run() {
        while let item = next() { item() }
        condition.withLock { eachThreadLast }()
        // A thread counts itself out only once its last closure has run, so the one that runs
        // `afterAll` runs it after every thread's last closure.
        let (all, isLast) = condition.withLock {
            running -= 1
            return (afterAll, running == 0)
        }
        if isLast { all() }
    }
}

/// Threads that run the synchronous parts of a task that prefers this executor
/// (`withTaskExecutorPreference(…)` or `Task(executorPreference:)`), between its suspension points:
/// work that may block and so must not hold a thread of the cooperative pool (Docs/Architecture.md).
final class BlockingWorkThreads: TaskExecutor {
    /// Opening (creating, migrating) and deleting database files: two threads.
    static let files = BlockingWorkThreads(count: 2, name: "docstore.files")
    /// Reads that run the app's code as they go — a `_changes` filter predicate (a JavaScript filter
    /// waits there for the engine), a custom reduce: four threads, so that a slow one does not hold
    /// up the pool.
    static let userCode = BlockingWorkThreads(count: 4, name: "docstore.user-code")
    /// Long reads — a changes feed, `_all_docs` or a view read without a small limit: four threads, so
    /// that a long scan leaves the pool to short requests.
    static let longReads = BlockingWorkThreads(count: 4, name: "docstore.long-reads")

    /// A server's requests that write — a document, an attachment, `_bulk_docs` — from the parsing of
    /// their bodies until they hand the write to the database's writer (which commits on its own
    /// executor, or here for a point write): four threads, so that a large write holds neither the
    /// event loop that serves other connections nor the pool.
    /// Their stacks are as large as an event loop's (8 MiB): a request's body is parsed there, and
    /// the JSON parser recurses up to its nesting limit.
    static let writes = BlockingWorkThreads(count: 4, name: "docstore.writes", stackSize: 8 << 20)

    /// Rows a read may be asked for and still run on the pool.
    static let shortReadRows = 1000

    private let threads: DedicatedThreads

    init(count: Int, name: String, stackSize: Int = 1 << 20) {
        threads = DedicatedThreads(count: count, name: name, stackSize: stackSize)
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        threads.submit { [self] in job.runSynchronously(on: asUnownedTaskExecutor()) }
    }
}

extension BlockingWorkThreads {
    /// The threads for a read of at most `limit` rows (`nil`: no bound): ``longReads`` past
    /// ``shortReadRows``, else none — a hop costs more than a short read, and less than a pool thread
    /// held by a long one.
    static func forReading(upTo limit: Int?) -> BlockingWorkThreads? {
        (limit ?? Int.max) > shortReadRows ? longReads : nil
    }
}

/// Runs `body` with `threads` as its task executor preference, or — when `nil`, a short read
/// (``ThreadRule/Exception/shortRead``) — where it is.
func running<T: Sendable>(on threads: BlockingWorkThreads?, _ body: () async throws -> T) async throws -> T {
    guard let threads else { return try await ThreadRule.allowing(.shortRead, body) }
    return try await withTaskExecutorPreference(threads) { try await body() }
}

/// Runs `body` off the pool when it may read and answer more than a short read's rows (`limit` `nil`:
/// no bound), as DocStore's own long reads do: for a server route, whose answer is long to build too.
package func reading<T: Sendable>(upTo limit: Int?, _ body: () async throws -> T) async throws -> T {
    try await running(on: .forReading(upTo: limit), body)
}

/// Runs `body`, a server's answer to a request that writes, on DocStore's threads for such requests
/// (``BlockingWorkThreads/writes``): its body's parsing, hashing and the writer's SQLite work
/// then hold no event loop.
package func writingApart<T: Sendable>(_ body: () async throws -> T) async throws -> T {
    try await running(on: .writes, body)
}

/// Runs `body`, which may hold its thread for milliseconds (a password's PBKDF2 of 100 000 rounds),
/// on the threads for the app's own code rather than where the caller runs — the cooperative pool, or
/// the event loop that answers a server connection and all the others on that loop.
package func computingApart<T: Sendable>(_ body: @Sendable () throws -> T) async throws -> T {
    try await running(on: .userCode) { try body() }
}
