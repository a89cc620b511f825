@testable import DocServer
import DocStore
import DocSync
import Foundation
import XCTest

/// The `_replicator` database and `_scheduler`: persistent replications described by documents,
/// with the state CouchDB 3.3 writes into them and shows in `_scheduler/docs` and `_scheduler/jobs`.
final class ReplicatorDatabaseTests: XCTestCase {
    private func seed(_ server: TestServer, _ database: String, _ ids: [String]) async throws {
        if try await server.request("GET", "/\(database)").status == 404 {
            await XCTAssertEqualAsync(try await server.request("PUT", "/\(database)").status, 201)
        }
        let docs = JSON.array(ids.map { ["_id": .string($0), "n": .integer($0.count)] })
        await XCTAssertEqualAsync(try await server.request("POST", "/\(database)/_bulk_docs", json: ["docs": docs]).status, 201)
    }

    private func rowCount(_ server: TestServer, _ database: String) async throws -> Int {
        try await server.request("GET", "/\(database)/_all_docs").json["rows"]?.arrayValue?.count ?? -1
    }

    func testOneShotDocumentCompletesAndRecordsCouchDBState() async throws {
        let server = try await TestServer(self)
        try await seed(server, "a", ["x", "y", "z"])
        // The source by URL (this server, over HTTP), the target by name.
        let source = "http://\(TestServer.admin.name):\(TestServer.admin.password)@127.0.0.1:\(server.port)/a"
        let put = try await server.request("PUT", "/_replicator/one", json: ["source": .string(source), "target": "b", "create_target": true])
        XCTAssertEqual(put.status, 201, put.text)

        var document = JSON.null
        try await eventually {
            document = try await server.request("GET", "/_replicator/one").json
            return document["_replication_state"] == "completed"
        }
        XCTAssertEqual(document["owner"], .string(TestServer.admin.name), "the writer is recorded as owner, as CouchDB")
        let time = try XCTUnwrap(document["_replication_state_time"]?.stringValue)
        XCTAssertNotNil(try? Date(time, strategy: .iso8601), time)
        let stats = try XCTUnwrap(document["_replication_stats"])
        for (key, value) in [("docs_written", 3), ("docs_read", 3), ("revisions_checked", 3), ("missing_revisions_found", 3), ("doc_write_failures", 0),
                             ("bulk_get_docs", 3), ("bulk_get_attempts", 3)] {
            XCTAssertEqual(stats[key], .integer(value), key)
        }
        XCTAssertNotNil(stats["checkpointed_source_seq"].flatMap { $0 == .null ? nil : $0 }, "\(stats)")
        XCTAssertNotNil(stats["start_time"]?.stringValue)
        XCTAssertNil(document["_replication_state_reason"])
        await XCTAssertEqualAsync(try await rowCount(server, "b"), 3)

        let scheduled = try await server.request("GET", "/_scheduler/docs/_replicator/one")
        XCTAssertEqual(scheduled.status, 200)
        XCTAssertEqual(scheduled.json["state"], "completed")
        XCTAssertEqual(scheduled.json["database"], "_replicator")
        XCTAssertEqual(scheduled.json["id"], .null)
        XCTAssertEqual(scheduled.json["source"], .string("http://127.0.0.1:\(server.port)/a/"), "credentials are not shown")
        XCTAssertEqual(scheduled.json["info"]?["docs_written"], 3)
        await XCTAssertEqualAsync(try await server.request("GET", "/_scheduler/jobs").json["total_rows"], 0, "a completed job is gone")

        // Replication metrics moved.
        let metrics = try await server.request("GET", "/_node/_local/_prometheus").text
        XCTAssertTrue(metrics.contains("docstore_replication_docs_written_total 3"), metrics)
        XCTAssertTrue(metrics.contains("couchdb_couch_replicator_docs_completed_state_updates_total 1"), metrics)
        XCTAssertTrue(metrics.contains("couchdb_couch_replicator_jobs_starts_total 1"), metrics)

        // A completed document does not run again by itself; with its state removed it does.
        try await seed(server, "a", ["w"])
        var edited = try XCTUnwrap(document.objectValue)
        for key in ["_replication_state", "_replication_state_time", "_replication_stats"] { edited.removeValue(forKey: key) }
        await XCTAssertEqualAsync(try await server.request("PUT", "/_replicator/one", json: .object(edited)).status, 201)
        try await eventually { try await server.request("GET", "/_replicator/one").json["_replication_state"] == "completed" }
        // As CouchDB's, the figures go on from the checkpoint it resumed from: 3 + 1 (a run from the
        // beginning would have found only the new document missing, and shown 1).
        let again = try await server.request("GET", "/_replicator/one").json["_replication_stats"]
        XCTAssertEqual(again?["docs_written"], 4, "\(again ?? .null)")
        XCTAssertEqual(again?["missing_revisions_found"], 4)
        XCTAssertEqual(again?["bulk_get_docs"], 4)
        await XCTAssertEqualAsync(try await rowCount(server, "b"), 4)
    }

