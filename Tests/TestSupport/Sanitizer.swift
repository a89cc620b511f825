#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Whether this test process runs under AddressSanitizer or ThreadSanitizer (`swift test --sanitize=…`,
/// as `.ci/run` does after the plain run): their runtimes are linked into the process.
///
/// Under a sanitizer every instrumented instruction costs several, and malloc is the sanitizer's. Tests
/// that bound a latency allow more under one (``latencyBound(_:)``); the plain run holds the real bound.
public enum Sanitizer {
    /// True when AddressSanitizer's or ThreadSanitizer's runtime is in the process.
    public static let isRunning: Bool = {
        let process = dlopen(nil, RTLD_NOW)
        return dlsym(process, "__asan_init") != nil || dlsym(process, "__tsan_init") != nil
    }()

    /// `bound` in a plain build; under a sanitizer, `bound` times `factor`.
    public static func latencyBound(_ bound: Duration, underSanitizer factor: Int = 2) -> Duration {
        isRunning ? bound * factor : bound
    }
}
