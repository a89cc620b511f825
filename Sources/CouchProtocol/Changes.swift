import Foundation
import DocStore

/// One row of a `_changes` answer: `{"seq","id","changes":[{"rev"}…],"deleted"?,"doc"?}`.
package struct ChangesRow: Sendable, Hashable {
    /// The source's sequence, opaque: an integer from DocStore, a string from CouchDB 2+.
    package var sequence: JSON
    package var id: String
    /// The winner, or with `style=all_docs` every leaf, the winner first.
    package var revisions: [RevisionID]
    package var deleted: Bool
    /// The document (`include_docs=true`).
    package var document: JSON?

    package init(sequence: JSON, id: String, revisions: [RevisionID], deleted: Bool, document: JSON? = nil) {
        self.sequence = sequence
        self.id = id
        self.revisions = revisions
        self.deleted = deleted
        self.document = document
    }

    /// A row of DocStore's feed; with `allLeaves` (`style=all_docs`) every leaf revision, otherwise
    /// the winner only.
    package init(_ change: ChangesFeedRow, allLeaves: Bool, document: JSON? = nil) {
        self.init(sequence: .integer(Int(change.sequence)), id: change.id,
                  revisions: allLeaves ? change.leafRevisions : [change.revision],
                  deleted: change.isDeleted, document: document)
    }

    /// Decodes a row. A row without an id or a `changes` list is malformed; a revision that does not
    /// parse is too.
    package init(json: JSON) throws {
        guard let id = json[Keys.id]?.stringValue, let changes = json[Keys.changes]?.arrayValue else {
            throw DocStoreError(.badRequest, "A _changes row needs \"id\" and \"changes\": \(json.description.prefix(200))")
        }
        self.id = id
        revisions = try changes.map { entry in
            guard let text = entry[Keys.rev]?.stringValue, let revision = RevisionID(text) else {
                throw DocStoreError(.invalidRevision, "A _changes row of \(id) has an invalid rev")
            }
            return revision
        }
        sequence = json[Keys.seq] ?? .null
        deleted = json[Keys.deleted]?.boolValue ?? false
        document = json[Keys.doc]
    }

    /// Writes the row as ``json`` serializes, without building it: `_changes` answers are written so.
    package func write(to writer: inout JSONWriter) throws {
        writer.append("{\"seq\":")
        try writer.write(sequence)
        writer.append(",\"id\":")
        writer.writeString(id)
        writer.append(",\"changes\":[")
        for (index, revision) in revisions.enumerated() {
            writer.append(index == 0 ? "{\"rev\":" : ",{\"rev\":")
            writer.writeRevision(revision)
            writer.append("}")
        }
        writer.append("]")
        if deleted { writer.append(",\"deleted\":true") }
        if let document {
            writer.append(",\"doc\":")
            try writer.write(document)
        }
        writer.append("}")
    }

    /// The row's JSON text, as ``write(to:)`` writes it (values JSON cannot hold written as `null`).
    package var text: String {
        var writer = JSONWriter(nonFiniteAsNull: true)
        try? write(to: &writer)
        return String(decoding: writer.bytes, as: UTF8.self)
    }

    package var json: JSON {
        var object: JSONObject = [
            Keys.seq: sequence, Keys.id: .string(id),
            Keys.changes: .array(revisions.map { [Keys.rev: .string($0.description)] }),
        ]
        if deleted { object[Keys.deleted] = true }
        if let document { object[Keys.doc] = document }
        return .object(object)
    }

    enum Keys {
        static let seq = "seq"
        static let id = "id"
        static let changes = "changes"
        static let rev = "rev"
        static let deleted = "deleted"
        static let doc = "doc"
    }
}

