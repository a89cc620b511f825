@testable import DocServer
import DocStore
import Foundation
import XCTest

/// `_rewrite`, with rules and with a function, over real HTTP; the answers are those of CouchDB 3.3.3
/// for the same design documents (checked with curl against one, quoted where they are errors).
final class RewriteTests: XCTestCase {
    private static let functions: JSON = [
        "shows": ["welcome": "function(doc, req) { return 'Welcome ' + req.query.name; }"],
        "updates": ["hello": "function(doc, req) { return [{_id: req.id, by: req.query.id}, 'made ' + req.id]; }"],
        "views": ["by_n": ["map": "function(doc) { if (doc.n !== undefined) emit(doc.n, doc.s || null); }"],
                  "by_pair": ["map": "function(doc) { if (doc.pair) emit(doc.pair, null); }"]],
    ]

    /// A server with database `name` holding a few documents and design document `_design/app` made of
    /// `rewrites` and the functions above.
    private func seeded(_ name: String = "db", rewrites: JSON) async throws -> TestServer {
        let server = try await TestServer(self)
        let db = "/" + CouchRequest.percentEncoded(name)
        await XCTAssertEqualAsync(try await server.request("PUT", db).status, 201)
        var design = Self.functions.objectValue!
        design["rewrites"] = rewrites
        design["_attachments"] = ["foo.txt": ["content_type": "text/plain", "data": "VGhpcyBpcyBhIGJhc2U2NCBlbmNvZGVkIHRleHQ="]]
        await XCTAssertEqualAsync(try await server.request("PUT", db + "/_design/app", json: .object(design)).status, 201)
        let docs: JSON = ["docs": [["_id": "a", "n": 1, "s": "one"], ["_id": "b", "n": 2, "s": "two"], ["_id": "c", "n": 3],
                                   ["_id": "p", "pair": ["x", "y"]]]]
        await XCTAssertEqualAsync(try await server.request("POST", db + "/_bulk_docs", json: docs).status, 201)
        return server
    }

    private static let rules: JSON = [
        ["from": "foo", "to": "foo.txt"],
        ["from": "/welcome/:name", "to": "_show/welcome"],
        ["from": "welcome2", "to": "_show/welcome", "query": ["name": "user"]],
        ["from": "hello/:id", "to": "_update/hello/:id", "method": "PUT"],
        ["from": "n/:low/:high", "to": "_view/by_n", "query": ["startkey": ":low", "endkey": ":high"],
         "formats": ["low": "int", "high": "int"]],
        ["from": "pair/:a/:b", "to": "_view/by_pair", "query": ["key": [":a", ":b"], "include_docs": ":docs"],
         "formats": ["docs": "bool"]],
        ["from": "fixed", "to": "_view/by_n", "query": ["startkey": 2]],
        ["from": "db/*", "to": "../../*"],
        ["from": "", "to": "_view/by_n"],
    ]

    func testRulesRewriteToAttachmentsShowsUpdatesViewsAndTheDatabase() async throws {
        for name in ["db", "db/with_slash"] {
            let server = try await seeded(name, rewrites: Self.rules)
            let base = "/" + CouchRequest.percentEncoded(name) + "/_design/app/_rewrite"

            let attachment = try await server.request("GET", base + "/foo")
            XCTAssertEqual(attachment.status, 200)
            XCTAssertEqual(attachment.text, "This is a base64 encoded text")
            XCTAssertEqual(attachment.header("Content-Type"), "text/plain")

            // A bound segment and the request's own parameters travel as query parameters.
            await XCTAssertEqualAsync(try await server.request("GET", base + "/welcome/user").text, "Welcome user")
            await XCTAssertEqualAsync(try await server.request("GET", base + "/welcome2").text, "Welcome user")
            // The rule's query wins over the request's.
            await XCTAssertEqualAsync(try await server.request("GET", base + "/welcome2?name=other").text, "Welcome user")

            // `method` limits a rule; `:id` binds the document id for the update handler and `id` as a parameter.
            let made = try await server.request("PUT", base + "/hello/new")
            XCTAssertEqual(made.status, 201, made.text)
            XCTAssertEqual(made.text, "made new")
            let stored = try await server.request("GET", "/" + CouchRequest.percentEncoded(name) + "/new")
            XCTAssertEqual(stored.json["by"], "new")
            // CouchDB 3.3.3: 404 {"error":"not_found","reason":"missing"} when no rule matches.
            let wrongMethod = try await server.request("GET", base + "/hello/new")
            XCTAssertEqual(wrongMethod.status, 404)
            XCTAssertEqual(wrongMethod.json, ["error": "not_found", "reason": "missing"])

            // Formats make numbers of segments; `key`-like parameters are sent as JSON.
            let range = try await server.request("GET", base + "/n/2/3")
            XCTAssertEqual(range.json["rows"]?.arrayValue?.map { $0["id"]! }, ["b", "c"], range.text)
            let pair = try await server.request("GET", base + "/pair/x/y?docs=true")
            XCTAssertEqual(pair.json["rows"]?.arrayValue?.map { $0["id"]! }, ["p"], pair.text)
            XCTAssertEqual(pair.json["rows"]?[0]?["doc"]?["_id"], "p")
            let fixed = try await server.request("GET", base + "/fixed")
            XCTAssertEqual(fixed.json["rows"]?.arrayValue?.map { $0["id"]! }, ["b", "c"])

            // `*` takes the rest; `../..` climbs to the database (COUCHDB-2031: the query string is kept).
            let design = try await server.request("GET", base + "/db/_design/app?meta=true")
            XCTAssertEqual(design.json["_id"], "_design/app")
            XCTAssertNotNil(design.json["_revs_info"])
            let document = try await server.request("GET", base + "/db/a")
            XCTAssertEqual(document.json["s"], "one")
            let root = try await server.request("GET", base)
            XCTAssertEqual(root.json["total_rows"], 3)
        }
    }

