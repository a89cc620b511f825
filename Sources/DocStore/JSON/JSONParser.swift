/// DocStore's JSON parser: one pass over UTF-8 bytes, no Foundation, no intermediate tokens.
///
/// It accepts exactly RFC 8259 JSON and rejects, with the byte offset of the problem: trailing
/// commas, single quotes, comments, leading zeros, `NaN`/`Infinity`, numbers that overflow a double,
/// control characters in strings, invalid escapes, lone UTF-16 surrogates, invalid UTF-8, trailing
/// garbage and nesting deeper than ``maximumDepth``. An object that gives a key twice keeps its last
/// member, as `JSON.parse` and CouchDB read it.
package enum JSONParser {
    /// The deepest nesting of arrays and objects accepted; deeper input is rejected rather than
    /// risking the stack.
    public static let maximumDepth = 512

    /// Parses one JSON value that must span the whole buffer (surrounding whitespace allowed).
    static func parse(_ buffer: UnsafeBufferPointer<UInt8>, documentDepth: Int = 0) throws -> JSON {
        var reader = JSONReader(buffer)
        reader.documentDepth = documentDepth
        let value = try reader.readValue()
        reader.skipWhitespace()
        if reader.index != buffer.count {
            throw reader.error("Unexpected data after the JSON value")
        }
        return value
    }
}

/// A growable stack in manually managed memory, for the members of the containers being parsed.
///
/// Popping moves the top elements into a new array without retaining and releasing each one, which
/// `Array.removeSubrange` cannot do. Noncopyable, so its memory is freed exactly once, on every path.
struct ParseStack<Element>: ~Copyable {
    private var base: UnsafeMutablePointer<Element>
    private var capacity: Int
    private(set) var count = 0

    /// Allocates nothing until the first push: most parses of a scalar or a short key never push
    /// into some of a reader's stacks, and an index query parses two small values per row.
    init(capacity: Int) {
        self.capacity = 0
        initialCapacity = capacity
        // A placeholder, never read, written or freed while the capacity is 0.
        base = UnsafeMutablePointer(bitPattern: MemoryLayout<Element>.alignment)!
    }

    private let initialCapacity: Int

    deinit {
        guard capacity > 0 else { return }
        base.deinitialize(count: count)
        base.deallocate()
    }

    @inline(__always)
    mutating func push(_ element: consuming Element) {
        if count == capacity { grow() }
        (base + count).initialize(to: element)
        count += 1
    }

    private mutating func grow() {
        let grown = capacity == 0 ? initialCapacity : capacity * 2
        let larger = UnsafeMutablePointer<Element>.allocate(capacity: grown)
        if capacity > 0 {
            larger.moveInitialize(from: base, count: count)
            base.deallocate()
        }
        base = larger
        capacity = grown
    }

    subscript(position: Int) -> Element {
        @inline(__always) get { base[position] }
    }

    /// Moves the elements from `start` to the top into a new array and pops them.
    mutating func pop(from start: Int) -> [Element] {
        let moved = count - start
        count = start
        // reserveCapacity and append are specialized; the unsafeUninitializedCapacity initializers call
        // an unspecialized stdlib entry point that looks up generic metadata on every call.
        var result: [Element] = []
        result.reserveCapacity(moved)
        for k in start..<start + moved { result.append((base + k).move()) }
        return result
    }

    /// Drops the elements from `start` to the top.
    mutating func drop(from start: Int) {
        (base + start).deinitialize(count: count - start)
        count = start
    }
}

/// Where an object key starts in the input and a hash of its bytes, for the duplicate-key check.
struct KeyInfo {
    var offset: Int
    /// FNV-1a of the key's bytes; 0 marks a key that is not plain ASCII (escaped or non-ASCII), for
    /// which byte equality is not String equality.
    var hash: UInt64
}

