/// Reading documents that arrive as JSON (a `_bulk_get` answer, a `_bulk_docs` request) straight into
/// the stored form of their bodies: the members that are not CouchDB metadata are checked and copied
/// as bytes, never built into a tree, when they are already exactly what ``JSONWriter`` would write.
///
/// The check is conservative: anything it is not sure of — whitespace, an escape ``JSONWriter`` would
/// not write, a number it would write otherwise, a key that is not plain ASCII, an unknown `_`
/// member, invalid input of any kind — sends the whole object back to the tree parser, which reads
/// it (or reports its error) exactly as it always has. So the stored bytes are always what writing
/// the parsed tree would give, and a stored body never holds a reserved `_` member.
extension JSONReader {
    /// The `_` members a document may carry beside its body; any other sends the document to the tree
    /// parser (where `Document(json:)` leaves it in the body for saving to reject or accept).
    static let documentMetadataKeys = Set(Document.metadataKeys)

    /// Reads the object at `index` as a document: its metadata members parsed, its other members kept
    /// as bytes (``JSONObject``'s stored form, metadata first), or — when that cannot be done — as the
    /// tree ``readObject()`` makes.
    mutating func readDocumentObject() throws -> JSON {
        let start = index
        let startDepth = depth
        if let (metadata, body) = try readStoredDocument() {
            return .object(metadata.isEmpty ? JSONObject(storedJSON: body) : JSONObject(metadata: metadata, storedBody: body))
        }
        index = start
        depth = startDepth
        return try readObject()
    }

    /// Reads the object at `index` as a ``Document`` (``Document/init(json:)-(JSON)``), its body kept
    /// as bytes when ``readDocumentObject()`` would keep them, without the object in between.
    package mutating func readDocument() throws -> Document {
        let start = index
        let startDepth = depth
        if let (metadata, body) = try readStoredDocument() {
            return try Document(metadata: metadata, body: JSONObject(storedJSON: body))
        }
        index = start
        depth = startDepth
        return try Document(couchJSON: readObject())
    }

    /// The metadata members and the body's bytes of the document at `index`, or `nil` (the position
    /// then undefined) when its text is not in ``JSONWriter``'s form or is not valid.
    private mutating func readStoredDocument() throws -> (metadata: [JSONObject.Member], body: [UInt8])? {
        try enterContainer()
        index += 1
        // Room for `_id`, `_rev`, `_revisions` and one more, so that the array is made once.
        var metadata: [JSONObject.Member] = []
        metadata.reserveCapacity(4)
        var body: [UInt8] = [UInt8(ascii: "{")]
        let hashesStart = skippedKeyHashes.count
        defer { skippedKeyHashes.removeSubrange(hashesStart...) }
        if index < buffer.count && buffer[index] == UInt8(ascii: "}") {
            index += 1
            depth -= 1
            body.append(UInt8(ascii: "}"))
            return ([], body)
        }
        while true {
            let keyStart = index
            guard let hash = skipPlainKey(), index < buffer.count, buffer[index] == UInt8(ascii: ":") else { return nil }
            if skippedKeyHashes[hashesStart...].contains(hash) { return nil }
            skippedKeyHashes.append(hash)
            index += 1
            if buffer[keyStart + 1] == UInt8(ascii: "_") {
                let key = String(decoding: UnsafeBufferPointer(rebasing: buffer[keyStart + 1..<index - 2]), as: UTF8.self)
                guard JSONReader.documentMetadataKeys.contains(key) else { return nil }
                metadata.append(JSONObject.Member(key: key, value: try readValue()))
            } else {
                guard skipCanonicalValue() else { return nil }
                if body.count > 1 { body.append(UInt8(ascii: ",")) }
                body.append(contentsOf: UnsafeBufferPointer(rebasing: buffer[keyStart..<index]))
            }
            guard let more = skipSeparator(closing: UInt8(ascii: "}")) else { return nil }
            if !more { break }
        }
        depth -= 1
        body.append(UInt8(ascii: "}"))
        return (metadata, body)
    }

    /// Reads what follows a member or an element, with no whitespace before it: `true` past a `,`,
    /// `false` past `closing`, `nil` for anything else.
    private mutating func skipSeparator(closing: UInt8) -> Bool? {
        guard index < buffer.count else { return nil }
        let byte = buffer[index]
        index += 1
        if byte == UInt8(ascii: ",") { return true }
        return byte == closing ? false : nil
    }

