/// A revision id of the form `N-hash`, where `N` is the generation (1 for a new document, one more
/// for each edit) and `hash` identifies the content.
///
/// Ordering follows CouchDB: by generation, then by the hash compared as bytes.
///
/// The hash DocStore and CouchDB write — 32 lowercase hex digits — is held as two integers, so that
/// making, comparing and hashing such an id allocates nothing; any other hash a peer writes is held
/// as text.
public struct RevisionID: Sendable, Hashable, Comparable, LosslessStringConvertible, Codable {
    /// The generation, 1 or more; 0 only in the revision of a local document (``LocalDocument``).
    public let generation: Int
    private let storage: Digest

    /// The hash: 32 lowercase hex digits as a 128-bit number (the canonical form: such a hash is
    /// never held as text, so equal ids always have equal storage), or any other text.
    private enum Digest: Sendable, Hashable {
        case hex(UInt64, UInt64)
        case text(String)
    }

    /// Whether the hash is 32 lowercase hex digits (so its text needs no escaping in JSON).
    var isHex: Bool {
        if case .hex = storage { return true } else { return false }
    }

    /// The part after the dash; DocStore writes 32 lowercase hex digits, peers may write anything.
    public var digest: String {
        switch storage {
        case .text(let text):
            return text
        case .hex(let high, let low):
            return String(unsafeUninitializedCapacity: 32) { buffer in
                RevisionID.writeHex(high, low, into: UnsafeMutableRawBufferPointer(buffer))
                return 32
            }
        }
    }

    /// Creates a revision id from its parts.
    /// - Precondition: `generation >= 1`. The digest may be empty: CouchDB takes `"1-"` (PouchDB
    ///   sends it) and keeps it as written.
    public init(generation: Int, digest: String) {
        precondition(generation >= 1, "invalid revision id")
        self.generation = generation
        var digest = digest
        self.storage = digest.withUTF8 { RevisionID.parseHex(UnsafeRawBufferPointer($0)) } ?? .text(digest)
    }

    /// The revision `0-N` of a local document written `counter` (N) times. Such a revision is never
    /// one of a replicated document, so ``init(_:)`` does not parse it.
    package init(localCounter counter: Int64) {
        self.generation = 0
        self.storage = .text(String(counter))
    }

    /// Parses a local document's revision `0-N`; `nil` for any other text.
    package static func local(_ text: String) -> RevisionID? {
        guard text.hasPrefix("0-"), let counter = Int64(text.dropFirst(2)), counter >= 1 else { return nil }
        return RevisionID(localCounter: counter)
    }

    /// The write counter of a local document's revision `0-N`; `nil` for any other revision.
    package var localCounter: Int64? {
        guard generation == 0, case .text(let text) = storage else { return nil }
        return Int64(text)
    }

    /// A revision id whose hash is given as bytes (e.g. a view of a stored revision tree).
    /// - Precondition: `generation >= 1`.
    init(generation: Int, digestBytes digest: UnsafeRawBufferPointer) {
        precondition(generation >= 1, "invalid revision id")
        self.generation = generation
        self.storage = RevisionID.parseHex(digest) ?? .text(String(decoding: digest, as: UTF8.self))
    }

    /// A revision id whose hash is the lowercase hex of 16 digest bytes (e.g. an MD5).
    package init<D: Sequence>(generation: Int, digest16 bytes: D) where D.Element == UInt8 {
        precondition(generation >= 1, "invalid revision id")
        var high: UInt64 = 0, low: UInt64 = 0, count = 0
        for byte in bytes {
            if count < 8 { high = high << 8 | UInt64(byte) } else { low = low << 8 | UInt64(byte) }
            count += 1
        }
        precondition(count == 16, "a 16-byte digest is required")
        self.generation = generation
        self.storage = .hex(high, low)
    }

    /// Parses `"N-hash"`; returns `nil` unless N is a positive decimal integer and the hash is non-empty
    /// printable ASCII without spaces.
    public init?(_ description: String) {
        var description = description
        guard let parsed = description.withUTF8({ RevisionID(utf8: UnsafeRawBufferPointer($0)) }) else { return nil }
        self = parsed
    }

