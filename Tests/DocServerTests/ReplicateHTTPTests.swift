@testable import DocServer
import DocStore
import Foundation
import XCTest

/// `POST /_replicate`: one-shot replications run by DocSync inside the server, between its databases
/// and URLs, answered in CouchDB 3.3's form.
final class ReplicateHTTPTests: XCTestCase {
    func testOneShotReplications() async throws {
        let server = try await TestServer(self)
        await XCTAssertEqualAsync(try await server.request("PUT", "/a").status, 201)
        let docs: JSON = ["docs": [["_id": "x", "n": 1], ["_id": "y", "n": 2], ["_id": "z", "n": 3]]]
        await XCTAssertEqualAsync(try await server.request("POST", "/a/_bulk_docs", json: docs).status, 201)

        let first = try await server.request("POST", "/_replicate", json: ["source": "a", "target": "b", "create_target": true])
        XCTAssertEqual(first.status, 200, first.text)
        XCTAssertEqual(first.json["ok"], true)
        XCTAssertEqual(first.json["replication_id_version"], 4)
        let history = try XCTUnwrap(first.json["history"]?[0])
        XCTAssertEqual(history["docs_written"], 3)
        XCTAssertEqual(history["doc_write_failures"], 0)
        XCTAssertEqual(history["session_id"], first.json["session_id"])
        XCTAssertTrue(history["start_time"]?.stringValue?.hasSuffix(" GMT") == true, "\(history)")
        await XCTAssertEqualAsync(try await server.request("GET", "/b/y").json["n"], 2)

        let again = try await server.request("POST", "/_replicate", json: ["source": "a", "target": "b"])
        XCTAssertEqual(again.json, ["ok": true, "no_changes": true], "the checkpoint was kept")
        // As CouchDB 3.3.3: a later run answers the checkpoint's sessions, its own first.
        _ = try await server.request("PUT", "/a/w", json: ["n": 4])
        let second = try await server.request("POST", "/_replicate", json: ["source": "a", "target": "b"])
        XCTAssertEqual(second.json["history"]?.arrayValue?.count, 2)
        XCTAssertEqual(second.json["history"]?[0]?["session_id"], second.json["session_id"])
        XCTAssertEqual(second.json["history"]?[1]?["session_id"], first.json["session_id"])
        XCTAssertEqual(second.json["history"]?[0]?["docs_written"], 4, "figures carry on from the checkpoint, as CouchDB's")

        // To a URL (this very server), with doc_ids; the URL's credentials, or an Authorization header.
        let url = "http://127.0.0.1:\(server.port)/c"
        let authorization = "Basic " + Data("\(TestServer.admin.name):\(TestServer.admin.password)".utf8).base64EncodedString()
        let remote = try await server.request("POST", "/_replicate", json: [
            "source": "a", "target": ["url": .string(url), "headers": ["Authorization": .string(authorization)]],
            "create_target": true, "doc_ids": ["x", "z"]])
        XCTAssertEqual(remote.status, 200, remote.text)
        // Listed documents move without checkpoints: CouchDB answers the run's figures.
        XCTAssertEqual(remote.json["docs_written"], 2)
        XCTAssertTrue(remote.json["start_time"]?.stringValue?.hasSuffix(" GMT") == true, remote.text)
        XCTAssertNil(remote.json["history"])
        let copied = try await server.request("GET", "/c/_all_docs")
        XCTAssertEqual(copied.json["rows"]?.arrayValue?.map { $0["id"]! }, ["x", "z"])

        // Refusals.
        let missing = try await server.request("POST", "/_replicate", json: ["source": "nope", "target": "b"])
        XCTAssertEqual(missing.status, 404)
        XCTAssertEqual(missing.json["error"], "db_not_found")
        // A remote one too, as CouchDB 3.3.3 answers it (recorded with curl).
        let remoteMissing = try await server.request("POST", "/_replicate", json: [
            "source": .string("http://\(TestServer.admin.name):\(TestServer.admin.password)@127.0.0.1:\(server.port)/nosuch"), "target": "b"])
        XCTAssertEqual(remoteMissing.status, 404)
        XCTAssertEqual(remoteMissing.json, ["error": "db_not_found", "reason": .string("could not open http://127.0.0.1:\(server.port)/nosuch/")])
        await XCTAssertEqualAsync(try await server.request("POST", "/_replicate", json: ["target": "b"]).status, 400)
        // DocSync sends one set of headers to both sides: one side's token must not reach the other.
        let leaking = try await server.request("POST", "/_replicate", json: [
            "source": ["url": "http://127.0.0.1:1/x", "headers": ["Authorization": "Bearer secret"]], "target": "http://127.0.0.1:2/y"])
        XCTAssertEqual(leaking.status, 400)
        XCTAssertEqual(leaking.json["reason"], "`headers` other than Basic `Authorization` must be the same for source and target")
        await XCTAssertEqualAsync(try await server.request("GET", "/_replicate").status, 405)
        let unreachable = try await server.request("POST", "/_replicate", json: ["source": "a", "target": "http://127.0.0.1:1/none"])
        XCTAssertEqual(unreachable.status, 502)
        XCTAssertEqual(unreachable.json["error"], "replication_failed")
        await XCTAssertEqualAsync(try await server.addUser("alice", ["password": "pw", "channels": ["*"]]), 201)
        await XCTAssertEqualAsync(try await server.request("POST", "/_replicate", json: ["source": "a", "target": "b"], as: .user("alice", "pw")).status, 401)
    }

