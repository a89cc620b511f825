import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Where SQLite may run, and the check that enforces it in debug builds.
///
/// **The rule.** A SQLite call made from async code — inside a task, whichever executor runs it —
/// runs on one of DocStore's own threads: the ``BlockingWorkThreads`` (long reads, the app's code,
/// files, a server's writes), the ``DedicatedThreads`` helpers, a ``SerialQueueExecutor`` (the index
/// writers). Never on a thread of Swift's cooperative pool, whose few threads every task of the
/// process shares, and never on a SwiftNIO event loop, which serves every connection assigned to it.
/// Synchronous code outside any task (a thread of the app's, the WAL checkpointer's queue, the lock
/// waits) is not concerned.
///
/// **The exceptions** — work measured in microseconds that cannot wait for a lock, for which a
/// thread hop (two thread wake-ups, tens of microseconds on two cores) would cost more than the work:
/// ``Exception/pointRead``, ``Exception/shortRead`` and ``Exception/pointWrite`` (and a test's own
/// statements, ``Exception/testing``), each run inside
/// ``allowing(_:_:)`` where DocStore decides it (a task-local value, so it follows the task).
///
/// **The check.** In a debug build, every SQLite step, `exec` and open asks ``check(_:)``. A call that
/// breaks the rule stops a test process (one whose name ends in `.xctest`, so every `swift test` run)
/// with a message naming the thread and the statement. `DOCSTORE_THREAD_RULE=fail|log|off` overrides
/// that for any process (`log` prints each breach to standard error, with its stack, once per place).
/// Release builds check nothing.
enum ThreadRule {
    /// Work allowed on the caller's thread, wherever that is.
    enum Exception: String, Sendable {
        /// A read by key of one document, one row or a fixed few (``Database/readPoint(_:)``,
        /// ``Database/readNow(_:)``, ``Database/readByKey(consistent:_:)``): in WAL mode it takes no
        /// lock a writer holds (point reads also turn the busy wait off; one that would wait is done
        /// again on the threads for long reads).
        case pointRead = "point read"
        /// A read asked for at most ``BlockingWorkThreads/shortReadRows`` rows
        /// (``BlockingWorkThreads/forReading(upTo:)``): WAL readers take no lock a writer holds.
        case shortRead = "short read"
        /// A write of one small document (``DatabaseWriter/isPointWrite(_:)``: at most
        /// ``DatabaseWriter/pointWriteBytes`` of JSON, no attachment content), or of a small `_local`
        /// document or setting, under
        /// ``DatabaseConfiguration/Durability/normal`` (its commit appends to the WAL and waits for no
        /// `fsync`) with no validation that runs the app's code: the writer's busy timeout is 0, so
        /// another process's lock fails it at once, and the wait for that lock runs on a thread of
        /// its own.
        case pointWrite = "point write"
        /// A test that sets up or inspects a file through DocStore's internals (an old schema, a lock
        /// held, a corrupt row), where the test runs.
        case testing = "a test's own statements"
    }

    /// Marks the calling thread as one of DocStore's own for the rest of its life (a thread that
    /// DocStore started and that runs nothing else).
    static func markOwnThread() {
        #if DEBUG
        ThreadMarks.set(ThreadMarks.get() | ThreadMarks.own)
        #endif
    }

    /// Runs `body` as work of one of DocStore's own threads, on a thread it shares with others (a
    /// dispatch queue's).
    @inline(__always)
    static func asOwnThread<T>(_ body: () throws -> T) rethrows -> T {
        #if DEBUG
        let before = ThreadMarks.get()
        ThreadMarks.set(before | ThreadMarks.own)
        defer { ThreadMarks.set(before) }
        #endif
        return try body()
    }

    /// Runs `body`, whose SQLite calls are the documented `exception`, where the caller runs.
    @inline(__always)
    static func allowing<T>(_ exception: Exception, _ body: () throws -> T) rethrows -> T {
        #if DEBUG
        return try $allowed.withValue(exception) { try body() }
        #else
        return try body()
        #endif
    }

    /// The async form of ``allowing(_:_:)``: the exception holds for the task, across its suspensions.
    @inline(__always)
    static func allowing<T>(_ exception: Exception, isolation: isolated (any Actor)? = #isolation,
                            _ body: () async throws -> T) async rethrows -> T {
        #if DEBUG
        return try await $allowed.withValue(exception, operation: body, isolation: isolation)
        #else
        return try await body()
        #endif
    }

    /// Checks a SQLite call about to run (`what`: its statement or the file it opens).
    @inline(__always)
    static func check(_ what: @autoclosure () -> String) {
        #if DEBUG
        guard mode != .off else { return }
        guard ThreadMarks.get() == 0, allowed == nil, withUnsafeCurrentTask(body: { $0 != nil }) else { return }
        breach(what())
        #endif
    }

    #if DEBUG
    /// The exception the current task runs under, if any.
    @TaskLocal static var allowed: Exception?

    enum Mode { case fail, log, off }

    static let mode: Mode = {
        switch ProcessInfo.processInfo.environment["DOCSTORE_THREAD_RULE"] {
        case "fail": return .fail
        case "log": return .log
        case "off": return .off
        default: return ProcessInfo.processInfo.processName.hasSuffix(".xctest") ? .fail : .off
        }
    }()

    private struct Capture {
        var depth = 0
        var breaches: [String] = []
        var logged = Set<String>()
    }

    private static let capture = Locked(Capture())

    /// Runs `body` with breaches recorded instead of acted on, and returns them: for the test that
    /// shows the check catches a write moved onto an event loop or the pool.
    static func recordingBreaches(_ body: () async throws -> Void) async rethrows -> [String] {
        capture.withLock { $0.depth += 1 }
        defer { capture.withLock { $0.depth -= 1 } }
        try await body()
        return capture.withLock { state in
            defer { state.breaches = [] }
            return state.breaches
        }
    }

    private static func breach(_ what: String) {
        let message = "SQLite called from a task on thread '\(ThreadMarks.currentThreadName())', which is not one of "
            + "DocStore's own, outside the documented exceptions (ThreadRule): \(what)"
        let recorded = capture.withLock { state in
            guard state.depth > 0 else { return false }
            state.breaches.append(message)
            return true
        }
        if recorded { return }
        switch mode {
        case .fail:
            fatalError(message)
        case .log:
            // Once per place: the statement and the frames that called it.
            let stack = Thread.callStackSymbols.prefix(16)
            if capture.withLock({ $0.logged.insert(what + stack.dropFirst(2).joined()).inserted }) {
                FileHandle.standardError.write(Data((message + "\n" + stack.joined(separator: "\n") + "\n").utf8))
            }
        case .off:
            break
        }
    }
    #endif
}

#if DEBUG
/// The calling thread's marks, in a thread-specific value: ``own`` on one of DocStore's own threads.
enum ThreadMarks {
    static let own = 1

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        precondition(pthread_key_create(&key, nil) == 0, "no thread-specific key left")
        return key
    }()

    static func get() -> Int {
        Int(bitPattern: pthread_getspecific(key))
    }

    static func set(_ marks: Int) {
        pthread_setspecific(key, UnsafeRawPointer(bitPattern: marks))
    }

    static func currentThreadName() -> String {
        #if os(Linux)
        let name = (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? "?"
        return name.trimmingCharacters(in: .whitespacesAndNewlines)
        #else
        return Thread.current.name ?? "?"
        #endif
    }
}
#endif
