import DocStore

/// A replication checkpoint, the `_local/<replication id>` document a replicator writes on both sides:
/// `{"session_id","source_last_seq","replication_id_version","history":[…]}`.
///
/// Written by DocSync; read back from whichever replicator wrote it last (CouchDB's own included), so
/// unknown fields of history entries survive a rewrite.
package struct ReplicationCheckpoint: Sendable, Hashable {
    /// One replication session's record, newest first in ``ReplicationCheckpoint/history``.
    package struct Session: Sendable, Hashable {
        package var sessionID: String
        package var startTime: String = ""
        package var endTime: String = ""
        package var startSequence: JSON = .integer(0)
        package var endSequence: JSON = .integer(0)
        /// The source sequence this session's checkpoint stands for.
        package var recordedSequence: JSON = .integer(0)
        package var missingChecked = 0
        package var missingFound = 0
        package var documentsRead = 0
        package var documentsWritten = 0
        package var documentWriteFailures = 0
        package var bulkGetDocuments = 0
        package var bulkGetAttempts = 0
        /// Fields of another replicator's entry that this type does not name, kept as they were.
        package var otherFields: JSONObject = [:]

        package init(sessionID: String) { self.sessionID = sessionID }

        package init?(json: JSON) {
            guard case .object(var object) = json, let id = object.removeValue(forKey: Keys.sessionID)?.stringValue else { return nil }
            sessionID = id
            startTime = object.removeValue(forKey: Keys.startTime)?.stringValue ?? ""
            endTime = object.removeValue(forKey: Keys.endTime)?.stringValue ?? ""
            startSequence = object.removeValue(forKey: Keys.startLastSequence) ?? .integer(0)
            endSequence = object.removeValue(forKey: Keys.endLastSequence) ?? .integer(0)
            recordedSequence = object.removeValue(forKey: Keys.recordedSequence) ?? .integer(0)
            missingChecked = object.removeValue(forKey: Keys.missingChecked)?.intValue ?? 0
            missingFound = object.removeValue(forKey: Keys.missingFound)?.intValue ?? 0
            documentsRead = object.removeValue(forKey: Keys.documentsRead)?.intValue ?? 0
            documentsWritten = object.removeValue(forKey: Keys.documentsWritten)?.intValue ?? 0
            documentWriteFailures = object.removeValue(forKey: Keys.documentWriteFailures)?.intValue ?? 0
            bulkGetDocuments = object.removeValue(forKey: Keys.bulkGetDocuments)?.intValue ?? 0
            bulkGetAttempts = object.removeValue(forKey: Keys.bulkGetAttempts)?.intValue ?? 0
            otherFields = object
        }

        package var json: JSON {
            var object: JSONObject = [
                Keys.sessionID: .string(sessionID), Keys.startTime: .string(startTime), Keys.endTime: .string(endTime),
                Keys.startLastSequence: startSequence, Keys.endLastSequence: endSequence,
                Keys.recordedSequence: recordedSequence, Keys.missingChecked: .integer(missingChecked),
                Keys.missingFound: .integer(missingFound), Keys.documentsRead: .integer(documentsRead),
                Keys.documentsWritten: .integer(documentsWritten),
                Keys.documentWriteFailures: .integer(documentWriteFailures),
                Keys.bulkGetDocuments: .integer(bulkGetDocuments), Keys.bulkGetAttempts: .integer(bulkGetAttempts),
            ]
            for (key, value) in otherFields where object[key] == nil { object[key] = value }
            return .object(object)
        }
    }

    /// The session that wrote this checkpoint.
    package var sessionID: String
    /// The source sequence up to which everything has been replicated.
    package var sourceLastSequence: JSON
    /// Sessions, newest first.
    package var history: [Session]
    /// The replication id scheme (CouchDB 3 writes 4).
    package var replicationIDVersion = 4

    /// CouchDB keeps at most this many sessions in a checkpoint's history.
    package static let historyLimit = 50

    package init(sessionID: String, sourceLastSequence: JSON, history: [Session]) {
        self.sessionID = sessionID
        self.sourceLastSequence = sourceLastSequence
        self.history = history
    }

    /// Decodes a checkpoint document; `nil` when it lacks `session_id` or `source_last_seq`.
    package init?(json: JSONObject) {
        guard let session = json[Keys.sessionID]?.stringValue, let last = json[Keys.sourceLastSequence] else { return nil }
        sessionID = session
        sourceLastSequence = last
        history = (json[Keys.history]?.arrayValue ?? []).compactMap(Session.init(json:))
        replicationIDVersion = json[Keys.replicationIDVersion]?.intValue ?? 4
    }

    /// The document body, history capped at ``historyLimit``.
    package var json: JSONObject {
        [Keys.sessionID: .string(sessionID), Keys.sourceLastSequence: sourceLastSequence,
         Keys.replicationIDVersion: .integer(replicationIDVersion),
         Keys.history: .array(history.prefix(Self.historyLimit).map(\.json))]
    }

    /// A `_local` checkpoint document as `GET /db/_local/id` answers it: the checkpoint (`nil` when
    /// it is not one), and the document's `_rev`.
    package static func decodeLocalDocument(_ json: JSON) -> (checkpoint: ReplicationCheckpoint?, revision: String)? {
        guard case .object(var body) = json else { return nil }
        let revision = body.removeValue(forKey: Keys.rev)?.stringValue ?? ""
        body.removeValue(forKey: Keys.id)
        return (ReplicationCheckpoint(json: body), revision)
    }

    /// The body of `PUT /db/_local/id` that writes this checkpoint over `revision`.
    package func localDocument(revision: String?) -> JSON {
        var document = json
        if let revision { document[Keys.rev] = .string(revision) }
        return .object(document)
    }

    private enum Keys {
        static let id = "_id"
        static let rev = "_rev"
        static let sessionID = "session_id"
        static let sourceLastSequence = "source_last_seq"
        static let replicationIDVersion = "replication_id_version"
        static let history = "history"
        static let startTime = "start_time"
        static let endTime = "end_time"
        static let startLastSequence = "start_last_seq"
        static let endLastSequence = "end_last_seq"
        static let recordedSequence = "recorded_seq"
        static let missingChecked = "missing_checked"
        static let missingFound = "missing_found"
        static let documentsRead = "docs_read"
        static let documentsWritten = "docs_written"
        static let documentWriteFailures = "doc_write_failures"
        static let bulkGetDocuments = "bulk_get_docs"
        static let bulkGetAttempts = "bulk_get_attempts"
    }
}