    /// A job that has no position yet shows CouchDB's 0, not null, as its sequences: CouchDB's own
    /// suite asks `_changes?since=` with a running job's `through_seq`.
    func testJobsWithoutAPositionShowZero() {
        XCTAssertEqual(ReplicationScheduler.Job.sequence(nil), 0)
        XCTAssertEqual(ReplicationScheduler.Job.sequence(.null), 0)
        XCTAssertEqual(ReplicationScheduler.Job.sequence("7-abc"), "7-abc")
    }

    /// As CouchDB 3.3.3 (COUCHDB-892): a replication by a JavaScript filter checkpoints under the
    /// filter's code, so a changed filter starts again from the beginning; `doc_ids` are URL-decoded.
    func testChangedFilterRestartsAndDocumentIDsAreDecoded() async throws {
        let server = try await TestServer(self)
        _ = try await server.request("PUT", "/src")
        let below = "function(doc, req) { return doc.value < Number(req.query.maxvalue); }"
        _ = try await server.request("POST", "/src/_bulk_docs", json: ["docs": [
            ["_id": "_design/mydesign", "filters": ["myfilter": .string(below)]],
            ["_id": "foo1", "value": 1], ["_id": "foo2", "value": 2], ["_id": "foo3", "value": 3], ["_id": "foo4", "value": 4]]])
        let source = JSON.string("http://\(TestServer.admin.name):\(TestServer.admin.password)@127.0.0.1:\(server.port)/src")
        let body: JSON = ["source": source, "target": "tgt", "create_target": true, "filter": "mydesign/myfilter",
                          "query_params": ["maxvalue": "3"]]
        let first = try await server.request("POST", "/_replicate", json: body)
        XCTAssertEqual(first.json["history"]?.arrayValue?.count, 1)
        XCTAssertEqual(first.json["history"]?[0]?["docs_written"], 2)
        var design = try await server.request("GET", "/src/_design/mydesign").json
        design["filters"] = ["myfilter": "function(doc, req) { return true; }"]
        _ = try await server.request("PUT", "/src/_design/mydesign", json: design)
        let second = try await server.request("POST", "/_replicate", json: body)
        XCTAssertEqual(second.json["history"]?.arrayValue?.count, 1, "a new checkpoint: the filter changed")
        XCTAssertEqual(second.json["history"]?[0]?["docs_read"], 3)
        await XCTAssertEqualAsync(try await server.request("GET", "/tgt/foo4").status, 200)

        let byID = try await server.request("POST", "/_replicate", json: ["source": source, "target": "ids", "create_target": true,
                                                                            "doc_ids": ["_design%2Fmydesign", "foo1", "foo1"]])
        XCTAssertEqual(byID.json["docs_read"], 2)
        await XCTAssertEqualAsync(try await server.request("GET", "/ids/_design/mydesign").status, 200)
    }

