import CouchProtocol
import DocStore
import TestSupport
import XCTest

final class ReplicationCheckpointTests: XCTestCase {
    func testRoundTrip() throws {
        var session = ReplicationCheckpoint.Session(sessionID: "s1")
        session.startTime = "Mon, 23 Nov 2026 21:30:35 GMT"
        session.recordedSequence = "12-abc"
        session.documentsWritten = 3
        session.bulkGetDocuments = 7
        session.otherFields = ["another_replicators_figure": 7]
        let checkpoint = ReplicationCheckpoint(sessionID: "s1", sourceLastSequence: "12-abc", history: [session])
        let bytes = try JSON.object(checkpoint.json).serialized()
        guard case .object(let decoded) = try JSON(parsing: bytes) else { return XCTFail("not an object") }
        XCTAssertEqual(ReplicationCheckpoint(json: decoded), checkpoint)
        XCTAssertEqual(decoded["history"]?[0]?["bulk_get_docs"], 7)
        XCTAssertEqual(decoded["history"]?[0]?["another_replicators_figure"], 7, "unknown fields survive")
        XCTAssertNil(ReplicationCheckpoint(json: ["source_last_seq": 1]), "a session id is required")
        XCTAssertNil(ReplicationCheckpoint(json: ["session_id": "x"]), "a sequence is required")
    }

    func testHistoryIsCappedWhenWritten() {
        let history = (0..<80).map { ReplicationCheckpoint.Session(sessionID: "s\($0)") }
        let checkpoint = ReplicationCheckpoint(sessionID: "s0", sourceLastSequence: 1, history: history)
        XCTAssertEqual(checkpoint.json["history"]?.arrayValue?.count, ReplicationCheckpoint.historyLimit)
    }

    /// The checkpoints CouchDB 3.3.3's replicator wrote, pushing and pulling.
    func testDecodesCouchDBsCheckpoints() throws {
        for name in ["push-to-target", "pull-from-source"] {
            let put = try XCTUnwrap(CouchDBFixtures.exchanges(name + ".ndjson").first { $0.method == "PUT" && $0.path.contains("/_local/") })
            guard case .object(let body) = try JSON(parsing: put.requestBody) else { return XCTFail("not an object") }
            let checkpoint = try XCTUnwrap(ReplicationCheckpoint(json: body), name)
            XCTAssertEqual(checkpoint.sessionID, body["session_id"]?.stringValue)
            XCTAssertEqual(checkpoint.sourceLastSequence, body["source_last_seq"])
            XCTAssertEqual(checkpoint.replicationIDVersion, 4)
            let first = try XCTUnwrap(checkpoint.history.first)
            XCTAssertEqual(first.sessionID, checkpoint.sessionID)
            XCTAssertEqual(first.recordedSequence, checkpoint.sourceLastSequence)
            XCTAssertEqual(first.startSequence, 0)
            XCTAssertEqual(first.documentsWritten, body["history"]?[0]?["docs_written"]?.intValue)
            XCTAssertGreaterThan(first.documentsWritten, 0)
            XCTAssertTrue(first.startTime.hasSuffix(" GMT"))
            XCTAssertEqual(first.bulkGetDocuments, body["history"]?[0]?["bulk_get_docs"]?.intValue, "CouchDB's _bulk_get figures are read")
            XCTAssertEqual(first.bulkGetAttempts, body["history"]?[0]?["bulk_get_attempts"]?.intValue)
            // Written back, every field CouchDB wrote is there with its value.
            let rewritten = checkpoint.json
            for (key, value) in body where key != "_id" {
                if key == "history" {
                    for (field, fieldValue) in value[0]!.objectValue! {
                        XCTAssertEqual(rewritten["history"]?[0]?[field], fieldValue, "\(name) history.\(field)")
                    }
                } else {
                    XCTAssertEqual(rewritten[key], value, "\(name) \(key)")
                }
            }
        }
    }
}
