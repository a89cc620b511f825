@testable import DocServer
import DocStore
import Foundation
import TestSupport
import XCTest

/// Endpoints, statuses and headers where DocServer answered otherwise than Apache CouchDB 3.3.3; each
/// expectation was recorded with curl from the real one.
final class CouchDBShapesTests: XCTestCase {

    /// `_design_docs` is `_all_docs` over the design documents (`total_rows` counting them, `offset`
    /// as `_all_docs` counts it); `_local_docs` lists `_local` documents with `null` totals.
    func testDesignDocsAndLocalDocs() async throws {
        let server = try await TestServer.withDatabase(self)
        for path in ["/db/a", "/db/b", "/db/_design/x", "/db/_design/y"] {
            await XCTAssertEqualAsync(try await server.request("PUT", path, json: [:]).status, 201)
        }
        await XCTAssertEqualAsync(try await server.request("PUT", "/db/_local/l", json: ["a": 1]).status, 201)
        await XCTAssertEqualAsync(try await server.request("PUT", "/db/_local/m", json: ["a": 2]).status, 201)

        let designs = try await server.request("GET", "/db/_design_docs")
        XCTAssertEqual(designs.json["total_rows"], 2)
        XCTAssertEqual(designs.json["offset"], 0)
        XCTAssertEqual(designs.json["rows"]?.arrayValue?.map { $0["id"] }, ["_design/x", "_design/y"])
        let descending = try await server.request("GET", "/db/_design_docs?descending=true")
        XCTAssertEqual(descending.json["rows"]?.arrayValue?.map { $0["id"] }, ["_design/y", "_design/x"])
        XCTAssertEqual(descending.json["offset"], 2, "b and a come first in descending _all_docs")
        let from = try await server.request("GET", "/db/_design_docs?startkey=%22_design/y%22")
        XCTAssertEqual(from.json["rows"]?.arrayValue?.map { $0["id"] }, ["_design/y"])
        XCTAssertEqual(from.json["offset"], 1)
        let keyed = try await server.request("POST", "/db/_design_docs", json: ["keys": ["_design/y", "_design/zz"]])
        XCTAssertEqual(keyed.json["offset"], .null)
        XCTAssertEqual(keyed.json["rows"]?[1], ["key": "_design/zz", "error": "not_found"])
        let withDocs = try await server.request("GET", "/db/_design_docs?include_docs=true&limit=1")
        XCTAssertEqual(withDocs.json["rows"]?[0]?["doc"]?["_id"], "_design/x")
        XCTAssertEqual(withDocs.json["rows"]?.arrayValue?.count, 1)

        let locals = try await server.request("GET", "/db/_local_docs")
        XCTAssertEqual(locals.json, ["total_rows": .null, "offset": .null, "rows": [
            ["id": "_local/l", "key": "_local/l", "value": ["rev": "0-1"]],
            ["id": "_local/m", "key": "_local/m", "value": ["rev": "0-1"]],
        ]])
        let localDocs = try await server.request("GET", "/db/_local_docs?include_docs=true&descending=true&limit=1&update_seq=true")
        XCTAssertEqual(localDocs.json, ["total_rows": .null, "offset": .null, "update_seq": .null, "rows": [
            ["id": "_local/m", "key": "_local/m", "value": ["rev": "0-1"], "doc": ["_id": "_local/m", "_rev": "0-1", "a": 2]],
        ]])
        let localKeys = try await server.request("POST", "/db/_local_docs", json: ["keys": ["_local/m", "_local/zz"]])
        XCTAssertEqual(localKeys.json["rows"]?[1], ["key": "_local/zz", "error": "not_found"])
    }

