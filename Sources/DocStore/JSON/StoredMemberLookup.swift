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
        scanning(forKey: key) { scanner, wanted in scanner.value(forKey: wanted) }
    }

    /// Runs `body` with a scanner at the start of the bytes and the UTF-8 of `key`.
    fileprivate func scanning<T>(forKey key: String, _ body: (inout StoredObjectScanner, UnsafeBufferPointer<UInt8>) -> T) -> T {
        var key = key
        return key.withUTF8 { wanted in
            bytes.withUnsafeBufferPointer { buffer in
                var scanner = StoredObjectScanner(buffer: buffer)
                return body(&scanner, wanted)
            }
        }
    }
}

/// Changing one member of a stored object without parsing the others.
///
/// The common update reads a document, sets a field or two and saves it. Parsing its whole body into a
/// tree for that, then writing the tree out as JSON and hashing it for the revision id, was most of an
/// update's own work. A stored object whose member `key` gets a scalar value instead gets new bytes:
/// the old ones with the value's text put in place of the member's old value (or, for a new member,
/// before the closing brace) — what writing the changed tree would give, as ``JSONWriter`` writes
/// members in order. The object stays in the stored form, which the writer copies and hashes from its
/// text.
///
/// Only where that is sure to equal the tree's result: not for a key among the members around the
/// bytes (a document's metadata), not for a key that begins with `_` (a body's stored bytes have passed
/// ``DocumentValidation/validateBody(_:)``, which then need not read them), not for containers (whose
/// depth the stored form's reader limits), not for a value the writer refuses (a non-finite number),
/// and not once the members have been parsed (then the tree is changed, as before). Each change copies
/// the bytes, so after ``splicesBeforeParsing`` of them an object is parsed and changed as a tree.
extension StoredMembers {
    /// How many changes an object takes as new bytes before it is parsed instead.
    static let splicesBeforeParsing = 4

    /// The object with member `key` set to `value` as new bytes, or `nil` when the members must be
    /// parsed and changed as a tree (see above).
    func setting(_ key: String, to value: JSON) -> StoredMembers? {
        switch value {
        case .null, .bool, .integer, .string: break
        case .double(let number) where number.isFinite: break
        default: return nil
        }
        guard splices < Self.splicesBeforeParsing, key.utf8.first != UInt8(ascii: "_"), !isParsed, middle?.isParsed != true,
            !head.contains(where: { $0.key.isIdentical(to: key) }), !tail.contains(where: { $0.key.isIdentical(to: key) })
        else { return nil }
        guard let replacement = scanning(forKey: key, { scanner, wanted in scanner.replacement(forKey: wanted) }) else { return nil }
        var writer = JSONWriter(capacity: bytes.count + 32)
        let end: Int
        switch replacement {
        case .value(let range):
            writer.bytes.append(contentsOf: bytes[..<range.lowerBound])
            end = range.upperBound
        case .newMember(let brace, let afterMembers):
            // A new member goes last; the members after the bytes would come after it in the tree.
            guard tail.isEmpty else { return nil }
            writer.bytes.append(contentsOf: bytes[..<brace])
            if afterMembers { writer.bytes.append(UInt8(ascii: ",")) }
            writer.writeKey(key)
            end = brace
        }
        guard (try? writer.write(value)) != nil else { return nil }
        writer.bytes.append(contentsOf: bytes[end...])
        return StoredMembers(head: head, bytes: writer.bytes, tail: tail, splices: splices + 1)
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
