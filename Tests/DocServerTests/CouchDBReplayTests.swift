@testable import DocServer
import DocStore
import Foundation
import XCTest

/// Real CouchDB 3.3.3 traffic (Tests/Fixtures/couchdb-3.3.3) replayed against DocServer: CouchDB's
/// replicator pushing into it and pulling from it, a continuous feed, and a client's calls — each
/// request must get CouchDB's status and an equivalent answer, and the data must end up exactly as
/// CouchDB holds it (`source-dump.json`).
final class CouchDBReplayTests: XCTestCase {
    /// `fx/by_type`, the JavaScript view of the corpus's design document, as a native index.
    private static let byType = IndexDefinition(name: "fx/by_type", version: "1", reduce: .count) { doc, emit in
        if let type = doc["type"] { emit(type, doc["n"] ?? .null) }
    }

    private func percentEncoded(_ id: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-_.~")
        return id.addingPercentEncoding(withAllowedCharacters: allowed)!
    }

    /// A server whose database `fx_target` holds what CouchDB's replicator pushed into it — the replay
    /// of `push-to-target`, each request checked against CouchDB's answer.
    private func pushedServer(file: StaticString = #filePath, line: UInt = #line) async throws -> (TestServer, CouchDBReplay) {
        let server = try await TestServer(self, indexes: { _ in [CouchDBReplayTests.byType] })
        let replay = CouchDBReplay(server: server)
        for exchange in try CouchDBFixtures.exchanges("push-to-target.ndjson") where exchange.path != "/_session" {
            let response = try replay.send(exchange)
            let context = "push #\(exchange.sequence) \(exchange.method) \(exchange.target.prefix(90))"
            XCTAssertEqual(response.status, exchange.status, "\(context): \(String(decoding: response.body.prefix(300), as: UTF8.self))",
                           file: file, line: line)
            let expected = (try? JSON(parsing: exchange.responseBody)) ?? .null
            let actual = (try? JSON(parsing: response.body)) ?? .null
            switch exchange.path {
            case let path where path.hasSuffix("/_revs_diff"):
                // The same missing revisions and possible ancestors, whatever the key order.
                XCTAssertEqual(Set((expected.objectValue ?? [:]).keys), Set((actual.objectValue ?? [:]).keys), context, file: file, line: line)
                for (id, entry) in expected.objectValue ?? [:] {
                    XCTAssertEqual(Set(entry["missing"]?.arrayValue ?? []), Set(actual[id]?["missing"]?.arrayValue ?? []), "\(context) \(id)",
                                   file: file, line: line)
                    XCTAssertEqual(Set(entry["possible_ancestors"]?.arrayValue ?? []), Set(actual[id]?["possible_ancestors"]?.arrayValue ?? []),
                                   "\(context) \(id)", file: file, line: line)
                }
            case let path where path.hasSuffix("/_bulk_docs") || exchange.target.contains("new_edits=false"):
                XCTAssertEqual(actual, expected, context, file: file, line: line)
            case let path where path.contains("/_local/") && exchange.method == "GET":
                XCTAssertEqual(actual["error"], expected["error"], context, file: file, line: line)
            default:
                if exchange.status < 300, let ok = expected["ok"] { XCTAssertEqual(actual["ok"], ok, context, file: file, line: line) }
            }
        }
        return (server, replay)
    }

    /// Every document of `source-dump.json` (but `_local/fx-note`, never replicated) in `database`:
    /// the same leaves, `_revisions`, bodies, and attachments with their metadata and decoded bytes.
    private func assertHoldsTheSource(_ server: TestServer, database: String, file: StaticString = #filePath, line: UInt = #line) async throws {
        let dump = try JSON(parsing: CouchDBFixtures.sourceDump())
        let documents = try XCTUnwrap(dump["docs"]?.arrayValue)
        XCTAssertEqual(documents.count, 152, file: file, line: line)
        for entry in documents {
            let id = try XCTUnwrap(entry["id"]?.stringValue)
            var expected: [String: ComparedRevision] = [:]
            for row in entry["open_revs"]?.arrayValue ?? [] {
                if let ok = row["ok"] { expected[ok["_rev"]!.stringValue!] = try ComparedRevision(ok) }
            }
            let reply = try await server.request("GET", "/\(database)/\(percentEncoded(id))?open_revs=all&revs=true&attachments=true")
            XCTAssertEqual(reply.status, 200, id, file: file, line: line)
            let actual = try revisionsOfOpenRevs(RawResponse(status: reply.status, headers: ["content-type": "application/json"], body: Array(reply.body)))
            XCTAssertEqual(Set(actual.keys), Set(expected.keys), "leaves of \(id)", file: file, line: line)
            for (revision, want) in expected {
                guard let got = actual[revision] else { continue }
                let problems = want.matches(got)
                XCTAssertTrue(problems.isEmpty, "\(id) \(revision): \(problems)", file: file, line: line)
            }
        }
    }