    /// `COPY` with `Destination` (`id`, or `id?rev=` to overwrite): 201 with ETag and Location; a
    /// missing header 400; an existing destination without its revision 409; a missing source 404.
    func testCopy() async throws {
        let server = try await TestServer.withDatabase(self)
        let upload = try await server.request("PUT", "/db/a/note.txt", body: Data("hello".utf8), contentType: "text/plain")
        XCTAssertEqual(upload.status, 201)
        let copied = try await server.request("COPY", "/db/a", headers: ["Destination": "c"])
        XCTAssertEqual(copied.status, 201)
        XCTAssertEqual(copied.json["id"], "c")
        XCTAssertEqual(copied.header("ETag"), "\"\(copied.json["rev"]!.stringValue!)\"")
        XCTAssertEqual(copied.header("Location"), "http://127.0.0.1:\(server.port)/db/c")
        await XCTAssertEqualAsync(try await server.request("GET", "/db/c/note.txt").text, "hello")
        let conflict = try await server.request("COPY", "/db/a", headers: ["Destination": "c"])
        XCTAssertEqual(conflict.status, 409)
        let overwritten = try await server.request("COPY", "/db/a", headers: ["Destination": "c?rev=\(copied.json["rev"]!.stringValue!)"])
        XCTAssertEqual(overwritten.status, 201)
        XCTAssertEqual(overwritten.json["rev"]?.stringValue?.hasPrefix("2-"), true)
        let spaced = try await server.request("COPY", "/db/a", headers: ["Destination": "d%20e"])
        XCTAssertEqual(spaced.json["id"], "d e")
        let noHeader = try await server.request("COPY", "/db/a")
        XCTAssertEqual(noHeader.status, 400)
        XCTAssertEqual(noHeader.json["reason"], "Destination header is mandatory for COPY.")
        await XCTAssertEqualAsync(try await server.request("COPY", "/db/zz", headers: ["Destination": "y"]).status, 404)
    }

    /// `X-HTTP-Method-Override` turns a POST (only a POST) into the method it names; `?batch=ok`
    /// answers 202 `{"ok", "id"}` whatever became of the write; `all_or_nothing` is 417.
    func testMethodOverrideBatchAndAllOrNothing() async throws {
        let server = try await TestServer.withDatabase(self)
        let created = try await server.request("PUT", "/db/b", json: [:])
        let revision = try XCTUnwrap(created.json["rev"]?.stringValue)
        await XCTAssertEqualAsync(try await server.request("POST", "/db/b", headers: ["X-HTTP-Method-Override": "DELETE"]).status, 409)
        await XCTAssertEqualAsync(try await server.request("GET", "/db/b", headers: ["X-HTTP-Method-Override": "DELETE"]).status, 200)
        let deleted = try await server.request("POST", "/db/b?rev=\(revision)", headers: ["X-HTTP-Method-Override": "DELETE"])
        XCTAssertEqual(deleted.status, 200)
        XCTAssertEqual(deleted.json["rev"]?.stringValue?.hasPrefix("2-"), true)

        let batch = try await server.request("PUT", "/db/bt?batch=ok", json: ["v": 1])
        XCTAssertEqual(batch.status, 202)
        XCTAssertEqual(batch.json, ["ok": true, "id": "bt"])
        await XCTAssertEqualAsync(try await server.request("GET", "/db/bt").json["v"], 1)
        let conflicting = try await server.request("PUT", "/db/bt?batch=ok", json: ["v": 2])
        XCTAssertEqual(conflicting.status, 202, "the conflict is not told")
        await XCTAssertEqualAsync(try await server.request("GET", "/db/bt").json["v"], 1)
        let posted = try await server.request("POST", "/db?batch=ok", json: ["_id": "bt2"])
        XCTAssertEqual(posted.json, ["ok": true, "id": "bt2"])

        let refused = try await server.request("POST", "/db/_bulk_docs", json: ["all_or_nothing": true, "docs": [["_id": "n1"], ["_id": "bt", "_rev": "1-abc"]]])
        XCTAssertEqual(refused.status, 417)
        XCTAssertEqual(refused.json, [
            ["id": "n1", "error": "not_implemented", "reason": "all_or_nothing is not supported", "rev": "0-"],
            ["id": "bt", "error": "not_implemented", "reason": "all_or_nothing is not supported", "rev": "1-abc"],
        ])
        await XCTAssertEqualAsync(try await server.request("GET", "/db/n1").status, 404)
        let replicated = try await server.request("POST", "/db/_bulk_docs", json: ["all_or_nothing": true, "new_edits": false, "docs": [["_id": "x", "_rev": "1-abc"]]])
        XCTAssertEqual(replicated.status, 201, "ignored with new_edits=false")
        await XCTAssertEqualAsync(try await server.request("GET", "/db/x").json["_rev"], "1-abc")
    }

