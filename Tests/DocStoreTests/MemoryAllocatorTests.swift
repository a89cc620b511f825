#if canImport(Glibc)
import Glibc
#endif
import TestSupport
import XCTest
@testable import DocStore

final class MemoryAllocatorTests: XCTestCase {
    func testTheEnvironmentsThresholdWins() {
        XCTAssertFalse(MemoryAllocator.environmentSetsThreshold([:]))
        XCTAssertFalse(MemoryAllocator.environmentSetsThreshold(["GLIBC_TUNABLES": "glibc.malloc.arena_max=2"]))
        XCTAssertTrue(MemoryAllocator.environmentSetsThreshold(["MALLOC_MMAP_THRESHOLD_": "65536"]))
        XCTAssertTrue(MemoryAllocator.environmentSetsThreshold(
            ["GLIBC_TUNABLES": "glibc.malloc.arena_max=2:glibc.malloc.mmap_threshold=262144"]))
        XCTAssertFalse(MemoryAllocator.fixLargeBlockThreshold(bytes: Int(Int32.max) + 1))
    }

    #if canImport(Glibc)
    /// After the fix, a block above the threshold has a mapping of its own even after a larger one
    /// was freed (which, left to glibc, raises the threshold above it: the block then comes from an
    /// arena). The blocks are large (24 and 32 MiB), so that no free chunk an earlier test left in an
    /// arena can serve them instead.
    func testLargeBlocksKeepTheirOwnMappingOnceFixed() throws {
        let setByEnvironment = MemoryAllocator.environmentSetsThreshold(ProcessInfo.processInfo.environment)
        // Under a sanitizer, malloc is the sanitizer's: its mallopt changes nothing and says so.
        let fixed = MemoryAllocator.fixLargeBlockThreshold()
        if Sanitizer.isRunning { return }
        XCTAssertEqual(fixed, !setByEnvironment)
        if setByEnvironment { return }  // the operator's threshold, whatever it is, is not ours to check
        for _ in 0..<3 {
            free(malloc(32 << 20))
            let block = try XCTUnwrap(malloc(24 << 20))
            // glibc keeps a chunk's size in the word before the block; bit 1 (IS_MMAPPED) says mapped.
            let sizeField = block.load(fromByteOffset: -MemoryLayout<Int>.size, as: Int.self)
            XCTAssertEqual(sizeField & 2, 2, "a 24 MiB block came from an arena")
            free(block)
        }
    }
    #endif
}
