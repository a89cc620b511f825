import Crypto
import Foundation

/// How DocStore names a new revision, as CouchDB 3 does: generation `parent + 1`, and as digest the MD5
/// of the Erlang external term (`term_to_binary(…, [{minor_version, 1}])`) of `[Deleted, ParentGeneration,
/// ParentDigest, Body, Attachments]` — the body as CouchDB's JSON decoder holds it (objects `{[{Key,
/// Value}]}`, strings as binaries, `true`/`false`/`null` as atoms), the attachments as `{Name, Type,
/// MD5}` in reverse order. So an edit made on DocStore and the same edit made on CouchDB get the same
/// revision id, and replicators see one revision, not a conflict. Attachments are in the order the
/// document keeps them, CouchDB's: as its JSON named them, an uploaded one first.
enum RevisionHash {
    static func digest(parent: RevisionID?, isDeleted: Bool, body: JSONObject, attachments: Attachments) -> Insecure.MD5Digest {
        var term = TermWriter()
        term.bytes.append(131)
        term.listHeader(5)
        term.atom(isDeleted ? "true" : "false")
        term.integer(parent?.generation ?? 0)
        if let parent {
            term.binary(parent.couchDigestBytes)
        } else {
            term.integer(0)
        }
        term.object(body)
        // CouchDB folds its attachments into a list, so the last comes first.
        let digested = attachments.reversed().compactMap { name, attachment -> (String, String, [UInt8])? in
            guard attachment.digest.hasPrefix("md5-"), let md5 = Data(base64Encoded: String(attachment.digest.dropFirst(4))) else { return nil }
            return (name, attachment.contentType, Array(md5))
        }
        if digested.isEmpty {
            term.bytes.append(106)
        } else {
            term.listHeader(digested.count)
            for (name, type, md5) in digested {
                term.bytes += [104, 3]
                term.binary(Array(name.utf8))
                term.binary(Array(type.utf8))
                term.binary(md5)
            }
            term.bytes.append(106)
        }
        term.bytes.append(106)  // the tail of the outer list
        term.flush()
        return term.md5.finalize()
    }

    /// The revision a new edit of `parent` gets.
    static func revision(parent: RevisionID?, isDeleted: Bool, body: JSONObject, attachments: Attachments = [:]) -> RevisionID {
        RevisionID(generation: (parent?.generation ?? 0) + 1,
                   digest16: digest(parent: parent, isDeleted: isDeleted, body: body, attachments: attachments))
    }
}

extension RevisionID {
    /// The digest as CouchDB holds it: 32 hex digits (either case) as their 16 bytes, other text as is.
    var couchDigestBytes: [UInt8] {
        let text = Array(digest.utf8)
        guard text.count == 32 else { return text }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(16)
        func value(_ byte: UInt8) -> UInt8? {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
            default: nil
            }
        }
        for index in stride(from: 0, to: 32, by: 2) {
            guard let high = value(text[index]), let low = value(text[index + 1]) else { return text }
            bytes.append(high << 4 | low)
        }
        return bytes
    }
}

/// Writes Erlang's external term format into an MD5, in pieces.
private struct TermWriter {
    var md5 = Insecure.MD5()
    var bytes: [UInt8] = []
    /// While above 0, the bytes stay in ``bytes`` (a list header written before its length is known
    /// is still to be patched there).
    private var holding = 0

    init() { bytes.reserveCapacity(4096) }

    mutating func flush() {
        bytes.withUnsafeBytes { md5.update(bufferPointer: $0) }
        bytes.removeAll(keepingCapacity: true)
    }

    private mutating func flushIfLarge() { if holding == 0 && bytes.count >= 4096 { flush() } }

    mutating func listHeader(_ count: Int) {
        bytes.append(108)
        appendUInt32(UInt32(count))
    }

    mutating func atom(_ name: StaticString) {
        bytes += [100, 0, UInt8(name.utf8CodeUnitCount)]
        name.withUTF8Buffer { bytes.append(contentsOf: $0) }
    }

