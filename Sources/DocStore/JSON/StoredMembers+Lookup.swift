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

