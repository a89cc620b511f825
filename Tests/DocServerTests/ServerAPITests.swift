@testable import DocServer
import DocStore
import Foundation
import XCTest

final class ServerAPITests: XCTestCase {

    /// CouchDB 3.3.3 (curl): `DELETE /db?rev=1-abc` (even `?rev=`, even of a missing database) is 400
    /// `bad_request` "You tried to DELETE a database with a ?=rev parameter. Did you mean to DELETE a
    /// document instead?", after the admin check (401 without credentials), and the database stays.
    func testDeletingADatabaseWithARevIsRefusedAndLosesNothing() async throws {
        let server = try await TestServer(self)
        await XCTAssertEqualAsync(try await server.request("PUT", "/keep").status, 201)
        await XCTAssertEqualAsync(try await server.request("PUT", "/keep/doc", json: ["v": 1]).status, 201)
        let refusal: JSON = ["error": "bad_request",
                             "reason": "You tried to DELETE a database with a ?=rev parameter. Did you mean to DELETE a document instead?"]
        for path in ["/keep?rev=1-abc", "/keep?rev=", "/missing?rev=1-abc"] {
            let answer = try await server.request("DELETE", path)
            XCTAssertEqual(answer.status, 400, path)
            XCTAssertEqual(answer.json, refusal, path)
        }
        await XCTAssertEqualAsync(try await server.request("DELETE", "/keep?rev=1-abc", as: .none).status, 401)
        await XCTAssertEqualAsync(try await server.request("GET", "/keep/doc").json["v"], 1)
    }

