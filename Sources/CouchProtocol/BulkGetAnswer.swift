import DocStore
import Foundation

/// A `_bulk_get` answer (`{"results": [{"id": …, "docs": [{"ok": document} | {"error": {…}}]}]}`) read
/// with its documents straight into `Document`s — DocSync's pulls read one for every batch. It is the
/// fast path of `BulkGet.Response`'s decoder: it reads the documents as DocStore's `JSONReader` reads a
/// document, so a body in DocStore's own form stays the bytes it came as, and no tree of the answer is
/// built around the documents. `WireShapeTests` hold the two to the same answers.
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
    /// - Throws: ``DocStoreError`` for invalid JSON or an answer without `results`, an entry with
    ///   neither `ok` nor `error`, or an envelope object that names a member twice (the documents in it
    ///   may: their last member wins).
    package init(parsing data: Data) throws {
        do {
            results = try Self.results(parsing: data)
        } catch let repeated as JSONReader.RepeatedKey {
            throw DocStoreError(.invalidJSON, "Duplicate key \"\(repeated.key)\" at byte \(repeated.offset)")
        }
    }

    private static func results(parsing data: Data) throws -> [Result] {
        try data.withUnsafeBytes { raw in
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
}