    /// As CouchDB 3.3.3: a user who is no admin replicates between URLs with the credentials they
    /// carry (a target whose `_security` refuses a design document counts a write failure), and may not
    /// cancel an admin's job (401 "You are not a server admin.").
    func testUsersReplicateBetweenURLsAndCancelOnlyTheirOwn() async throws {
        let server = try await TestServer(self)
        await XCTAssertEqualAsync(try await server.addUser("joe", ["password": "erly"], roles: ["erlanger"]), 201)
        let joe = TestServer.Credentials.user("joe", "erly")
        _ = try await server.request("PUT", "/src")
        _ = try await server.request("PUT", "/tgt")
        _ = try await server.request("POST", "/src/_bulk_docs", json: ["docs": [["_id": "a"], ["_id": "b"], ["_id": "_design/app", "views": [:]]]])
        _ = try await server.request("PUT", "/tgt/_security", json: ["admins": ["names": ["superman"], "roles": ["god"]]])
        func url(_ db: String) -> JSON { .string("http://joe:erly@127.0.0.1:\(server.port)/\(db)") }
        let result = try await server.request("POST", "/_replicate", json: ["source": url("src"), "target": url("tgt")], as: joe)
        XCTAssertEqual(result.status, 200, result.text)
        XCTAssertEqual(result.json["history"]?[0]?["docs_written"], 2)
        XCTAssertEqual(result.json["history"]?[0]?["doc_write_failures"], 1)
        await XCTAssertEqualAsync(try await server.request("GET", "/tgt/_design/app").status, 404)

        let started = try await server.request("POST", "/_replicate", json: ["source": "src", "target": "other", "create_target": true, "continuous": true])
        let id = try XCTUnwrap(started.json["_local_id"])
        let cancel = try await server.request("POST", "/_replicate", json: ["replication_id": id, "cancel": true], as: joe)
        XCTAssertEqual(cancel.status, 401)
        XCTAssertEqual(cancel.json, ["error": "unauthorized", "reason": "You are not a server admin."])
        await XCTAssertEqualAsync(try await server.request("POST", "/_replicate", json: ["replication_id": id, "cancel": true]).status, 200)
    }

    /// `since_seq` starts after a source sequence (CouchDB 3.3.3's replication test): only the later
    /// documents move, and the run has checkpoints of its own.
    func testSinceSequence() async throws {
        let server = try await TestServer(self)
        _ = try await server.request("PUT", "/src")
        _ = try await server.request("POST", "/src/_bulk_docs", json: ["docs": .array((1...5).map { ["_id": .string("d\($0)")] })])
        let feed = try await server.request("GET", "/src/_changes").json
        let changes = try XCTUnwrap(feed["results"]?.arrayValue)
        let since = try XCTUnwrap(changes[2]["seq"])
        let source = "http://\(TestServer.admin.name):\(TestServer.admin.password)@127.0.0.1:\(server.port)/src"
        let result = try await server.request("POST", "/_replicate", json: ["source": .string(source), "target": "tgt",
                                                                              "create_target": true, "since_seq": since])
        XCTAssertEqual(result.status, 200, result.text)
        XCTAssertEqual(result.json["history"]?[0]?["docs_written"], 2)
        XCTAssertEqual(result.json["history"]?[0]?["missing_checked"], 2)
        let copied = try await server.request("GET", "/tgt/_all_docs").json["rows"]?.arrayValue?.compactMap { $0["id"]?.stringValue }
        XCTAssertEqual(copied, changes.dropFirst(3).compactMap { $0["id"]?.stringValue })
    }

