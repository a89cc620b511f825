#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// A process-wide setting of the C allocator that suits a long-running process using DocStore.
///
/// DocStore works on several threads of its own (the writer, the readers, the long reads, JavaScript),
/// and on Linux each thread allocates from one of glibc's malloc arenas. glibc serves a block of
/// 128 KiB or more from a mapping of its own, returned to the system when freed — but each time such
/// a block is freed it raises that threshold to the block's size (up to 32 MiB). From then on, the
/// large transient buffers of a bulk save, an index build or a replication batch come from the arenas
/// instead, and what they leave behind there stays with the process, fragmented: in
/// `docstore-bench`, each repetition of the same operations started 20–40 MB higher than the one
/// before, with the same bytes in use (Docs/Performance.md). ``fixLargeBlockThreshold(bytes:)``
/// keeps the threshold where it starts.
///
/// `docstore serve` applies it at start (``Database/prepareProcessForService()``, which an app that
/// embeds DocStore in a service of its own calls too). It changes nothing where the allocator is not
/// glibc's.
package enum MemoryAllocator {
    /// The threshold ``fixLargeBlockThreshold(bytes:)`` keeps by default: 128 KiB, glibc's own
    /// starting value.
    public static let defaultLargeBlockThreshold = 128 * 1024

    /// Serves every block of `bytes` or more from a mapping of its own, for the whole process, and
    /// stops glibc from raising that threshold as blocks are freed.
    ///
    /// The operator's choice wins: nothing changes when the environment already sets the threshold
    /// (`MALLOC_MMAP_THRESHOLD_`, or `glibc.malloc.mmap_threshold` in `GLIBC_TUNABLES`).
    ///
    /// - Parameter bytes: The smallest block served from its own mapping (at most 32 MiB, glibc's limit).
    /// - Returns: Whether the setting was made: false where the allocator is not glibc's, where the
    ///   environment sets the threshold, or where glibc refuses the value.
    @discardableResult
    public static func fixLargeBlockThreshold(bytes: Int = defaultLargeBlockThreshold) -> Bool {
        guard !environmentSetsThreshold(ProcessInfo.processInfo.environment), let bytes = Int32(exactly: bytes) else {
            return false
        }
        #if canImport(Glibc)
        // mallopt is declared in <malloc.h>, which Swift's Glibc module leaves out: look it up in the C
        // library (absent under another libc, where nothing changes).
        typealias Mallopt = @convention(c) (Int32, Int32) -> Int32
        guard let library = dlopen(nil, RTLD_NOW), let symbol = dlsym(library, "mallopt") else { return false }
        let mmapThreshold: Int32 = -3  // M_MMAP_THRESHOLD in <malloc.h>
        return unsafeBitCast(symbol, to: Mallopt.self)(mmapThreshold, bytes) == 1
        #else
        return false
        #endif
    }

    /// Whether `environment` sets glibc's mapping threshold itself.
    static func environmentSetsThreshold(_ environment: [String: String]) -> Bool {
        environment["MALLOC_MMAP_THRESHOLD_"] != nil
            || (environment["GLIBC_TUNABLES"] ?? "").split(separator: ":").contains { $0.hasPrefix("glibc.malloc.mmap_threshold=") }
    }
}
