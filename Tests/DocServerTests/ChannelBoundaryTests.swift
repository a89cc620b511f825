@testable import DocServer
import DocStore
import Foundation
import XCTest

/// Every endpoint that returns or reveals document data, tried by a user limited to one channel
/// (Docs/Reliability.md): the user sees nothing of the documents outside it and writes
/// nothing outside it.
///
/// The documents the user may not read carry the marker `LEAK` in their contents and `hidden` in their
/// ids. An answer must never hold the marker; an answer to a request that names no hidden document must
/// not hold a hidden id either; and no answer holds a hidden document's revision unless the request
/// held it. Every answer is a status below 500.
final class ChannelBoundaryTests: XCTestCase {
    private static let marker = "LEAK"
    private let alice = TestServer.Credentials.user("alice", "alice-pw")

    /// The native indexes the server offers every database: a reduced view and a full-text index.
    private static let nativeIndexes: [IndexDefinition] = [
        IndexDefinition(name: "fx/by_v", version: "1", reduce: .count) { doc, emit in
            if let v = doc["v"] { emit(v, doc["secret"] ?? .null) }
        },
        IndexDefinition(name: "fx/text", version: "1") { doc, emit in
            if let word = doc["word"]?.stringValue { emit(FullTextSearch.createKey(word), doc["secret"] ?? .null) }
        },
    ]

    private struct World {
        let server: TestServer
        /// The revision of each hidden document, and the bytes an admin reads of it.
        var hidden: [String: (revision: String, body: JSON)] = [:]
        var redRevision = ""
    }

    /// Database `db` with red documents alice reads, hidden ones (blue, none) she does not, and a
    /// design document with a view, a reduce, a show, a list, an update handler and a filter.
    private func world() async throws -> World {
        let server = try await TestServer(self, indexes: { _ in ChannelBoundaryTests.nativeIndexes })
        await XCTAssertEqualAsync(try await server.request("PUT", "/db").status, 201)
        await XCTAssertEqualAsync(try await server.addUser("alice", ["password": "alice-pw", "channels": ["red"]]), 201)
        let docs: JSON = ["docs": [
            ["_id": "red1", "channels": ["red"], "v": 1, "word": "apple"],
            ["_id": "red2", "channels": ["red"], "v": 2, "word": "apple pie"],
            ["_id": "hidden-blue", "channels": ["blue"], "v": 3, "word": "apple", "secret": "LEAK-blue"],
            ["_id": "hidden-none", "v": 4, "word": "apple", "secret": "LEAK-none"],
            ["_id": "hidden-both-gone", "channels": ["blue"], "v": 5, "secret": "LEAK-gone"],
            ["_id": "_design/app", "language": "javascript", "views": [
                "by_v": ["map": "function (doc) { if (doc.v) emit(doc.v, doc.secret || null); }"],
                "sum": ["map": "function (doc) { if (doc.v) emit(doc.v, doc.v); }", "reduce": "_sum"],
                // Linked documents: every row links red1 and carries its document's secret, but red2's
                // links a hidden one (its id spelled in two pieces, so that the design document does
                // not name it).
                "links": ["map": "function (doc) { if (doc.v) emit(doc.v, {_id: doc.v == 2 ? 'hid' + 'den-blue' : 'red1', s: doc.secret}); }"],
            ], "shows": [
                "doc": "function (doc, req) { return {json: doc}; }",
            ], "lists": [
                "rows": "function (head, req) { var row, all = []; while ((row = getRow())) all.push(row); return JSON.stringify(all); }",
            ], "updates": [
                "echo": "function (doc, req) { return [null, JSON.stringify(doc)]; }",
                "touch": "function (doc, req) { if (doc) { doc.touched = true; doc.channels = ['red']; } return [doc, 'ok']; }",
            ], "filters": [
                "all": "function (doc, req) { return true; }",
            ]],
        ]]
        let written = try await server.request("POST", "/db/_bulk_docs", json: docs)
        XCTAssertEqual(written.status, 201)
        XCTAssertEqual(written.json.arrayValue?.allSatisfy { $0["ok"] == true }, true, "\(written.text)")
        // Attachments, a conflict, a deletion and a Mango text index.
        for id in ["red1", "hidden-blue"] {
            let revision = try await server.request("GET", "/db/\(id)").json["_rev"]!.stringValue!
            let text = id == "red1" ? "red attachment" : "LEAK-attachment"
            await XCTAssertEqualAsync(try await server.request("PUT", "/db/\(id)/a.txt?rev=\(revision)", body: Data(text.utf8),
                                                               contentType: "text/plain").status, 201)
        }
        let conflict: JSON = ["docs": [["_id": "hidden-blue", "_rev": "1-0000000000000000000000000000beef", "channels": ["blue"],
                                         "secret": "LEAK-conflict"]], "new_edits": false]
        await XCTAssertEqualAsync(try await server.request("POST", "/db/_bulk_docs", json: conflict).status, 201)
        let gone = try await server.request("GET", "/db/hidden-both-gone").json["_rev"]!.stringValue!
        await XCTAssertEqualAsync(try await server.request("DELETE", "/db/hidden-both-gone?rev=\(gone)").status, 200)
        await XCTAssertEqualAsync(try await server.request("POST", "/db/_index", json: ["index": ["fields": [["name": "word", "type": "string"]]], "type": "text",
                                                                                          "name": "words", "ddoc": "words"]).status, 200)
        await XCTAssertEqualAsync(try await server.request("POST", "/db/_index", json: ["index": ["fields": ["v"]], "name": "by-v",
                                                                                          "ddoc": "by-v"]).status, 200)
        await XCTAssertEqualAsync(try await server.request("PUT", "/db/_local/hidden-admin-note", json: ["note": "LEAK-local"]).status, 201)

        var world = World(server: server)
        for id in ["hidden-blue", "hidden-none"] {
            let body = try await server.request("GET", "/db/\(id)?conflicts=true&revs=true").json
            world.hidden[id] = (body["_rev"]!.stringValue!, body)
        }
        world.redRevision = try await server.request("GET", "/db/red1").json["_rev"]!.stringValue!
        return world
    }