    func testContinuousReplicationsAreListedAndCancelled() async throws {
        let server = try await TestServer(self)
        await XCTAssertEqualAsync(try await server.request("PUT", "/a").status, 201)
        await XCTAssertEqualAsync(try await server.request("PUT", "/a/first", json: ["n": 1]).status, 201)
        let badInterval = try await server.request("POST", "/_replicate", json: ["source": "a", "target": "b", "checkpoint_interval": "soon"])
        XCTAssertEqual(badInterval.status, 400)
        XCTAssertEqual(badInterval.json, ["error": "bad_request", "reason": "parameter `checkpoint_interval` must be a non-negative integer"])
        let badBatch = try await server.request("POST", "/_replicate", json: ["source": "a", "target": "b", "worker_batch_size": 0])
        XCTAssertEqual(badBatch.json, ["error": "bad_request", "reason": "parameter `worker_batch_size` must be a positive integer"])
        // Batches of two, a checkpoint after each (`checkpoint_interval` 0): five documents, three
        // checkpoint writes on the target (its `_local` revision counts them).
        for n in 2...5 { await XCTAssertEqualAsync(try await server.request("PUT", "/a/more\(n)", json: ["n": .integer(n)]).status, 201) }
        let batched = try await server.request("POST", "/_replicate", json: ["source": "a", "target": "batched", "create_target": true,
                                                                             "worker_batch_size": "2", "checkpoint_interval": 0])
        XCTAssertEqual(batched.status, 200, batched.text)
        await XCTAssertEqualAsync(try await server.request("GET", "/batched").json["doc_count"], 5)
        XCTAssertEqual(batched.json["history"]?[0]?["docs_written"], 5)
        let checkpoints = try await server.request("GET", "/batched/_local_docs?include_docs=true").json["rows"]?.arrayValue ?? []
        XCTAssertEqual(checkpoints.count, 1)
        XCTAssertEqual(checkpoints.first?["value"]?["rev"], "0-3")
        // CouchDB's `checkpoint_interval` (milliseconds, as digits too) is no part of the replication's id.
        let description: JSON = ["source": "a", "target": "b", "create_target": true, "continuous": true, "checkpoint_interval": "2500"]
        let started = try await server.request("POST", "/_replicate", json: description)
        XCTAssertEqual(started.status, 202, started.text)
        let id = try XCTUnwrap(started.json["_local_id"]?.stringValue)
        XCTAssertTrue(id.hasSuffix("+continuous+create_target"), id)
        await XCTAssertEqualAsync(try await server.request("POST", "/_replicate", json: description).json["_local_id"]?.stringValue, id,
                                  "the same description finds the same job")

        // It keeps going: a later write arrives.
        await XCTAssertEqualAsync(try await server.request("PUT", "/a/later", json: ["n": 2]).status, 201)
        try await eventually { try await server.request("GET", "/b/later").status == 200 }
        let tasks = try await server.request("GET", "/_active_tasks")
        XCTAssertEqual(tasks.status, 200)
        let task = try XCTUnwrap(tasks.json.arrayValue?.first)
        XCTAssertEqual(tasks.json.arrayValue?.count, 1)
        XCTAssertEqual(task["type"], "replication")
        XCTAssertEqual(task["replication_id"]?.stringValue, id)
        XCTAssertEqual(task["continuous"], true)
        XCTAssertEqual(task["source"], "a")
        XCTAssertEqual(task["user"], .string(TestServer.admin.name))
        XCTAssertEqual(task["checkpoint_interval"], 2500)
        XCTAssertGreaterThanOrEqual(task["docs_written"]?.intValue ?? 0, 2)

        var cancel = description.objectValue!
        cancel["cancel"] = true
        let cancelled = try await server.request("POST", "/_replicate", json: .object(cancel))
        XCTAssertEqual(cancelled.json, ["ok": true, "_local_id": .string(id)])
        await XCTAssertEqualAsync(try await server.request("GET", "/_active_tasks").json, [])
        let again = try await server.request("POST", "/_replicate", json: .object(cancel))
        XCTAssertEqual(again.status, 404)
        XCTAssertEqual(again.json, ["error": "not_found", "reason": "missing"])

        // Cancelled by its id alone, as CouchDB allows.
        await XCTAssertEqualAsync(try await server.request("POST", "/_replicate", json: description).status, 202)
        let byID = try await server.request("POST", "/_replicate", json: ["replication_id": .string(id), "cancel": true])
        XCTAssertEqual(byID.json, ["ok": true, "_local_id": .string(id)])
        await XCTAssertEqualAsync(try await server.request("GET", "/_scheduler/jobs").json["total_rows"], 0)

        // A job still running when the server stops is stopped with it (the teardown would hang otherwise).
        await XCTAssertEqualAsync(try await server.request("POST", "/_replicate", json: description).status, 202)
        await XCTAssertEqualAsync(try await server.addUser("alice", ["password": "pw", "channels": ["*"]]), 201)
        await XCTAssertEqualAsync(try await server.request("GET", "/_active_tasks", as: .user("alice", "pw")).status, 401)
    }
}