    /// Skips a key of plain ASCII without escapes at `index` (its opening quote) and returns its
    /// hash (``plainKeyHash(from:to:)``), or `nil` for any other key.
    private mutating func skipPlainKey() -> UInt64? {
        guard index < buffer.count, buffer[index] == UInt8(ascii: "\"") else { return nil }
        let start = index + 1
        var end = start
        while end < buffer.count {
            let byte = buffer[end]
            if byte == UInt8(ascii: "\"") { break }
            if byte < 0x20 || byte >= 0x80 || byte == UInt8(ascii: "\\") { return nil }
            end += 1
        }
        guard end < buffer.count else { return nil }
        index = end + 1
        return plainKeyHash(from: start, to: end)
    }

    /// Skips the value at `index` if its text is exactly what ``JSONWriter`` writes for it, and valid;
    /// `false` otherwise.
    private mutating func skipCanonicalValue() -> Bool {
        guard index < buffer.count else { return false }
        switch buffer[index] {
        case UInt8(ascii: "{"): return skipCanonicalObject()
        case UInt8(ascii: "["): return skipCanonicalArray()
        case UInt8(ascii: "\""): return skipCanonicalString()
        case UInt8(ascii: "t"): return (try? expectLiteral("true")) != nil
        case UInt8(ascii: "f"): return (try? expectLiteral("false")) != nil
        case UInt8(ascii: "n"): return (try? expectLiteral("null")) != nil
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return skipCanonicalNumber()
        default: return false
        }
    }

    private mutating func skipCanonicalObject() -> Bool {
        guard (try? enterContainer()) != nil else { return false }
        index += 1
        if index < buffer.count && buffer[index] == UInt8(ascii: "}") {
            index += 1
            depth -= 1
            return true
        }
        let hashesStart = skippedKeyHashes.count
        defer { skippedKeyHashes.removeSubrange(hashesStart...) }
        while true {
            guard let hash = skipPlainKey(), !skippedKeyHashes[hashesStart...].contains(hash),
                index < buffer.count, buffer[index] == UInt8(ascii: ":")
            else { return false }
            skippedKeyHashes.append(hash)
            index += 1
            guard skipCanonicalValue(), let more = skipSeparator(closing: UInt8(ascii: "}")) else { return false }
            if !more { break }
        }
        depth -= 1
        return true
    }

    private mutating func skipCanonicalArray() -> Bool {
        guard (try? enterContainer()) != nil else { return false }
        index += 1
        if index < buffer.count && buffer[index] == UInt8(ascii: "]") {
            index += 1
            depth -= 1
            return true
        }
        while true {
            guard skipCanonicalValue(), let more = skipSeparator(closing: UInt8(ascii: "]")) else { return false }
            if !more { break }
        }
        depth -= 1
        return true
    }

    /// A string with only ``JSONWriter``'s escapes (`\"`, `\\`, `\n`, `\r`, `\t`, `\b`, `\f`, and
    /// `\u00xx` in lower case for the other control characters) and valid UTF-8.
    private mutating func skipCanonicalString() -> Bool {
        index += 1
        while true {
            index = skippingPlainWords(in: buffer, from: index)
            guard index < buffer.count else { return false }
            let byte = buffer[index]
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                return true
            case UInt8(ascii: "\\"):
                guard index + 1 < buffer.count else { return false }
                switch buffer[index + 1] {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "n"), UInt8(ascii: "r"),
                     UInt8(ascii: "t"), UInt8(ascii: "b"), UInt8(ascii: "f"):
                    index += 2
                case UInt8(ascii: "u"):
                    guard index + 6 <= buffer.count, buffer[index + 2] == UInt8(ascii: "0"),
                        buffer[index + 3] == UInt8(ascii: "0"),
                        let high = JSONReader.lowerHexDigit(buffer[index + 4]), high <= 1,
                        let low = JSONReader.lowerHexDigit(buffer[index + 5])
                    else { return false }
                    // The writer's short escapes stand for these five.
                    let scalar = high << 4 | low
                    if [0x08, 0x09, 0x0A, 0x0C, 0x0D].contains(scalar) { return false }
                    index += 6
                default:
                    return false
                }
            case 0..<0x20:
                return false
            case 0x80...:
                guard let length = validUTF8SequenceLength(at: index) else { return false }
                index += length
            default:
                index += 1
            }
        }
    }

    private static func lowerHexDigit(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
        default: return nil
        }
    }

    /// The length of the well-formed UTF-8 sequence at `offset` (a lead byte of 0x80 or more), or
    /// `nil`: overlong forms, surrogates and code points above U+10FFFF are not well formed.
    private func validUTF8SequenceLength(at offset: Int) -> Int? {
        let lead = buffer[offset]
        let length: Int
        var secondRange: ClosedRange<UInt8> = 0x80...0xBF
        switch lead {
        case 0xC2...0xDF: length = 2
        case 0xE0: length = 3; secondRange = 0xA0...0xBF
        case 0xED: length = 3; secondRange = 0x80...0x9F
        case 0xE1...0xEC, 0xEE...0xEF: length = 3
        case 0xF0: length = 4; secondRange = 0x90...0xBF
        case 0xF1...0xF3: length = 4
        case 0xF4: length = 4; secondRange = 0x80...0x8F
        default: return nil
        }
        guard offset + length <= buffer.count, secondRange.contains(buffer[offset + 1]) else { return nil }
        for k in 2..<length where buffer[offset + k] & 0xC0 != 0x80 { return nil }
        return length
    }

    /// A number as ``JSONWriter`` writes what the parser reads from it: an integer without `-0`, or a
    /// double in its shortest form (`description`).
    private mutating func skipCanonicalNumber() -> Bool {
        let start = index
        guard let number = try? readNumber() else { return false }
        switch number {
        case .integer(let value):
            return !(value == 0 && buffer[start] == UInt8(ascii: "-"))
        case .bigInteger:
            return true
        case .double(let value):
            let read = UnsafeBufferPointer(rebasing: buffer[start..<index])
            return value.description.utf8.elementsEqual(read)
        default:
            return false
        }
    }
}

