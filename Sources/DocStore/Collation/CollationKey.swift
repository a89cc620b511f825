import CICUCollation

/// How index keys are ordered.
public enum Collation: String, Sendable, Hashable, Codable {
    /// CouchDB's default view collation: `null < false < true < numbers < strings < arrays < objects`,
    /// strings by the Unicode Collation Algorithm (ICU root collator: `"a" < "A" < "aa" < "b"`),
    /// arrays element by element (prefix first), objects member by member in member order.
    case unicode
    /// CouchDB's `raw` collation (Erlang term order): `numbers < false < null < true < objects <
    /// arrays < strings`, strings by their UTF-8 bytes.
    case raw
}

/// Encodes JSON values as byte strings whose `memcmp` order is the collation order, so that SQLite's
/// `ORDER BY` on a BLOB column sorts index rows exactly as CouchDB sorts view rows.
///
/// Every encoding is self-delimiting (no encoding is a prefix of another), so concatenations —
/// array elements, or a key followed by a document id — still compare correctly.
///
/// Layout (unicode): a type tag, then
/// - numbers: 8 bytes, the IEEE-754 double with the sign bit flipped (positive) or all bits inverted
///   (negative), big-endian, so that byte order is numeric order (`-0` is encoded as `0`);
/// - strings: the ICU sort key, which ends with its only zero byte;
/// - arrays and objects: the encoded elements (for objects: key, value, key, value…), then a zero byte,
///   which sorts before every tag, so a prefix sorts first.
/// Raw strings are their UTF-8 bytes with `00 → 01 01` and `01 → 01 02`, then `00`.
package enum CollationKey {
    static let end: UInt8 = 0x00

    enum Tag {
        static let unicode: (null: UInt8, bool: UInt8, number: UInt8, string: UInt8, array: UInt8, object: UInt8) =
            (0x01, 0x02, 0x04, 0x05, 0x06, 0x07)
        static let raw: (number: UInt8, falseValue: UInt8, null: UInt8, trueValue: UInt8, object: UInt8, array: UInt8, string: UInt8) =
            (0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07)
    }

    /// The ICU library and collator version the string keys depend on; an index records it and is
    /// rebuilt when it changes.
    public static let unicodeVersion: String = String(cString: docstore_collation_version())

    /// The encoding of `value`.
    public static func encode(_ value: JSON, collation: Collation = .unicode) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(32)
        append(value, to: &bytes, collation: collation)
        return bytes
    }

    /// The encoding of a document id as the tie-breaker of equal keys: its UTF-8 bytes, as CouchDB orders
    /// the ids of rows with equal keys (raw bytes, not collation: the NFC and NFD spellings of an id are
    /// two documents, which an ICU sort key would merge).
    static func encodeDocumentID(_ id: String, collation: Collation) -> [UInt8] {
        Array(id.utf8)
    }

    /// Names the encoding of ``encodeDocumentID(_:collation:)`` in an index's recorded collator version,
    /// so that indexes built with another one are rebuilt.
    static let documentIDEncoding = "ids:utf8"

    /// Appends the encoding of `value`.
    public static func append(_ value: JSON, to bytes: inout [UInt8], collation: Collation = .unicode) {
        switch collation {
        case .unicode: appendUnicode(value, to: &bytes)
        case .raw: appendRaw(value, to: &bytes)
        }
    }

    private static func appendUnicode(_ value: JSON, to bytes: inout [UInt8]) {
        switch value {
        case .null:
            bytes.append(Tag.unicode.null)
        case .bool(let b):
            bytes.append(Tag.unicode.bool)
            bytes.append(b ? 2 : 1)
        case .integer, .double, .bigInteger:
            bytes.append(Tag.unicode.number)
            appendNumber(value.doubleValue ?? 0, to: &bytes)
        case .string(let s):
            bytes.append(Tag.unicode.string)
            appendSortKey(s, to: &bytes)
        case .array(let elements):
            bytes.append(Tag.unicode.array)
            for element in elements { appendUnicode(element, to: &bytes) }
            bytes.append(end)
        case .object(let object):
            bytes.append(Tag.unicode.object)
            for (key, member) in object {
                appendUnicode(.string(key), to: &bytes)
                appendUnicode(member, to: &bytes)
            }
            bytes.append(end)
        }
    }

    private static func appendRaw(_ value: JSON, to bytes: inout [UInt8]) {
        switch value {
        case .integer, .double, .bigInteger:
            bytes.append(Tag.raw.number)
            appendNumber(value.doubleValue ?? 0, to: &bytes)
        case .bool(false): bytes.append(Tag.raw.falseValue)
        case .null: bytes.append(Tag.raw.null)
        case .bool(true): bytes.append(Tag.raw.trueValue)
        case .object(let object):
            bytes.append(Tag.raw.object)
            for (key, member) in object {
                appendRaw(.string(key), to: &bytes)
                appendRaw(member, to: &bytes)
            }
            bytes.append(end)
        case .array(let elements):
            bytes.append(Tag.raw.array)
            for element in elements { appendRaw(element, to: &bytes) }
            bytes.append(end)
        case .string(let s):
            bytes.append(Tag.raw.string)
            for byte in s.utf8 {
                switch byte {
                case 0x00: bytes.append(0x01); bytes.append(0x01)
                case 0x01: bytes.append(0x01); bytes.append(0x02)
                default: bytes.append(byte)
                }
            }
            bytes.append(end)
        }
    }

    private static func appendNumber(_ number: Double, to bytes: inout [UInt8]) {
        let value = number == 0 ? 0.0 : number  // -0 collates as 0
        var bits = value.bitPattern
        bits = bits & (1 << 63) == 0 ? bits | (1 << 63) : ~bits
        withUnsafeBytes(of: bits.bigEndian) { bytes.append(contentsOf: $0) }
    }

    private static func appendSortKey(_ string: String, to bytes: inout [UInt8]) {
        var utf16 = Array(string.utf16)
        let length16 = Int32(utf16.count)
        if utf16.isEmpty { utf16 = [0] }  // a valid pointer for ICU; the length stays 0
        var capacity = Int(length16) * 4 + 16
        while true {
            let start = bytes.count
            bytes.append(contentsOf: repeatElement(0, count: capacity))
            let length = utf16.withUnsafeBufferPointer { source in
                bytes.withUnsafeMutableBufferPointer { target in
                    docstore_collation_sort_key(source.baseAddress, length16,
                                                target.baseAddress! + start, Int32(capacity))
                }
            }
            if length < 0 {
                // ICU unavailable: fall back to code point order so that keys stay well-formed.
                bytes.removeLast(capacity)
                for scalar in string.unicodeScalars {
                    withUnsafeBytes(of: (scalar.value + 1).bigEndian) { bytes.append(contentsOf: $0) }
                }
                bytes.append(end)
                return
            }
            if Int(length) <= capacity {
                bytes.removeLast(capacity - Int(length))
                return
            }
            bytes.removeLast(capacity)
            capacity = Int(length)
        }
    }
}

