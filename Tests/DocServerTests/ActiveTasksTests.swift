@testable import DocServer
@testable import DocStore
import Foundation
import Logging
import TestSupport
import XCTest

/// What a running server shows of its work, as Apache CouchDB 3.3.3 shows it: `_active_tasks` with
/// `indexer`, `view_compaction` and `database_compaction` tasks beside the replications (their members
/// compared with the tasks CouchDB listed while it worked, `Tests/Fixtures/couchdb-3.3.3/conformance.json`),
/// and the log level changed through `_config/log/level`.
final class ActiveTasksTests: XCTestCase {
    /// CouchDB's recorded task of `type`.
    private func couchDBTask(_ type: String) throws -> JSONObject {
        let data = try Data(contentsOf: CouchDBFixtures.directory.appendingPathComponent("conformance.json"))
        return try XCTUnwrap(try JSON(parsing: data)["active_tasks"]?[type]?.objectValue, type)
    }

    /// The same members as CouchDB's task, each of the same JSON kind (a number where CouchDB writes a
    /// number, a string where it writes a string; CouchDB's `view` is `null` before its first view).
    private func assertShaped(like couchDB: JSONObject, _ task: JSON, _ type: String, file: StaticString = #filePath, line: UInt = #line) {
        let ours = task.objectValue ?? [:]
        XCTAssertEqual(Set(ours.keys), Set(couchDB.keys), type, file: file, line: line)
        func kind(_ value: JSON?) -> String {
            switch value {
            case .string?: "string"
            case .integer?, .double?: "number"
            case .null?: "null"
            default: String(describing: value)
            }
        }
        for (key, value) in couchDB where key != "view" {
            XCTAssertEqual(kind(ours[key]), kind(value), "\(type).\(key)", file: file, line: line)
        }
        XCTAssertEqual(ours["type"]?.stringValue, type, file: file, line: line)
    }

    func testAnIndexBuildIsListedWhileItRuns() async throws {
        // The map function stops on one document of the third window until the test has looked.
        let hold = MapHold()
        let slow = IndexDefinition(name: "app/slow", version: "1") { document, emit in
            if document.id == "doc-01200" { hold.hold() }
            emit(.string(document.id), nil)
        }
        let server = try await TestServer(self, indexes: { $0 == "tasks" ? [slow] : [] })
        defer { hold.release() }
        await XCTAssertEqualAsync(try await server.request("PUT", "/tasks").status, 201)
        let docs = (0..<3000).map { n -> JSON in ["_id": .string(String(format: "doc-%05d", n)), "n": .integer(n)] }
        await XCTAssertEqualAsync(try await server.request("POST", "/tasks/_bulk_docs", json: ["docs": .array(docs)]).status, 201)
        // A design document of that name, whose `_info` says whether its index is being updated.
        await XCTAssertEqualAsync(try await server.request("PUT", "/tasks/_design/app", json: ["language": "javascript"]).status, 201)
        let idle = try await server.request("GET", "/_active_tasks")
        XCTAssertEqual(idle.json, [], "nothing runs")

        let query = Task { try await server.request("GET", "/tasks/_design/app/_view/slow?limit=1") }
        await hold.reached()
        let listed = try await server.request("GET", "/_active_tasks")
        let info = try await server.request("GET", "/tasks/_design/app/_info")
        let database = try await server.request("GET", "/tasks")
        hold.release()
        let tasks = listed.json.arrayValue ?? []
        XCTAssertEqual(tasks.count, 1, listed.text)
        let task = try XCTUnwrap(tasks.first)
        assertShaped(like: try couchDBTask("indexer"), task, "indexer")
        XCTAssertEqual(task["database"], "tasks")
        XCTAssertEqual(task["design_document"], "_design/app")
        XCTAssertEqual(task["total_changes"], 3001, "every document changed since the index's last update, the design document too")
        // The first two windows of 500 are written, or the first while the second waits to be.
        let done = try XCTUnwrap(task["changes_done"]?.intValue)
        XCTAssertTrue([500, 1000].contains(done), "\(done)")
        XCTAssertEqual(task["progress"]?.intValue, done * 100 / 3001)
        XCTAssertEqual(info.json["view_index"]?["updater_running"], true, info.text)
        XCTAssertEqual(info.json["view_index"]?["compact_running"], false)
        XCTAssertEqual(database.json["compact_running"], false)

        let answered = try await query.value
        XCTAssertEqual(answered.status, 200)
        XCTAssertEqual(answered.json["total_rows"], 3001, "a Swift index maps design documents too")
        let after = try await server.request("GET", "/_active_tasks")
        XCTAssertEqual(after.json, [], "a task is gone once its work ends")
        let infoAfter = try await server.request("GET", "/tasks/_design/app/_info")
        XCTAssertEqual(infoAfter.json["view_index"]?["updater_running"], false)
    }

