#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Synchronization

/// A value behind a lock: the standard library's `Mutex`, which ThreadSanitizer also understands.
///
/// On Linux `Mutex` hands a contended lock from one thread to the next inside the kernel
/// (`FUTEX_LOCK_PI`/`FUTEX_UNLOCK_PI`), where ThreadSanitizer cannot see it: every access under a
/// contended `Mutex` is then reported as a race. `Locked` tells the sanitizer what the lock does —
/// acquired on entry, released on exit — when the process runs under it (`swift test
/// --sanitize=thread`), and costs one predictable branch otherwise. Use it wherever DocStore's
/// packages need a lock.
package struct Locked<Value: ~Copyable>: ~Copyable, Sendable {
    private let mutex: Mutex<Value>

    package init(_ initialValue: consuming sending Value) {
        mutex = Mutex(initialValue)
    }

    /// Runs `body` with the value, holding the lock.
    package borrowing func withLock<Result: ~Copyable, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result {
        guard let annotations = ThreadSanitizer.annotations else { return try mutex.withLock(body) }
        // The lock's own address names it to the sanitizer. `Locked` holds a `Mutex`, so it is never
        // copied or moved in memory: borrowed, it is passed by that address. (The guarded value's
        // address would do too, but taking it is an access the sanitizer would check before it knows
        // the lock is held.)
        let lock = withUnsafePointer(to: self) { UnsafeRawPointer($0) }
        return try mutex.withLock { (value: inout sending Value) throws(E) -> sending Result in
            annotations.acquire(lock)
            defer { annotations.release(lock) }
            return try body(&value)
        }
    }
}

/// ThreadSanitizer's annotation functions, when the process was built with it.
private enum ThreadSanitizer {
    struct Annotations: Sendable {
        let acquire: @convention(c) (UnsafeRawPointer?) -> Void
        let release: @convention(c) (UnsafeRawPointer?) -> Void
    }

    /// Looked up once among the process's symbols, where the sanitizer's runtime exports them.
    static let annotations: Annotations? = {
        #if canImport(Darwin)
        let everywhere = UnsafeMutableRawPointer(bitPattern: -2)  // RTLD_DEFAULT
        #else
        let everywhere: UnsafeMutableRawPointer? = nil  // RTLD_DEFAULT
        #endif
        guard let acquire = dlsym(everywhere, "__tsan_acquire"), let release = dlsym(everywhere, "__tsan_release") else { return nil }
        typealias Function = @convention(c) (UnsafeRawPointer?) -> Void
        return Annotations(acquire: unsafeBitCast(acquire, to: Function.self), release: unsafeBitCast(release, to: Function.self))
    }()
}