/// The high bit of each byte of `word` (little-endian) that is `"`, `\\`, below 0x20 or not ASCII. Bytes
/// above the first such byte may be flagged wrongly; the lowest flag is exact.
@inline(__always)
func swarSpecialOrNonASCIIMask(_ word: UInt64) -> UInt64 {
    let ones: UInt64 = 0x0101_0101_0101_0101
    let highs: UInt64 = 0x8080_8080_8080_8080
    let quote = word ^ (ones &* 0x22)
    let backslash = word ^ (ones &* 0x5C)
    let hasQuote = (quote &- ones) & ~quote & highs
    let hasBackslash = (backslash &- ones) & ~backslash & highs
    let hasControl = (word &- ones &* 0x20) & ~word & highs
    return hasQuote | hasBackslash | hasControl | (word & highs)
}

/// `start` moved past the whole words of eight bytes that are all plain (none `"`, `\\`, below 0x20 or
/// not ASCII): the string scanners' fast path, before they look at bytes one by one.
@inline(__always)
package func skippingPlainWords(in buffer: UnsafeBufferPointer<UInt8>, from start: Int) -> Int {
    guard let base = buffer.baseAddress else { return start }
    var index = start
    while index + 8 <= buffer.count,
        swarSpecialOrNonASCIIMask(UnsafeRawPointer(base + index).loadUnaligned(as: UInt64.self)) == 0 {
        index += 8
    }
    return index
}

/// Whether any byte of `word` is `"`, `\\` or below 0x20 (exact, per byte).
@inline(__always)
func swarHasSpecialByte(_ word: UInt64) -> Bool {
    let ones: UInt64 = 0x0101_0101_0101_0101
    let highs: UInt64 = 0x8080_8080_8080_8080
    let quote = word ^ (ones &* 0x22)
    let backslash = word ^ (ones &* 0x5C)
    let hasQuote = (quote &- ones) & ~quote & highs
    let hasBackslash = (backslash &- ones) & ~backslash & highs
    let hasControl = (word &- ones &* 0x20) & ~word & highs
    return (hasQuote | hasBackslash | hasControl) != 0
}

#if arch(x86_64) || arch(i386)
/// 10⁰ … 10²⁷, each exact in 80-bit precision (5²⁷ < 2⁶³).
private let extendedPowersOfTen: [Float80] = (0...27).map { exponent in
    var power: Float80 = 1
    for _ in 0..<exponent { power *= 10 }
    return power
}

/// `mantissa × 10^power` correctly rounded to a double, or `nil` when this method cannot tell.
///
/// The mantissa (below 2⁶⁴) and the power of ten (|power| ≤ 27) are exact in 80-bit precision, so
/// the product or quotient is rounded once, to within half an 80-bit ulp of the true value. Rounding
/// that result to a double (11 fewer bits) gives the correctly rounded double unless the result lies
/// within one 80-bit ulp of a halfway point between two doubles, where the true value might fall on
/// the other side; those rare inputs return `nil` and take the exact path.
@inline(__always)
func extendedPrecisionDouble(mantissa: UInt64, power: Int) -> Double? {
    guard power >= -27 && power <= 27 else { return nil }
    var value = Float80(mantissa)
    value = power >= 0 ? value * extendedPowersOfTen[power] : value / extendedPowersOfTen[-power]
    let dropped = value.significandBitPattern & 0x7FF
    if dropped >= 0x3FF && dropped <= 0x401 { return nil }
    return Double(value)
}
#endif

private let powersOfTen: [Double] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
    1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
]