    /// One request and what its answer may hold.
    private struct Probe {
        let method: String
        let path: String
        var json: JSON?
        var headers: [String: String] = [:]
        /// The request names hidden documents: their ids may come back (as a refusal), their data not.
        var names: Bool = false
        /// What the answer must hold: the endpoint does answer, with alice's documents.
        var shows: String?

        init(_ method: String, _ path: String, json: JSON? = nil, headers: [String: String] = [:], names: Bool = false, shows: String? = nil) {
            (self.method, self.path, self.json, self.headers, self.names, self.shows) = (method, path, json, headers, names, shows)
        }
    }

    private func check(_ probes: [Probe], in world: World, file: StaticString = #filePath, line: UInt = #line) async throws {
        for probe in probes {
            let reply = try await world.server.request(probe.method, probe.path, json: probe.json, headers: probe.headers, as: alice)
            let label = "\(probe.method) \(probe.path) \(probe.json.map { "\($0)" } ?? "") → \(reply.status) \(reply.text.prefix(300))"
            XCTAssertLessThan(reply.status, 500, label, file: file, line: line)
            XCTAssertFalse(reply.text.contains(ChannelBoundaryTests.marker), "content of a hidden document: \(label)", file: file, line: line)
            if let shows = probe.shows {
                XCTAssertTrue(reply.text.contains(shows), "\(shows) missing: \(label)", file: file, line: line)
            }
            let request = probe.path + (probe.json.map { "\($0)" } ?? "")
            if !probe.names {
                XCTAssertFalse(reply.text.contains("hidden"), "a hidden document's id: \(label)", file: file, line: line)
            }
            for (id, hidden) in world.hidden where !request.contains(hidden.revision) {
                XCTAssertFalse(reply.text.contains(String(hidden.revision.split(separator: "-")[1])),
                               "the revision of \(id): \(label)", file: file, line: line)
            }
        }
    }