    mutating func binary(_ value: [UInt8]) {
        bytes.append(109)
        appendUInt32(UInt32(value.count))
        if value.count > 1024 && holding == 0 {
            flush()
            value.withUnsafeBytes { md5.update(bufferPointer: $0) }
        } else {
            bytes += value
        }
        flushIfLarge()
    }

    mutating func string(_ value: String) {
        var value = value
        value.withUTF8 { utf8 in
            bytes.append(109)
            appendUInt32(UInt32(utf8.count))
            if utf8.count > 1024 && holding == 0 {
                flush()
                md5.update(bufferPointer: UnsafeRawBufferPointer(utf8))
            } else {
                bytes.append(contentsOf: utf8)
            }
        }
        flushIfLarge()
    }

    mutating func integer(_ value: Int) {
        if (0...255).contains(value) {
            bytes += [97, UInt8(value)]
        } else if (Int(Int32.min)...Int(Int32.max)).contains(value) {
            bytes.append(98)
            appendUInt32(UInt32(bitPattern: Int32(value)))
        } else {
            big(negative: value < 0, magnitude: littleEndianBytes(value.magnitude))
        }
    }

    /// An integer beyond 64 bits, from its decimal text.
    mutating func bigInteger(_ text: String) {
        var digits = Array(text.utf8)
        let negative = digits.first == UInt8(ascii: "-")
        digits = digits.filter { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }.map { $0 - UInt8(ascii: "0") }
        // Repeated division by 256 of the decimal digits: the magnitude, least significant byte first.
        var magnitude: [UInt8] = []
        while !digits.isEmpty {
            var remainder = 0
            var quotient: [UInt8] = []
            for digit in digits {
                let current = remainder * 10 + Int(digit)
                let next = UInt8(current / 256)
                if !quotient.isEmpty || next != 0 { quotient.append(next) }
                remainder = current % 256
            }
            magnitude.append(UInt8(remainder))
            digits = quotient
        }
        big(negative: negative, magnitude: magnitude)
    }

    private mutating func big(negative: Bool, magnitude: [UInt8]) {
        if magnitude.count <= 255 {
            bytes += [110, UInt8(magnitude.count), negative ? 1 : 0]
        } else {
            bytes.append(111)
            appendUInt32(UInt32(magnitude.count))
            bytes.append(negative ? 1 : 0)
        }
        bytes += magnitude
    }

    private func littleEndianBytes(_ value: UInt) -> [UInt8] {
        var value = value
        var result: [UInt8] = []
        while value > 0 {
            result.append(UInt8(truncatingIfNeeded: value))
            value >>= 8
        }
        return result
    }

    mutating func object(_ object: JSONObject) {
        // A stored body (a document read from JSON or from the database) is hashed from its text.
        if let text = object.storedJSON, storedObject(text) { return }
        bytes += [104, 1]
        if object.isEmpty {
            bytes.append(106)
            return
        }
        listHeader(object.count)
        for (key, value) in object {
            bytes += [104, 2]
            string(key)
            self.value(value)
        }
        bytes.append(106)
    }

    mutating func value(_ value: JSON) {
        switch value {
        case .null: atom("null")
        case .bool(let flag): flag ? atom("true") : atom("false")
        case .integer(let number): integer(number)
        case .bigInteger(let text): bigInteger(text)
        case .double(let number):
            bytes.append(70)
            withUnsafeBytes(of: number.bitPattern.bigEndian) { bytes.append(contentsOf: $0) }
        case .string(let text): string(text)
        case .array(let items):
            if items.isEmpty {
                bytes.append(106)
                return
            }
            listHeader(items.count)
            for item in items { self.value(item) }
            bytes.append(106)
        case .object(let members): object(members)
        }
        flushIfLarge()
    }

    private mutating func appendUInt32(_ value: UInt32) {
        withUnsafeBytes(of: value.bigEndian) { bytes.append(contentsOf: $0) }
    }
}

// MARK: - The term of a stored object, from its text

extension TermWriter {
    private struct UnreadableText: Error {}

