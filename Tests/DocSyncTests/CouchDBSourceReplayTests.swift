@testable import DocServer
import DocStore
@testable import DocSync
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import XCTest

/// A server on 127.0.0.1 that answers as the recorded CouchDB 3.3.3 source of `pull-from-source`:
/// its welcome, database info, `_changes` rows (paged by `since` and `limit`), the `_bulk_get` result
/// of each document and the `multipart/mixed` answer to `open_revs` for each revision — CouchDB's bytes,
/// gzip-encoded attachments and all. Checkpoints are kept in memory.
final class RecordedCouchDBSource: Sendable {
    private let welcome: Data
    private let databaseInfo: Data
    private let rows: [JSON]
    private let lastSequence: JSON
    private let bulkGetResults: [ExactString: JSON]
    private let openRevisions: [String: (contentType: String, body: Data)]
    private let checkpoints = Locked<[String: JSONObject]>([:])
    private let server = LoopbackServer()
    /// Requests no recording could answer.
    let unanswered = Locked<[String]>([])

    init() throws {
        let pull = try CouchDBFixtures.exchanges("pull-from-source.ndjson")
        welcome = try XCTUnwrap(CouchDBFixtures.exchanges("client-api.ndjson").first { $0.target == "/" }).responseBody
        databaseInfo = try XCTUnwrap(pull.first { $0.target == "/fx_src/" }).responseBody
        let changes = try JSON(parsing: XCTUnwrap(pull.first { $0.path == "/fx_src/_changes" }).responseBody)
        rows = changes["results"]?.arrayValue ?? []
        lastSequence = changes["last_seq"] ?? .null
        var results: [ExactString: JSON] = [:]
        var revisions: [String: (String, Data)] = [:]
        for exchange in pull {
            if exchange.path == "/fx_src/_bulk_get" {
                // Results come in the order of the requested revisions; a conflicted document is asked
                // for once per leaf.
                let asked = try JSON(parsing: exchange.requestBody)["docs"]?.arrayValue ?? []
                for (spec, result) in zip(asked, try JSON(parsing: exchange.responseBody)["results"]?.arrayValue ?? []) {
                    results[ExactString((spec["id"]?.stringValue ?? "") + " " + (spec["rev"]?.stringValue ?? ""))] = result
                }
            } else if let openRevs = exchange.query["open_revs"], let list = try? JSON(parsing: openRevs), let rev = list[0]?.stringValue {
                let id = String(exchange.path.dropFirst("/fx_src/".count)).removingPercentEncoding ?? ""
                revisions[id + " " + rev] = (exchange.responseHeader("Content-Type") ?? "", exchange.responseBody)
            }
        }
        bulkGetResults = results
        openRevisions = revisions
    }

    func start() async throws -> Int {
        try await server.start { [self] request in try await self.answer(request) }
    }

    func stop() async {
        await server.stop()
    }

    private func json(_ value: JSON, status: HTTPResponse.Status = .ok) -> Response {
        Response(status: status, headers: [.contentType: "application/json"],
                 body: ResponseBody(byteBuffer: ByteBuffer(bytes: (try? value.serialized()) ?? [])))
    }

    private func bytes(_ data: Data, contentType: String = "application/json") -> Response {
        Response(status: .ok, headers: [.contentType: contentType], body: ResponseBody(byteBuffer: ByteBuffer(bytes: data)))
    }