/// The reference comparison of CouchDB's view collation, written independently of ``CollationKey``
/// (tests check that the two agree).
package enum JSONCollator {
    /// Compares two values: negative if `a` sorts first, zero if they collate equal, positive otherwise.
    public static func compare(_ a: JSON, _ b: JSON, collation: Collation = .unicode) -> Int {
        let (rankA, rankB) = (rank(a, collation), rank(b, collation))
        if rankA != rankB { return rankA < rankB ? -1 : 1 }
        switch (a, b) {
        case (.bool(let x), .bool(let y)):
            return x == y ? 0 : (x ? 1 : -1)
        case (.string(let x), .string(let y)):
            return compareStrings(x, y, collation)
        case (.array(let x), .array(let y)):
            for (ex, ey) in zip(x, y) {
                let c = compare(ex, ey, collation: collation)
                if c != 0 { return c }
            }
            return x.count == y.count ? 0 : (x.count < y.count ? -1 : 1)
        case (.object(let x), .object(let y)):
            for ((kx, vx), (ky, vy)) in zip(x, y) {
                let ck = compareStrings(kx, ky, collation)
                if ck != 0 { return ck }
                let cv = compare(vx, vy, collation: collation)
                if cv != 0 { return cv }
            }
            return x.count == y.count ? 0 : (x.count < y.count ? -1 : 1)
        default:
            if let x = a.doubleValue, let y = b.doubleValue { return x == y ? 0 : (x < y ? -1 : 1) }
            return 0
        }
    }

    private static func rank(_ value: JSON, _ collation: Collation) -> Int {
        switch (collation, value) {
        case (.unicode, .null): return 0
        case (.unicode, .bool): return 1
        case (.unicode, .integer), (.unicode, .double), (.unicode, .bigInteger): return 2
        case (.unicode, .string): return 3
        case (.unicode, .array): return 4
        case (.unicode, .object): return 5
        case (.raw, .integer), (.raw, .double), (.raw, .bigInteger): return 0
        case (.raw, .bool(false)): return 1
        case (.raw, .null): return 2
        case (.raw, .bool(true)): return 3
        case (.raw, .object): return 4
        case (.raw, .array): return 5
        case (.raw, .string): return 6
        }
    }

    private static func compareStrings(_ a: String, _ b: String, _ collation: Collation) -> Int {
        switch collation {
        case .raw:
            if a.isIdentical(to: b) { return 0 }
            return a.utf8.lexicographicallyPrecedes(b.utf8) ? -1 : 1
        case .unicode:
            let x = Array(a.utf16) + [0], y = Array(b.utf16) + [0]  // + [0]: never an empty buffer
            return Int(x.withUnsafeBufferPointer { px in
                y.withUnsafeBufferPointer { py in
                    docstore_collation_compare(px.baseAddress, Int32(px.count - 1), py.baseAddress, Int32(py.count - 1))
                }
            })
        }
    }
}