    /// Parses `"N-hash"` from UTF-8 bytes, as ``init(_:)``.
    package init?(utf8 bytes: UnsafeRawBufferPointer) {
        guard let dash = bytes.firstIndex(of: UInt8(ascii: "-")), dash != 0 else { return nil }
        var generation = 0
        for byte in bytes[..<dash] {
            guard byte >= 48 && byte <= 57, generation < 100_000_000 else { return nil }
            generation = generation * 10 + Int(byte - 48)
        }
        let digest = UnsafeRawBufferPointer(rebasing: bytes[(dash + 1)...])
        guard generation >= 1, digest.count <= 256,
            digest.allSatisfy({ $0 > 0x20 && $0 < 0x7F })
        else { return nil }
        self.init(generation: generation, digestBytes: digest)
    }

    /// Whether CouchDB 3.3 reads `text` as a revision: an integer (Erlang's, with an optional sign)
    /// before the first `-`, then anything — 32 characters only if they are hex. Such a text that
    /// ``init(_:)`` refuses (`0-a`, `1-`, `+2-a`, a hash with a space) names a revision no database
    /// holds: CouchDB answers it as missing where it reads, rather than as a malformed request.
    package static func isReadableByCouchDB(_ text: String) -> Bool {
        guard let dash = text.utf8.firstIndex(of: UInt8(ascii: "-")) else { return false }
        var number = text.utf8[..<dash]
        if let sign = number.first, sign == UInt8(ascii: "+") || sign == UInt8(ascii: "-") { number = number.dropFirst() }
        guard !number.isEmpty, number.allSatisfy({ $0 >= 48 && $0 <= 57 }) else { return false }
        let hash = text.utf8[text.utf8.index(after: dash)...]
        return hash.count != 32 || hash.allSatisfy { ($0 >= 48 && $0 <= 57) || ($0 | 0x20 >= 97 && $0 | 0x20 <= 102) }
    }

    /// `text` read as CouchDB 3.3 reads a revision: as ``init(_:)``, but the generation may also have a
    /// sign or leading zeros (`+2-a` and `02-a` are `2-a`); `nil` where CouchDB refuses the text
    /// (``isReadableByCouchDB(_:)``) or reads a revision no database holds (`0-a`, `1-`).
    package static func readAsCouchDB(_ text: String) -> RevisionID? {
        // The revisions DocStore and CouchDB write (a generation of digits, 32 hex digits) are
        // readable without the check's walk over the text.
        if let exact = RevisionID(text), exact.isHex { return exact }
        guard isReadableByCouchDB(text) else { return nil }
        if let exact = RevisionID(text) { return exact }
        guard let dash = text.firstIndex(of: "-"), let generation = Int(text[..<dash]), generation >= 1 else {
            return nil
        }
        return RevisionID("\(generation)\(text[dash...])")
    }

    /// Revisions CouchDB 3.3 reads (``isReadableByCouchDB(_:)``) as it writes them back — each once, in
    /// its order (generation, then the hash's bytes, 32 hex digits as 16 bytes), the generation without
    /// sign or leading zeros and a hex hash in small letters — as its `open_revs` answers list them.
    package static func couchDBOrdered(_ texts: [String]) -> [String] {
        var keyed: [String: (generation: Int, hash: [UInt8])] = [:]
        for text in texts {
            guard isReadableByCouchDB(text), let dash = text.firstIndex(of: "-"), let generation = Int(text[..<dash]) else { continue }
            var hash = String(text[text.index(after: dash)...])
            var bytes = Array(hash.utf8)
            if bytes.count == 32 {
                hash = hash.lowercased()
                bytes = stride(from: 0, to: 32, by: 2).map { UInt8(hash.utf8.dropFirst($0).prefix(2).reduce(0) { $0 << 4 | hexValue($1) }) }
            }
            keyed["\(generation)-\(hash)"] = (generation, bytes)
        }
        return keyed.sorted { a, b in
            a.value.generation != b.value.generation ? a.value.generation < b.value.generation
                : a.value.hash.lexicographicallyPrecedes(b.value.hash)
        }.map(\.key)
    }

    private static func hexValue(_ digit: UInt8) -> Int {
        digit <= 57 ? Int(digit) - 48 : Int(digit | 0x20) - 87
    }

    /// Parses a revision id, throwing ``DocStoreError/Code/invalidRevision`` if it is malformed.
    public static func parse(_ text: String) throws -> RevisionID {
        guard let revision = RevisionID(text) else {
            throw DocStoreError(.invalidRevision, "Invalid rev format: \"\(text)\"")
        }
        return revision
    }

    /// `"N-hash"`.
    public var description: String {
        guard case .hex = storage else { return "\(generation)-\(digest)" }
        return withDescriptionBytes { String(decoding: $0, as: UTF8.self) }
    }