    /// `_all_docs` takes its parameters from a POST body too (the query string winning), and a key that
    /// is not a string is a `not_found` row.
    func testAllDocsBodyParametersAndNonStringKeys() async throws {
        let server = try await TestServer.withDatabase(self)
        _ = try await server.request("POST", "/db/_bulk_docs", json: ["docs": [["_id": "0"], ["_id": "1"], ["_id": "2"], ["_id": "a"]]])
        let keyed = try await server.request("POST", "/db/_all_docs", json: ["keys": [1, "a"]])
        XCTAssertEqual(keyed.status, 200)
        XCTAssertEqual(keyed.json["rows"]?[0], ["key": 1, "error": "not_found"])
        XCTAssertEqual(keyed.json["rows"]?[1]?["id"], "a")
        await XCTAssertEqualAsync(try await server.request("POST", "/db/_all_docs", json: ["keys": [1, 2], "limit": 1]).json["rows"]?.arrayValue?.count, 1)
        await XCTAssertEqualAsync(try await server.request("POST", "/db/_all_docs?limit=1", json: ["keys": ["0", "1"], "limit": 2]).json["rows"]?.arrayValue?.count, 1)
        await XCTAssertEqualAsync(try await server.request("POST", "/db/_all_docs", json: ["startkey": "1", "limit": 2]).json["rows"]?.arrayValue?.map { $0["id"] }, ["1", "2"])
        await XCTAssertEqualAsync(try await server.request("POST", "/db/_all_docs", json: ["keys": "a"]).json["reason"],
                                  "`keys` body member must be an array.")
        let badKeys = try await server.request("GET", "/db/_all_docs?keys=%22a%22")
        XCTAssertEqual(badKeys.status, 400)
        XCTAssertEqual(badKeys.json["reason"], "`keys` parameter must be an array.")
    }