    /// (a) CouchDB's replicator pushing into DocServer: CouchDB's status for every request, and the
    /// source's data exactly — gzip-encoded attachments included.
    func testPushFromCouchDBStoresTheSourceExactly() async throws {
        let (server, _) = try await pushedServer()
        try await assertHoldsTheSource(server, database: "fx_target")
        let info = try await server.request("GET", "/fx_target")
        let dumpInfo = try JSON(parsing: CouchDBFixtures.sourceDump())["db_info"]
        XCTAssertEqual(info.json["doc_count"], dumpInfo?["doc_count"])
        XCTAssertEqual(info.json["doc_del_count"], dumpInfo?["doc_del_count"])
    }

    /// Compares one recorded source exchange with DocServer's answer to the same request.
    private func assertEquivalentSourceAnswer(_ exchange: RecordedExchange, _ response: RawResponse, _ context: String,
                                              file: StaticString = #filePath, line: UInt = #line) throws {
        XCTAssertEqual(response.status, exchange.status, "\(context): \(String(decoding: response.body.prefix(300), as: UTF8.self))",
                       file: file, line: line)
        guard response.status == 200 else { return }
        let query = exchange.query
        if exchange.path.hasSuffix("/_changes") {
            XCTAssertEqual(try changeRows(response.body), try changeRows(Array(exchange.responseBody)), context, file: file, line: line)
        } else if exchange.path.hasSuffix("/_bulk_get") {
            let expected = try JSON(parsing: exchange.responseBody)["results"]?.arrayValue ?? []
            let actual = try JSON(parsing: response.body)["results"]?.arrayValue ?? []
            XCTAssertEqual(expected.count, actual.count, context, file: file, line: line)
            for (want, got) in zip(expected, actual) {
                XCTAssertEqual(want["id"], got["id"], context, file: file, line: line)
                let wantDocs = want["docs"]?.arrayValue ?? [], gotDocs = got["docs"]?.arrayValue ?? []
                XCTAssertEqual(wantDocs.count, gotDocs.count, context, file: file, line: line)
                for (wantDoc, gotDoc) in zip(wantDocs, gotDocs) {
                    if let ok = wantDoc["ok"] {
                        let problems = try ComparedRevision(ok).matches(try ComparedRevision(gotDoc["ok"] ?? .null))
                        XCTAssertTrue(problems.isEmpty, "\(context) \(want["id"] ?? .null): \(problems)", file: file, line: line)
                    } else {
                        XCTAssertEqual(wantDoc["error"]?["error"], gotDoc["error"]?["error"], context, file: file, line: line)
                    }
                }
            }
        } else if query["open_revs"] != nil {
            let expected = try revisionsOfOpenRevs(RawResponse(status: 200, headers: ["content-type": exchange.responseHeader("Content-Type") ?? ""],
                                                               body: Array(exchange.responseBody)))
            let actual = try revisionsOfOpenRevs(response)
            XCTAssertEqual(Set(actual.keys), Set(expected.keys), context, file: file, line: line)
            let since = query["atts_since"].flatMap { try? JSON(parsing: $0) }?.arrayValue?.compactMap(\.stringValue) ?? []
            for (revision, want) in expected {
                guard let got = actual[revision] else { continue }
                let history = (want.revisions?["ids"]?.arrayValue ?? []).enumerated().map { offset, digest in
                    "\((want.revisions?["start"]?.intValue ?? 0) - offset)-\(digest.stringValue ?? "")"
                }
                let known = history.first(where: since.contains).flatMap { Int($0.split(separator: "-")[0]) }
                let problems = want.matches(got, knownGeneration: known)
                XCTAssertTrue(problems.isEmpty, "\(context) \(revision): \(problems)", file: file, line: line)
            }
        }
    }

    /// A `_changes` answer's rows (normal or continuous) as id → leaf revisions and deletion, ignoring
    /// sequences and order (CouchDB merges two shards).
    private func changeRows(_ body: [UInt8]) throws -> [String: String] {
        var rows: [JSON] = []
        if let json = try? JSON(parsing: body), let results = json["results"]?.arrayValue {
            rows = results
        } else {
            for line in body.split(separator: 0x0A) where !line.isEmpty {
                let json = try JSON(parsing: Array(line))
                if json["id"] != nil { rows.append(json) }
            }
        }
        var result: [String: String] = [:]
        for row in rows {
            let revisions = (row["changes"]?.arrayValue ?? []).compactMap { $0["rev"]?.stringValue }.sorted()
            result[row["id"]!.stringValue!] = revisions.joined(separator: ",") + (row["deleted"] == true ? " deleted" : "")
        }
        return result
    }