    /// Compactions run too briefly to be caught in a test: their tasks as DocServer writes them.
    func testCompactionTasksHaveCouchDBsMembers() async throws {
        let server = try await TestServer(self)
        let list = ActiveTaskList(database: "db")
        let view = list.begin(.indexCompaction, total: 90)
        let file = list.begin(.databaseCompaction, total: 30)
        list.advance(file, to: 12)
        // `POST /db/_compact/app` names the design document while it compacts the index file.
        server.server.designCompactions.withLock { $0["db"] = "_design/app" }
        let tasks = list.current.map { server.server.taskJSON($0) }
        XCTAssertEqual(tasks.count, 2)
        assertShaped(like: try couchDBTask("view_compaction"), tasks[0], "view_compaction")
        assertShaped(like: try couchDBTask("database_compaction"), tasks[1], "database_compaction")
        XCTAssertEqual(tasks[0]["phase"], "view")
        XCTAssertEqual(tasks[0]["design_document"], "_design/app")
        XCTAssertEqual(tasks[1]["progress"], 40)
        XCTAssertEqual(tasks[1]["phase"], "document_copy")
        list.end(view)
        list.end(file)
        XCTAssertTrue(list.current.isEmpty)
    }

    func testLogLevelChangesWhileTheServerRuns() async throws {
        let log = MessageLog()
        let server = try await TestServer(self, logger: Logger(label: "test.levels") { _ in CollectingLogHandler(log: log) })
        let level = "/_node/_local/_config/log/level"
        func listDatabases() async throws {
            await XCTAssertEqualAsync(try await server.request("GET", "/_all_dbs").status, 200)
        }
        await XCTAssertEqualAsync(try await server.request("GET", level).json, "info", "the level the server started with")
        try await listDatabases()
        XCTAssertEqual(log.count(containing: "GET /_all_dbs"), 1, "at info, a line per request")

        await XCTAssertEqualAsync(try await server.request("PUT", level, json: "warning").json, "info")
        try await listDatabases()
        XCTAssertEqual(log.count(containing: "GET /_all_dbs"), 1, "at warning, none")
        XCTAssertEqual(server.server.logLevel.level, .warning)

        // A word CouchDB does not know is kept, and logged at as info (CouchDB's rule).
        await XCTAssertEqualAsync(try await server.request("PUT", level, json: "loud").json, "warning")
        try await listDatabases()
        XCTAssertEqual(log.count(containing: "GET /_all_dbs"), 2)
        await XCTAssertEqualAsync(try await server.request("PUT", level, json: "debug").json, "loud")
        XCTAssertEqual(server.server.logLevel.level, .debug)

        // Not persisted: `_reload` goes back to the kept level; a kept level survives a restart.
        await XCTAssertEqualAsync(try await server.request("PUT", level, json: "error", headers: ["X-Couch-Persist": "false"]).status, 200)
        XCTAssertEqual(server.server.logLevel.level, .error)
        await XCTAssertEqualAsync(try await server.request("POST", "/_node/_local/_config/_reload").status, 200)
        XCTAssertEqual(server.server.logLevel.level, .debug)
        await server.server.stop()
        let again = try await TestServer(self, directory: server.directory)
        XCTAssertEqual(again.server.logLevel.level, .debug)
        await XCTAssertEqualAsync(try await again.request("DELETE", level).json, "debug")
        XCTAssertEqual(again.server.logLevel.level, .info, "a deleted level is CouchDB's default")
    }
}