    /// `_all_docs`' bounds as CouchDB 3.3.3 reads them: a `startkey`, `endkey` or `key` that is not a
    /// string bounds nothing; the `…docid` parameters are ids as sent (not JSON), used where no string
    /// key is given.
    func testAllDocsBoundsOfOtherTypesAndDocumentIDParameters() async throws {
        let server = try await TestServer.withDatabase(self)
        _ = try await server.request("POST", "/db/_bulk_docs", json: ["docs": [["_id": "a"], ["_id": "b"], ["_id": "c"], ["_id": "d"]]])
        let expected: [(String, [JSON])] = [
            ("startkey=3", ["a", "b", "c", "d"]), ("key=3", ["a", "b", "c", "d"]), ("endkey=%7B%7D", ["a", "b", "c", "d"]),
            ("startkey=%5B1%5D&endkey=%22b%22", ["a", "b"]), ("startkey_docid=b", ["b", "c", "d"]),
            ("start_key_doc_id=c&endkey_docid=c", ["c"]), ("startkey=%22b%22&endkey_docid=c", ["b", "c"]),
            ("startkey=%22c%22&startkey_docid=a", ["c", "d"]), ("key=null&startkey_docid=d", ["d"]),
            ("descending=true&startkey=3&endkey_docid=c", ["d", "c"]),
        ]
        for (query, ids) in expected {
            let answer = try await server.request("GET", "/db/_all_docs?" + query)
            XCTAssertEqual(answer.status, 200, query)
            XCTAssertEqual(answer.json["rows"]?.arrayValue?.map { $0["id"]! }, ids, query)
        }
        // Not JSON at all: 400 {"error":"bad_request","reason":"invalid UTF-8 JSON"} in CouchDB.
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_all_docs?startkey=notjson").status, 400)
        // Two spellings of one bound: the last one counts (`key` sets both ends); each must be JSON.
        for (query, ids) in [("endkey=%22b%22&end_key=%22c%22", ["a", "b", "c"]), ("end_key=%22c%22&endkey=%22b%22", ["a", "b"]),
                             ("key=%22a%22&endkey=%22b%22", ["a", "b"]), ("endkey=%22b%22&key=%22a%22", ["a"])] as [(String, [JSON])] {
            await XCTAssertEqualAsync(try await server.request("GET", "/db/_all_docs?" + query).json["rows"]?.arrayValue?.map { $0["id"]! },
                                      ids, query)
        }
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_all_docs?endkey=notjson&end_key=%22c%22").status, 400)
        // The first wrong parameter is the one refused; a flag is checked without include_docs too.
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_all_docs?conflicts=yes&startkey=notjson").json["error"],
                                  "query_parse_error")
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_all_docs?startkey=notjson&conflicts=yes").json["error"],
                                  "bad_request")
        // An empty `keys` goes with a range, and answers no rows.
        let none = try await server.request("GET", "/db/_all_docs?keys=%5B%5D&startkey=%22a%22")
        XCTAssertEqual(none.status, 200)
        XCTAssertEqual(none.json["rows"], [])
    }

    /// `_uuids`: 1 to 1000, GET only, never cached; `_all_dbs` with `_all_docs`' range parameters;
    /// `_session` says `default` for Basic; every answer has an `X-Couch-Request-ID`.
    func testServerEndpoints() async throws {
        let server = try await TestServer.withDatabase(self)
        let uuids = try await server.request("GET", "/_uuids?count=3")
        XCTAssertEqual(uuids.json["uuids"]?.arrayValue?.count, 3)
        XCTAssertEqual(uuids.header("Cache-Control"), "no-cache")
        XCTAssertEqual(uuids.header("Pragma"), "no-cache")
        XCTAssertEqual(uuids.header("Expires"), "Mon, 01 Jan 1990 00:00:00 GMT")
        XCTAssertNotNil(uuids.header("ETag"))
        let tooMany = try await server.request("GET", "/_uuids?count=1001")
        XCTAssertEqual(tooMany.status, 400)
        XCTAssertEqual(tooMany.json, ["error": "bad_request", "reason": "count parameter too large"])
        await XCTAssertEqualAsync(try await server.request("GET", "/_uuids?count=-1").json["reason"], "count must be a positive integer")
        await XCTAssertEqualAsync(try await server.request("GET", "/_uuids?count=0").json, ["uuids": []])
        let post = try await server.request("POST", "/_uuids", json: [:])
        XCTAssertEqual(post.status, 405)
        XCTAssertEqual(post.json, ["error": "method_not_allowed", "reason": "Only GET allowed"])

        for name in ["b", "c", "d"] { _ = try await server.request("PUT", "/\(name)") }
        await XCTAssertEqualAsync(try await server.request("GET", "/_all_dbs?limit=0").json, [])
        await XCTAssertEqualAsync(try await server.request("GET", "/_all_dbs?skip=1&limit=2&descending=true").json, ["d", "c"], "after db")
        await XCTAssertEqualAsync(try await server.request("GET", "/_all_dbs?startkey=%22b%22&endkey=%22d%22&inclusive_end=false").json, ["b", "c"])
        // As CouchDB 3.3.3: `key`; a key that is no string bounds nothing; `…docid` names as sent.
        await XCTAssertEqualAsync(try await server.request("GET", "/_all_dbs?key=%22c%22").json, ["c"])
        await XCTAssertEqualAsync(try await server.request("GET", "/_all_dbs?startkey=3&startkey_docid=c&endkey_docid=d").json, ["c", "d"])
        await XCTAssertEqualAsync(try await server.request("GET", "/_all_dbs?limit=-1").json["error"], "query_parse_error")

        let basic = try await server.request("GET", "/_session")
        XCTAssertEqual(basic.json["info"]?["authenticated"], "default")
        let anonymous = try await server.request("GET", "/_session", as: .none)
        XCTAssertNil(anonymous.json["info"]?["authenticated"])
        let id = try XCTUnwrap(basic.header("X-Couch-Request-ID"))
        XCTAssertEqual(id.count, 10)
        XCTAssertTrue(id.allSatisfy(\.isHexDigit))
        let other = try await server.request("GET", "/").header("X-Couch-Request-ID")
        XCTAssertNotEqual(other, id)
        // Made from a counter, they still look random: lowercase, distinct, every digit everywhere.
        let ids = (0..<5_000).map { _ in DocServer.requestID() }
        XCTAssertEqual(Set(ids).count, ids.count)
        XCTAssertTrue(ids.allSatisfy { $0.count == 10 && $0.allSatisfy { "0123456789abcdef".contains($0) } })
        for position in 0..<10 { XCTAssertEqual(Set(ids.map { Array($0)[position] }).count, 16, "position \(position)") }
    }

    /// Small words CouchDB 3.3.3 says otherwise (recorded with curl): malformed JSON is "invalid UTF-8
    /// JSON", a body that is not an object "Document must be a JSON object", base64 that is not whole
    /// groups of four is refused, `_local` needs a name and takes no attachment, a reserved id is named
    /// without the id, and every answer says `X-CouchDB-Body-Time: 0`.
    func testCouchDBsWordsForBadRequests() async throws {
        let server = try await TestServer.withDatabase(self)
        let malformed = try await server.request("PUT", "/db/a", body: Data(#"{"a":"#.utf8), contentType: "application/json")
        XCTAssertEqual(malformed.json, ["error": "bad_request", "reason": "invalid UTF-8 JSON"])
        XCTAssertEqual(malformed.header("X-CouchDB-Body-Time"), "0")
        await XCTAssertEqualAsync(try await server.request("PUT", "/db/a", json: [1]).json,
                                  ["error": "bad_request", "reason": "Document must be a JSON object"])
        let badData = try await server.request("PUT", "/db/a", json: ["_attachments": ["a.txt": ["content_type": "text/plain", "data": "notBase64Encoded="]]])
        XCTAssertEqual(badData.json, ["error": "bad_request", "reason": "Invalid attachment data for a.txt"])
        for path in ["/db/_local", "/db/_local/", "/db/_local%2F"] {
            await XCTAssertEqualAsync(try await server.request("PUT", path, json: [:]).json,
                                      ["error": "bad_request", "reason": "Invalid _local document id."], path)
        }
        await XCTAssertEqualAsync(try await server.request("PUT", "/db/_local/foo/bar", json: [:]).json,
                                  ["error": "bad_request", "reason": "_local documents do not accept attachments."])
        await XCTAssertEqualAsync(try await server.request("POST", "/db", json: ["_id": "_invalid"]).json,
                                  ["error": "illegal_docid", "reason": "Only reserved document ids may start with underscore."])
    }

    /// A form upload (`POST /db/doc`, `multipart/form-data`: `_rev` and `_attachments` fields, with a
    /// `Referer`); attachment writes on a revision the document never had (404 `missing_rev`) or on an
    /// older one (404 for a missing attachment, else 409); `If-Match` disagreeing with the body's
    /// `_rev`; `purge_seq` moving with purges; `_session` taking `username`; a COPY to a URL.
    func testFormsAttachmentRevisionsAndOtherCouchDBAnswers() async throws {
        let server = try await TestServer.withDatabase(self)
        let created = try await server.request("PUT", "/db/form", json: [:])
        let revision = try XCTUnwrap(created.json["rev"]?.stringValue)
        let form = "------TF\r\nContent-Disposition: form-data; name=\"_rev\"\r\n\r\n\(revision)\r\n------TF\r\n"
            + "Content-Disposition: form-data; name=\"_attachments\"; filename=\"file.txt\"\r\nContent-Type: text/plain\r\n\r\n"
            + "contents of file.txt\r\n------TF--"
        let noReferer = try await server.request("POST", "/db/form", body: Data(form.utf8), contentType: "multipart/form-data; boundary=----TF")
        XCTAssertEqual(noReferer.json, ["error": "bad_request", "reason": "Referer header required."])
        let notAForm = try await server.request("POST", "/db/form", body: Data("a=1".utf8), contentType: "application/x-www-form-urlencoded",
                                                headers: ["Referer": "http://127.0.0.1"])
        XCTAssertEqual(notAForm.status, 415)
        XCTAssertEqual(notAForm.json, ["error": "bad_content_type", "reason": "Content-Type must be multipart/form-data"])
        let uploaded = try await server.request("POST", "/db/form", body: Data(form.utf8), contentType: "multipart/form-data; boundary=----TF",
                                                headers: ["Referer": "http://127.0.0.1"])
        XCTAssertEqual(uploaded.status, 201, uploaded.text)
        await XCTAssertEqualAsync(try await server.request("GET", "/db/form/file.txt").text, "contents of file.txt")

        let missingRevision = try await server.request("DELETE", "/db/form/file.txt?rev=4-garbage")
        XCTAssertEqual(missingRevision.status, 409, "CouchDB's status for it")
        XCTAssertEqual(missingRevision.json, ["error": "not_found", "reason": "missing_rev"])
        let olderWithout = try await server.request("DELETE", "/db/form/file.txt?rev=\(revision)")
        XCTAssertEqual(olderWithout.json, ["error": "not_found", "reason": "Document is missing attachment"])
        await XCTAssertEqualAsync(try await server.request("PUT", "/db/form/other.txt?rev=\(revision)", body: Data("x".utf8), contentType: "text/plain").status, 409)

        let mismatch = try await server.request("PUT", "/db/other", json: ["_id": "elsewhere", "_rev": "1-abc"], headers: ["If-Match": "1-foobar"])
        XCTAssertEqual(mismatch.json, ["error": "bad_request", "reason": "Document rev and etag have different values"])
        // The URL names the document; an `_id` in the body is not looked at.
        await XCTAssertEqualAsync(try await server.request("PUT", "/db/urlid", json: ["_id": "bodyid"]).json["id"], "urlid")
        // `_revisions` shows at most `_revs_limit` revisions, before compaction too.
        var longRevision = try await server.request("PUT", "/db/long", json: [:]).json["rev"]!
        for _ in 0..<6 { longRevision = try await server.request("PUT", "/db/long", json: ["_rev": longRevision]).json["rev"]! }
        _ = try await server.request("PUT", "/db/_revs_limit", body: Data("5".utf8), contentType: "application/json")
        await XCTAssertEqualAsync(try await server.request("GET", "/db/long?revs=true").json["_revisions"]?["ids"]?.arrayValue?.count, 5)

        let before = try await server.request("GET", "/db").json["purge_seq"]
        XCTAssertEqual(sequenceNumber(before), 0)
        let current = try await server.request("GET", "/db/form").json["_rev"]!
        _ = try await server.request("POST", "/db/_purge", json: ["form": [current]])
        await XCTAssertEqualAsync(sequenceNumber(try await server.request("GET", "/db").json["purge_seq"]), 1)

        let session = try await server.request("POST", "/_session", json: ["username": .string(TestServer.admin.name), "password": .string(TestServer.admin.password)], as: .none)
        XCTAssertEqual(session.json["ok"], true)
        await XCTAssertEqualAsync(try await server.request("COPY", "/db/other", headers: ["Destination": "http://localhost:5984/db/x"]).json["reason"],
                                  "Destination URL must be relative.")
    }

    /// A 304 carries `Content-Length: 0`, as CouchDB 3.3.3's does (NIO's encoder drops framing headers
    /// from answers without a body; `NotModifiedLength` puts this one back), and only a 304: on one
    /// kept-alive connection, the answers around it keep their own framing.
    func testNotModifiedAnswersCarryAZeroLength() async throws {
        let server = try await TestServer.withDatabase(self)
        let created = try await server.request("PUT", "/db/a", json: ["n": 1])
        let etag = try XCTUnwrap(created.header("ETag"))
        _ = try await server.request("PUT", "/db/r/t.bin", body: Data("HTTP/1.1 304 Not Modified\r\n\r\n".utf8),
                                     contentType: "application/octet-stream")
        let stored = try await server.request("GET", "/db/r/t.bin")
        let md5 = try XCTUnwrap(stored.header("ETag"))
        let auth = ("Authorization", TestServer.basic(TestServer.admin.name, TestServer.admin.password))
        let connection = try RawConnection(port: server.port)
        for (path, tag) in [("/db/a", etag), ("/db/r/t.bin", md5)] {
            connection.sendRequest("GET", path, headers: [auth, ("If-None-Match", tag)])
            let unchanged = try XCTUnwrap(connection.readResponse(), path)
            XCTAssertEqual(unchanged.status, 304, path)
            XCTAssertEqual(unchanged.headers["content-length"], "0", path)
            XCTAssertEqual(unchanged.headers["etag"], tag, path)
            // The next answer on the connection: whole, framed by its own length, no header added.
            connection.sendRequest("GET", path, headers: [auth])
            let whole = try XCTUnwrap(connection.readResponse(), path)
            XCTAssertEqual(whole.status, 200, path)
            XCTAssertEqual(whole.headers["content-length"].flatMap(Int.init), whole.body.count, path)
            XCTAssertFalse(whole.body.isEmpty, path)
        }
        // A body that reads like a 304's head is sent as it is.
        connection.sendRequest("GET", "/db/r/t.bin", headers: [auth])
        let attachment = try XCTUnwrap(connection.readResponse())
        XCTAssertEqual(String(decoding: attachment.body, as: UTF8.self), "HTTP/1.1 304 Not Modified\r\n\r\n")
        // HEAD of a document keeps the length of its GET.
        connection.sendRequest("HEAD", "/db/a", headers: [auth])
        let head = try XCTUnwrap(connection.readResponse(head: true))
        XCTAssertEqual(head.status, 200)
        XCTAssertNotEqual(head.headers["content-length"], "0")
    }

    /// `If-None-Match` with weak tags and lists; a range from 0 to the end (alone or among others) is
    /// the whole content, 200; `heartbeat` must be a positive number of milliseconds.
    func testETagsRangesAndHeartbeats() async throws {
        let server = try await TestServer.withDatabase(self)
        let created = try await server.request("PUT", "/db/a", json: [:])
        let etag = try XCTUnwrap(created.header("ETag"))
        await XCTAssertEqualAsync(try await server.request("GET", "/db/a", headers: ["If-None-Match": "W/\(etag)"], as: .admin).status, 304)
        await XCTAssertEqualAsync(try await server.request("GET", "/db/a", headers: ["If-None-Match": "\"x\", \(etag)"]).status, 304)
        await XCTAssertEqualAsync(try await server.request("GET", "/db/a", headers: ["If-None-Match": "\"x\""]).status, 200)

        let content = "This is a base64 encoded text"
        let upload = try await server.request("PUT", "/db/r/t.bin", body: Data(content.utf8), contentType: "application/octet-stream")
        let stored = try await server.request("GET", "/db/r/t.bin")
        let md5 = try XCTUnwrap(stored.header("ETag"))
        XCTAssertEqual(upload.status, 201)
        await XCTAssertEqualAsync(try await server.request("GET", "/db/r/t.bin", headers: ["If-None-Match": "W/\(md5)"]).status, 304)
        for (range, status, body, contentRange) in [("bytes=0-28", 206, content, "bytes 0-28/29"), ("bytes=0-", 200, content, nil),
                                                    ("bytes=0-,0-,0-", 200, content, nil), ("bytes=2-", 206, String(content.dropFirst(2)), "bytes 2-28/29"),
                                                    ("bytes=-3", 206, "ext", "bytes 26-28/29")] {
            let answer = try await server.request("GET", "/db/r/t.bin", headers: ["Range": range])
            XCTAssertEqual(answer.status, status, range)
            XCTAssertEqual(answer.text, body, range)
            XCTAssertEqual(answer.header("Content-Range"), contentRange, range)
        }
        for heartbeat in ["-1", "0"] {
            let refused = try await server.request("GET", "/db/_changes?feed=longpoll&heartbeat=\(heartbeat)")
            XCTAssertEqual(refused.status, 400, heartbeat)
            XCTAssertEqual(refused.json["reason"], "The heartbeat value should be a positive integer (in milliseconds).")
        }
        let notANumber = try await server.request("GET", "/db/_changes?feed=longpoll&heartbeat=a1000")
        XCTAssertEqual(notANumber.status, 400)
        XCTAssertEqual(notANumber.json["reason"], "Invalid heartbeat value. Expecting a positive integer value (in milliseconds).")
    }
}