    func testWelcomeUpAllDbsAndDatabaseLifecycle() async throws {
        let server = try await TestServer(self)
        let welcome = try await server.request("GET", "/", as: .none)
        XCTAssertEqual(welcome.status, 200)
        XCTAssertEqual(welcome.json["couchdb"], "Welcome")
        XCTAssertEqual(welcome.json["vendor"]?["name"], "DocStore")
        XCTAssertNotNil(welcome.json["version"]?.stringValue)
        // CouchDB 3.3.3: "Server: CouchDB/3.3.3 (Erlang OTP/25)", on every answer, errors included.
        XCTAssertEqual(welcome.header("Server"), "CouchDB/3.3.3 (DocStore/0.1.0)")
        await XCTAssertEqualAsync(try await server.request("GET", "/missing", as: .none).header("Server")?.hasPrefix("CouchDB/3.3.3"), true)
        await XCTAssertEqualAsync(try await server.request("GET", "/_up", as: .none).json, ["status": "ok", "seeds": [:]])
        await XCTAssertEqualAsync(try await server.request("GET", "/_uuids?count=3", as: .none).json["uuids"]?.arrayValue?.count, 3)

        await XCTAssertEqualAsync(try await server.request("PUT", "/alpha").status, 201)
        let again = try await server.request("PUT", "/alpha")
        XCTAssertEqual(again.status, 412)
        XCTAssertEqual(again.json["error"], "file_exists")
        let illegal = try await server.request("PUT", "/Bad%20Name")
        XCTAssertEqual(illegal.status, 400)
        XCTAssertEqual(illegal.json["error"], "illegal_database_name")
        await XCTAssertEqualAsync(try await server.request("PUT", "/beta").status, 201)
        await XCTAssertEqualAsync(try await server.request("GET", "/_all_dbs").json, ["_replicator", "_users", "alpha", "beta"])

        let info = try await server.request("GET", "/alpha")
        XCTAssertEqual(info.json["db_name"], "alpha")
        XCTAssertEqual(info.json["doc_count"], 0)
        XCTAssertEqual(info.json["instance_start_time"], "0")
        let missing = try await server.request("GET", "/nope")
        XCTAssertEqual(missing.status, 404)
        XCTAssertEqual(missing.json, ["error": "not_found", "reason": "Database does not exist."])

        await XCTAssertEqualAsync(try await server.request("DELETE", "/beta").json, ["ok": true])
        await XCTAssertEqualAsync(try await server.request("DELETE", "/beta").status, 404)
        await XCTAssertEqualAsync(try await server.request("GET", "/_all_dbs").json, ["_replicator", "_users", "alpha"])
        let compacted = try await server.request("POST", "/alpha/_compact", json: [:])
        XCTAssertEqual(compacted.status, 202)
        XCTAssertEqual(compacted.json, ["ok": true])
        let wrongType = try await server.request("POST", "/alpha/_bulk_docs", body: Data(#"{"docs":[]}"#.utf8), contentType: "application/xml")
        XCTAssertEqual(wrongType.status, 415)
        XCTAssertEqual(wrongType.json, ["error": "bad_content_type", "reason": "Content-Type must be application/json"])
        let bare = try await server.request("POST", "/alpha/_ensure_full_commit")
        XCTAssertEqual(bare.status, 415, "CouchDB wants application/json even on an empty body")
        let ensure = try await server.request("POST", "/alpha/_ensure_full_commit", contentType: "application/json")
        XCTAssertEqual(ensure.status, 201)
        XCTAssertEqual(ensure.json["ok"], true)
    }

    func testDocumentCrudWithEtagsConflictsAndErrors() async throws {
        let server = try await TestServer.withDatabase(self)
        let put = try await server.request("PUT", "/db/doc1", json: ["name": "Ada"])
        XCTAssertEqual(put.status, 201)
        let rev1 = try XCTUnwrap(put.json["rev"]?.stringValue)
        XCTAssertEqual(put.json["id"], "doc1")
        XCTAssertEqual(put.header("ETag"), "\"\(rev1)\"")

        let get = try await server.request("GET", "/db/doc1")
        XCTAssertEqual(get.json, ["_id": "doc1", "_rev": .string(rev1), "name": "Ada"])
        XCTAssertEqual(get.header("ETag"), "\"\(rev1)\"")

        let conflict = try await server.request("PUT", "/db/doc1", json: ["name": "stale"])
        XCTAssertEqual(conflict.status, 409)
        XCTAssertEqual(conflict.json, ["error": "conflict", "reason": "Document update conflict."])
        let update = try await server.request("PUT", "/db/doc1?rev=\(rev1)", json: ["name": "Ada L."])
        XCTAssertEqual(update.status, 201)
        let rev2 = update.json["rev"]!.stringValue!

        let slashed = try await server.request("PUT", "/db/a%2Fb%20c", json: ["slash": true])
        XCTAssertEqual(slashed.json["id"], "a/b c", "percent-encoded ids are decoded once")
        await XCTAssertEqualAsync(try await server.request("GET", "/db/a%2Fb%20c").json["slash"], true)

        let post = try await server.request("POST", "/db", json: ["generated": true])
        XCTAssertEqual(post.status, 201)
        XCTAssertEqual(post.json["id"]?.stringValue?.count, 32)

        let old = try await server.request("GET", "/db/doc1?rev=\(rev1)&revs=true&revs_info=true")
        XCTAssertEqual(old.json["name"], "Ada")
        let current = try await server.request("GET", "/db/doc1?revs=true&revs_info=true")
        XCTAssertEqual(current.json["_revisions"]?["start"], 2)
        XCTAssertEqual(current.json["_revs_info"]?.arrayValue?.map { $0["status"]! }, ["available", "available"])

        let deleted = try await server.request("DELETE", "/db/doc1?rev=\(rev2)")
        XCTAssertEqual(deleted.status, 200)
        XCTAssertEqual(deleted.json["ok"], true)
        let gone = try await server.request("GET", "/db/doc1")
        XCTAssertEqual(gone.status, 404)
        XCTAssertEqual(gone.json, ["error": "not_found", "reason": "deleted"])
        await XCTAssertEqualAsync(try await server.request("GET", "/db/never").json, ["error": "not_found", "reason": "missing"])
        await XCTAssertEqualAsync(try await server.request("DELETE", "/db/never?rev=1-abc").status, 404)
        // CouchDB 3.3.3: a deleted document deleted again without a revision is 404 "deleted".
        await XCTAssertEqualAsync(try await server.request("DELETE", "/db/doc1").status, 404, "no rev")
        let badID = try await server.request("PUT", "/db/_bad", json: [:])
        XCTAssertEqual(badID.status, 400)
        XCTAssertEqual(badID.json["error"], "illegal_docid")
        let badField = try await server.request("PUT", "/db/x", json: ["_secret": 1])
        XCTAssertEqual(badField.status, 400)
        XCTAssertEqual(badField.json["error"], "doc_validation")
    }

    /// What PouchDB sends with `new_edits=false`, as CouchDB 3.3.3 takes it (recorded with curl):
    /// `_revisions` names the revision whatever `_rev` says (`3-c` with `{"start":2,"ids":["c","a"]}`
    /// is stored as `2-c`), and `"_rev": "1-"` is kept as written. DocServer refused both.
    func testReplicatedRevisionsAsPouchDBSendsThem() async throws {
        let server = try await TestServer.withDatabase(self)
        let bulk = try await server.request("POST", "/db/_bulk_docs", json: ["new_edits": false, "docs": [
            ["_id": "r1", "_rev": "3-c", "_revisions": ["start": 2, "ids": ["c", "a"]]],
            ["_id": "r2", "_rev": "1-"],
        ]])
        XCTAssertEqual(bulk.status, 201)
        XCTAssertEqual(bulk.json, [])
        await XCTAssertEqualAsync(try await server.request("GET", "/db/r1?revs=true").json,
                                  ["_id": "r1", "_rev": "2-c", "_revisions": ["start": 2, "ids": ["c", "a"]]])
        await XCTAssertEqualAsync(try await server.request("GET", "/db/r2?revs=true").json,
                                  ["_id": "r2", "_rev": "1-", "_revisions": ["start": 1, "ids": [""]]])
        let put = try await server.request("PUT", "/db/r3?new_edits=false", json: ["_rev": "3-c", "_revisions": ["start": 2, "ids": ["c", "a"]]])
        XCTAssertEqual(put.json["rev"], "2-c")
        // The empty-hash revision is a revision like any other: edited on, it gets a child.
        let edited = try await server.request("PUT", "/db/r2", json: ["_rev": "1-", "v": 1])
        XCTAssertEqual(edited.status, 201)
        await XCTAssertEqualAsync(try await server.request("GET", "/db/r2?revs=true").json["_revisions"]?["ids"]?[1], "")
    }

    /// Database names with `/` (sent as `%2F`), legal in CouchDB 3.3.3 and refused by DocServer; and
    /// CouchDB's absolute `Location`, every name percent-encoded, the host a proxy's
    /// `X-Forwarded-Host` where there is one (all recorded with curl).
    func testDatabaseNamesWithSlashesAndAbsoluteLocations() async throws {
        let server = try await TestServer(self)
        let created = try await server.request("PUT", "/a%2Fb")
        XCTAssertEqual(created.status, 201)
        XCTAssertEqual(created.header("Location"), "http://127.0.0.1:\(server.port)/a%2Fb")
        await XCTAssertEqualAsync(try await server.request("PUT", "/a").status, 201)
        await XCTAssertEqualAsync(try await server.request("PUT", "/a%2Fb%2Fc").status, 201)
        await XCTAssertEqualAsync(try await server.request("GET", "/a%2Fb").json["db_name"], "a/b")
        let document = try await server.request("PUT", "/a%2Fb/doc%201", json: ["v": 1])
        XCTAssertEqual(document.status, 201)
        XCTAssertEqual(document.header("Location"), "http://127.0.0.1:\(server.port)/a%2Fb/doc%201")
        let design = try await server.request("PUT", "/a%2Fb/_design/x", json: [:], headers: ["X-Forwarded-Host": "proxy.test:8080"])
        XCTAssertEqual(design.header("Location"), "http://proxy.test:8080/a%2Fb/_design%2Fx")
        let attachment = try await server.request("PUT", "/a/d/e%20f.txt", body: Data("hi".utf8), contentType: "text/plain",
                                                  headers: ["X-Forwarded-Host": "proxy.test", "X-Forwarded-Proto": "https"])
        XCTAssertEqual(attachment.header("Location"), "https://proxy.test/a/d/e%20f.txt")
        await XCTAssertEqualAsync(try await server.request("GET", "/a%2Fb/doc%201").json["v"], 1)
        await XCTAssertEqualAsync(try await server.request("GET", "/a/doc%201").status, 404, "another database")
        await XCTAssertEqualAsync(try await server.request("GET", "/_all_dbs").json, ["_replicator", "_users", "a", "a/b", "a/b/c"])
        for illegal in ["/a%2F", "/%2Fa", "/a%2F%2Fb", "/a%2F.b"] {
            let refused = try await server.request("PUT", illegal)
            XCTAssertEqual(refused.status, 400, illegal)
            XCTAssertEqual(refused.json["error"], "illegal_database_name", illegal)
        }
        // Replicated by name, as any local database.
        let replicated = try await server.request("POST", "/_replicate", json: ["source": "a/b", "target": "x/y", "create_target": true])
        XCTAssertEqual(replicated.json["ok"], true, replicated.text)
        await XCTAssertEqualAsync(try await server.request("GET", "/x%2Fy/doc%201").json["v"], 1)
        await XCTAssertEqualAsync(try await server.request("DELETE", "/a%2Fb").json, ["ok": true])
        await XCTAssertEqualAsync(try await server.request("GET", "/a%2Fb").status, 404)
        await XCTAssertEqualAsync(try await server.request("GET", "/a%2Fb%2Fc").status, 200)
        await XCTAssertEqualAsync(try await server.request("GET", "/_all_dbs").json, ["_replicator", "_users", "a", "a/b/c", "x/y"])
    }

    /// As CouchDB: HEAD is GET without the body on every endpoint — the GET's status and headers, its
    /// length among them — and a feed is never started.
    func testHeadIsGetWithoutTheBody() async throws {
        let server = try await TestServer.withDatabase(self)
        await XCTAssertEqualAsync(try await server.request("PUT", "/db/a", json: ["v": 1]).status, 201)
        for path in ["/db/_changes", "/db/_security", "/_active_tasks", "/db/_revs_limit", "/db/_index", "/db/a", "/db"] {
            let get = try await server.request("GET", path)
            let head = try await server.request("HEAD", path)
            XCTAssertEqual(get.status, 200, path)
            XCTAssertEqual(head.status, get.status, path)
            XCTAssertTrue(head.body.isEmpty, path)
            XCTAssertEqual(head.header("Content-Length"), String(get.body.count), path)
            XCTAssertEqual(head.header("Content-Type"), get.header("Content-Type"), path)
        }
        let feed = try await server.request("HEAD", "/db/_changes?feed=continuous&heartbeat=1000")
        XCTAssertEqual(feed.status, 200)
        XCTAssertTrue(feed.body.isEmpty)
        await XCTAssertEqualAsync(try await server.request("HEAD", "/db/nope").status, 404)
    }

    func testConflictsOpenRevsAndMultipart() async throws {
        let server = try await TestServer.withDatabase(self)
        let docs: JSON = ["new_edits": false, "docs": [
            ["_id": "c", "_rev": "2-bbb", "_revisions": ["start": 2, "ids": ["bbb", "aaa"]], "side": "b"],
            ["_id": "c", "_rev": "2-ccc", "_revisions": ["start": 2, "ids": ["ccc", "aaa"]], "side": "c"],
        ]]
        let bulk = try await server.request("POST", "/db/_bulk_docs", json: docs)
        XCTAssertEqual(bulk.status, 201)
        XCTAssertEqual(bulk.json, [], "new_edits=false lists only failures")

        let winner = try await server.request("GET", "/db/c?conflicts=true")
        XCTAssertEqual(winner.json["_rev"], "2-ccc")
        XCTAssertEqual(winner.json["_conflicts"], ["2-bbb"])

        let all = try await server.request("GET", "/db/c?open_revs=all&revs=true")
        let revs = all.json.arrayValue?.compactMap { $0["ok"]?["_rev"]?.stringValue }.sorted()
        XCTAssertEqual(revs, ["2-bbb", "2-ccc"])
        XCTAssertEqual(all.json[0]?["ok"]?["_revisions"]?["ids"]?.arrayValue?.count, 2)

        let some = try await server.request("GET", "/db/c?open_revs=%5B%222-bbb%22,%223-zzz%22%5D")
        XCTAssertEqual(some.json, [["ok": ["_id": "c", "_rev": "2-bbb", "side": "b"]], ["missing": "3-zzz"]])

        let latest = try await server.request("GET", "/db/c?open_revs=%5B%221-aaa%22%5D&latest=true")
        XCTAssertEqual(latest.json.arrayValue?.count, 2, "latest=true replaces an ancestor by its leaves")

        // _bulk_get reads every request in one snapshot; latest=true answers an ancestor with its leaves.
        let bulkLatest = try await server.request("POST", "/db/_bulk_get?revs=true&latest=true", json: ["docs": [
            ["id": "c", "rev": "1-aaa"], ["id": "c", "rev": "2-bbb"], ["id": "c", "rev": "bad"], ["id": "c"], ["id": "c", "rev": "1-zzz"],
        ]])
        let latestResults = try XCTUnwrap(bulkLatest.json["results"]?.arrayValue)
        // (Several leaves in CouchDB's walk of the tree; an entry without `rev` asks for every leaf.)
        XCTAssertEqual(latestResults.map { $0["docs"]?.arrayValue?.map { $0["ok"]?["_rev"] ?? $0["error"]?["error"] ?? .null } },
                       [["2-bbb", "2-ccc"], ["2-bbb"], ["bad_request"], ["2-bbb", "2-ccc"], ["not_found"]])
        XCTAssertEqual(latestResults[0]["docs"]?[1]?["ok"]?["_revisions"], ["start": 2, "ids": ["ccc", "aaa"]])
        let withoutLatest = try await server.request("POST", "/db/_bulk_get", json: ["docs": [["id": "c", "rev": "1-aaa"]]])
        XCTAssertEqual(withoutLatest.json["results"]?[0]?["docs"]?[0]?["error"]?["error"], "not_found",
                       "without latest, an ancestor whose body is not stored is missing")

        let multipart = try await server.request("GET", "/db/c?open_revs=all", headers: ["Accept": "multipart/mixed"])
        let contentType = try XCTUnwrap(multipart.header("Content-Type"))
        XCTAssertTrue(contentType.hasPrefix("multipart/mixed"), contentType)
        let boundary = try XCTUnwrap(Multipart.boundary(from: contentType))
        let parts = try Multipart.parse(Array(multipart.body), boundary: boundary)
        XCTAssertEqual(parts.count, 2)
        XCTAssertEqual(parts.map { try? JSON(parsing: $0.body)["_id"] }, ["c", "c"])

        // Replicator-style push: PUT new_edits=false with multipart/related and a following attachment.
        let boundaryOut = "abc123"
        let json = #"{"_id":"m","_rev":"1-mmm","_revisions":{"start":1,"ids":["mmm"]},"_attachments":{"a.bin":{"content_type":"application/octet-stream","length":4,"follows":true,"digest":"\#(Attachment.digest(of: Data([0, 1, 2, 255])))","revpos":1}}}"#
        var body = Array("--\(boundaryOut)\r\nContent-Type: application/json\r\n\r\n\(json)\r\n--\(boundaryOut)\r\nContent-Type: application/octet-stream\r\n\r\n".utf8)
        body += [0, 1, 2, 255]
        body += Array("\r\n--\(boundaryOut)--".utf8)
        let pushed = try await server.request("PUT", "/db/m?new_edits=false", body: Data(body),
                                              contentType: "multipart/related; boundary=\"\(boundaryOut)\"")
        XCTAssertEqual(pushed.status, 201, pushed.text)
        let attachment = try await server.request("GET", "/db/m/a.bin")
        XCTAssertEqual(Array(attachment.body), [0, 1, 2, 255])
        let withData = try await server.request("GET", "/db/m?attachments=true")
        XCTAssertEqual(withData.json["_attachments"]?["a.bin"]?["data"], "AAEC/w==")
        XCTAssertEqual(withData.json["_attachments"]?["a.bin"]?["digest"], .string(Attachment.digest(of: Data([0, 1, 2, 255]))))
        let stubOnly = try await server.request("GET", "/db/m?attachments=true&atts_since=%5B%221-mmm%22%5D")
        XCTAssertEqual(stubOnly.json["_attachments"]?["a.bin"]?["stub"], true, "atts_since: the peer has revpos 1 already")

        let badMultipart = try await server.request("PUT", "/db/m2", body: Data("garbage".utf8), contentType: "multipart/related; boundary=x")
        XCTAssertEqual(badMultipart.status, 400)
        XCTAssertEqual(badMultipart.json["error"], "bad_request")
    }

    func testAttachmentsAsResourcesAndInline() async throws {
        let server = try await TestServer.withDatabase(self)
        let created = try await server.request("PUT", "/db/photo/image.png", body: Data([1, 2, 3]), contentType: "image/png")
        XCTAssertEqual(created.status, 201)
        let rev1 = created.json["rev"]!.stringValue!
        let fetched = try await server.request("GET", "/db/photo/image.png")
        XCTAssertEqual(Array(fetched.body), [1, 2, 3])
        XCTAssertEqual(fetched.header("Content-Type"), "image/png")
        let stub = try await server.request("GET", "/db/photo")
        XCTAssertEqual(stub.json["_attachments"]?["image.png"]?["stub"], true)
        XCTAssertEqual(stub.json["_attachments"]?["image.png"]?["length"], 3)
        let stale = try await server.request("PUT", "/db/photo/second.txt", body: Data("x".utf8), contentType: "text/plain")
        XCTAssertEqual(stale.status, 409)
        let second = try await server.request("PUT", "/db/photo/dir/second.txt?rev=\(rev1)", body: Data("hi".utf8), contentType: "text/plain")
        XCTAssertEqual(second.status, 201)
        await XCTAssertEqualAsync(try await server.request("GET", "/db/photo/dir/second.txt").text, "hi")
        let removed = try await server.request("DELETE", "/db/photo/image.png?rev=\(second.json["rev"]!.stringValue!)")
        XCTAssertEqual(removed.status, 200)
        await XCTAssertEqualAsync(try await server.request("GET", "/db/photo/image.png").status, 404)

        let inline = try await server.request("PUT", "/db/inline", json: ["_attachments": ["n.txt": ["content_type": "text/plain", "data": "aGVsbG8="]]])
        XCTAssertEqual(inline.status, 201)
        await XCTAssertEqualAsync(try await server.request("GET", "/db/inline/n.txt").text, "hello")
        let badStub = try await server.request("PUT", "/db/stub", json: ["_attachments": ["n.txt": ["stub": true, "digest": "md5-nothing"]]])
        XCTAssertEqual(badStub.status, 412)
        XCTAssertEqual(badStub.json["error"], "missing_stub")

        // CouchDB 3.3.3 (curl): a name starting with `_` is 400 bad_request, as a resource, inline, and
        // in `_bulk_docs` (the whole request, also with new_edits=false); nothing is written.
        let underscore: JSON = ["error": "bad_request", "reason": "Attachment name '_x' starts with prohibited character '_'"]
        let asResource = try await server.request("PUT", "/db/under/_x", body: Data("x".utf8), contentType: "text/plain")
        XCTAssertEqual(asResource.status, 400)
        XCTAssertEqual(asResource.json, underscore)
        let asInline = try await server.request("PUT", "/db/under", json: ["_attachments": ["_x": ["content_type": "text/plain", "data": "eA=="]]])
        XCTAssertEqual(asInline.status, 400)
        XCTAssertEqual(asInline.json, underscore)
        let replicated = try await server.request("POST", "/db/_bulk_docs", json: ["new_edits": false, "docs": [
            ["_id": "under", "_rev": "1-abc", "_attachments": ["_x": ["content_type": "text/plain", "data": "eA=="]]],
        ]])
        XCTAssertEqual(replicated.status, 400)
        XCTAssertEqual(replicated.json, underscore)
        let bulk = try await server.request("POST", "/db/_bulk_docs", json: ["docs": [
            ["_id": "fine"], ["_id": "under", "_attachments": ["_x": ["content_type": "text/plain", "data": "eA=="]]],
        ]])
        XCTAssertEqual(bulk.status, 400)
        await XCTAssertEqualAsync(try await server.request("GET", "/db/fine").status, 404)
        await XCTAssertEqualAsync(try await server.request("GET", "/db/under").status, 404)
    }

    /// CouchDB 3.3.3 (curl): DELETE without a revision is 404 `missing` or `deleted` when there is no
    /// live document, 409 otherwise; a PUT whose `?rev=` and body `_rev` differ is 400.
    func testDeleteWithoutRevisionAndDisagreeingRevisions() async throws {
        let server = try await TestServer.withDatabase(self)
        await XCTAssertEqualAsync(try await server.request("DELETE", "/db/nosuch").json, ["error": "not_found", "reason": "missing"])
        let created = try await server.request("PUT", "/db/doc", json: ["v": 1])
        let rev = try XCTUnwrap(created.json["rev"]?.stringValue)
        let live = try await server.request("DELETE", "/db/doc")
        XCTAssertEqual(live.status, 409)
        XCTAssertEqual(live.json["error"], "conflict")
        let disagreeing = try await server.request("PUT", "/db/doc?rev=1-abc", json: ["_rev": .string(rev), "v": 2])
        XCTAssertEqual(disagreeing.status, 400)
        XCTAssertEqual(disagreeing.json, ["error": "bad_request", "reason": "Document rev from request body and query string have different values"])
        await XCTAssertEqualAsync(try await server.request("PUT", "/db/doc?rev=\(rev)", json: ["_rev": .string(rev), "v": 2]).status, 201)
        let current = try await server.request("GET", "/db/doc")
        await XCTAssertEqualAsync(try await server.request("DELETE", "/db/doc?rev=\(current.json["_rev"]!.stringValue!)").status, 200)
        let deleted = try await server.request("DELETE", "/db/doc")
        XCTAssertEqual(deleted.status, 404)
        XCTAssertEqual(deleted.json, ["error": "not_found", "reason": "deleted"])
    }

    /// CouchDB 3.3.3 (curl, If-None-Match of the winner "1-bbb"): 304 for the plain document, `revs`,
    /// `rev`, `attachments`, `latest`, and for `conflicts`/`deleted_conflicts` when there are none; 200
    /// without an ETag for `conflicts` when there are some, `revs_info` and `meta`.
    func testNotModifiedOnlyWhereTheBodyCannotHaveChanged() async throws {
        let server = try await TestServer.withDatabase(self)
        let branches: JSON = ["new_edits": false, "docs": [["_id": "a", "_rev": "1-aaa", "v": 1], ["_id": "a", "_rev": "1-bbb", "v": 2]]]
        await XCTAssertEqualAsync(try await server.request("POST", "/db/_bulk_docs", json: branches).status, 201)
        await XCTAssertEqualAsync(try await server.request("PUT", "/db/plain", json: [:]).status, 201)
        let plainAnswer = try await server.request("GET", "/db/plain")
        let plainTag = try XCTUnwrap(plainAnswer.header("ETag"))
        await XCTAssertEqualAsync(try await server.request("GET", "/db/a").header("ETag"), "\"1-bbb\"")
        for query in ["", "?revs=true", "?rev=1-bbb", "?attachments=true", "?latest=true", "?deleted_conflicts=true"] {
            await XCTAssertEqualAsync(try await server.request("GET", "/db/a\(query)", headers: ["If-None-Match": "\"1-bbb\""]).status, 304, query)
        }
        await XCTAssertEqualAsync(try await server.request("GET", "/db/plain?conflicts=true", headers: ["If-None-Match": plainTag]).status, 304)
        for query in ["?conflicts=true", "?revs_info=true", "?meta=true", "?local_seq=true"] {
            let answer = try await server.request("GET", "/db/a\(query)", headers: ["If-None-Match": "\"1-bbb\""])
            XCTAssertEqual(answer.status, 200, query)
            XCTAssertNil(answer.header("ETag"), query)
        }
        await XCTAssertEqualAsync(try await server.request("GET", "/db/a?conflicts=true").json["_conflicts"], ["1-aaa"])
        // {"_id":"nb","_rev":"1-…","_local_seq":2}: the sequence of the document's last change, not in `meta`.
        let changes = try await server.request("GET", "/db/_changes")
        let plainSequence = changes.json["results"]?.arrayValue?.first { $0["id"] == "plain" }?["seq"]
        let withSequence = try await server.request("GET", "/db/plain?local_seq=true")
        XCTAssertEqual(withSequence.json["_local_seq"]?.intValue, sequenceNumber(plainSequence))
        XCTAssertNotNil(withSequence.json["_local_seq"]?.intValue)
        await XCTAssertEqualAsync(try await server.request("GET", "/db/a?meta=true").json["_local_seq"], nil)
    }

    /// CouchDB 3.3.3 (curl): `_all_docs?include_docs=true&conflicts=true` adds `_conflicts` to the
    /// included documents (`{"_id":"a","_rev":"1-bbb","v":2,"_conflicts":["1-aaa"]}`), also for `keys`.
    func testAllDocsWithConflicts() async throws {
        let server = try await TestServer.withDatabase(self)
        let branches: JSON = ["new_edits": false, "docs": [["_id": "a", "_rev": "1-aaa", "v": 1], ["_id": "a", "_rev": "1-bbb", "v": 2],
                                                            ["_id": "b", "_rev": "1-ccc"]]]
        await XCTAssertEqualAsync(try await server.request("POST", "/db/_bulk_docs", json: branches).status, 201)
        let all = try await server.request("GET", "/db/_all_docs?include_docs=true&conflicts=true")
        XCTAssertEqual(all.json["rows"]?[0]?["doc"], ["_id": "a", "_rev": "1-bbb", "v": 2, "_conflicts": ["1-aaa"]])
        XCTAssertEqual(all.json["rows"]?[1]?["doc"], ["_id": "b", "_rev": "1-ccc"])
        let keyed = try await server.request("POST", "/db/_all_docs?include_docs=true&conflicts=true", json: ["keys": ["a", "zz"]])
        XCTAssertEqual(keyed.json["rows"]?[0]?["doc"]?["_conflicts"], ["1-aaa"])
        XCTAssertEqual(keyed.json["rows"]?[1]?["error"], "not_found")
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_all_docs?include_docs=true").json["rows"]?[0]?["doc"]?["_conflicts"], nil)
        // `update_seq=true`: the database's sequence, before the rows; `null` for `keys` (CouchDB 3.3.3).
        let sequence = try await server.request("GET", "/db").json["update_seq"]
        let withSequence = try await server.request("GET", "/db/_all_docs?update_seq=true&limit=1")
        XCTAssertEqual(withSequence.json["update_seq"], sequence)
        XCTAssertEqual(withSequence.json.objectValue?.keys, ["total_rows", "offset", "update_seq", "rows"])
        await XCTAssertEqualAsync(try await server.request("POST", "/db/_all_docs?update_seq=true", json: ["keys": ["a"]]).json["update_seq"], .null)
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_all_docs").json["update_seq"], nil)
    }

    func testBulkDocsBulkGetAllDocsRevsDiffAndLocal() async throws {
        let server = try await TestServer.withDatabase(self)
        // As CouchDB: a reserved id fails the whole request before anything is written.
        let refused = try await server.request("POST", "/db/_bulk_docs", json: ["docs": [
            ["_id": "a", "v": 1], ["_id": "b", "v": 2], ["_id": "_bad"], ["_id": "c", "v": 3],
        ]])
        XCTAssertEqual(refused.status, 400)
        XCTAssertEqual(refused.json["error"], "illegal_docid")
        await XCTAssertEqualAsync(try await server.request("GET", "/db/a").status, 404)
        let bulk = try await server.request("POST", "/db/_bulk_docs", json: ["docs": [
            ["_id": "a", "v": 1], ["_id": "b", "v": 2], ["_id": "c", "v": 3],
        ]])
        XCTAssertEqual(bulk.status, 201)
        XCTAssertEqual(bulk.json.arrayValue?.count, 3)
        let revA = bulk.json[0]!["rev"]!.stringValue!

        let allDocs = try await server.request("GET", "/db/_all_docs?include_docs=true&startkey=%22b%22")
        XCTAssertEqual(allDocs.json["total_rows"], 3)
        XCTAssertEqual(allDocs.json["offset"], 1)
        XCTAssertEqual(allDocs.json["rows"]?.arrayValue?.map { $0["id"]! }, ["b", "c"])
        XCTAssertEqual(allDocs.json["rows"]?[0]?["doc"]?["v"], 2)
        let keys = try await server.request("POST", "/db/_all_docs", json: ["keys": ["c", "zz", "a"]])
        XCTAssertEqual(keys.json["rows"]?.arrayValue?.map { $0["key"]! }, ["c", "zz", "a"])
        XCTAssertEqual(keys.json["rows"]?[1]?["error"], "not_found")
        let limited = try await server.request("GET", "/db/_all_docs?descending=true&limit=2")
        XCTAssertEqual(limited.json["rows"]?.arrayValue?.map { $0["id"]! }, ["c", "b"])
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_all_docs?limit=-1").status, 400)
        // CouchDB 3.3.3: `keys` with `key` or a range is 400 query_parse_error (views too, below).
        let keysAndKey = try await server.request("POST", "/db/_all_docs?key=%22a%22", json: ["keys": ["a"]])
        XCTAssertEqual(keysAndKey.status, 400)
        XCTAssertEqual(keysAndKey.json, ["error": "query_parse_error", "reason": "`keys` is incompatible with `key`, `start_key` and `end_key`"])
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_all_docs?end_key=%22a%22&keys=%5B%22a%22%5D").status, 400)

        let bulkGet = try await server.request("POST", "/db/_bulk_get?revs=true", json: ["docs": [
            ["id": "a", "rev": .string(revA)], ["id": "a", "rev": "9-nope"], ["id": "missing"], ["id": "b"],
        ]])
        let results = try XCTUnwrap(bulkGet.json["results"]?.arrayValue)
        XCTAssertEqual(results.count, 4)
        XCTAssertEqual(results[0]["docs"]?[0]?["ok"]?["v"], 1)
        XCTAssertEqual(results[0]["docs"]?[0]?["ok"]?["_revisions"]?["start"], 1)
        XCTAssertEqual(results[1]["docs"]?[0]?["error"]?["error"], "not_found")
        XCTAssertEqual(results[2]["docs"]?[0]?["error"]?["error"], "not_found")
        XCTAssertEqual(results[3]["docs"]?[0]?["ok"]?["_id"], "b")

        let diff = try await server.request("POST", "/db/_revs_diff", json: ["a": [.string(revA), "2-new"], "zz": ["1-x"]])
        XCTAssertEqual(diff.json, ["a": ["missing": ["2-new"], "possible_ancestors": [.string(revA)]], "zz": ["missing": ["1-x"]]])

        let local = try await server.request("PUT", "/db/_local/checkpoint", json: ["seq": 5])
        XCTAssertEqual(local.json, ["ok": true, "id": "_local/checkpoint", "rev": "0-1"])
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_local/checkpoint").json, ["_id": "_local/checkpoint", "_rev": "0-1", "seq": 5])
        await XCTAssertEqualAsync(try await server.request("PUT", "/db/_local/checkpoint", json: ["_rev": "0-1", "seq": 6]).json["rev"], "0-2")
        await XCTAssertEqualAsync(try await server.request("DELETE", "/db/_local/checkpoint?rev=0-2").status, 200)
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_local/checkpoint").status, 404)
    }

    /// `_local` documents as CouchDB 3.3.3 writes them over HTTP (recorded with curl): no conflict
    /// check, the revision counting on from the one given; written by `_bulk_docs` (in their place in
    /// the answer, left out with `new_edits=false` but still written) and `POST /db`; `_deleted` removes
    /// them (`0-0`, also where there was none), `DELETE` whatever its `rev`, 404 when missing;
    /// `_attachments` dropped, unknown `_` members refused, a revision not `0-N` "Invalid rev format".
    /// DocServer refused `_local` ids in `_bulk_docs`, `_deleted` and `_attachments`.
    func testLocalDocumentsAsCouchDBWritesThem() async throws {
        let server = try await TestServer.withDatabase(self)
        let bulk = try await server.request("POST", "/db/_bulk_docs", json: ["docs": [["_id": "_local/l1", "v": 1], ["_id": "n1"]]])
        XCTAssertEqual(bulk.status, 201)
        XCTAssertEqual(bulk.json[0], ["ok": true, "id": "_local/l1", "rev": "0-1"])
        XCTAssertEqual(bulk.json[1]?["id"], "n1")
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_local/l1").json, ["_id": "_local/l1", "_rev": "0-1", "v": 1])
        // No conflict check: without a revision it is 0-1 again, with 0-7 it is 0-8.
        let again = try await server.request("POST", "/db/_bulk_docs", json: ["docs": [["_id": "_local/l1", "v": 2]]])
        XCTAssertEqual(again.json, [["ok": true, "id": "_local/l1", "rev": "0-1"]])
        await XCTAssertEqualAsync(try await server.request("PUT", "/db/_local/l1", json: ["_rev": "0-7", "v": 3]).json["rev"], "0-8")
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_local/l1?revs=true").json,
                                  ["_id": "_local/l1", "_rev": "0-8", "v": 3, "_revisions": ["start": 0, "ids": ["8"]]])
        let badRevision = try await server.request("POST", "/db/_bulk_docs", json: ["docs": [["_id": "_local/l1", "_rev": "1-abc"]]])
        XCTAssertEqual(badRevision.json, [["id": "_local/l1", "error": "bad_request", "reason": "Invalid rev format"]])
        let badPut = try await server.request("PUT", "/db/_local/l1", json: ["_rev": "1-abc"])
        XCTAssertEqual(badPut.status, 400)
        XCTAssertEqual(badPut.json["reason"], "Invalid rev format")

        let deleted = try await server.request("POST", "/db/_bulk_docs", json: ["docs": [["_id": "_local/l1", "_rev": "0-8", "_deleted": true],
                                                                                        ["_id": "_local/never", "_deleted": true]]])
        XCTAssertEqual(deleted.json, [["ok": true, "id": "_local/l1", "rev": "0-0"], ["ok": true, "id": "_local/never", "rev": "0-0"]])
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_local/l1").status, 404)
        let l2 = try await server.request("PUT", "/db/_local/l2", json: ["a": 1])
        XCTAssertEqual(l2.status, 201)
        XCTAssertEqual(l2.header("Location"), "http://127.0.0.1:\(server.port)/db/_local%2Fl2")
        // CouchDB 3.3.3 finds none of a local document's revisions when one is asked for.
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_local/l2?rev=0-1").json, ["error": "not_found", "reason": "missing"])
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_local/l2?rev=bad").json["reason"], "Invalid rev format")
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_local/l2?rev=0-9&latest=true").json["a"], 1)
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_local/l2?open_revs=%5B%220-1%22%5D").json, [["missing": "0-1"]])
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_local/l2?open_revs=all").status, 404)
        await XCTAssertEqualAsync(try await server.request("PUT", "/db/_local/l2", json: [1]).json["reason"], "Document must be a JSON object")
        let deletion = try await server.request("PUT", "/db/_local/l2", json: ["_rev": "0-1", "_deleted": true])
        XCTAssertEqual(deletion.status, 200, "a deletion by PUT is a 200, as CouchDB")
        XCTAssertEqual(deletion.json, ["ok": true, "id": "_local/l2", "rev": "0-0"])
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_local/l2").status, 404)

        let attachments = try await server.request("PUT", "/db/_local/l3", json: [
            "a": 1, "_attachments": ["x.txt": ["content_type": "text/plain", "data": "aGk="]], "_conflicts": []])
        XCTAssertEqual(attachments.status, 201)
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_local/l3").json, ["_id": "_local/l3", "_rev": "0-1", "a": 1])
        let special = try await server.request("PUT", "/db/_local/l4", json: ["_foo": 1])
        XCTAssertEqual(special.status, 400)
        XCTAssertEqual(special.json["error"], "doc_validation")
        await XCTAssertEqualAsync(try await server.request("DELETE", "/db/_local/l3?rev=0-9").json, ["ok": true, "id": "_local/l3", "rev": "0-0"])
        await XCTAssertEqualAsync(try await server.request("DELETE", "/db/_local/l3").status, 404)

        let replicated = try await server.request("POST", "/db/_bulk_docs", json: ["new_edits": false, "docs": [["_id": "_local/l5", "_rev": "0-5", "v": 1]]])
        XCTAssertEqual(replicated.json, [])
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_local/l5").json["_rev"], "0-6")
        let posted = try await server.request("POST", "/db", json: ["_id": "_local/posted", "a": 1])
        XCTAssertEqual(posted.json, ["ok": true, "id": "_local/posted", "rev": "0-1"])
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_local/posted").json["a"], 1)
        let mismatch = try await server.request("PUT", "/db/_local/posted?rev=0-4", json: ["_rev": "0-7"])
        XCTAssertEqual(mismatch.status, 400)
        // Local documents stay out of _all_docs and _changes.
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_all_docs").json["total_rows"], 1)
    }

    func testChangesFeedsAndFilters() async throws {
        let server = try await TestServer.withDatabase(self)
        _ = try await server.request("POST", "/db/_bulk_docs", json: ["docs": [
            ["_id": "a", "type": "x", "channels": ["red"]], ["_id": "b", "type": "y", "channels": ["blue"]],
            ["_id": "c", "type": "x", "tags": ["t1", "t2"], "channels": ["red", "blue"]],
        ]])
        let normal = try await server.request("GET", "/db/_changes?style=all_docs&include_docs=true")
        XCTAssertEqual(normal.json["results"]?.arrayValue?.map { $0["id"]! }, ["a", "b", "c"])
        XCTAssertEqual(sequenceNumber(normal.json["last_seq"]), 3)
        XCTAssertEqual(normal.json["results"]?[0]?["doc"]?["type"], "x")
        let since = try await server.request("GET", "/db/_changes?since=2&limit=5")
        XCTAssertEqual(since.json["results"]?.arrayValue?.map { $0["id"]! }, ["c"])
        let limited = try await server.request("GET", "/db/_changes?limit=1")
        XCTAssertEqual(sequenceNumber(limited.json["last_seq"]), 1)
        XCTAssertEqual(limited.json["pending"], 2)
        // A continuous feed its limit ends says so too, as CouchDB.
        let continuous = try await server.request("GET", "/db/_changes?feed=continuous&limit=1")
        let lastLine = try JSON(parsing: Array(continuous.text.split(separator: "\n").last.map { Array($0.utf8) } ?? []))
        XCTAssertEqual(lastLine["pending"], 2, continuous.text)
        let descending = try await server.request("GET", "/db/_changes?descending=true&limit=2")
        XCTAssertEqual(descending.json["results"]?.arrayValue?.map { $0["id"]! }, ["c", "b"])

        let ids = try await server.request("POST", "/db/_changes?filter=_doc_ids", json: ["doc_ids": ["c", "a"]])
        XCTAssertEqual(ids.json["results"]?.arrayValue?.map { $0["id"]! }, ["a", "c"])
        let selector = try await server.request("POST", "/db/_changes?filter=_selector", json: ["selector": ["type": "x", "tags": ["$elemMatch": ["$eq": "t2"]]]])
        XCTAssertEqual(selector.json["results"]?.arrayValue?.map { $0["id"]! }, ["c"])
        let either = try await server.request("POST", "/db/_changes?filter=_selector", json: ["selector": ["$or": [["_id": "a"], ["type": ["$in": ["y"]]]], "tags": ["$exists": false]]])
        XCTAssertEqual(either.json["results"]?.arrayValue?.map { $0["id"]! }, ["a", "b"])
        let channel = try await server.request("GET", "/db/_changes?filter=sync_gateway/bychannel&channels=blue")
        XCTAssertEqual(channel.json["results"]?.arrayValue?.map { $0["id"]! }, ["b", "c"])
        let inBody = try await server.request("POST", "/db/_changes", json: ["filter": "sync_gateway/bychannel", "channels": ["red"]])
        XCTAssertEqual(inBody.json["results"]?.arrayValue?.map { $0["id"]! }, ["a", "c"])
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_changes?filter=nope/nope").status, 404)
        await XCTAssertEqualAsync(try await server.request("POST", "/db/_changes?filter=_selector", json: ["selector": ["a": ["$bogus": 1]]]).status, 400)
        let now = try await server.request("GET", "/db/_changes?since=now")
        XCTAssertEqual(now.json["results"], [])
        XCTAssertEqual(sequenceNumber(now.json["last_seq"]), 3)
    }

    /// Opens a streamed `_changes` request and returns once the server is waiting: after
    /// `heartbeats` empty heartbeat lines (each one a wait that ended without news).
    private func waitingFeed(_ server: TestServer, _ target: String, heartbeats: Int) throws -> (RawConnection, [UInt8]) {
        let connection = try RawConnection(port: server.port)
        connection.sendRequest("GET", target, headers: [("Authorization", TestServer.basic(TestServer.admin.name, TestServer.admin.password))])
        let head = try XCTUnwrap(connection.readHead())
        XCTAssertEqual(head.status, 200)
        var ended = false
        let start = connection.readChunked(until: { $0.filter { $0 == 0x0A }.count > heartbeats }, ended: &ended)
        XCTAssertFalse(ended, String(decoding: start, as: UTF8.self))
        return (connection, start)
    }

    func testLongpollAndContinuousDeliverLaterChanges() async throws {
        let server = try await TestServer.withDatabase(self)
        _ = try await server.request("PUT", "/db/first", json: [:])
        // The write comes after the longpoll has waited through two heartbeats.
        let (poll, start) = try waitingFeed(server, "/db/_changes?feed=longpoll&since=1&heartbeat=30&timeout=10000", heartbeats: 2)
        _ = try await server.request("PUT", "/db/second", json: [:])
        var ended = false
        let rest = poll.readChunked(until: { _ in false }, ended: &ended)
        XCTAssertTrue(ended)
        let polled = try JSON(parsing: start + rest)
        XCTAssertEqual(polled["results"]?.arrayValue?.map { $0["id"]! }, ["second"])
        XCTAssertEqual(sequenceNumber(polled["last_seq"]), 2)

        let emptyPoll = try await server.request("GET", "/db/_changes?feed=longpoll&since=now&timeout=200")
        XCTAssertEqual(emptyPoll.json["results"], [], "a longpoll times out with no results")

        let (feed, _) = try waitingFeed(server, "/db/_changes?feed=continuous&since=2&heartbeat=30&timeout=10000", heartbeats: 2)
        _ = try await server.request("PUT", "/db/third", json: ["written": "after the request began"])
        let streamed = feed.readChunked(until: { String(decoding: $0, as: UTF8.self).contains("\"third\"") }, ended: &ended)
        let lines = String(decoding: streamed, as: UTF8.self).split(separator: "\n").map { (try? JSON(parsing: String($0))) ?? .null }
        XCTAssertEqual(lines.last?["id"], "third")
        XCTAssertEqual(sequenceNumber(lines.last?["seq"]), 3)
        _ = try await server.request("PUT", "/db/fourth", json: [:])
        let more = feed.readChunked(until: { String(decoding: $0, as: UTF8.self).contains("\"fourth\"") }, ended: &ended)
        XCTAssertTrue(String(decoding: more, as: UTF8.self).contains("\"seq\":\"4-"), "the feed keeps waiting after a change")

        let bounded = try await server.request("GET", "/db/_changes?feed=live&since=2&heartbeat=30&timeout=100")
        let boundedLines = bounded.text.split(separator: "\n").map { (try? JSON(parsing: String($0))) ?? .null }
        XCTAssertEqual(boundedLines.first?["id"], "third")
        XCTAssertEqual(sequenceNumber(boundedLines.last?["last_seq"]), 4)

        async let events = server.request("GET", "/db/_changes?feed=eventsource&since=0&limit=2")
        let eventText = try await events.text
        // As CouchDB 3.3.3: the id is the sequence as JSON, quotes included.
        XCTAssertTrue(eventText.hasPrefix("data: {\"seq\":\"1-"), eventText)
        XCTAssertTrue(eventText.contains("\nid: \"2-"), eventText)
        // `Last-Event-ID` (what a reconnecting EventSource sends) is where the feed starts.
        let lastID = try XCTUnwrap(eventText.components(separatedBy: "\nid: ").last?.prefix { $0 != "\n" })
        let resumed = try await server.request("GET", "/db/_changes?feed=eventsource&limit=1", headers: ["Last-Event-ID": String(lastID)])
        XCTAssertTrue(resumed.text.hasPrefix("data: {\"seq\":\"3-"), resumed.text)
        // Heartbeats are events of their own.
        let beats = try await server.request("GET", "/db/_changes?feed=eventsource&since=now&heartbeat=20&timeout=100")
        XCTAssertTrue(beats.text.contains("event: heartbeat\ndata: \n\n"), beats.text)
    }

    func testViewsOfNativeIndexes() async throws {
        let byType = IndexDefinition(name: "app/by-type", version: "1", reduce: .count) { doc, emit in
            if let type = doc.type { emit(.string(type), nil) }
        }
        let server = try await TestServer(self, indexes: { _ in [byType] })
        _ = try await server.request("PUT", "/db")
        _ = try await server.request("POST", "/db/_bulk_docs", json: ["docs": [["_id": "1", "type": "b"], ["_id": "2", "type": "a"], ["_id": "3", "type": "b"]]])
        let grouped = try await server.request("GET", "/db/_design/app/_view/by-type?group=true")
        XCTAssertEqual(grouped.json, ["rows": [["key": "a", "value": 1], ["key": "b", "value": 2]]])
        let rows = try await server.request("GET", "/db/_design/app/_view/by-type?reduce=false&key=%22b%22&include_docs=true")
        XCTAssertEqual(rows.json["total_rows"], 3)
        XCTAssertEqual(rows.json["offset"], 1)
        XCTAssertEqual(rows.json["rows"]?.arrayValue?.map { $0["id"]! }, ["1", "3"])
        XCTAssertEqual(rows.json["rows"]?[0]?["doc"]?["type"], "b")
        let posted = try await server.request("POST", "/db/_design/app/_view/by-type?reduce=false", json: ["keys": ["a"]])
        XCTAssertEqual(posted.json["rows"]?.arrayValue?.map { $0["id"]! }, ["2"])
        let keysAndRange = try await server.request("GET", "/db/_design/app/_view/by-type?reduce=false&startkey=%22a%22&keys=%5B%22a%22%5D")
        XCTAssertEqual(keysAndRange.status, 400)
        XCTAssertEqual(keysAndRange.json["error"], "query_parse_error")
        let reversed = try await server.request("GET", "/db/_design/app/_view/by-type?reduce=false&startkey=%22a%22&endkey=%22b%22&descending=true")
        XCTAssertEqual(reversed.status, 400)
        XCTAssertEqual(reversed.json["error"], "query_parse_error")
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_design/app/_view/missing").status, 404)
    }
}
