import DocStore
import Foundation

/// Runs design-document JavaScript on JavaScriptCore, on a few threads of its own with one context
/// each, never shared: JavaScript never runs on Swift's cooperative thread pool (Docs/Architecture.md), and
/// however many threads call in (index writers mapping windows of documents, the writer validating,
/// `async` callers), an engine holds at most `threads` contexts (each costs JavaScriptCore some
/// 15 MB). Every context has a watchdog: a function that runs longer than ``timeLimit``, or that grows
/// the process's resident memory by more than ``memoryLimit`` while it runs, is stopped with
/// ``DocStoreError/Code/scriptTimeout`` (CouchDB's `os_process_error`), and the thread goes on.
///
/// ```swift
/// let engine = JavaScriptEngine(timeLimit: .seconds(5))
/// let design = try await db.enableJavaScript(engine: engine)
/// ```
public final class JavaScriptEngine: Sendable {
    /// The engine most programs need: CouchDB's default 5 s limit per function call.
    public static let shared = JavaScriptEngine()

    /// How long one call into JavaScript may run before it is stopped (CouchDB's
    /// `os_process_timeout`, 5 s by default).
    public let timeLimit: Duration

    /// How far one call into JavaScript may grow the process's resident memory before it is stopped,
    /// in bytes (`nil`: no bound). CouchDB's JavaScript processes stop at a 64 MiB heap; the default
    /// here, 256 MiB, also covers what the process's other threads allocate meanwhile, which the
    /// measure (the whole process's) cannot tell apart. It is measured from the call's first 50 ms of
    /// CPU time on: shorter calls are never looked at.
    public let memoryLimit: Int?

    /// How many threads (and contexts) the engine has.
    public let threads: Int

    private let contexts: ThreadContexts
    private let workers: Workers

    /// An engine whose functions may each run for `timeLimit` and grow the resident memory by
    /// `memoryLimit` bytes, with `threads` threads for `async` callers.
    public init(timeLimit: Duration = .seconds(5), memoryLimit: Int? = 256 * 1024 * 1024, threads: Int = 2) {
        self.timeLimit = timeLimit
        self.memoryLimit = memoryLimit
        let seconds = Double(timeLimit.components.seconds) + Double(timeLimit.components.attoseconds) / 1e18
        contexts = ThreadContexts(timeLimit: seconds, memoryLimit: memoryLimit)
        self.threads = max(1, threads)
        workers = Workers(javaScriptThreads: self.threads, name: "docstore.javascript")
    }

    /// The threads end once the work given to them has run, each releasing its context; then the
    /// thread-specific slot goes too (a process has about a thousand of them).
    deinit {
        workers.finish(eachThreadLast: { [contexts] in contexts.releaseCurrent() }, afterAll: { [contexts] in contexts.delete() })
    }

    /// Runs each of `bodies` with a context on one of the engine's threads, as many at once as it has
    /// threads, and waits for all of them. Called on an engine thread, they run there one after the other.
    ///
    /// The wait blocks the calling thread (Docs/Architecture.md): the callers are the synchronous SQLite work of
    /// the index writer (map functions, on the index writer's own queue), the database writer
    /// (validation, on the threads for the app's code) and the readers (filters, reduces), which run
    /// on their caller's thread. Where that is the cooperative pool, the wait holds a pool thread no
    /// longer than running the JavaScript there would, and keeps the JavaScript itself on the
    /// engine's threads.
    func withContexts<T: Sendable>(_ bodies: [@Sendable (JavaScriptContext) throws -> T]) throws -> [T] {
        if let context = contexts.existing() { return try bodies.map { try $0(context) } }
        let jobs = bodies.map { body in WaitedJob { [contexts] in try body(try contexts.current()) } }
        for job in jobs { workers.submit { job.run() } }
        return try jobs.map { try $0.wait() }
    }

    /// Runs `body` with a context on one of the engine's threads and waits for it, blocking the caller
    /// as ``withContexts(_:)`` does (its note on the cooperative pool holds here too). Called on an engine
    /// thread, it runs there at once.
    func withContext<T>(_ body: (JavaScriptContext) throws -> T) throws -> T {
        if let context = contexts.existing() { return try body(context) }
        return try workers.perform { try body(try contexts.current()) }
    }

    /// Runs `body` with a context on one of the engine's own threads; the caller's task waits without
    /// holding a thread.
    func run<T: Sendable>(_ body: @escaping @Sendable (JavaScriptContext) throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            workers.submit { [contexts] in
                continuation.resume(with: Result { try body(try contexts.current()) })
            }
        }
    }
}

