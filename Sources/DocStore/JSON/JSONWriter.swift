/// DocStore's JSON serializer: compact output straight into a byte buffer.
///
/// Strings escape only what JSON requires (`"`, `\`, and control characters below U+0020, the common
/// ones as `\n`-style escapes and the rest as `\u00XX`); all other Unicode is written as UTF-8.
/// Doubles use Swift's shortest round-tripping representation (`1.0`, `0.1`, `1e+100`, `-0.0`).
///
/// The package's protocol answers (`_changes`, `_all_docs` and views, `_bulk_get`) write their
/// envelopes with it directly, around values written with ``write(_:)``, instead of building a tree
/// to serialize.
package struct JSONWriter {
    package var bytes: [UInt8] = []
    /// When set, NaN and infinities are written as `null` instead of throwing (used by `description`).
    var nonFiniteAsNull = false

    package init(nonFiniteAsNull: Bool = false, capacity: Int = 256) {
        self.nonFiniteAsNull = nonFiniteAsNull
        bytes.reserveCapacity(capacity)
    }

    package mutating func write(_ value: JSON) throws {
        switch value {
        case .null:
            bytes.append(contentsOf: "null".utf8)
        case .bool(let b):
            bytes.append(contentsOf: b ? "true".utf8 : "false".utf8)
        case .integer(let i):
            writeInteger(i)
        case .bigInteger(let text):
            bytes.append(contentsOf: text.utf8)
        case .double(let d):
            try writeDouble(d)
        case .string(let s):
            writeString(s)
        case .array(let elements):
            bytes.append(UInt8(ascii: "["))
            var first = true
            for element in elements {
                if !first { bytes.append(UInt8(ascii: ",")) }
                first = false
                try write(element)
            }
            bytes.append(UInt8(ascii: "]"))
        case .object(let object):
            try writeObject(object)
        }
    }

    mutating func writeObject(_ object: JSONObject) throws {
        try writeObject(object, appending: [])
    }

    /// Writes `object` with `extra` members appended after its own, without copying the object. A
    /// stored object's bytes are copied as they are, not parsed.
    mutating func writeObject(_ object: JSONObject, appending extra: [(String, JSON)]) throws {
        bytes.append(UInt8(ascii: "{"))
        var first = true
        switch object.storage {
        case .members(let members, _):
            try writeMembers(members, first: &first)
        case .stored(let stored):
            try writeMembers(stored.head, first: &first)
            // The members of the stored object: its text without the braces.
            if stored.bytes.count > 2 {
                if !first { bytes.append(UInt8(ascii: ",")) }
                first = false
                bytes.append(contentsOf: stored.bytes[1..<(stored.bytes.count - 1)])
            }
            try writeMembers(stored.tail, first: &first)
        }
        for (key, value) in extra {
            if !first { bytes.append(UInt8(ascii: ",")) }
            first = false
            writeKey(key)
            try write(value)
        }
        bytes.append(UInt8(ascii: "}"))
    }

    private mutating func writeMembers(_ members: [JSONObject.Member], first: inout Bool) throws {
        for member in members {
            if !first { bytes.append(UInt8(ascii: ",")) }
            first = false
            writeKey(member.key)
            try write(member.value)
        }
    }

    /// Appends `"key":` — a member name followed by the colon.
    mutating func writeKey(_ key: String) {
        writeString(key)
        bytes.append(UInt8(ascii: ":"))
    }

    package mutating func writeInteger(_ value: Int) {
        if value >= 0 && value < 10 {
            bytes.append(UInt8(truncatingIfNeeded: value) &+ 48)
            return
        }
        if value < 0 { bytes.append(UInt8(ascii: "-")) }
        withUnsafeTemporaryAllocation(byteCount: DecimalDigits.maximumCount, alignment: 1) { digits in
            let count = DecimalDigits.write(UInt64(value.magnitude), into: digits)
            bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: digits[..<count]))
        }
    }

    mutating func writeDouble(_ value: Double) throws {
        guard value.isFinite else {
            if nonFiniteAsNull {
                bytes.append(contentsOf: "null".utf8)
                return
            }
            throw DocStoreError(.invalidJSON, "JSON cannot represent the number \(value)")
        }
        bytes.append(contentsOf: value.description.utf8)
    }

    package mutating func writeString(_ string: String) {
        var string = string
        string.withUTF8 { utf8 in
            bytes.append(UInt8(ascii: "\""))
            var runStart = 0
            var k = 0
            let count = utf8.count
            while k < count {
                // Skip eight plain bytes at a time.
                if k + 8 <= count, let base = utf8.baseAddress,
                    !swarHasSpecialByte(UnsafeRawPointer(base + k).loadUnaligned(as: UInt64.self)) {
                    k += 8
                    continue
                }
                let byte = utf8[k]
                k += 1
                guard byte < 0x20 || byte == 0x22 || byte == 0x5C else { continue }
                if runStart < k - 1 { bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<(k - 1)])) }
                runStart = k
                bytes.append(UInt8(ascii: "\\"))
                switch byte {
                case 0x22: bytes.append(0x22)
                case 0x5C: bytes.append(0x5C)
                case 0x0A: bytes.append(UInt8(ascii: "n"))
                case 0x0D: bytes.append(UInt8(ascii: "r"))
                case 0x09: bytes.append(UInt8(ascii: "t"))
                case 0x08: bytes.append(UInt8(ascii: "b"))
                case 0x0C: bytes.append(UInt8(ascii: "f"))
                default:
                    let hex: [UInt8] = Array("0123456789abcdef".utf8)
                    bytes.append(contentsOf: [UInt8(ascii: "u"), 48, 48, hex[Int(byte >> 4)], hex[Int(byte & 0xF)]])
                }
            }
            if runStart < utf8.count { bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart...])) }
            bytes.append(UInt8(ascii: "\""))
        }
    }

    /// Writes a revision as a JSON string (`"N-hash"`), without making a `String` for a hex hash.
    package mutating func writeRevision(_ revision: RevisionID) {
        guard revision.isHex else { return writeString(revision.description) }
        bytes.append(UInt8(ascii: "\""))
        revision.withDescriptionBytes { bytes.append(contentsOf: $0) }
        bytes.append(UInt8(ascii: "\""))
    }

    /// Appends JSON text already written (a member separator, a bracket).
    package mutating func append(_ text: StaticString) {
        text.withUTF8Buffer { bytes.append(contentsOf: $0) }
    }
}
