import DocStore
import Foundation

/// A `_changes` answer (`{"results": [{"seq": …, "id": …, "changes": [{"rev": …}], "deleted": true},
/// …], "last_seq": …, "pending": …}`) read row by row, without a tree of the answer: DocSync's pulls
/// read one for every batch, and building the tree, reading the rows out of it and freeing it were 4 %
/// of a pull's CPU. It is the fast path of ``ChangesResponse``'s decoder: the rows are checked as
/// `ChangesRow(json:)` checks them, and `WireShapeTests` hold the two to the same answers.
package struct ChangesAnswer: Sendable {
    /// One row: what `ChangesRow` holds.
    package struct Row: Sendable {
        package var sequence: JSON
        package var id: String
        /// The `rev` of each entry of `changes`, in order.
        package var revisions: [RevisionID]
        package var deleted: Bool
        /// `doc`, when the feed includes documents.
        package var document: JSON?
    }

    package var rows: [Row]
    /// `last_seq`, when the answer has it.
    package var lastSequence: JSON?
    /// `pending`, when the answer has it as an integer.
    package var pending: Int?

    /// Reads the answer's JSON text.
    /// - Throws: ``DocStoreError``: `.invalidJSON` for text that is not JSON, `.badRequest` for an
    ///   answer without `results` or a row without a string `id` or an array `changes`,
    ///   `.invalidRevision` for an entry of `changes` without a valid `rev`.
    package init(parsing data: Data) throws {
        (rows, lastSequence, pending) = try data.withUnsafeBytes { raw in
            var reader = JSONReader(raw.bindMemory(to: UInt8.self))
            var rows: [Row]? = nil
            var lastSequence: JSON? = nil
            var pending: Int? = nil
            var resultsAreArray = true
            try reader.readMembers { reader, key in
                switch key {
                case "results":
                    reader.skipWhitespace()
                    guard reader.index < reader.buffer.count, reader.buffer[reader.index] == UInt8(ascii: "[") else {
                        resultsAreArray = false
                        return false
                    }
                    rows = try reader.readElements { reader in try reader.readChangesRow() }
                case "last_seq":
                    lastSequence = try reader.readValue()
                case "pending":
                    pending = try reader.readValue().intValue
                default:
                    return false
                }
                return true
            }
            reader.skipWhitespace()
            guard reader.index == reader.buffer.count else { throw reader.error("Unexpected data after the JSON value") }
            guard resultsAreArray, let rows else {
                throw DocStoreError(.badRequest, "_changes answered without results: \(Self.describe(raw))")
            }
            return (rows, lastSequence, pending)
        }
    }

    /// The start of `text`, for an error message.
    fileprivate static func describe(_ text: UnsafeRawBufferPointer) -> String {
        ((try? JSON(parsing: text.bindMemory(to: UInt8.self), documentDepth: 0))?.description ?? "").prefix(200).description
    }
}

extension JSONReader {
    /// `{"seq": …, "id": …, "changes": [{"rev": …}, …], "deleted": …, "doc": …}`.
    fileprivate mutating func readChangesRow() throws -> ChangesAnswer.Row {
        let start = index
        let rowError = { (reader: borrowing JSONReader) in
            DocStoreError(.badRequest, "A _changes row needs \"id\" and \"changes\": "
                          + ChangesAnswer.describe(UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: reader.buffer[start..<reader.index]))))
        }
        guard index < buffer.count, buffer[index] == UInt8(ascii: "{") else {
            _ = try readValue()
            throw rowError(self)
        }
        var row = ChangesAnswer.Row(sequence: .null, id: "", revisions: [], deleted: false, document: nil)
        var id: String? = nil
        // Whether an entry of `changes` has no valid `rev`: reported with the id, which may come later.
        var invalidRevision = false
        var revisions: [RevisionID]? = nil
        try readMembers { reader, key in
            switch key {
            case "seq":
                row.sequence = try reader.readValue()
            case "id":
                id = try reader.readValue().stringValue
            case "changes":
                guard reader.index < reader.buffer.count, reader.buffer[reader.index] == UInt8(ascii: "[") else {
                    revisions = nil
                    return false
                }
                revisions = try reader.readElements { reader in
                    if let revision = try reader.readChangesEntry() { return revision }
                    invalidRevision = true
                    return RevisionID(generation: 1, digest16: repeatElement(0, count: 16))
                }
            case "deleted":
                row.deleted = try reader.readValue().boolValue ?? false
            case "doc":
                row.document = try reader.readValue()
            default:
                return false
            }
            return true
        }
        guard let id, let revisions else { throw rowError(self) }
        guard !invalidRevision else { throw DocStoreError(.invalidRevision, "A _changes row of \(id) has an invalid rev") }
        row.id = id
        row.revisions = revisions
        return row
    }

    /// `{"rev": "N-hash"}`: the revision, or `nil` when the entry has no valid one.
    private mutating func readChangesEntry() throws -> RevisionID? {
        guard index < buffer.count, buffer[index] == UInt8(ascii: "{") else {
            _ = try readValue()
            return nil
        }
        var revision: RevisionID? = nil
        try readMembers { reader, key in
            guard key == "rev" else { return false }
            revision = try reader.readRevisionString()
            return true
        }
        return revision
    }

    /// A string value read as a revision (`nil` when it is not one, or not a string); a string of
    /// ASCII without escapes is read from the text in place.
    private mutating func readRevisionString() throws -> RevisionID? {
        guard index < buffer.count, buffer[index] == UInt8(ascii: "\"") else {
            _ = try readValue()
            return nil
        }
        var end = skippingPlainWords(in: buffer, from: index + 1)
        while end < buffer.count, buffer[end] != UInt8(ascii: "\""), buffer[end] != UInt8(ascii: "\\"),
              buffer[end] >= 0x20, buffer[end] < 0x80 {
            end += 1
        }
        if end < buffer.count, buffer[end] == UInt8(ascii: "\"") {
            let text = UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: buffer[(index + 1)..<end]))
            index = end + 1
            return RevisionID(utf8: text)
        }
        return RevisionID(try readString())
    }
}