/// A `_changes` answer in the normal and longpoll feeds: `{"results":[…],"last_seq","pending"}`.
package struct ChangesResponse: Sendable, Hashable {
    package var results: [ChangesRow]
    /// The sequence to continue from.
    package var lastSequence: JSON
    /// How many changes remain after `last_seq` (absent from older servers' answers).
    package var pending: Int?

    package init(results: [ChangesRow], lastSequence: JSON, pending: Int?) {
        self.results = results
        self.lastSequence = lastSequence
        self.pending = pending
    }

    /// Decodes an answer; without `last_seq` (some older servers) the last row's sequence stands for it.
    package init(json: JSON) throws {
        guard let rows = json[Keys.results]?.arrayValue else {
            throw DocStoreError(.badRequest, "_changes answered without results: \(json.description.prefix(200))")
        }
        results = try rows.map(ChangesRow.init(json:))
        lastSequence = json[Keys.lastSeq] ?? results.last?.sequence ?? .null
        pending = json[Keys.pending]?.intValue
    }

    /// Reads an answer's JSON text as ``init(json:)`` decodes its tree, without building the tree
    /// (``ChangesAnswer``).
    package init(parsing data: Data) throws {
        let answer: ChangesAnswer
        do {
            answer = try ChangesAnswer(parsing: data)
        } catch is JSONReader.RepeatedKey {
            // An object that names a member twice: read as the tree reads it, the last member winning.
            try self.init(json: JSON(parsing: data))
            return
        }
        let results = answer.rows.map {
            ChangesRow(sequence: $0.sequence, id: $0.id, revisions: $0.revisions, deleted: $0.deleted, document: $0.document)
        }
        self.init(results: results, lastSequence: answer.lastSequence ?? results.last?.sequence ?? .null, pending: answer.pending)
    }

    /// The answer as ``json`` serializes, without building it; with `nonFiniteAsNull`, a NaN or
    /// infinite number is written as `null` (as `description` writes it) instead of throwing.
    package func serialized(nonFiniteAsNull: Bool = false) throws -> [UInt8] {
        var writer = JSONWriter(nonFiniteAsNull: nonFiniteAsNull, capacity: 64 + results.count * 96)
        writer.append("{\"results\":[")
        for (index, row) in results.enumerated() {
            if index > 0 { writer.append(",") }
            try row.write(to: &writer)
        }
        writer.append("],\"last_seq\":")
        try writer.write(lastSequence)
        if let pending {
            writer.append(",\"pending\":")
            writer.writeInteger(pending)
        }
        writer.append("}")
        return writer.bytes
    }

    package var json: JSON {
        var object: JSONObject = [Keys.results: .array(results.map(\.json)), Keys.lastSeq: lastSequence]
        if let pending { object[Keys.pending] = .integer(pending) }
        return .object(object)
    }

    /// A longpoll answer is written in two pieces, since it opens before the first change exists and
    /// heartbeat newlines may come between them: this opening,
    package static let streamOpening = "{\"" + Keys.results + "\":[\n"

    /// and after it this rest of the answer (``streamOpening`` followed by this parses as ``json``).
    package var streamClosing: String {
        var text = results.map(\.text).joined(separator: ",\n")
        text += "\n],\n\"\(Keys.lastSeq)\":\(lastSequence.description)"
        if let pending { text += ",\"\(Keys.pending)\":\(pending)" }
        return text + "}\n"
    }

    enum Keys {
        static let results = "results"
        static let lastSeq = "last_seq"
        static let pending = "pending"
    }
}

/// One line of a continuous `_changes` feed: a row, an empty heartbeat line, or the final
/// `{"last_seq","pending"}` line.
package enum ChangesFeedLine: Sendable, Hashable {
    case row(ChangesRow)
    case heartbeat
    case end(lastSequence: JSON, pending: Int?)

    /// Decodes a line (without its newline).
    package init(line: some Collection<UInt8>) throws {
        if line.allSatisfy({ $0 == 0x20 || $0 == 0x0D }) {
            self = .heartbeat
            return
        }
        let json = try JSON(parsing: line)
        if json[ChangesRow.Keys.id] == nil, let last = json[ChangesResponse.Keys.lastSeq] {
            self = .end(lastSequence: last, pending: json[ChangesResponse.Keys.pending]?.intValue)
        } else {
            self = .row(try ChangesRow(json: json))
        }
    }

    /// The line as the continuous feed writes it, newline included.
    package var text: String {
        switch self {
        case .row(let row): return row.text + "\n"
        case .heartbeat: return "\n"
        case .end(let last, let pending):
            var object: JSONObject = [ChangesResponse.Keys.lastSeq: last]
            if let pending { object[ChangesResponse.Keys.pending] = .integer(pending) }
            return JSON.object(object).description + "\n"
        }
    }

    /// A row as an `EventSource` event (`feed=eventsource`): its JSON as data, its sequence as id (in
    /// JSON, quotes included, as CouchDB 3.3 sends it).
    package static func event(_ row: ChangesRow) -> String {
        "data: \(row.text)\nid: \(row.sequence.description)\n\n"
    }

    /// An `EventSource` heartbeat, as CouchDB 3.3 sends it.
    package static let eventHeartbeat = "event: heartbeat\ndata: \n\n"
}