/// One ``JavaScriptContext`` per thread, in a thread-specific slot that releases it when its thread ends.
final class ThreadContexts: Sendable {
    private let key: pthread_key_t
    private let timeLimit: Double
    private let memoryLimit: Int?

    init(timeLimit: Double, memoryLimit: Int?) {
        self.timeLimit = timeLimit
        self.memoryLimit = memoryLimit
        ThreadContexts.configureJavaScriptCore
        var key = pthread_key_t()
        pthread_key_create(&key) { pointer in
            #if canImport(Glibc) || canImport(Musl)
            guard let pointer else { return }
            #endif
            Unmanaged<JavaScriptContext>.fromOpaque(pointer).release()
        }
        self.key = key
    }

    /// JavaScriptCore's options, set once before its first context: its VM traps (how the watchdog stops
    /// a runaway script) poll instead of suspending the running thread with a signal. With contexts on
    /// several threads, a thread suspended while it held the allocator's lock deadlocked the process
    /// (seen here: one thread in `Thread::resume` from the trap's signal sender, another waiting in
    /// `pas_thread_local_cache_for_all`). JavaScriptCore reads `JSC_<option>` environment variables
    /// when it initialises; one the process already set is left as it is.
    static let configureJavaScriptCore: Void = {
        setenv("JSC_usePollingTraps", "true", 0)
    }()

    /// Releases this thread's context, if it has one.
    func releaseCurrent() {
        guard let pointer = pthread_getspecific(key) else { return }
        pthread_setspecific(key, nil)
        Unmanaged<JavaScriptContext>.fromOpaque(pointer).release()
    }

    /// Frees the thread-specific slot, once no thread has a context in it (``releaseCurrent()``).
    func delete() {
        pthread_key_delete(key)
    }

    /// This thread's context if it has one (only an engine's threads do).
    func existing() -> JavaScriptContext? {
        pthread_getspecific(key).map { Unmanaged<JavaScriptContext>.fromOpaque($0).takeUnretainedValue() }
    }

    /// This thread's context. The slot is per thread, so no other thread ever sees it.
    func current() throws -> JavaScriptContext {
        if let pointer = pthread_getspecific(key) {
            return Unmanaged<JavaScriptContext>.fromOpaque(pointer).takeUnretainedValue()
        }
        let context = try JavaScriptContext(timeLimit: timeLimit, memoryLimit: memoryLimit)
        pthread_setspecific(key, Unmanaged.passRetained(context).toOpaque())
        return context
    }
}

/// The engine's threads: DocStore's `DedicatedThreads` (threads of their own, never the cooperative
/// pool's, which wait for work, until the engine goes), with the stack JavaScriptCore needs, and a way
/// to run a closure there and wait for it.
typealias Workers = DedicatedThreads

extension DedicatedThreads {
    /// Starts the engine's threads: `count` of them, named `name`-N, with 8 MB stacks.
    convenience init(javaScriptThreads count: Int, name: String) {
        self.init(count: count, name: name, stackSize: 8 << 20)
    }

    /// Runs `body` on one of the threads and blocks the calling thread until it has run.
    func perform<T>(_ body: () throws -> T) throws -> T {
        try withoutActuallyEscaping(body) { body in
            let job = WaitedJob(body)
            submit { job.run() }
            return try job.wait()
        }
    }
}

/// A job whose submitter waits for it: `perform` hands a non-escaping, non-`Sendable` closure to a
/// worker thread and gets its result back.
///
/// `@unchecked Sendable`: `body` and `result` are touched by the worker inside `run()` and by the
/// submitter only after `wait()` returns, and the semaphore's signal/wait orders the two; the
/// submitter is blocked in `wait()` the whole time, and `run()` drops the closure before it signals,
/// so the closure never outlives its scope.
private final class WaitedJob<T>: @unchecked Sendable {
    private var body: (() throws -> T)?
    private var result: Result<T, any Error>?
    private let done = DispatchSemaphore(value: 0)

    init(_ body: @escaping () throws -> T) { self.body = body }

    func run() {
        result = Result { try body!() }
        // Released before the submitter resumes: `withoutActuallyEscaping` checks that nothing holds it.
        body = nil
        done.signal()
    }

    func wait() throws -> T {
        done.wait()
        return try result!.get()
    }
}
