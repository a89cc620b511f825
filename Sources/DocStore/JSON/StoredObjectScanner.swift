/// A forward scan over one JSON object as DocStore stores it (see ``StoredMembers/scannedValue(forKey:)``).
/// Whitespace is tolerated although ``JSONWriter`` writes none.
struct StoredObjectScanner {
    let buffer: UnsafeBufferPointer<UInt8>
    var index = 0

    init(buffer: UnsafeBufferPointer<UInt8>) {
        self.buffer = buffer
    }

    /// Where member `wanted` (its key's UTF-8) stands in the object.
    enum MemberPosition {
        /// Its value begins at this offset (the scanner's index is left there).
        case value(at: Int)
        /// The object has no such member; its closing brace is at this offset, after members or not.
        case absent(closingBrace: Int, afterMembers: Bool)
        /// Only a parse can tell (an escaped key, or bytes the scan cannot follow).
        case unknown
    }

    /// See ``MemberPosition``; the scan starts at the object's opening brace.
    mutating func position(ofKey wanted: UnsafeBufferPointer<UInt8>) -> MemberPosition {
        skipWhitespace()
        guard next(is: UInt8(ascii: "{")) else { return .unknown }
        skipWhitespace()
        if next(is: UInt8(ascii: "}")) { return .absent(closingBrace: index - 1, afterMembers: false) }
        // An escaped key might spell `wanted`: then only a parse can say the member is absent.
        var sawEscapedKey = false
        while true {
            skipWhitespace()
            guard index < buffer.count, buffer[index] == UInt8(ascii: "\"") else { return .unknown }
            let keyStart = index + 1
            guard let escaped = skipString() else { return .unknown }
            let keyEnd = index - 1
            skipWhitespace()
            guard next(is: UInt8(ascii: ":")) else { return .unknown }
            skipWhitespace()
            if !escaped, keyEnd - keyStart == wanted.count,
                bytesEqual(buffer.baseAddress! + keyStart, wanted.baseAddress, wanted.count) {
                return .value(at: index)
            }
            guard skipValue() else { return .unknown }
            if escaped { sawEscapedKey = true }
            skipWhitespace()
            guard index < buffer.count else { return .unknown }
            let separator = buffer[index]
            index += 1
            if separator == UInt8(ascii: ",") { continue }
            guard separator == UInt8(ascii: "}") else { return .unknown }
            return sawEscapedKey ? .unknown : .absent(closingBrace: index - 1, afterMembers: true)
        }
    }

    /// See ``StoredMembers/scannedValue(forKey:)``; `wanted` is the key's UTF-8.
    mutating func value(forKey wanted: UnsafeBufferPointer<UInt8>) -> JSON?? {
        switch position(ofKey: wanted) {
        case .unknown: return nil
        case .absent: return .some(nil)
        case .value:
            // The member: its value parsed where it stands (one pass), and followed by a separator.
            var reader = JSONReader(buffer)
            reader.index = index
            guard let value = try? reader.readValue() else { return nil }
            index = reader.index
            guard followedBySeparator() else { return nil }
            return .some(value)
        }
    }

    /// Where a new value of a member goes (``StoredMembers/setting(_:to:)``).
    enum Replacement {
        /// Over the bytes of its present value.
        case value(Range<Int>)
        /// As a new member before the closing brace at this offset, after other members or not.
        case newMember(closingBrace: Int, afterMembers: Bool)
    }

    /// Where a new value of member `wanted` goes; `nil` when only a parse can tell.
    mutating func replacement(forKey wanted: UnsafeBufferPointer<UInt8>) -> Replacement? {
        switch position(ofKey: wanted) {
        case .unknown: return nil
        case .absent(let brace, let afterMembers): return .newMember(closingBrace: brace, afterMembers: afterMembers)
        case .value(let start):
            guard skipValue() else { return nil }
            let end = index
            guard followedBySeparator() else { return nil }
            return .value(start..<end)
        }
    }

    /// Whether whitespace, then a `,` or the object's `}`, follows.
    private mutating func followedBySeparator() -> Bool {
        skipWhitespace()
        return index < buffer.count && (buffer[index] == UInt8(ascii: ",") || buffer[index] == UInt8(ascii: "}"))
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
        while true {
            index = skippingPlainWords(in: buffer, from: index)
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