    func testReadingEndpointsShowOnlyTheUsersChannels() async throws {
        let world = try await world()
        let blue = world.hidden["hidden-blue"]!.revision
        let selector: JSON = ["selector": ["v": ["$gt": 0]]]
        var probes: [Probe] = [
            // Documents, revisions and attachments, named.
            Probe("GET", "/db/hidden-blue", names: true),
            Probe("HEAD", "/db/hidden-blue", names: true),
            Probe("GET", "/db/hidden-blue?rev=\(blue)", names: true),
            Probe("GET", "/db/hidden-blue?rev=1-0000000000000000000000000000beef", names: true),
            Probe("GET", "/db/hidden-blue?revs=true&revs_info=true&conflicts=true&deleted_conflicts=true&meta=true", names: true),
            Probe("GET", "/db/hidden-blue?open_revs=all", names: true),
            Probe("GET", "/db/hidden-blue?open_revs=all", headers: ["Accept": "multipart/mixed"], names: true),
            Probe("GET", "/db/hidden-blue?open_revs=%5B%22\(blue)%22%5D&latest=true", names: true),
            Probe("GET", "/db/hidden-blue?attachments=true", names: true),
            Probe("GET", "/db/hidden-blue/a.txt", names: true),
            Probe("HEAD", "/db/hidden-blue/a.txt", names: true),
            Probe("GET", "/db/hidden-none", names: true),
            Probe("GET", "/db/hidden-both-gone", names: true),
            Probe("GET", "/db/hidden-both-gone?open_revs=all", names: true),
            Probe("GET", "/db/_local/hidden-admin-note", names: true),
            Probe("GET", "/db/_design/app"),
            Probe("GET", "/db/_design/words"),
            // Lists of documents.
            Probe("GET", "/db/_all_docs"),
            Probe("GET", "/db/_all_docs?include_docs=true&conflicts=true&attachments=true", shows: "red2"),
            Probe("GET", "/db/_all_docs?descending=true&include_docs=true"),
            Probe("GET", "/db/_all_docs?startkey=%22h%22&endkey=%22i%22&include_docs=true"),
            Probe("POST", "/db/_all_docs", json: ["keys": ["hidden-blue", "hidden-none", "red1"], "include_docs": true], names: true),
            Probe("GET", "/db/_design_docs?include_docs=true"),
            Probe("GET", "/db/_local_docs?include_docs=true"),
            Probe("POST", "/db/_bulk_get", json: ["docs": [["id": "hidden-blue"], ["id": "hidden-blue", "rev": .string(blue)],
                                                           ["id": "hidden-none"], ["id": "hidden-both-gone"], ["id": "red1"]]], names: true, shows: "apple"),
            Probe("POST", "/db/_bulk_get?revs=true&attachments=true&latest=true", json: ["docs": [["id": "hidden-blue"], ["id": "red1"]]], names: true),
            Probe("POST", "/db/_bulk_get?revs=true", json: ["docs": [["id": "hidden-blue"]]], headers: ["Accept": "multipart/mixed"], names: true),
            Probe("POST", "/db/_revs_diff", json: ["hidden-blue": [.string(blue), "2-abc"], "hidden-none": ["1-abc"]], names: true),
            // Mango, full text.
            Probe("POST", "/db/_find", json: selector, shows: "red2"),
            Probe("POST", "/db/_find", json: ["selector": ["v": ["$gt": 0]], "fields": ["_id", "secret", "v"], "use_index": "by-v"]),
            Probe("POST", "/db/_find", json: ["selector": ["_id": ["$gt": nil]], "execution_stats": true]),
            Probe("POST", "/db/_find", json: ["selector": ["$text": "apple"]], shows: "red2"),
            Probe("POST", "/db/_explain", json: selector),
            Probe("GET", "/db/_index"),
            Probe("GET", "/db/_design/fx/_view/text?full_text=%22apple%22&include_docs=true&snippets=true", shows: "red2"),
            // Views: JavaScript and native, rows and reduced values, shows, lists, update handlers.
            Probe("GET", "/db/_design/app/_view/by_v"),
            Probe("GET", "/db/_design/app/_view/by_v?include_docs=true&conflicts=true", shows: "red2"),
            Probe("POST", "/db/_design/app/_view/by_v", json: ["keys": [3, 4, 1]]),
            // red2's value names the hidden document it links: its row shows `"doc": null`.
            Probe("GET", "/db/_design/app/_view/links?include_docs=true", names: true, shows: #""id":"red2","key":2,"value":{"_id":"hidden-blue"},"doc":null"#),
            Probe("GET", "/db/_design/app/_view/links", names: true, shows: "red2"),
            Probe("GET", "/db/_design/app/_list/rows/links?include_docs=true", names: true, shows: "red2"),
            Probe("GET", "/db/_design/app/_view/sum"),
            Probe("GET", "/db/_design/app/_view/sum?group=true"),
            Probe("GET", "/db/_design/app/_view/sum?reduce=false"),
            Probe("GET", "/db/_design/app/_info"),
            Probe("GET", "/db/_design/fx/_view/by_v"),
            Probe("GET", "/db/_design/fx/_view/by_v?reduce=false&include_docs=true", shows: "red2"),
            Probe("GET", "/db/_design/app/_show/doc/hidden-blue", names: true),
            Probe("GET", "/db/_design/app/_show/doc/hidden-none", names: true),
            Probe("GET", "/db/_design/app/_show/doc"),
            Probe("GET", "/db/_design/app/_show/doc/red1", shows: "apple"),
            Probe("GET", "/db/red1?open_revs=all", headers: ["Accept": "multipart/mixed"], shows: "apple"),
            Probe("GET", "/db/_design/app/_list/rows/by_v"),
            Probe("GET", "/db/_design/app/_list/rows/by_v?include_docs=true", shows: "red2"),
            Probe("GET", "/db/_design/app/_list/rows/sum?group=true"),
            Probe("POST", "/db/_design/app/_update/echo/hidden-blue", json: [:], names: true),
            Probe("POST", "/db/_design/app/_update/echo/hidden-none", json: [:], names: true),
            // The partition and database endpoints that count or list.
            Probe("GET", "/db"),
        ]
        // The changes feed in every form and with every filter (`_design` passes only design documents,
        // which have no channels: alice sees none).
        for feed in ["normal", "longpoll", "continuous", "eventsource"] {
            for filter in ["", "&filter=_selector", "&filter=_view&view=app/by_v", "&filter=app/all", "&filter=_design",
                           "&filter=_doc_ids&doc_ids=%5B%22hidden-blue%22%2C%22red1%22%5D"] {
                let body: JSON? = filter == "&filter=_selector" ? ["selector": ["v": ["$gt": 0]]] : nil
                for options in ["", "&include_docs=true&conflicts=true&style=all_docs&attachments=true", "&descending=true&include_docs=true"] {
                    let path = "/db/_changes?feed=\(feed)&timeout=10\(filter)\(options)"
                    probes.append(Probe(body == nil ? "GET" : "POST", path, json: body, names: filter.contains("doc_ids"),
                                        shows: filter == "&filter=_design" ? nil : "red1"))
                }
            }
        }
        try await check(probes, in: world)
    }

    func testWritesStayInsideTheUsersChannels() async throws {
        let world = try await world()
        let blue = world.hidden["hidden-blue"]!.revision
        let none = world.hidden["hidden-none"]!.revision
        let probes: [Probe] = [
            Probe("PUT", "/db/hidden-blue?rev=\(blue)", json: ["channels": ["red"]], names: true),
            Probe("PUT", "/db/hidden-blue", json: ["_rev": .string(blue), "channels": ["red"], "_deleted": true], names: true),
            Probe("PUT", "/db/hidden-none?rev=\(none)", json: ["channels": ["red"]], names: true),
            Probe("PUT", "/db/hidden-new", json: ["channels": ["blue"]], names: true),
            Probe("DELETE", "/db/hidden-blue?rev=\(blue)", names: true),
            Probe("DELETE", "/db/hidden-none?rev=\(none)", names: true),
            Probe("PUT", "/db/hidden-blue/b.txt?rev=\(blue)", json: ["x": 1], names: true),
            Probe("DELETE", "/db/hidden-blue/a.txt?rev=\(blue)", names: true),
            Probe("COPY", "/db/hidden-blue", headers: ["Destination": "stolen"], names: true),
            Probe("COPY", "/db/red1", headers: ["Destination": "hidden-blue?rev=\(blue)"], names: true),
            Probe("POST", "/db", json: ["_id": "hidden-blue", "channels": ["red"]], names: true),
            Probe("POST", "/db/_bulk_docs", json: ["docs": [["_id": "hidden-blue", "_rev": .string(blue), "channels": ["red"]],
                                                            ["_id": "hidden-none", "_rev": .string(none), "_deleted": true],
                                                            ["_id": "hidden-new2", "channels": ["blue"]]]], names: true),
            // A revision on a branch of its own, and one on top of the hidden leaf, without edit checks.
            Probe("POST", "/db/_bulk_docs", json: ["docs": [["_id": "hidden-blue", "_rev": "1-00000000000000000000000000000001", "channels": ["red"]],
                                                            ["_id": "hidden-blue", "_rev": "9-00000000000000000000000000000009", "channels": ["red"],
                                                             "_revisions": ["start": 9, "ids": ["00000000000000000000000000000009",
                                                                                                .string(String(blue.split(separator: "-")[1]))]]]],
                                                   "new_edits": false], names: true),
            Probe("POST", "/db/_design/app/_update/touch/hidden-blue", json: [:], names: true),
            Probe("POST", "/db/_design/app/_update/touch/hidden-none", json: [:], names: true),
            Probe("PUT", "/db/_design/app", json: ["views": [:]]),
            Probe("POST", "/db/_purge", json: ["hidden-blue": [.string(blue)]], names: true),
            Probe("POST", "/db/_index", json: ["index": ["fields": ["secret"]]]),
            Probe("DELETE", "/db/_index/by-v/json/by-v"),
            Probe("PUT", "/db/_local/hidden-admin-note", json: ["note": "overwritten"], names: true),
            Probe("DELETE", "/db/_local/hidden-admin-note", names: true),
            Probe("PUT", "/db/_security", json: ["members": ["names": ["alice"]]]),
            Probe("POST", "/_replicator", json: ["source": "db", "target": "copy"]),
            Probe("POST", "/_replicate", json: ["source": "db", "target": "copy", "create_target": true]),
            Probe("POST", "/db/_view_cleanup", json: [:]),
            Probe("POST", "/db/_compact", json: [:]),
        ]
        try await check(probes, in: world)
        // Nothing outside red was written: the hidden documents are as they were, no document names
        // them, and every document alice may have written is red.
        for (id, hidden) in world.hidden {
            await XCTAssertEqualAsync(try await world.server.request("GET", "/db/\(id)?conflicts=true&revs=true").json, hidden.body, id)
        }
        let all = try await world.server.request("GET", "/db/_all_docs?include_docs=true").json["rows"]?.arrayValue ?? []
        for row in all where !(row["id"]?.stringValue?.hasPrefix("_design/") ?? true) {
            let id = row["id"]!.stringValue!
            if id.hasPrefix("hidden-") { continue }
            XCTAssertEqual(row["doc"]?["channels"], ["red"], "\(id) was written outside red: \(row)")
        }
        XCTAssertEqual(all.compactMap { $0["id"]?.stringValue }.filter { $0.hasPrefix("hidden-") }.sorted(), ["hidden-blue", "hidden-none"])
        await XCTAssertEqualAsync(try await world.server.request("GET", "/db/_local/hidden-admin-note").json["note"], "LEAK-local")
        await XCTAssertEqualAsync(try await world.server.request("GET", "/db/_design/app").json["views"]?["by_v"] != nil, true)
        await XCTAssertEqualAsync(try await world.server.request("GET", "/db/_security").json, [:])
        await XCTAssertEqualAsync(try await world.server.request("GET", "/copy").status, 404)
    }

    /// Local documents have no channels: a user limited to channels has local documents of her own,
    /// which checkpoints need, apart from everyone else's.
    func testLocalDocumentsOfAUserLimitedToChannelsAreHerOwn() async throws {
        let world = try await world()
        let server = world.server
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_local/hidden-admin-note", as: alice).status, 404)
        let put = try await server.request("PUT", "/db/_local/hidden-admin-note", json: ["note": "alice's"], as: alice)
        XCTAssertEqual(put.status, 201)
        XCTAssertEqual(put.json, ["ok": true, "id": "_local/hidden-admin-note", "rev": "0-1"])
        let mine = try await server.request("GET", "/db/_local/hidden-admin-note", as: alice)
        XCTAssertEqual(mine.json, ["_id": "_local/hidden-admin-note", "_rev": "0-1", "note": "alice's"])
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_local/hidden-admin-note").json["note"], "LEAK-local")
        // Written by _bulk_docs and POST too, and removed by her alone.
        let bulk = try await server.request("POST", "/db/_bulk_docs", json: ["docs": [["_id": "_local/cp", "n": 1]]], as: alice)
        XCTAssertEqual(bulk.json, [["ok": true, "id": "_local/cp", "rev": "0-1"]])
        await XCTAssertEqualAsync(try await server.request("POST", "/db", json: ["_id": "_local/cp2", "n": 2], as: alice).status, 201)
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_local/cp", as: alice).json["n"], 1)
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_local/cp2", as: alice).json["n"], 2)
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_local/cp").status, 404)
        await XCTAssertEqualAsync(try await server.request("DELETE", "/db/_local/hidden-admin-note", as: alice).status, 200)
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_local/hidden-admin-note", as: alice).status, 404)
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_local/hidden-admin-note").json["note"], "LEAK-local")
        // Another user limited to channels has her own again.
        await XCTAssertEqualAsync(try await server.addUser("bob", ["password": "bob-pw", "channels": ["red"]]), 201)
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_local/cp", as: .user("bob", "bob-pw")).status, 404)
    }

    /// A replication run with alice's credentials on one side moves only what she may read, and writes
    /// only what she may write.
    func testReplicationsWithTheUsersCredentials() async throws {
        let world = try await world()
        let base = "http://alice:alice-pw@127.0.0.1:\(world.server.port)"
        // Alice's view of db as the source: only red documents arrive.
        let pulled = try await world.server.request("POST", "/_replicate", json: ["source": .string("\(base)/db"), "target": "pulled",
                                                                                 "create_target": true])
        XCTAssertEqual(pulled.status, 200, pulled.text)
        let ids = try await world.server.request("GET", "/pulled/_all_docs").json["rows"]?.arrayValue?.compactMap { $0["id"]?.stringValue }
        XCTAssertEqual(ids, ["red1", "red2"])
        await XCTAssertEqualAsync(try await world.server.request("GET", "/pulled/red1/a.txt").text, "red attachment")

        // Alice as the target: everything is offered, only red documents are written.
        await XCTAssertEqualAsync(try await world.server.request("PUT", "/pushed").status, 201)
        await XCTAssertEqualAsync(try await world.server.request("PUT", "/pushed/_security", json: [:]).status, 200)
        let pushed = try await world.server.request("POST", "/_replicate", json: ["source": "db", "target": .string("\(base)/pushed")])
        XCTAssertEqual(pushed.status, 200, pushed.text)
        XCTAssertGreaterThan(pushed.json["history"]?[0]?["doc_write_failures"]?.intValue ?? 0, 0, pushed.text)
        let written = try await world.server.request("GET", "/pushed/_all_docs?include_docs=true").json["rows"]?.arrayValue ?? []
        XCTAssertEqual(written.compactMap { $0["id"]?.stringValue }, ["red1", "red2"])
        XCTAssertFalse(written.description.contains(ChannelBoundaryTests.marker))
    }
}
