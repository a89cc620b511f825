#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Object keys the parser made recently on this thread, so that documents of one shape — a page of
/// the changes feed, an index window, a bulk upload — make each key's `String` once.
///
/// Only plain-ASCII keys of up to 15 bytes are kept: those are small strings, held inline, so a cached
/// key costs no memory beyond its slot and sharing it costs no reference counting. The cache is
/// direct-mapped on a hash of the key's bytes; a collision simply replaces the slot.
///
/// One cache per thread, reached through a thread-specific key: the parser runs synchronously, so no
/// other code can use the cache while one parse is running on the thread, and no two threads share one.
final class JSONKeyCache {
    struct Entry {
        /// The key's bytes, little-endian, zero past its end; `count` is -1 in an empty slot.
        var word0: UInt64
        var word1: UInt64
        var count: Int
        var key: String
    }

    static let slotCount = 256
    let entries: UnsafeMutablePointer<Entry>

    init() {
        entries = .allocate(capacity: JSONKeyCache.slotCount)
        entries.initialize(repeating: Entry(word0: 0, word1: 0, count: -1, key: ""), count: JSONKeyCache.slotCount)
    }

    deinit {
        entries.deinitialize(count: JSONKeyCache.slotCount)
        entries.deallocate()
    }

    /// The key with these bytes (`count` ≤ 15, words as in ``Entry``), made from `bytes` on a miss.
    @inline(__always)
    func key(word0: UInt64, word1: UInt64, count: Int, hash: UInt64, bytes: UnsafeBufferPointer<UInt8>) -> String {
        let entry = entries + Int(truncatingIfNeeded: hash >> 56)
        if entry.pointee.word0 == word0 && entry.pointee.word1 == word1 && entry.pointee.count == count {
            return entry.pointee.key
        }
        let key = String(decoding: bytes, as: UTF8.self)
        entry.pointee = Entry(word0: word0, word1: word1, count: count, key: key)
        return key
    }

    /// The calling thread's cache.
    static var current: JSONKeyCache {
        if let pointer = pthread_getspecific(threadKey) {
            return Unmanaged<JSONKeyCache>.fromOpaque(pointer).takeUnretainedValue()
        }
        let cache = JSONKeyCache()
        pthread_setspecific(threadKey, Unmanaged.passRetained(cache).toOpaque())
        return cache
    }
}

/// The thread-specific slot of each thread's ``JSONKeyCache``; a thread's cache is released when the
/// thread exits.
private let threadKey: pthread_key_t = {
    var key = pthread_key_t()
    #if canImport(Darwin)
    let status = pthread_key_create(&key) { Unmanaged<JSONKeyCache>.fromOpaque($0).release() }
    #else
    let status = pthread_key_create(&key) { pointer in
        if let pointer { Unmanaged<JSONKeyCache>.fromOpaque(pointer).release() }
    }
    #endif
    precondition(status == 0, "pthread_key_create failed")
    return key
}()

/// A hash of a key of up to 15 bytes given as two little-endian words (zero past the end); never 0.
@inline(__always)
func shortKeyHash(_ word0: UInt64, _ word1: UInt64, _ count: Int) -> UInt64 {
    var hash = (word0 &* 0x9E37_79B9_7F4A_7C15) ^ (word1 &* 0xC2B2_AE3D_27D4_EB4F) ^ UInt64(truncatingIfNeeded: count)
    hash ^= hash >> 31
    hash = hash &* 0xBF58_476D_1CE4_E5B9
    hash ^= hash >> 29
    return hash | 1
}