package struct JSONReader: ~Copyable {
    package let buffer: UnsafeBufferPointer<UInt8>
    package var index = 0
    package var depth = 0
    var scratch: [UInt8] = []
    /// Members and elements of the containers being parsed, so that each array and object is
    /// allocated once, at its final size, when it closes.
    var memberStack = ParseStack<JSONObject.Member>(capacity: 16)
    var keyInfoStack = ParseStack<KeyInfo>(capacity: 16)
    var valueStack = ParseStack<JSON>(capacity: 32)
    /// Whether the last string read had neither escapes nor non-ASCII bytes.
    var lastStringWasPlainASCII = false
    /// Short object keys made earlier on this thread.
    let keyCache = JSONKeyCache.current
    /// The nesting level (1 for the outermost value) whose objects are documents, read by
    /// ``readDocumentObject()``; 0 for none.
    var documentDepth = 0
    /// The key hashes of the objects ``skipCanonicalValue()`` is inside, for its duplicate-key check.
    var skippedKeyHashes: [UInt64] = []

    package init(_ buffer: UnsafeBufferPointer<UInt8>) {
        self.buffer = buffer
    }

    package func error(_ reason: String, at offset: Int? = nil) -> DocStoreError {
        let offset = offset ?? index
        return DocStoreError(.invalidJSON, "\(reason) at byte offset \(offset)", byteOffset: offset)
    }

    package func describeByte(at offset: Int) -> String {
        guard offset < buffer.count else { return "end of input" }
        let byte = buffer[offset]
        if byte >= 0x21 && byte < 0x7F { return "character '\(Character(Unicode.Scalar(byte)))'" }
        return "byte 0x\(String(byte, radix: 16, uppercase: true))"
    }

    @inline(__always)
    package mutating func skipWhitespace() {
        while index < buffer.count {
            switch buffer[index] {
            case 0x20, 0x0A, 0x0D, 0x09: index += 1
            default: return
            }
        }
    }

    package mutating func readValue() throws -> JSON {
        skipWhitespace()
        guard index < buffer.count else { throw error("Unexpected end of input") }
        switch buffer[index] {
        case UInt8(ascii: "{"): return depth + 1 == documentDepth ? try readDocumentObject() : try readObject()
        case UInt8(ascii: "["): return try readArray()
        case UInt8(ascii: "\""): return .string(try readString())
        case UInt8(ascii: "t"): try expectLiteral("true"); return .bool(true)
        case UInt8(ascii: "f"): try expectLiteral("false"); return .bool(false)
        case UInt8(ascii: "n"): try expectLiteral("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try readNumber()
        default: throw error("Unexpected \(describeByte(at: index))")
        }
    }

    mutating func expectLiteral(_ literal: StaticString) throws {
        let count = literal.utf8CodeUnitCount
        guard buffer.count - index >= count else { throw error("Invalid literal") }
        let start = literal.utf8Start
        for k in 0..<count where buffer[index + k] != start[k] {
            throw error("Invalid literal")
        }
        index += count
    }

    package mutating func enterContainer() throws {
        depth += 1
        if depth > JSONParser.maximumDepth {
            throw error("Nesting deeper than \(JSONParser.maximumDepth) levels")
        }
    }

    mutating func readArray() throws -> JSON {
        try enterContainer()
        index += 1
        skipWhitespace()
        if index < buffer.count && buffer[index] == UInt8(ascii: "]") {
            index += 1
            depth -= 1
            return .array([])
        }
        let start = valueStack.count
        while true {
            valueStack.push(try readValue())
            if try !readSeparator(closing: UInt8(ascii: "]")) { break }
        }
        depth -= 1
        return .array(valueStack.pop(from: start))
    }

    mutating func readObject() throws -> JSON {
        try enterContainer()
        index += 1
        skipWhitespace()
        if index < buffer.count && buffer[index] == UInt8(ascii: "}") {
            index += 1
            depth -= 1
            return .object(JSONObject())
        }
        let start = memberStack.count
        while true {
            skipWhitespace()
            guard index < buffer.count, buffer[index] == UInt8(ascii: "\"") else {
                throw error("Expected a string key but found \(describeByte(at: index))")
            }
            let keyOffset = index
            let key: String
            let keyInfo: KeyInfo
            if let short = readShortKey() {
                key = short.key
                keyInfo = KeyInfo(offset: keyOffset, hash: short.hash)
            } else {
                key = try readString()
                keyInfo = KeyInfo(offset: keyOffset,
                                  hash: lastStringWasPlainASCII ? plainKeyHash(from: keyOffset + 1, to: index - 1) : 0)
            }
            try readColon()
            // Both stacks grow together, after the value, so nested objects see them aligned.
            memberStack.push(JSONObject.Member(key: key, value: try readValue()))
            keyInfoStack.push(keyInfo)
            if try !readSeparator(closing: UInt8(ascii: "}")) { break }
        }
        depth -= 1
        let repeatsAKey = firstDuplicateKey(from: start) != nil
        keyInfoStack.drop(from: start)
        let members = memberStack.pop(from: start)
        return .object(JSONObject(uniqueMembers: repeatsAKey ? Self.lastOfEachKey(members) : members))
    }

    /// The members of an object that gives a key more than once, each key once: its last member, where
    /// that stands — as JavaScript's `JSON.parse` and CouchDB read such an object (`{"a":1,"b":2,"a":3}`
    /// is `{"b":2,"a":3}`), so that a database CouchDB holds replicates without loss.
    private static func lastOfEachKey(_ members: [JSONObject.Member]) -> [JSONObject.Member] {
        // Keys compared by their bytes, as the duplicate check compares them.
        var seen = Set<ExactString>(minimumCapacity: members.count)
        var kept: [JSONObject.Member] = []
        kept.reserveCapacity(members.count)
        for member in members.reversed() where seen.insert(ExactString(member.key)).inserted { kept.append(member) }
        return kept.reversed()
    }

    /// Reads the `:` after a member's key (whitespace before it allowed).
    @inline(__always)
    package mutating func readColon() throws {
        skipWhitespace()
        guard index < buffer.count, buffer[index] == UInt8(ascii: ":") else {
            throw error("Expected ':' but found \(describeByte(at: index))")
        }
        index += 1
    }

    /// Reads what follows an element of an array (`closing` `]`) or a member of an object (`}`),
    /// whitespace before it allowed: `true` past a `,`, `false` past `closing`.
    @inline(__always)
    package mutating func readSeparator(closing: UInt8) throws -> Bool {
        skipWhitespace()
        guard index < buffer.count else { throw error(closing == UInt8(ascii: "]") ? "Unterminated array" : "Unterminated object") }
        let byte = buffer[index]
        index += 1
        if byte == UInt8(ascii: ",") { return true }
        if byte == closing { return false }
        throw error("Expected ',' or '\(Character(Unicode.Scalar(closing)))' but found \(describeByte(at: index - 1))", at: index - 1)
    }

    /// A plain-ASCII key of up to 15 bytes, at the opening quote, read with two word loads and taken
    /// from the thread's ``JSONKeyCache``; `nil` (nothing read) for any other key or near the end of
    /// the input. Its hash is the one ``plainKeyHash(from:to:)`` gives the same bytes.
    @inline(__always)
    mutating func readShortKey() -> (key: String, hash: UInt64)? {
        let start = index + 1
        guard start + 16 <= buffer.count, let base = buffer.baseAddress else { return nil }
        let raw0 = UInt64(littleEndian: UnsafeRawPointer(base + start).loadUnaligned(as: UInt64.self))
        let raw1 = UInt64(littleEndian: UnsafeRawPointer(base + start + 8).loadUnaligned(as: UInt64.self))
        let count: Int
        let special0 = swarSpecialOrNonASCIIMask(raw0)
        if special0 != 0 {
            count = special0.trailingZeroBitCount >> 3
        } else {
            let special1 = swarSpecialOrNonASCIIMask(raw1)
            guard special1 != 0 else { return nil }
            count = 8 + (special1.trailingZeroBitCount >> 3)
        }
        // The first special byte must be the closing quote: an escape, a control character or a
        // non-ASCII byte takes the general path.
        guard buffer[start + count] == UInt8(ascii: "\"") else { return nil }
        let word0 = count >= 8 ? raw0 : raw0 & ((1 &<< UInt64(count &* 8)) &- 1)
        let word1 = count <= 8 ? 0 : raw1 & ((1 &<< UInt64((count &- 8) &* 8)) &- 1)
        let hash = shortKeyHash(word0, word1, count)
        let key = keyCache.key(word0: word0, word1: word1, count: count, hash: hash,
                               bytes: UnsafeBufferPointer(rebasing: buffer[start..<start + count]))
        index = start + count + 1
        lastStringWasPlainASCII = true
        return (key, hash)
    }

    /// A hash of the bytes of a plain-ASCII key, never 0 (which marks keys that are not plain ASCII).
    /// Keys of up to 15 bytes get ``shortKeyHash(_:_:_:)`` of their bytes as words, as
    /// ``readShortKey()`` computes it, so equal keys hash alike whichever path read them; longer keys
    /// get FNV-1a.
    @inline(__always)
    func plainKeyHash(from start: Int, to end: Int) -> UInt64 {
        let count = end - start
        if count <= 15 {
            var word0: UInt64 = 0, word1: UInt64 = 0
            for k in 0..<count {
                if k < 8 { word0 |= UInt64(buffer[start + k]) << (8 * UInt64(k)) }
                else { word1 |= UInt64(buffer[start + k]) << (8 * UInt64(k - 8)) }
            }
            return shortKeyHash(word0, word1, count)
        }
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325
        for k in start..<end { hash = (hash ^ UInt64(buffer[k])) &* 0x100_0000_01B3 }
        return hash | 1
    }

    /// The stack position of the first key, among those from `start`, that repeats an earlier one.
    ///
    /// Plain ASCII keys are equal exactly when their bytes are, so their hashes are compared pairwise
    /// and only equal hashes compare the strings. Other keys need `String` equality (canonical
    /// equivalence, which the object's dictionary uses: U+212A KELVIN SIGN equals "K"), so a set decides.
    private func firstDuplicateKey(from start: Int) -> Int? {
        let end = memberStack.count
        if end - start <= 32 {
            // A 128-bit filter of the hashes seen: only a key whose bit is already set is compared
            // with the keys before it.
            var seen: (UInt64, UInt64) = (0, 0)
            var allPlain = true
            for i in start..<end {
                let hash = keyInfoStack[i].hash
                if hash == 0 { allPlain = false; break }
                let bit = UInt64(1) &<< (hash >> 57 & 63)
                let alreadySeen = hash >> 63 == 0 ? seen.0 & bit != 0 : seen.1 & bit != 0
                if alreadySeen {
                    for j in start..<i where keyInfoStack[j].hash == hash && memberStack[j].key.isIdentical(to: memberStack[i].key) { return i }
                }
                if hash >> 63 == 0 { seen.0 |= bit } else { seen.1 |= bit }
            }
            if allPlain { return nil }
        }
        var seen = Set<ExactString>(minimumCapacity: end - start)
        for i in start..<end where !seen.insert(ExactString(memberStack[i].key)).inserted { return i }
        return nil
    }

    // MARK: Strings

    /// Reads a string starting at its opening quote.
    package mutating func readString() throws -> String {
        index += 1
        let start = index
        var ascii = true
        // Eight bytes at a time while none is a quote, a backslash or a control character.
        if let base = buffer.baseAddress {
            while index + 8 <= buffer.count {
                let word = UnsafeRawPointer(base + index).loadUnaligned(as: UInt64.self)
                if swarHasSpecialByte(word) { break }
                if word & 0x8080_8080_8080_8080 != 0 { ascii = false }
                index += 8
            }
        }
        while index < buffer.count {
            let byte = buffer[index]
            if byte == UInt8(ascii: "\"") {
                let bytes = UnsafeBufferPointer(rebasing: buffer[start..<index])
                index += 1
                lastStringWasPlainASCII = ascii
                return try makeString(bytes, ascii: ascii, offset: start)
            }
            if byte == UInt8(ascii: "\\") {
                lastStringWasPlainASCII = false
                return try readEscapedString(start: start, ascii: ascii)
            }
            if byte < 0x20 { throw error("Unescaped control character in string") }
            if byte >= 0x80 { ascii = false }
            index += 1
        }
        throw error("Unterminated string", at: start - 1)
    }

    func makeString(_ bytes: UnsafeBufferPointer<UInt8>, ascii: Bool, offset: Int) throws -> String {
        if ascii { return String(decoding: bytes, as: UTF8.self) }
        guard let string = String(validating: bytes, as: UTF8.self) else {
            throw error("Invalid UTF-8 in string", at: offset)
        }
        return string
    }

    mutating func readEscapedString(start: Int, ascii initialASCII: Bool) throws -> String {
        var ascii = initialASCII
        scratch.removeAll(keepingCapacity: true)
        scratch.append(contentsOf: UnsafeBufferPointer(rebasing: buffer[start..<index]))
        while index < buffer.count {
            let byte = buffer[index]
            if byte == UInt8(ascii: "\"") {
                index += 1
                return try scratch.withUnsafeBufferPointer { try makeString($0, ascii: ascii, offset: start) }
            }
            if byte == UInt8(ascii: "\\") {
                let escapeOffset = index
                index += 1
                guard index < buffer.count else { break }
                switch buffer[index] {
                case UInt8(ascii: "\""): scratch.append(0x22)
                case UInt8(ascii: "\\"): scratch.append(0x5C)
                case UInt8(ascii: "/"): scratch.append(0x2F)
                case UInt8(ascii: "b"): scratch.append(0x08)
                case UInt8(ascii: "f"): scratch.append(0x0C)
                case UInt8(ascii: "n"): scratch.append(0x0A)
                case UInt8(ascii: "r"): scratch.append(0x0D)
                case UInt8(ascii: "t"): scratch.append(0x09)
                case UInt8(ascii: "u"):
                    var scalar = try readHex4(at: index + 1)
                    index += 4
                    if scalar >= 0xD800 && scalar <= 0xDBFF {
                        guard index + 6 < buffer.count, buffer[index + 1] == UInt8(ascii: "\\"),
                            buffer[index + 2] == UInt8(ascii: "u")
                        else { throw error("Lone high surrogate in \\u escape", at: escapeOffset) }
                        let low = try readHex4(at: index + 3)
                        guard low >= 0xDC00 && low <= 0xDFFF else {
                            throw error("Lone high surrogate in \\u escape", at: escapeOffset)
                        }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                        index += 6
                    } else if scalar >= 0xDC00 && scalar <= 0xDFFF {
                        throw error("Lone low surrogate in \\u escape", at: escapeOffset)
                    }
                    if scalar >= 0x80 { ascii = false }
                    appendUTF8(scalar)
                default:
                    throw error("Invalid escape sequence", at: escapeOffset)
                }
                index += 1
                continue
            }
            if byte < 0x20 { throw error("Unescaped control character in string") }
            if byte >= 0x80 { ascii = false }
            scratch.append(byte)
            index += 1
        }
        throw error("Unterminated string", at: start - 1)
    }

    func readHex4(at offset: Int) throws -> UInt32 {
        guard offset + 4 <= buffer.count else { throw error("Truncated \\u escape", at: offset) }
        var value: UInt32 = 0
        for k in 0..<4 {
            let byte = buffer[offset + k]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw error("Invalid hex digit in \\u escape", at: offset + k)
            }
            value = value << 4 | UInt32(digit)
        }
        return value
    }

    mutating func appendUTF8(_ scalar: UInt32) {
        switch scalar {
        case 0..<0x80:
            scratch.append(UInt8(scalar))
        case 0x80..<0x800:
            scratch.append(UInt8(0xC0 | (scalar >> 6)))
            scratch.append(UInt8(0x80 | (scalar & 0x3F)))
        case 0x800..<0x10000:
            scratch.append(UInt8(0xE0 | (scalar >> 12)))
            scratch.append(UInt8(0x80 | ((scalar >> 6) & 0x3F)))
            scratch.append(UInt8(0x80 | (scalar & 0x3F)))
        default:
            scratch.append(UInt8(0xF0 | (scalar >> 18)))
            scratch.append(UInt8(0x80 | ((scalar >> 12) & 0x3F)))
            scratch.append(UInt8(0x80 | ((scalar >> 6) & 0x3F)))
            scratch.append(UInt8(0x80 | (scalar & 0x3F)))
        }
    }

    // MARK: Numbers

    @inline(__always)
    func isDigit(_ offset: Int) -> Bool {
        offset < buffer.count && buffer[offset] &- UInt8(ascii: "0") < 10
    }

    mutating func readNumber() throws -> JSON {
        let start = index
        let negative = buffer[index] == UInt8(ascii: "-")
        if negative { index += 1 }
        guard isDigit(index) else { throw error("Invalid number", at: start) }
        let integerStart = index
        if buffer[index] == UInt8(ascii: "0") {
            index += 1
            if isDigit(index) { throw error("Leading zeros are not allowed in numbers", at: start) }
        } else {
            while isDigit(index) { index += 1 }
        }
        let integerEnd = index
        var fractionEnd = index
        var isInteger = true
        if index < buffer.count && buffer[index] == UInt8(ascii: ".") {
            isInteger = false
            index += 1
            guard isDigit(index) else { throw error("Expected a digit after the decimal point") }
            while isDigit(index) { index += 1 }
            fractionEnd = index
        }
        var exponent = 0
        if index < buffer.count && (buffer[index] | 0x20) == UInt8(ascii: "e") {
            isInteger = false
            index += 1
            var exponentNegative = false
            if index < buffer.count && (buffer[index] == UInt8(ascii: "+") || buffer[index] == UInt8(ascii: "-")) {
                exponentNegative = buffer[index] == UInt8(ascii: "-")
                index += 1
            }
            guard isDigit(index) else { throw error("Expected a digit in the exponent") }
            while isDigit(index) {
                if exponent < 100_000 { exponent = exponent * 10 + Int(buffer[index] - UInt8(ascii: "0")) }
                index += 1
            }
            if exponentNegative { exponent = -exponent }
        }

        if isInteger {
            let digitCount = integerEnd - integerStart
            if digitCount <= 18 {
                var value = 0
                for k in integerStart..<integerEnd { value = value &* 10 &+ Int(buffer[k] &- 48) }
                return .integer(negative ? -value : value)
            }
            var magnitude: UInt64 = 0
            var overflow = false
            for k in integerStart..<integerEnd {
                let (m1, o1) = magnitude.multipliedReportingOverflow(by: 10)
                let (m2, o2) = m1.addingReportingOverflow(UInt64(buffer[k] &- 48))
                magnitude = m2
                if o1 || o2 { overflow = true; break }
            }
            if !overflow {
                if !negative, magnitude <= UInt64(Int.max) { return .integer(Int(magnitude)) }
                if negative, magnitude <= UInt64(Int.max) + 1 { return .integer(Int(truncatingIfNeeded: 0 &- magnitude)) }
            }
            return .bigInteger(String(decoding: UnsafeBufferPointer(rebasing: buffer[start..<index]), as: UTF8.self))
        }

        // Up to 19 significant digits fit in a UInt64 mantissa, read once for both fast paths.
        let fractionStart = integerEnd + 1
        let fractionDigits = fractionEnd > integerEnd ? fractionEnd - fractionStart : 0
        let significantDigits = integerEnd - integerStart + fractionDigits
        if significantDigits <= 19 {
            var mantissa: UInt64 = 0
            for k in integerStart..<integerEnd { mantissa = mantissa &* 10 &+ UInt64(buffer[k] &- 48) }
            if fractionDigits > 0 {
                for k in fractionStart..<fractionEnd { mantissa = mantissa &* 10 &+ UInt64(buffer[k] &- 48) }
            }
            let power = exponent - fractionDigits
            // Clinger: up to 15 digits and a power of ten up to 22 are exact in a double, so one
            // operation rounds correctly.
            if significantDigits <= 15 && power >= -22 && power <= 22 {
                var value = Double(mantissa)
                value = power >= 0 ? value * powersOfTen[power] : value / powersOfTen[-power]
                return .double(negative ? -value : value)
            }
            #if arch(x86_64) || arch(i386)
            // Up to 19 digits and a power of ten up to 27: one correctly rounded operation in 80-bit
            // precision, then rounding to a double, unless that could round twice the wrong way.
            if let value = extendedPrecisionDouble(mantissa: mantissa, power: power) {
                return .double(negative ? -value : value)
            }
            #endif
        }
        let text = String(decoding: UnsafeBufferPointer(rebasing: buffer[start..<index]), as: UTF8.self)
        guard let value = Double(text), value.isFinite else {
            throw error("Number out of range", at: start)
        }
        return .double(value)
    }
}
