import CouchProtocol
import DocStore
@testable import DocSync
import XCTest

/// CouchDB's checkpoint rules, without I/O.
final class CheckpointerTests: XCTestCase {
    private func checkpoint(_ session: String, at sequence: JSON, history: [(String, JSON)]) -> ReplicationCheckpoint {
        ReplicationCheckpoint(sessionID: session, sourceLastSequence: sequence, history: history.map { id, recorded in
            var entry = ReplicationCheckpoint.Session(sessionID: id)
            entry.recordedSequence = recorded
            return entry
        })
    }

    func testStartSequence() {
        let a = checkpoint("s3", at: 30, history: [("s3", 30), ("s2", 20), ("s1", 10)])
        XCTAssertEqual(Checkpointer.startSequence(source: a, target: a), 30, "same session on both sides")
        XCTAssertEqual(Checkpointer.startSequence(source: a, target: nil), 0)
        XCTAssertEqual(Checkpointer.startSequence(source: nil, target: a), 0)
        // The target missed s3's last write: its history still knows s3.
        let behind = checkpoint("s2", at: 20, history: [("s3", 25), ("s2", 20)])
        XCTAssertEqual(Checkpointer.startSequence(source: a, target: behind), 30)
        // The newest session they share decides.
        let older = checkpoint("x9", at: 99, history: [("x9", 99), ("s2", 20), ("s1", 10)])
        XCTAssertEqual(Checkpointer.startSequence(source: a, target: older), 20)
        let unrelated = checkpoint("y1", at: 5, history: [("y1", 5)])
        XCTAssertEqual(Checkpointer.startSequence(source: a, target: unrelated), 0)
        XCTAssertEqual(Checkpointer.startSequence(source: a, target: checkpoint("s1", at: 10, history: [])), 10)
    }

    func testCheckpointsPutThisSessionFirstOnceAndCapTheHistory() {
        let old = checkpoint("old-0", at: 60, history: (0..<60).map { ("old-\($0)", JSON.integer(60 - $0)) })
        var checkpointer = Checkpointer(sessionID: "new", startTime: "t0", source: .init(checkpoint: old, revision: "0-1"),
                                        target: .init(checkpoint: old, revision: "0-2"))
        XCTAssertEqual(checkpointer.startSequence, 60)
        checkpointer.statistics.documentsWritten = 4
        let first = checkpointer.checkpoint(recording: 64, endTime: "t1")
        XCTAssertEqual(first.sessionID, "new")
        XCTAssertEqual(first.sourceLastSequence, 64)
        XCTAssertEqual(first.history.count, ReplicationCheckpoint.historyLimit)
        XCTAssertEqual(first.history[0].sessionID, "new")
        XCTAssertEqual(first.history[0].startSequence, 60)
        XCTAssertEqual(first.history[0].recordedSequence, 64)
        XCTAssertEqual(first.history[0].documentsWritten, 4)
        XCTAssertEqual(first.history[1].sessionID, "old-0")
        checkpointer.saved(first, sourceRevision: "0-3", targetRevision: "0-4")
        XCTAssertEqual(checkpointer.source?.revision, "0-3")
        XCTAssertEqual(checkpointer.target?.revision, "0-4")
        XCTAssertEqual(checkpointer.recordedSequence, 64)
        let second = checkpointer.checkpoint(recording: 70, endTime: "t2")
        XCTAssertEqual(second.history.filter { $0.sessionID == "new" }.count, 1, "one entry per session")
        XCTAssertEqual(second.history[0].recordedSequence, 70)
        XCTAssertEqual(second.history[0].startSequence, 60)
    }

    func testARefusedSourceIsNotWrittenAgain() {
        var checkpointer = Checkpointer(sessionID: "s", startTime: "t", source: nil, target: nil)
        XCTAssertTrue(checkpointer.sourceIsWritable)
        checkpointer.saved(checkpointer.checkpoint(recording: 5, endTime: "t"), sourceRevision: nil, targetRevision: "0-1")
        XCTAssertFalse(checkpointer.sourceIsWritable)
        XCTAssertEqual(checkpointer.target?.revision, "0-1")
        let readOnly = Checkpointer(sessionID: "s", startTime: "t", source: nil, sourceIsWritable: false, target: nil)
        XCTAssertFalse(readOnly.sourceIsWritable)
    }

    func testTimestampsUseCouchDBsFormat() {
        XCTAssertEqual(Date(timeIntervalSince1970: 1_795_469_438).checkpointTimestamp, "Mon, 23 Nov 2026 21:30:38 GMT")
        // As Foundation's formatter writes them, for dates from 1906 to 2096 (fractions of a second dropped).
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        var generator = SystemRandomNumberGenerator()
        let seconds = [0, -1, 951_782_400, 951_868_799.75] + (0..<2_000).map { _ in Double(Int.random(in: -2_000_000_000...4_000_000_000, using: &generator)) + 0.5 }
        for second in seconds {
            let date = Date(timeIntervalSince1970: second)
            XCTAssertEqual(date.checkpointTimestamp, formatter.string(from: date), "\(second)")
        }
        // Out of range, clamped rather than trapping.
        XCTAssertEqual(Date(timeIntervalSince1970: .nan).checkpointTimestamp, "Thu, 01 Jan 1970 00:00:00 GMT")
        XCTAssertEqual(Date(timeIntervalSince1970: 1e300).checkpointTimestamp, "Fri, 31 Dec 9999 23:59:59 GMT")
    }
}