    func testContinuousDocumentSurvivesARestartAndResumesFromItsCheckpoint() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("docserver-tests-\(UUID().uuidString)")
        let first = try await TestServer(self, directory: directory)
        try await seed(first, "a", ["d1", "d2", "d3", "d4", "d5"])
        let put = try await first.request("PUT", "/_replicator/mirror", json: ["source": "a", "target": "b", "create_target": true, "continuous": true])
        XCTAssertEqual(put.status, 201, put.text)
        try await eventually { try await self.rowCount(first, "b") == 5 }
        // Running: in _scheduler/docs, _scheduler/jobs and _active_tasks, with its checkpoint saved.
        var job = JSON.null
        try await eventually {
            job = try await first.request("GET", "/_scheduler/jobs").json["jobs"]?[0] ?? .null
            return job["info"]?["checkpointed_source_seq"] == 5
        }
        let id = try XCTUnwrap(job["id"]?.stringValue)
        XCTAssertTrue(id.hasSuffix("+continuous+create_target"), id)
        XCTAssertEqual(job["doc_id"], "mirror")
        XCTAssertEqual(job["database"], "_replicator")
        XCTAssertEqual(job["user"], .string(TestServer.admin.name))
        XCTAssertEqual(job["history"]?.arrayValue?.compactMap { $0["type"]?.stringValue }, ["started", "added"])
        await XCTAssertEqualAsync(try await first.request("GET", "/_scheduler/jobs/\(id.replacingOccurrences(of: "+", with: "%2B"))").json["doc_id"], "mirror")
        let doc = try await first.request("GET", "/_scheduler/docs/_replicator/mirror").json
        XCTAssertEqual(doc["state"], "running")
        XCTAssertEqual(doc["id"], .string(id))
        XCTAssertEqual(doc["error_count"], 0)
        let task = try await first.request("GET", "/_active_tasks").json[0]
        XCTAssertEqual(task?["doc_id"], "mirror")
        XCTAssertEqual(task?["replication_id"], .string(id))
        let undisturbed = try await first.request("GET", "/_replicator/mirror").json
        XCTAssertNil(undisturbed["_replication_state"], "a running replication's document is left alone, as CouchDB 3.3")

        // Stopped; documents written meanwhile, with the database opened directly.
        await first.server.stop()
        let database = try await Database.open(DatabaseConfiguration(name: "a", directory: directory))
        _ = try await database.save([Document(id: "d6", body: ["n": 6]), Document(id: "d7", body: ["n": 7])])
        await database.close()