    func testClimbingAboveTheDatabaseAndLoopsAreRefused() async throws {
        let server = try await seeded(rewrites: [["from": "uuids", "to": "../../../_uuids"]])
        // CouchDB 3.3.3: 500 {"error":"insecure_rewrite_rule","reason":"too many ../.. segments"}
        let insecure = try await server.request("GET", "/db/_design/app/_rewrite/uuids")
        XCTAssertEqual(insecure.status, 500)
        XCTAssertEqual(insecure.json, ["error": "insecure_rewrite_rule", "reason": "too many ../.. segments"])
        _ = try await server.request("PUT", "/_node/_local/_config/chttpd/secure_rewrites", json: "false")
        let uuids = try await server.request("GET", "/db/_design/app/_rewrite/uuids")
        XCTAssertEqual(uuids.status, 200, uuids.text)
        XCTAssertEqual(uuids.json["uuids"]?.arrayValue?.count, 1)

        await XCTAssertEqualAsync(try await server.request("PUT", "/db/_design/loop", json: [
            "rewrites": [["from": "loop", "to": "_rewrite/loop"], ["from": "once", "to": "../app/foo.txt"]],
        ]).status, 201)
        _ = try await server.request("PUT", "/_node/_local/_config/chttpd/rewrite_limit", json: "2")
        // 400 {"error":"bad_request","reason":"Exceeded rewrite recursion limit"}
        let loop = try await server.request("GET", "/db/_design/loop/_rewrite/loop")
        XCTAssertEqual(loop.status, 400)
        XCTAssertEqual(loop.json, ["error": "bad_request", "reason": "Exceeded rewrite recursion limit"])
        // The limit counts the rewrites of one request, not of the connection or the server.
        for _ in 0..<4 { await XCTAssertEqualAsync(try await server.request("GET", "/db/_design/loop/_rewrite/once").status, 200) }
    }

    private static let function = """
        function(req) {
          var prefix = req.path[4];
          if (prefix === 'foo') return 'foo.txt';
          if (prefix === 'welcome') return {path: '_show/welcome', query: {name: req.path[5]}};
          if (prefix === 'changes') return {path: '../../_changes', query: {filter: '_doc_ids'}};
          if (prefix === 'post') return {path: '_view/by_n', method: 'POST', headers: {'Content-Type': 'application/json'},
                                         body: JSON.stringify({keys: [3]})};
          if (prefix === 'early') return {code: parseInt(req.query.status), body: JSON.stringify({user: req.userCtx.name}),
                                          headers: {'X-Foo': 'bar', 'Content-Type': 'application/json'}};
          if (prefix === 'fields') return {code: 200, body: JSON.stringify(Object.keys(req).sort())};
          if (prefix === 'number') return 5;
          if (prefix === 'nopath') return {query: {a: 'b'}};
          if (prefix === 'badquery') return {path: 'x', query: {a: 1}};
          if (prefix === 'throws') throw new Error('boom');
          return null;
        }
        """