    private func answer(_ request: Request) async throws -> Response {
        var request = request
        let body = try await request.collectBody(upTo: 16 * 1024 * 1024)
        let path = request.uri.path
        let query = Dictionary(request.uri.queryParameters.map { (String($0.key), String($0.value)) }, uniquingKeysWith: { $1 })
        switch (request.method, path) {
        case (.get, "/"):
            return bytes(welcome)
        case (.get, "/fx_src"), (.get, "/fx_src/"), (.head, "/fx_src"), (.head, "/fx_src/"):
            return bytes(databaseInfo)
        case (_, let local) where local.hasPrefix("/fx_src/_local/"):
            let id = String(local.dropFirst("/fx_src/_local/".count))
            if request.method == .put, case .object(let document) = try JSON(parsing: Array(body.readableBytesView)) {
                let count = checkpoints.withLock { checkpoints -> Int in
                    checkpoints[id] = document
                    return checkpoints.count
                }
                return json(["ok": true, "id": .string("_local/\(id)"), "rev": .string("0-\(count)")], status: .created)
            }
            guard var document = checkpoints.withLock({ $0[id] }) else { return json(["error": "not_found", "reason": "missing"], status: .notFound) }
            document["_id"] = .string("_local/\(id)")
            return json(.object(document))
        case (_, "/fx_src/_changes"):
            let limit = query["limit"].flatMap(Int.init) ?? rows.count
            var start = 0
            if let since = query["since"], since != "0" {
                start = (rows.firstIndex { $0["seq"]?.stringValue == since } ?? rows.count - 1) + 1
            }
            let page = Array(rows[min(start, rows.count)..<min(start + limit, rows.count)])
            let last = start + limit >= rows.count ? lastSequence : (page.last?["seq"] ?? lastSequence)
            return json(["results": .array(page), "last_seq": last, "pending": .integer(max(rows.count - start - page.count, 0))])
        case (.post, "/fx_src/_bulk_get"):
            var results: [JSON] = []
            for spec in try JSON(parsing: Array(body.readableBytesView))["docs"]?.arrayValue ?? [] {
                let id = spec["id"]?.stringValue ?? ""
                if let recorded = bulkGetResults[ExactString(id + " " + (spec["rev"]?.stringValue ?? ""))] {
                    results.append(recorded)
                } else if let rev = spec["rev"]?.stringValue, let recorded = openRevisions[id + " " + rev],
                    let document = try documentsOfMultipartMixed(Array(recorded.body), contentType: recorded.contentType).first {
                    // Design documents were only ever fetched by open_revs: its JSON part is CouchDB's answer.
                    results.append(["id": .string(id), "docs": [["ok": document.body.merging(document)]]])
                } else {
                    unanswered.withLock { $0.append("_bulk_get \(id)") }
                    results.append(["id": .string(id), "docs": [["error": ["id": .string(id), "error": "not_found", "reason": "missing"]]]])
                }
            }
            return json(["results": .array(results)])
        default:
            if request.method == .get, let openRevs = query["open_revs"], let rev = (try? JSON(parsing: openRevs))?[0]?.stringValue {
                let id = String(path.dropFirst("/fx_src/".count))
                if let recorded = openRevisions[id + " " + rev] { return bytes(recorded.body, contentType: recorded.contentType) }
            }
            unanswered.withLock { $0.append("\(request.method) \(path)") }
            return json(["error": "not_found", "reason": "not recorded"], status: .notFound)
        }
    }
}

private extension JSON {
    /// A document's JSON with the `_revisions` of its compared form.
    func merging(_ revision: ComparedRevision) -> JSON {
        var object = objectValue ?? [:]
        if let revisions = revision.revisions { object["_revisions"] = revisions }
        return .object(object)
    }
}

/// (e) DocSync against CouchDB's own recorded answers: pulling from them yields the source exactly, and
/// pushing the result to DocServer sends nothing CouchDB would refuse.
final class CouchDBSourceReplayTests: XCTestCase {
    func testPullFromRecordedCouchDBThenPushToDocServer() async throws {
        let source = try RecordedCouchDBSource()
        let port = try await source.start()
        let held = Held(source)
        addTeardownBlock { await held.take()?.stop() }
        let local = try await makeDatabase("pulled")
        let url = URL(string: "http://admin:admin@127.0.0.1:\(port)/fx_src")!
        let pull = try await Replicator(configuration: .init(source: .remote(url), target: .local(local))).run()
        XCTAssertEqual(pull.documentWriteFailures, 0)
        XCTAssertEqual(source.unanswered.withLock { $0 }, [], "every request DocSync sent has a recorded answer")
        let pulled = try await CouchDBFixtures.differencesFromSource { try await local.comparedLeaves(of: $0) }
        XCTAssertEqual(pulled, [], "the local database holds the source exactly")

        // Pushed on to DocServer, which answers as CouchDB does: no request refused (but the first
        // checkpoint reads), and the server then holds the source exactly too.
        let log = MessageLog()
        let (server, serverURL, served) = try await makeServer(logger: Logger(label: "test.server") { _ in CollectingLogHandler(log: log) })
        _ = server
        let push = try await Replicator(configuration: .init(source: .local(local), target: .remote(serverURL))).run()
        XCTAssertEqual(push.documentWriteFailures, 0)
        let refused = log.messages(atLeast: .trace).filter { line in
            let fields = line.split(separator: " ")
            guard fields.count >= 3, let status = Int(fields[2]) else { return false }
            return status >= 400 && !(status == 404 && fields[0] == "GET" && fields[1].contains("/_local/"))
        }
        XCTAssertEqual(refused, [], "requests DocServer refused, as CouchDB would")
        let multipartPuts = log.messages(atLeast: .trace).filter { $0.hasPrefix("PUT /remote/") && !$0.contains("/_local/") && $0.contains(" 201 ") }
        XCTAssertGreaterThan(multipartPuts.count, 20, "revisions with attachments went as multipart PUTs")
        let stored = try await CouchDBFixtures.differencesFromSource { try await served.comparedLeaves(of: $0) }
        XCTAssertEqual(stored, [])
    }
}
