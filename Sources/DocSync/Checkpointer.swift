import CouchProtocol
import DocStore
import Foundation

/// One replication session's checkpoint bookkeeping, without I/O: where to start, and the document to
/// write on both sides after each batch.
///
/// CouchDB's rule for the start: the same session on both sides → its sequence; otherwise the newest
/// session of the source's history that the target also knows → the sequence it recorded; otherwise
/// from the beginning. Each checkpoint written puts this session first in the history, drops an older
/// entry of the same session, and keeps at most ``ReplicationCheckpoint/historyLimit`` sessions.
struct Checkpointer: Sendable {
    /// A checkpoint as read from one side, with the `_rev` to overwrite.
    struct Record: Sendable, Equatable {
        /// The checkpoint, `nil` when the document there is not one.
        var checkpoint: ReplicationCheckpoint?
        var revision: String
    }

    let sessionID: String
    let startTime: String
    /// The source sequence this session starts after.
    let startSequence: JSON
    /// The sequence of the last checkpoint written (or the start).
    private(set) var recordedSequence: JSON
    private(set) var source: Record?
    private(set) var target: Record?
    /// Whether the source accepts checkpoints; a read-only source (403/401) does not, and only the
    /// target's is written, as CouchDB does.
    private(set) var sourceIsWritable: Bool
    /// The replication's figures, written into this session's history entry: as CouchDB's, they carry
    /// on from the entry of the session it resumed from.
    var statistics = ReplicationFigures()
    /// The figures this session started from: those of the session it resumed from (zero otherwise).
    let earlier: ReplicationFigures
    private var history: [ReplicationCheckpoint.Session]

    /// - Parameters:
    ///   - source: The source's checkpoint, `nil` when it has none.
    ///   - sourceIsWritable: `false` when the source refused to show its checkpoint.
    ///   - target: The target's checkpoint.
    ///   - startingAt: where to start instead of where the checkpoints say (`since_seq`).
    init(sessionID: String, startTime: String, source: Record?, sourceIsWritable: Bool = true, target: Record?,
         startingAt override: JSON? = nil) {
        self.sessionID = sessionID
        self.startTime = startTime
        self.source = source
        self.target = target
        self.sourceIsWritable = sourceIsWritable
        let start = override ?? Self.startSequence(source: source?.checkpoint, target: target?.checkpoint)
        startSequence = start
        recordedSequence = start
        history = source?.checkpoint?.history ?? target?.checkpoint?.history ?? []
        // Resuming, the figures go on from the newest session's (CouchDB's `init_state`).
        if start != .integer(0), let newest = history.first { statistics = ReplicationFigures(newest) }
        earlier = statistics
    }

    /// CouchDB's rule (see the type's documentation).
    static func startSequence(source: ReplicationCheckpoint?, target: ReplicationCheckpoint?) -> JSON {
        guard let source, let target else { return .integer(0) }
        if source.sessionID == target.sessionID { return source.sourceLastSequence }
        let targetSessions = Set([target.sessionID] + target.history.map(\.sessionID))
        if targetSessions.contains(source.sessionID) { return source.sourceLastSequence }
        for session in source.history where targetSessions.contains(session.sessionID) {
            return session.recordedSequence
        }
        return .integer(0)
    }

    /// The checkpoint that records `sequence` now.
    func checkpoint(recording sequence: JSON, endTime: String) -> ReplicationCheckpoint {
        var entry = ReplicationCheckpoint.Session(sessionID: sessionID)
        entry.startTime = startTime
        entry.endTime = endTime
        entry.startSequence = startSequence
        entry.endSequence = sequence
        entry.recordedSequence = sequence
        statistics.record(into: &entry)
        let older = history.filter { $0.sessionID != sessionID }
        return ReplicationCheckpoint(sessionID: sessionID, sourceLastSequence: sequence,
                                     history: Array(([entry] + older).prefix(ReplicationCheckpoint.historyLimit)))
    }

    /// Records that `checkpoint` was written: on the source with `sourceRevision` (`nil` when the
    /// source refused it, which stops further writes there) and on the target with `targetRevision`.
    mutating func saved(_ checkpoint: ReplicationCheckpoint, sourceRevision: String?, targetRevision: String) {
        if let sourceRevision {
            source = Record(checkpoint: checkpoint, revision: sourceRevision)
        } else {
            sourceIsWritable = false
        }
        target = Record(checkpoint: checkpoint, revision: targetRevision)
        history = checkpoint.history
        recordedSequence = checkpoint.sourceLastSequence
    }
}

extension Date {
    /// CouchDB's timestamp format in checkpoint and `_replicate` histories: `Mon, 23 Nov 2026 21:30:38 GMT`
    /// (``Timestamp/httpDate(_:)``: no `DateFormatter` made for each checkpoint of a replication).
    package var checkpointTimestamp: String { Timestamp.httpDate(self) }
}

extension ReplicationFigures {
    /// The figures a checkpoint's history entry records.
    init(_ entry: ReplicationCheckpoint.Session) {
        self.init()
        revisionsChecked = entry.missingChecked
        missingRevisionsFound = entry.missingFound
        documentsRead = entry.documentsRead
        documentsWritten = entry.documentsWritten
        documentWriteFailures = entry.documentWriteFailures
        bulkGetDocuments = entry.bulkGetDocuments
        bulkGetAttempts = entry.bulkGetAttempts
    }

    /// Writes the figures into a checkpoint's history entry, under CouchDB's names (also the history
    /// of DocServer's `_replicate` answer, which has that shape).
    package func record(into entry: inout ReplicationCheckpoint.Session) {
        entry.missingChecked = revisionsChecked
        entry.missingFound = missingRevisionsFound
        entry.documentsRead = documentsRead
        entry.documentsWritten = documentsWritten
        entry.documentWriteFailures = documentWriteFailures
        entry.bulkGetDocuments = bulkGetDocuments
        entry.bulkGetAttempts = bulkGetAttempts
    }
}
