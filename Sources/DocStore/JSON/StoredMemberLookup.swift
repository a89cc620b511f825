/// Reading one member of a stored object without parsing the others.
///
/// A Mango selector, a Swift map function or a filter usually reads one or two members of a document
/// read from the database; parsing its whole body into a tree for that was a quarter of a query through
/// a json index. Stored bytes are DocStore's own writing (``JSONWriter``'s form, keys unique), so the
/// members before the one asked for are skipped by their brackets and quotes alone, and only its value
/// is parsed. Whatever the scan is not sure of (an escaped key, bytes it cannot follow) answers
/// "unknown", and the caller parses the whole object as before. (Bytes damaged under SQLite, the one
/// way stored bytes can be invalid, read as an empty body once parsed; a member before the damage may
/// still be found by a scan.)
extension StoredMembers {
    /// How many members are looked up by scanning before the whole object is parsed instead: a caller
    /// that reads many members one by one (a decoder) would otherwise scan the bytes again for each.
    static let scannedLookupsBeforeParsing = 4

    /// The value of member `key` of the stored bytes: `.some(value)`, `.some(nil)` when there is no
    /// such member, or `nil` when the bytes must be parsed to tell.
    func scannedValue(forKey key: String) -> JSON?? {
        var key = key
        return key.withUTF8 { wanted in
            bytes.withUnsafeBufferPointer { buffer in
                var scanner = StoredObjectScanner(buffer: buffer)
                return scanner.value(forKey: wanted)
            }
        }
    }
}

/// A forward scan over one JSON object as DocStore stores it (see ``StoredMembers/scannedValue(forKey:)``).
/// Whitespace is tolerated although ``JSONWriter`` writes none.
struct StoredObjectScanner {
    let buffer: UnsafeBufferPointer<UInt8>
    var index = 0

    init(buffer: UnsafeBufferPointer<UInt8>) {
        self.buffer = buffer
    }

    /// See ``StoredMembers/scannedValue(forKey:)``; `wanted` is the key's UTF-8.
    mutating func value(forKey wanted: UnsafeBufferPointer<UInt8>) -> JSON?? {
        skipWhitespace()
        guard next(is: UInt8(ascii: "{")) else { return nil }
        skipWhitespace()
        if next(is: UInt8(ascii: "}")) { return .some(nil) }
        // An escaped key might spell `wanted`: then only a parse can say the member is absent.
        var sawEscapedKey = false
        while true {
            skipWhitespace()
            guard index < buffer.count, buffer[index] == UInt8(ascii: "\"") else { return nil }
            let keyStart = index + 1
            guard let escaped = skipString() else { return nil }
            let keyEnd = index - 1
            skipWhitespace()
            guard next(is: UInt8(ascii: ":")) else { return nil }
            skipWhitespace()
            if !escaped, keyEnd - keyStart == wanted.count,
                bytesEqual(buffer.baseAddress! + keyStart, wanted.baseAddress, wanted.count) {
                // The member: its value parsed where it stands (one pass), and followed by a separator.
                var reader = JSONReader(buffer)
                reader.index = index
                guard let value = try? reader.readValue() else { return nil }
                index = reader.index
                skipWhitespace()
                guard index < buffer.count, buffer[index] == UInt8(ascii: ",") || buffer[index] == UInt8(ascii: "}") else { return nil }
                return .some(value)
            }
            guard skipValue() else { return nil }
            if escaped { sawEscapedKey = true }
            skipWhitespace()
            guard index < buffer.count else { return nil }
            let separator = buffer[index]
            index += 1
            if separator == UInt8(ascii: ",") { continue }
            guard separator == UInt8(ascii: "}") else { return nil }
            return sawEscapedKey ? nil : .some(nil)
        }
    }

    private func bytesEqual(_ a: UnsafePointer<UInt8>, _ b: UnsafePointer<UInt8>?, _ count: Int) -> Bool {
        guard count > 0, let b else { return true }
        for offset in 0..<count where a[offset] != b[offset] { return false }
        return true
    }

    private mutating func next(is byte: UInt8) -> Bool {
        guard index < buffer.count, buffer[index] == byte else { return false }
        index += 1
        return true
    }

    private mutating func skipWhitespace() {
        while index < buffer.count {
            switch buffer[index] {
            case 0x20, 0x0A, 0x0D, 0x09: index += 1
            default: return
            }
        }
    }

    /// Skips the string whose opening quote is at `index`; whether it held an escape, or `nil` when it
    /// does not end.
    private mutating func skipString() -> Bool? {
        index += 1
        var escaped = false
        let base = buffer.baseAddress
        while true {
            if let base {
                while index + 8 <= buffer.count,
                    swarSpecialOrNonASCIIMask(UnsafeRawPointer(base + index).loadUnaligned(as: UInt64.self)) == 0 {
                    index += 8
                }
            }
            guard index < buffer.count else { return nil }
            switch buffer[index] {
            case UInt8(ascii: "\""):
                index += 1
                return escaped
            case UInt8(ascii: "\\"):
                escaped = true
                index += 2
            default:
                index += 1
            }
        }
    }

    /// Skips the value at `index`; `false` when its end cannot be found.
    private mutating func skipValue() -> Bool {
        guard index < buffer.count else { return false }
        switch buffer[index] {
        case UInt8(ascii: "\""):
            return skipString() != nil
        case UInt8(ascii: "{"), UInt8(ascii: "["):
            var depth = 0
            while index < buffer.count {
                switch buffer[index] {
                case UInt8(ascii: "\""):
                    guard skipString() != nil else { return false }
                    continue
                case UInt8(ascii: "{"), UInt8(ascii: "["):
                    depth += 1
                case UInt8(ascii: "}"), UInt8(ascii: "]"):
                    depth -= 1
                    if depth == 0 {
                        index += 1
                        return true
                    }
                default:
                    break
                }
                index += 1
            }
            return false
        default:
            // A number or a literal runs to the next separator.
            let start = index
            while index < buffer.count {
                switch buffer[index] {
                case UInt8(ascii: ","), UInt8(ascii: "}"), UInt8(ascii: "]"), 0x20, 0x0A, 0x0D, 0x09:
                    return index > start
                default:
                    index += 1
                }
            }
            return false
        }
    }
}
