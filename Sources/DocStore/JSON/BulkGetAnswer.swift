import Foundation

/// A `_bulk_get` answer (`{"results": [{"id": …, "docs": [{"ok": document} | {"error": {…}}]}]}`) read
/// with its documents straight into ``Document``s — DocSync's pulls read one for every batch. It lives
/// here, beside the parser, because it reads the documents as ``JSONReader/readDocument()`` does: a
/// body in DocStore's own form stays the bytes it came as, and no tree of the answer is built around
/// the documents.
package struct BulkGetAnswer: Sendable {
    /// The answer for one requested item.
    package struct Result: Sendable {
        /// The requested id as the answer names it (`nil` when it is not a string).
        package var id: String?
        package var entries: [Entry]
    }

    /// One revision of a result.
    package enum Entry: Sendable {
        /// An `ok` member: the revision.
        case document(Document)
        /// An `ok` member that is valid JSON but no valid document (a malformed `_rev`, `_attachments`…).
        case invalid(DocStoreError)
        /// An `error` member's object, as it came.
        case error(JSON)
    }

    package var results: [Result]

    /// Reads the answer's JSON text.
    /// - Throws: ``DocStoreError`` for invalid JSON or an answer without `results`, or an entry with
    ///   neither `ok` nor `error`.
    package init(parsing data: Data) throws {
        results = try data.withUnsafeBytes { raw in
            var reader = JSONReader(raw.bindMemory(to: UInt8.self))
            var results: [Result]? = nil
            try reader.readMembers { reader, key in
                guard key == "results" else { return false }
                results = try reader.readElements { reader in try reader.readBulkGetResult() }
                return true
            }
            reader.skipWhitespace()
            guard reader.index == reader.buffer.count else { throw reader.error("Unexpected data after the JSON value") }
            guard let results else { throw DocStoreError(.badRequest, "_bulk_get answered without results") }
            return results
        }
    }
}

extension JSONReader {
    /// `{"id": …, "docs": [{"ok": …} | {"error": …}]}`.
    fileprivate mutating func readBulkGetResult() throws -> BulkGetAnswer.Result {
        var result = BulkGetAnswer.Result(id: nil, entries: [])
        try readMembers { reader, key in
            switch key {
            case "id":
                result.id = try reader.readValue().stringValue
            case "docs":
                result.entries = try reader.readElements { reader in
                    var entry: BulkGetAnswer.Entry? = nil
                    try reader.readMembers { reader, key in
                        switch key {
                        case "ok":
                            guard reader.index < reader.buffer.count, reader.buffer[reader.index] == UInt8(ascii: "{") else {
                                entry = .invalid(DocStoreError(.invalidDocument, "Document must be a JSON object"))
                                _ = try reader.readValue()
                                return true
                            }
                            do {
                                entry = .document(try reader.readDocument())
                            } catch let error as DocStoreError where error.code != .invalidJSON {
                                entry = .invalid(error)
                            }
                        case "error":
                            entry = .error(try reader.readValue())
                        default:
                            return false
                        }
                        return true
                    }
                    guard let entry else { throw DocStoreError(.badRequest, "A _bulk_get entry needs \"ok\" or \"error\"") }
                    return entry
                }
            default:
                return false
            }
            return true
        }
        return result
    }

    /// Reads the object at `index` member by member: `read` reads the value of each key it knows and
    /// returns `true`, or returns `false` to have it skipped. A key given twice is an error, as in
    /// ``readObject()``.
    mutating func readMembers(_ read: (inout JSONReader, String) throws -> Bool) throws {
        skipWhitespace()
        guard index < buffer.count, buffer[index] == UInt8(ascii: "{") else {
            throw error("Expected an object but found \(describeByte(at: index))")
        }
        try enterContainer()
        index += 1
        skipWhitespace()
        if index < buffer.count && buffer[index] == UInt8(ascii: "}") {
            index += 1
            depth -= 1
            return
        }
        var keys = SeenKeys()
        while true {
            skipWhitespace()
            guard index < buffer.count, buffer[index] == UInt8(ascii: "\"") else {
                throw error("Expected a string key but found \(describeByte(at: index))")
            }
            let keyOffset = index
            let key = try readString()
            guard keys.insert(key) else { throw error("Duplicate key \"\(key)\"", at: keyOffset) }
            try readColon()
            skipWhitespace()
            if try !read(&self, key) { _ = try readValue() }
            if try !readSeparator(closing: UInt8(ascii: "}")) { break }
        }
        depth -= 1
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
    mutating func readElements<Element>(_ read: (inout JSONReader) throws -> Element) throws -> [Element] {
        skipWhitespace()
        guard index < buffer.count, buffer[index] == UInt8(ascii: "[") else {
            throw error("Expected an array but found \(describeByte(at: index))")
        }
        try enterContainer()
        index += 1
        skipWhitespace()
        var elements: [Element] = []
        if index < buffer.count && buffer[index] == UInt8(ascii: "]") {
            index += 1
            depth -= 1
            return elements
        }
        while true {
            skipWhitespace()
            elements.append(try read(&self))
            if try !readSeparator(closing: UInt8(ascii: "]")) { break }
        }
        depth -= 1
        return elements
    }
}