    /// (b) CouchDB's replicator pulling from DocServer — a fresh pull and an incremental one (`atts_since`,
    /// possible ancestors): the same revisions, missing entries, bodies, digests and decoded bytes.
    func testPullsByCouchDBGetEquivalentAnswers() async throws {
        var (_, replay) = try await pushedServer()
        replay.databases = ["fx_src": "fx_target"]
        for name in ["pull-from-source.ndjson", "pull-incremental.ndjson"] {
            for exchange in try CouchDBFixtures.exchanges(name) where exchange.path != "/_session" {
                let response = try replay.send(exchange)
                try assertEquivalentSourceAnswer(exchange, response, "\(name) #\(exchange.sequence) \(exchange.method) \(exchange.target.prefix(90))")
            }
        }
    }

    /// The later writes of the continuous recording (new documents, updates with an attachment,
    /// deletions), taken from the answers CouchDB gave the replicator about them, written into
    /// `database` as CouchDB received them.
    private func writeLateChanges(_ server: TestServer, database: String) async throws {
        for exchange in try CouchDBFixtures.exchanges("continuous-source.ndjson") where exchange.sequence > 61 && exchange.status == 200 {
            if exchange.path.hasSuffix("/_bulk_get") {
                var docs: [JSON] = []
                // As the replicator: revisions with attachments come from their own open_revs answer.
                for result in try JSON(parsing: exchange.responseBody)["results"]?.arrayValue ?? [] {
                    for entry in result["docs"]?.arrayValue ?? [] {
                        if let ok = entry["ok"], ok["_attachments"] == nil { docs.append(ok) }
                    }
                }
                if docs.isEmpty { continue }
                let reply = try await server.request("POST", "/\(database)/_bulk_docs", json: ["docs": .array(docs), "new_edits": false])
                XCTAssertEqual(reply.status, 201, reply.text)
            } else if exchange.query["open_revs"] != nil {
                let outer = try XCTUnwrap(Multipart.boundary(from: exchange.responseHeader("Content-Type") ?? ""))
                for part in try Multipart.parse(Array(exchange.responseBody), boundary: outer) {
                    let type = try XCTUnwrap(part.headers["Content-Type"])
                    let id = try JSON(parsing: try Multipart.parse(part.body, boundary: try XCTUnwrap(Multipart.boundary(from: type)))[0].body)["_id"]!.stringValue!
                    let reply = try await server.request("PUT", "/\(database)/\(percentEncoded(id))?new_edits=false", body: Data(part.body), contentType: type)
                    XCTAssertEqual(reply.status, 201, reply.text)
                }
            }
        }
    }

    /// (c) The continuous feed of `continuous-source`: the same changes to the same requests — the
    /// catch-up, the idle timeout, the later writes as they happen, a `limit=0` check. Timeouts of 10 s
    /// are replayed as 0.3 s (how long a feed idles is not what is compared); CouchDB's opaque sequences
    /// map to DocServer's as the answers reveal them.
    func testContinuousFeedGivesTheSameChanges() async throws {
        var (server, replay) = try await pushedServer()
        replay.databases = ["fx_src": "fx_target"]
        var wroteLateChanges = false
        for exchange in try CouchDBFixtures.exchanges("continuous-source.ndjson") where exchange.path != "/_session" {
            let context = "continuous #\(exchange.sequence) \(exchange.method) \(exchange.target.prefix(90))"
            if exchange.sequence == 61 {
                try await writeLateChanges(server, database: "fx_target")
                wroteLateChanges = true
            }
            guard exchange.path.hasSuffix("/_changes") else {
                try assertEquivalentSourceAnswer(exchange, try replay.send(exchange), context)
                continue
            }
            let connection = try RawConnection(port: server.port, timeout: 30)
            let target = replay.target(of: exchange).replacingOccurrences(of: "timeout=10000", with: "timeout=300")
            connection.sendRequest(exchange.method, target, headers: CouchDBReplay.headers(of: exchange))
            let head = try XCTUnwrap(connection.readHead(), context)
            XCTAssertEqual(head.status, exchange.status, context)
            if exchange.clientClosed { continue }
            let body = try XCTUnwrap(connection.readBody(of: head), context).body
            XCTAssertEqual(try changeRows(body), try changeRows(Array(exchange.responseBody)), context)
            // CouchDB's sequences in this answer name the same points as DocServer's.
            mapSequences(recorded: Array(exchange.responseBody), actual: body, into: &replay)
        }
        XCTAssertTrue(wroteLateChanges)
        XCTAssertEqual(replay.sequences.count > 10, true, "sequences were mapped")
    }