    /// Writes the term of an object held as JSON text in ``JSONWriter``'s form (``JSONObject``'s
    /// stored form), reading the text once without building its tree: the same term as ``object(_:)``
    /// writes for the parsed object. A document saved from the JSON it arrived as is so never parsed
    /// into a tree. Returns `false`, having written nothing, for text it cannot read (the caller then
    /// hashes the parsed tree).
    mutating func storedObject(_ text: [UInt8]) -> Bool {
        let start = bytes.count
        holding += 1
        let written = text.withUnsafeBufferPointer { buffer in
            var reader = JSONReader(buffer)
            guard (try? storedValue(&reader)) != nil else { return false }
            return reader.index == buffer.count
        }
        holding -= 1
        guard written else {
            bytes.removeSubrange(start...)
            return false
        }
        flushIfLarge()
        return true
    }

    /// The value at the reader's position, with no whitespace around it (the stored form has none).
    private mutating func storedValue(_ reader: inout JSONReader) throws {
        let buffer = reader.buffer
        guard reader.index < buffer.count else { throw UnreadableText() }
        switch buffer[reader.index] {
        case UInt8(ascii: "{"):
            try reader.enterContainer()
            reader.index += 1
            bytes += [104, 1]
            try storedElements(&reader, closing: UInt8(ascii: "}")) { writer, reader in
                writer.bytes += [104, 2]
                guard reader.index < buffer.count, buffer[reader.index] == UInt8(ascii: "\"") else { throw UnreadableText() }
                try writer.storedString(&reader)
                guard reader.index < buffer.count, buffer[reader.index] == UInt8(ascii: ":") else { throw UnreadableText() }
                reader.index += 1
                try writer.storedValue(&reader)
            }
            reader.depth -= 1
        case UInt8(ascii: "["):
            try reader.enterContainer()
            reader.index += 1
            try storedElements(&reader, closing: UInt8(ascii: "]")) { writer, reader in try writer.storedValue(&reader) }
            reader.depth -= 1
        case UInt8(ascii: "\""): try storedString(&reader)
        case UInt8(ascii: "t"): try reader.expectLiteral("true"); atom("true")
        case UInt8(ascii: "f"): try reader.expectLiteral("false"); atom("false")
        case UInt8(ascii: "n"): try reader.expectLiteral("null"); atom("null")
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): value(try reader.readNumber())
        default: throw UnreadableText()
        }
    }

    /// The members or elements of a container whose opening bracket was read, up to and past
    /// `closing`: a list (`[]` when empty), its length patched in once they are counted.
    private mutating func storedElements(_ reader: inout JSONReader, closing: UInt8,
                                         _ element: (inout TermWriter, inout JSONReader) throws -> Void) throws {
        let buffer = reader.buffer
        if reader.index < buffer.count && buffer[reader.index] == closing {
            reader.index += 1
            bytes.append(106)
            return
        }
        let header = bytes.count
        listHeader(0)
        var count: UInt32 = 0
        while true {
            try element(&self, &reader)
            count += 1
            guard reader.index < buffer.count else { throw UnreadableText() }
            let separator = buffer[reader.index]
            reader.index += 1
            if separator == UInt8(ascii: ",") { continue }
            guard separator == closing else { throw UnreadableText() }
            break
        }
        withUnsafeBytes(of: count.bigEndian) { length in
            for k in 0..<4 { bytes[header + 1 + k] = length[k] }
        }
        bytes.append(106)
    }

    /// A string at its opening quote, as a binary of its UTF-8: plain ASCII is copied as it stands,
    /// anything else read by the parser (which undoes escapes and checks the UTF-8).
    private mutating func storedString(_ reader: inout JSONReader) throws {
        let buffer = reader.buffer
        let start = reader.index + 1
        // Eight plain bytes at a time, then byte by byte to the first other one.
        var end = skippingPlainWords(in: buffer, from: start)
        while end < buffer.count {
            let byte = buffer[end]
            if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") || byte >= 0x80 || byte < 0x20 { break }
            end += 1
        }
        if end < buffer.count && buffer[end] == UInt8(ascii: "\"") {
            bytes.append(109)
            appendUInt32(UInt32(end - start))
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: buffer[start..<end]))
            reader.index = end + 1
        } else {
            string(try reader.readString())
        }
    }
}