// MARK: - Reading an envelope around documents

extension JSONReader {
    /// Reads the object at `index` member by member: `read` reads the value of each key it knows and
    /// returns `true`, or returns `false` to have it skipped. A key given twice throws ``RepeatedKey``,
    /// for the caller to read the text as a tree instead, where the last member wins (``readObject()``).
    package mutating func readMembers(_ read: (inout JSONReader, String) throws -> Bool) throws {
        guard try enter(UInt8(ascii: "{"), closing: UInt8(ascii: "}"), expected: "an object") else { return }
        var keys = SeenKeys()
        while true {
            skipWhitespace()
            guard index < buffer.count, buffer[index] == UInt8(ascii: "\"") else {
                throw error("Expected a string key but found \(describeByte(at: index))")
            }
            let keyOffset = index
            let key = try readString()
            guard keys.insert(key) else { throw RepeatedKey(key: key, offset: keyOffset) }
            try readColon()
            skipWhitespace()
            if try !read(&self, key) { _ = try readValue() }
            if try !readSeparator(closing: UInt8(ascii: "}")) { break }
        }
        depth -= 1
    }

    /// What ``readMembers(_:)`` throws for an object that gives a key twice.
    package struct RepeatedKey: Error {
        /// The key.
        package let key: String
        /// Where its second copy starts in the input.
        package let offset: Int
    }

    /// The keys of an object read so far, compared as exact bytes; the envelope's objects have one or
    /// two, held without allocating.
    private struct SeenKeys {
        private var first: String?
        private var second: String?
        private var more: [String] = []

        /// Adds `key`; `false` if it was there.
        mutating func insert(_ key: String) -> Bool {
            func same(_ other: String?) -> Bool { other.map { $0.utf8.elementsEqual(key.utf8) } ?? false }
            if same(first) || same(second) || more.contains(where: { same($0) }) { return false }
            if first == nil { first = key } else if second == nil { second = key } else { more.append(key) }
            return true
        }
    }

    /// Reads the array at `index`, each element with `read`.
    package mutating func readElements<Element>(_ read: (inout JSONReader) throws -> Element) throws -> [Element] {
        var elements: [Element] = []
        guard try enter(UInt8(ascii: "["), closing: UInt8(ascii: "]"), expected: "an array") else { return elements }
        while true {
            skipWhitespace()
            elements.append(try read(&self))
            if try !readSeparator(closing: UInt8(ascii: "]")) { break }
        }
        depth -= 1
        return elements
    }

    /// Enters the container at `index`, which must open with `opening`: `false` when it is empty (and
    /// has been read), `true` when its first member or element is next.
    private mutating func enter(_ opening: UInt8, closing: UInt8, expected: String) throws -> Bool {
        skipWhitespace()
        guard index < buffer.count, buffer[index] == opening else {
            throw error("Expected \(expected) but found \(describeByte(at: index))")
        }
        try enterContainer()
        index += 1
        skipWhitespace()
        guard index < buffer.count, buffer[index] == closing else { return true }
        index += 1
        depth -= 1
        return false
    }
}