    private func mapSequences(recorded: [UInt8], actual: [UInt8], into replay: inout CouchDBReplay) {
        func sequences(_ body: [UInt8]) -> (byID: [String: String], last: String?) {
            var byID: [String: String] = [:]
            var last: String?
            for line in body.split(separator: 0x0A) {
                guard let json = try? JSON(parsing: Array(line)) else { continue }
                let value: (JSON?) -> String? = { $0.map { $0.stringValue ?? $0.description } }
                if let id = json["id"]?.stringValue, let seq = value(json["seq"]) { byID[id] = seq }
                if let seq = value(json["last_seq"]) { last = seq }
            }
            if let json = try? JSON(parsing: body), let seq = json["last_seq"] { last = seq.stringValue ?? seq.description }
            return (byID, last)
        }
        let (recordedByID, recordedLast) = sequences(recorded)
        let (actualByID, actualLast) = sequences(actual)
        for (id, seq) in recordedByID { if let ours = actualByID[id] { replay.sequences[seq] = ours } }
        if let recordedLast, let actualLast { replay.sequences[recordedLast] = actualLast }
    }

    /// (d) A client's calls (`client-api`), errors included: CouchDB's status and error name for every
    /// one, on a database holding what CouchDB held then. Not replayed: the Mango calls (`_find`,
    /// `_index`, `_explain`), which DocServer does not serve yet.
    func testClientCallsGetCouchDBsStatusesAndErrors() async throws {
        var (server, replay) = try await pushedServer()
        try await writeLateChanges(server, database: "fx_target")
        let note = try JSON(parsing: CouchDBFixtures.sourceDump())["local"]?[0]?["doc"]
        let local = try await server.request("PUT", "/fx_target/_local/fx-note", json: .object(try XCTUnwrap(note?.objectValue).filter { !$0.key.hasPrefix("_") }.reduce(into: JSONObject()) { $0[$1.key] = $1.value }))
        XCTAssertEqual(local.status, 201)
        replay.databases = ["fx_src": "fx_target"]
        // Revision ids need not match across implementations: CouchDB's, in the recorded calls, stand for
        // the ones DocServer gave the same writes.
        var revisions: [String: String] = [:]
        func rewritten(_ text: String) -> String {
            revisions.reduce(text) { $0.replacingOccurrences(of: $1.key, with: $1.value) }
        }
        var replayed = 0
        for exchange in try CouchDBFixtures.exchanges("client-api.ndjson") {
            let mango = ["/_find", "/_index", "/_explain"].contains { exchange.path.hasSuffix($0) || exchange.path.contains($0 + "/") }
            if mango { continue }
            let context = "client #\(exchange.sequence) \(exchange.method) \(exchange.target.prefix(100))"
            let connection = try RawConnection(port: server.port, timeout: 30)
            let body = revisions.isEmpty ? Array(exchange.requestBody) : Array(rewritten(String(decoding: exchange.requestBody, as: UTF8.self)).utf8)
            // Feeds that waited for their timeout wait a tenth of it here: what is compared is their status.
            let target = replay.target(of: exchange).replacingOccurrences(of: "timeout=1000", with: "timeout=100")
                .replacingOccurrences(of: "timeout=2000", with: "timeout=200")
            connection.sendRequest(exchange.method, rewritten(target), headers: CouchDBReplay.headers(of: exchange),
                                   body: body)
            let response: RawResponse
            if exchange.clientClosed {
                // A feed the client hung up on: its status, then the connection is dropped.
                response = try XCTUnwrap(connection.readHead(), context)
            } else {
                response = try XCTUnwrap(connection.readResponse(head: exchange.method == "HEAD"), context)
            }
            XCTAssertEqual(response.status, exchange.status, "\(context): \(String(decoding: response.body.prefix(300), as: UTF8.self))")
            if exchange.status >= 400 {
                let expected = try JSON(parsing: exchange.responseBody)["error"]
                XCTAssertEqual((try? JSON(parsing: response.body))?["error"], expected, context)
            }
            if exchange.method == "PUT" || exchange.method == "POST" || exchange.method == "DELETE",
                let recorded = try? JSON(parsing: exchange.responseBody), let ours = try? JSON(parsing: response.body) {
                let pairs = [(recorded, ours)] + zip(recorded.arrayValue ?? [], ours.arrayValue ?? []).map { ($0, $1) }
                for (theirs, mine) in pairs {
                    if let recordedRevision = theirs["rev"]?.stringValue, let ourRevision = mine["rev"]?.stringValue {
                        revisions[recordedRevision] = ourRevision
                    }
                }
            }
            replayed += 1
        }
        XCTAssertEqual(replayed, 83)
    }
}