        // Started again on the same folder: nobody asks, the job runs again from its checkpoint.
        let second = try await TestServer(self, directory: directory)
        try await eventually { try await self.rowCount(second, "b") == 7 }
        try await eventually {
            let info = try await second.request("GET", "/_scheduler/jobs/\(id.replacingOccurrences(of: "+", with: "%2B"))").json["info"]
            return info?["checkpointed_source_seq"] == 7
        }
        // It started after sequence 5, and its figures go on from the checkpoint's, as CouchDB's (from
        // the beginning it would have checked 7 revisions but found and written only 2).
        let restarted = try XCTUnwrap(second.server.scheduler.job(id))
        XCTAssertEqual(restarted.status.positions[.push]?.startedFrom, 5)
        XCTAssertEqual(restarted.status.figures.revisionsChecked, 2, "only the changes after the checkpoint were read")
        let info = try await second.request("GET", "/_scheduler/jobs/\(id.replacingOccurrences(of: "+", with: "%2B"))").json["info"]
        XCTAssertEqual(info?["revisions_checked"], 7, "\(info ?? .null)")
        XCTAssertEqual(info?["missing_revisions_found"], 7)
        XCTAssertEqual(info?["docs_written"], 7)

        // Deleting the document stops the job.
        let current = try await second.request("GET", "/_replicator/mirror").json
        let rev = try XCTUnwrap(current["_rev"]?.stringValue)
        await XCTAssertEqualAsync(try await second.request("DELETE", "/_replicator/mirror?rev=\(rev)").status, 200)
        try await eventually { try await second.request("GET", "/_scheduler/jobs").json["total_rows"] == 0 }
        await XCTAssertEqualAsync(try await second.request("GET", "/_scheduler/docs").json["docs"], [])
    }

    func testDocumentsAreCheckedAndOnlyAdminsMayUseThem() async throws {
        let server = try await TestServer(self)
        try await seed(server, "a", ["x"])
        // Refused as CouchDB refuses them, with its reasons.
        let missing = try await server.request("PUT", "/_replicator/bad", json: ["target": "b"])
        XCTAssertEqual(missing.status, 403)
        XCTAssertEqual(missing.json, ["error": "forbidden", "reason": "Missing replicator database"])
        let ids = try await server.request("PUT", "/_replicator/bad", json: ["source": "a", "target": "b", "doc_ids": "x"])
        XCTAssertEqual(ids.json["reason"], #"{throw,{bad_request,<<"parameter `doc_ids` must be an array">>}}"#)
        let both = try await server.request("POST", "/_replicator", json: ["source": "a", "target": "b", "doc_ids": ["x"], "filter": "f/g"])
        XCTAssertEqual(both.json["reason"], #"{throw,{bad_request,"`doc_ids`,`filter`,`selector` are mutually exclusive"}}"#)
        let bulk = try await server.request("POST", "/_replicator/_bulk_docs", json: ["docs": [["_id": "bulk", "source": "a", "continuous": "yes", "target": "b"]]])
        XCTAssertEqual(bulk.json[0]?["error"], "forbidden", bulk.text)
        await XCTAssertEqualAsync(try await server.request("GET", "/_replicator/bad").status, 404)
        // Marked failed by its writer: stored, and not run.
        let marked = try await server.request("PUT", "/_replicator/marked", json: ["source": "nowhere", "_replication_state": "failed"])
        XCTAssertEqual(marked.status, 201, marked.text)

        // A document that arrives by replication is not checked when written: it fails when processed.
        let replicated = try await server.request("POST", "/_replicator/_bulk_docs", json: [
            "new_edits": false, "docs": [["_id": "carried", "_rev": "1-abc", "source": "a", "target": "b", "selector": "not an object"]]])
        XCTAssertEqual(replicated.status, 201, replicated.text)
        var carried = JSON.null
        try await eventually {
            carried = try await server.request("GET", "/_replicator/carried").json
            return carried["_replication_state"] == "failed"
        }
        XCTAssertEqual(carried["_replication_state_reason"], #"{throw,{bad_request,<<"parameter `selector` must be a JSON object">>}}"#)
        let failed = try await server.request("GET", "/_scheduler/docs?states=failed").json
        XCTAssertEqual(failed["docs"]?.arrayValue?.compactMap { $0["doc_id"]?.stringValue }, ["carried", "marked"])

        // Two documents for one replication: the second fails, naming the first.
        await XCTAssertEqualAsync(try await server.request("PUT", "/_replicator/r1", json: ["source": "a", "target": "c", "create_target": true, "continuous": true]).status, 201)
        try await eventually { try await server.request("GET", "/_scheduler/docs/_replicator/r1").json["state"] == "running" }
        await XCTAssertEqualAsync(try await server.request("PUT", "/_replicator/r2", json: ["source": "a", "target": "c", "create_target": true, "continuous": true]).status, 201)
        try await eventually { try await server.request("GET", "/_replicator/r2").json["_replication_state"] == "failed" }
        let reason = try await server.request("GET", "/_replicator/r2").json["_replication_state_reason"]?.stringValue ?? ""
        XCTAssertTrue(reason.contains("already started, triggered by document `r1` from db `_replicator`"), reason)

        // A transient job runs the same replication: the document is in `error` and retried; once the
        // transient job is cancelled, the document's job takes over.
        let transient: JSON = ["source": "a", "target": "t", "create_target": true, "continuous": true]
        await XCTAssertEqualAsync(try await server.request("POST", "/_replicate", json: transient).status, 202)
        await XCTAssertEqualAsync(try await server.request("PUT", "/_replicator/late", json: transient).status, 201)
        var late = JSON.null
        try await eventually {
            late = try await server.request("GET", "/_scheduler/docs/_replicator/late").json
            return late["state"] == "error"
        }
        XCTAssertTrue(late["info"]?["error"]?.stringValue?.contains("already running as a transient replication") == true, "\(late)")
        var cancel = transient.objectValue!
        cancel["cancel"] = true
        await XCTAssertEqualAsync(try await server.request("POST", "/_replicate", json: .object(cancel)).status, 200)
        try await eventually { try await server.request("GET", "/_scheduler/docs/_replicator/late").json["state"] == "running" }
        let lateJob = try await server.request("GET", "/_scheduler/docs/_replicator/late").json
        await XCTAssertEqualAsync(try await server.request("GET", "/_scheduler/jobs/\(lateJob["id"]?.stringValue?.replacingOccurrences(of: "+", with: "%2B") ?? "")").json["doc_id"], "late")
        let lateRevision = try await server.request("GET", "/_replicator/late").json["_rev"]?.stringValue ?? ""
        await XCTAssertEqualAsync(try await server.request("DELETE", "/_replicator/late?rev=\(lateRevision)").status, 200)
        try await eventually { try await server.request("GET", "/_scheduler/docs/_replicator/late").status == 404 }

        // An unreachable peer: the job is crashing, with its error, and is retried.
        await XCTAssertEqualAsync(try await server.request("PUT", "/_replicator/far", json: ["source": "a", "target": "http://127.0.0.1:1/none", "continuous": true]).status, 201)
        var far = JSON.null
        try await eventually {
            far = try await server.request("GET", "/_scheduler/docs/_replicator/far").json
            return far["state"] == "crashing"
        }
        XCTAssertGreaterThanOrEqual(far["error_count"]?.intValue ?? 0, 1)
        XCTAssertNotNil(far["info"]?["error"]?.stringValue, "\(far)")

        // Query parameters of _scheduler.
        let page = try await server.request("GET", "/_scheduler/docs?limit=1&skip=1").json
        XCTAssertEqual(page["total_rows"], 5)
        XCTAssertEqual(page["offset"], 1)
        XCTAssertEqual(page["docs"]?.arrayValue?.compactMap { $0["doc_id"]?.stringValue }, ["far"])
        let bogus = try await server.request("GET", "/_scheduler/docs?states=bogus")
        XCTAssertEqual(bogus.status, 400)
        XCTAssertEqual(bogus.json["error"], "query_parse_error")
        await XCTAssertEqualAsync(try await server.request("GET", "/_scheduler/jobs/nope").status, 404)
        await XCTAssertEqualAsync(try await server.request("POST", "/_scheduler/jobs", json: [:]).status, 405)

        // Admins only, as CouchDB 3.3: the database is theirs, and so is _scheduler.
        await XCTAssertEqualAsync(try await server.request("GET", "/_replicator/_security").json,
                                  ["members": ["roles": ["_admin"]], "admins": ["roles": ["_admin"]]])
        await XCTAssertEqualAsync(try await server.addUser("alice", ["password": "pw", "channels": ["*"]]), 201)
        let alice = TestServer.Credentials.user("alice", "pw")
        for (method, path, body) in [("GET", "/_replicator", nil), ("GET", "/_replicator/r1", nil),
                                     ("PUT", "/_replicator/mine", ["source": "a", "target": "d"] as JSON?)] {
            let refused = try await server.request(method, path, json: body, as: alice)
            XCTAssertEqual(refused.status, 403, "\(method) \(path)")
            XCTAssertEqual(refused.json, ["error": "forbidden", "reason": "You are not allowed to access this db."])
        }
        for path in ["/_scheduler/docs", "/_scheduler/jobs", "/_active_tasks", "/_node/_local/_prometheus"] {
            let refused = try await server.request("GET", path, as: alice)
            XCTAssertEqual(refused.status, 401, path)
            XCTAssertEqual(refused.json["error"], "unauthorized")
        }
        await XCTAssertEqualAsync(try await server.request("GET", "/_replicator/mine").status, 404)

        // Opened to members by an admin, as CouchDB allows: a member writes in their own name only, and
        // names databases by URL (with their own credentials), not this server's databases directly.
        await XCTAssertEqualAsync(try await server.request("PUT", "/_replicator/_security", json: ["members": ["names": ["bob"]]]).status, 200)
        await XCTAssertEqualAsync(try await server.addUser("bob", ["password": "pw", "channels": ["*"]]), 201)
        let bob = TestServer.Credentials.user("bob", "pw")
        let url = JSON.string("http://bob:pw@127.0.0.1:\(server.port)/a")
        let foreign = try await server.request("PUT", "/_replicator/bobs", json: ["source": url, "target": "http://127.0.0.1:1/x", "owner": "admin"], as: bob)
        XCTAssertEqual(foreign.json, ["error": "forbidden", "reason": "Can't update replication documents from other users."])
        let local = try await server.request("PUT", "/_replicator/bobs", json: ["source": "a", "target": "http://127.0.0.1:1/x"], as: bob)
        XCTAssertEqual(local.json, ["error": "forbidden", "reason": "local_endpoints_not_supported"])
        let own = try await server.request("PUT", "/_replicator/bobs", json: ["source": url, "target": "http://127.0.0.1:1/x"], as: bob)
        XCTAssertEqual(own.status, 201, own.text)
        await XCTAssertEqualAsync(try await server.request("GET", "/_replicator/bobs").json["owner"], "bob")

        // Deleted, the database takes its jobs along; created again, it is the admins' and runs documents.
        await XCTAssertEqualAsync(try await server.request("DELETE", "/_replicator").status, 200)
        try await eventually { try await server.request("GET", "/_scheduler/jobs").json["total_rows"] == 0 }
        await XCTAssertEqualAsync(try await server.request("GET", "/_scheduler/docs").json["docs"], [])
        await XCTAssertEqualAsync(try await server.request("PUT", "/_replicator").status, 201)
        await XCTAssertEqualAsync(try await server.request("GET", "/_replicator", as: alice).status, 403)
        await XCTAssertEqualAsync(try await server.request("PUT", "/_replicator/again", json: ["source": "a", "target": "e", "create_target": true]).status, 201)
        try await eventually { try await server.request("GET", "/_replicator/again").json["_replication_state"] == "completed" }
    }
}