    func testAFunctionRewritesWithQueryMethodHeadersAndBody() async throws {
        let server = try await seeded(rewrites: .string(Self.function))
        let base = "/db/_design/app/_rewrite"
        await XCTAssertEqualAsync(try await server.request("GET", base + "/foo").text, "This is a base64 encoded text")
        await XCTAssertEqualAsync(try await server.request("GET", base + "/welcome/you").text, "Welcome you")
        // The request's body goes with it.
        let changes = try await server.request("POST", base + "/changes", json: ["doc_ids": ["b"]])
        XCTAssertEqual(changes.json["results"]?.arrayValue?.map { $0["id"]! }, ["b"], changes.text)
        // A new method, headers and body.
        let post = try await server.request("GET", base + "/post")
        XCTAssertEqual(post.json["rows"]?.arrayValue?.map { $0["id"]! }, ["c"], post.text)

        let early = try await server.request("GET", base + "/early?status=451")
        XCTAssertEqual(early.status, 451)
        XCTAssertEqual(early.header("X-Foo"), "bar")
        XCTAssertEqual(early.json, ["user": "admin"])
        // CouchDB 3.3.3's request object for a rewrite function has no info, form, uuid or id.
        let fields = try await server.request("GET", base + "/fields")
        XCTAssertEqual(fields.json, ["body", "cookie", "headers", "method", "path", "peer", "query", "raw_path", "requested_path",
                                     "secObj", "userCtx"])

        // 404 {"error":"rewrite_error","reason":"Invalid path."}
        let none = try await server.request("GET", base + "/other")
        XCTAssertEqual(none.status, 404)
        XCTAssertEqual(none.json, ["error": "rewrite_error", "reason": "Invalid path."])
        // 500 {"error":"rewrite_error","reason":"bad rewrite"}
        let number = try await server.request("GET", base + "/number")
        XCTAssertEqual(number.status, 500)
        XCTAssertEqual(number.json, ["error": "rewrite_error", "reason": "bad rewrite"])
        // 500 {"error":"rewrite_error","reason":"Rewrite result must produce a new path."}
        let noPath = try await server.request("GET", base + "/nopath")
        XCTAssertEqual(noPath.json, ["error": "rewrite_error", "reason": "Rewrite result must produce a new path."])
        // 500 {"error":"rewrite_error","reason":"object key/value must be strings <<\"a\">>=1"}
        let badQuery = try await server.request("GET", base + "/badquery")
        XCTAssertEqual(badQuery.json, ["error": "rewrite_error", "reason": "object key/value must be strings <<\"a\">>=1"])
        let throwing = try await server.request("GET", base + "/throws")
        XCTAssertEqual(throwing.status, 500)
        XCTAssertEqual(throwing.json["error"], "rewrite_error")
        XCTAssertTrue(throwing.json["reason"]?.stringValue?.contains("boom") == true, throwing.text)
    }

    func testRewritesMustBeRulesOrAFunction() async throws {
        let server = try await seeded(rewrites: [])
        for value: JSON in [["a": 1], 5, nil] {
            // CouchDB 3.3.3: 400 {"error":"invalid_design_doc","reason":"`rewrites` field must have array or string type"}
            let refused = try await server.request("PUT", "/db/_design/bad", json: ["rewrites": value])
            XCTAssertEqual(refused.status, 400)
            XCTAssertEqual(refused.json, ["error": "invalid_design_doc", "reason": "`rewrites` field must have array or string type"])
        }
        // A design document without rewrites: 404 {"error":"rewrite_error","reason":"Invalid path."}
        await XCTAssertEqualAsync(try await server.request("PUT", "/db/_design/plain", json: ["x": 1]).status, 201)
        let plain = try await server.request("GET", "/db/_design/plain/_rewrite/x")
        XCTAssertEqual(plain.json, ["error": "rewrite_error", "reason": "Invalid path."])
        let missing = try await server.request("GET", "/db/_design/missing/_rewrite/x")
        XCTAssertEqual(missing.status, 404)
        XCTAssertEqual(missing.json, ["error": "not_found", "reason": "missing"])
        // No rule: 404 not_found.
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_design/app/_rewrite/x").status, 404)
    }

    func testRulesMatchAndBuildPathsAsCouchDB() throws {
        let rules = try RewriteRules([
            ["from": "a/*/c", "to": "x/*"],
            ["from": "b/:v", "to": "y/:v/:missing", "query": ["q": "*", "list": [":v", "*"]]],
            ["from": "*", "to": "rest/*/ignored"],
        ], secure: true)
        // A `*` before the end binds one segment, named `*` (never a query parameter); `*` in `to` takes
        // what a final `*` left.
        XCTAssertEqual(rules.rewrite(method: "GET", path: ["a", "b c", "c"], query: [("s", .string("t u"))]), "x?s=t+u")
        // An unbound variable is "undefined" in a path and itself in a query; an array of strings is joined.
        XCTAssertEqual(rules.rewrite(method: "GET", path: ["b", "1"], query: []), "y/1/undefined?list=1%2A&q=%2A&v=1")
        XCTAssertEqual(rules.rewrite(method: "GET", path: ["z", "é/"], query: [("k", .string("v"))]), "rest/z/%C3%A9%2F?k=v")
        XCTAssertEqual(RewriteRules.normalize("/db/_design/d/../../../_uuids?x=1"), "/_uuids?x=1")
        XCTAssertEqual(RewriteRules.normalize("/../a/./b//c/.."), "/../a/b")
        XCTAssertThrowsError(try RewriteRules([["from": "x", "to": "../../../../y"]], secure: true))
        XCTAssertNoThrow(try RewriteRules([["from": "x", "to": "../../../../y"]], secure: false))
        XCTAssertEqual(try RewriteRules.bindings(ofQuery: [("key", "[1,\"a\"]"), ("name", "[1]")]).map(\.value), [[1, "a"], "[1]"])
        XCTAssertThrowsError(try RewriteRules.bindings(ofQuery: [("startkey", "not json")]))
    }
}