    /// Calls `body` with the UTF-8 bytes of ``description``, without making a `String` for a hex hash.
    func withDescriptionBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        guard case .hex(let high, let low) = storage else {
            var text = description
            return try text.withUTF8 { try body(UnsafeRawBufferPointer($0)) }
        }
        // Up to 20 digits of the generation, the dash and 32 hex digits.
        var scratch: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0, 0, 0)
        return try withUnsafeMutableBytes(of: &scratch) { buffer in
            let count = DecimalDigits.write(UInt64(generation), into: buffer)
            buffer[count] = UInt8(ascii: "-")
            RevisionID.writeHex(high, low, into: UnsafeMutableRawBufferPointer(rebasing: buffer[(count + 1)...]))
            return try body(UnsafeRawBufferPointer(rebasing: buffer[..<(count + 33)]))
        }
    }

    /// Calls `body` with the hash's UTF-8 bytes, without making a `String` for a hex hash.
    func withDigestBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        switch storage {
        case .text(var text):
            return try text.withUTF8 { try body(UnsafeRawBufferPointer($0)) }
        case .hex(let high, let low):
            var hex: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
            return try withUnsafeMutableBytes(of: &hex) { buffer in
                RevisionID.writeHex(high, low, into: buffer)
                return try body(UnsafeRawBufferPointer(buffer))
            }
        }
    }

    /// CouchDB's order (the one that picks a document's winner): by generation, then by the hash as
    /// CouchDB holds it — 32 hex digits as their 16 bytes, any other hash as its text's bytes — so a
    /// hex hash and a text one (`1-b8f9…` and `1-bb`, the bytes `b8 f9 …` and `62 62`) rank as they
    /// do in CouchDB, and replicas agree on the winner.
    public static func < (lhs: RevisionID, rhs: RevisionID) -> Bool {
        if lhs.generation != rhs.generation { return lhs.generation < rhs.generation }
        if case .hex(let lh, let ll) = lhs.storage, case .hex(let rh, let rl) = rhs.storage {
            return lh != rh ? lh < rh : ll < rl
        }
        return lhs.withOrderBytes { left in rhs.withOrderBytes { right in left.lexicographicallyPrecedes(right) } }
    }

    /// The bytes CouchDB compares hashes by: a hex hash's 16 bytes, big-endian; a text hash's UTF-8.
    private func withOrderBytes<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R {
        switch storage {
        case .hex(let high, let low):
            var bytes = (high.bigEndian, low.bigEndian)
            return withUnsafeBytes(of: &bytes) { body($0) }
        case .text(var text):
            return text.withUTF8 { body(UnsafeRawBufferPointer($0)) }
        }
    }

    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        self = try RevisionID.parse(text)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }

    // MARK: Hex

    private static let hexDigits: (UInt64, UInt64) = (0x3736_3534_3332_3130, 0x6665_6463_6261_3938)  // "0123456789abcdef"

    /// Writes 32 lowercase hex digits of `high` then `low` at the start of `buffer`.
    private static func writeHex(_ high: UInt64, _ low: UInt64, into buffer: UnsafeMutableRawBufferPointer) {
        withUnsafeBytes(of: hexDigits) { digits in
            for i in 0..<16 {
                buffer[i] = digits[Int(truncatingIfNeeded: high >> (60 - 4 * UInt64(i))) & 0xF]
                buffer[16 + i] = digits[Int(truncatingIfNeeded: low >> (60 - 4 * UInt64(i))) & 0xF]
            }
        }
    }

    /// The 128-bit value of exactly 32 lowercase hex digits, or `nil` for any other text.
    private static func parseHex(_ bytes: UnsafeRawBufferPointer) -> Digest? {
        guard bytes.count == 32 else { return nil }
        // Branch-free per digit: hex digits in random order would defeat a branch predictor.
        var high: UInt64 = 0, low: UInt64 = 0
        var invalid: UInt8 = 0
        for i in 0..<16 {
            let (h, badH) = nibble(bytes[i]), (l, badL) = nibble(bytes[16 + i])
            high = high << 4 | h
            low = low << 4 | l
            invalid |= badH | badL
        }
        return invalid == 0 ? .hex(high, low) : nil
    }

    /// The value of a lowercase hex digit, and 1 if the byte is not one (else 0).
    @inline(__always)
    private static func nibble(_ byte: UInt8) -> (UInt64, UInt8) {
        let digit = byte &- 48, letter = byte &- 97
        let isDigit = digit < 10
        let bad: UInt8 = (isDigit ? 0 : 1) & (letter < 6 ? 0 : 1)
        return (UInt64(isDigit ? digit : letter &+ 10), bad)
    }
}
