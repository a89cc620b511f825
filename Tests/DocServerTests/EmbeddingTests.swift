@testable import DocServer
import DocStore
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Hummingbird
import Logging
import TestSupport
import XCTest

/// Docs/Server.md's embedding example: DocServer as the responder of the caller's own application,
/// with DocServer's listener and its guards.
final class EmbeddingTests: XCTestCase {
    func testDocServerAsTheResponderOfAnotherApplication() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("embed-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        var configuration = ServerConfiguration(dataDirectory: folder)
        configuration.admin = ("admin", "pw")
        configuration.passwordIterations = 1000
        configuration.maximumBodySize = 4096
        let byType = IndexDefinition(name: "app/by-type", version: "1", reduce: .count) { doc, emit in
            if let type = doc.type { emit(.string(type), nil) }
        }
        let couch = try await DocServer(configuration: configuration, indexes: { _ in [byType] })
        try await couch.prepare()                // `_users` and `_replicator`, and the replications of its documents
        try await couch.users.setUser(name: "device-1", password: "d1", readChannels: ["device-1"], writeChannels: ["device-1"])

        let (ports, portContinuation) = AsyncStream<Int>.makeStream()
        let app = Application(
            router: couch,
            server: .docServer(configuration),
            configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in portContinuation.yield(channel.localAddress?.port ?? 0) })
        let running = Task { try await app.run() }
        var iterator = ports.makeAsyncIterator()
        let next = await iterator.next()
        let port = try XCTUnwrap(next)

        func send(_ method: String, _ path: String, _ body: String? = nil, user: String, password: String) async throws -> (Int, JSON) {
            var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)\(path)")!)
            request.httpMethod = method
            request.httpBody = body.map { Data($0.utf8) }
            request.setValue("Basic " + Data("\(user):\(password)".utf8).base64EncodedString(), forHTTPHeaderField: "Authorization")
            let (data, response) = try await URLSession.shared.data(for: request)
            return ((response as! HTTPURLResponse).statusCode, (try? JSON(parsing: data)) ?? .null)
        }
        // The system databases are there, as CouchDB has them from its start.
        let databases = try await send("GET", "/_all_dbs", user: "admin", password: "pw")
        XCTAssertEqual(databases.1, ["_replicator", "_users"])
        let created = try await send("PUT", "/readings", user: "admin", password: "pw")
        XCTAssertEqual(created.0, 201)
        let written = try await send("PUT", "/readings/r1", #"{"type":"temperature","channels":["device-1"],"value":21.5}"#, user: "device-1", password: "d1")
        XCTAssertEqual(written.0, 201)
        let counted = try await send("GET", "/readings/_design/app/_view/by-type?group=true", user: "admin", password: "pw")
        XCTAssertEqual(counted.1, ["rows": [["key": "temperature", "value": 1]]])

        // The guards come with the responder and the listener: CouchDB's JSON errors, not the host's.
        let tooLarge = try await send("POST", "/readings", "{\"pad\":\"" + String(repeating: "x", count: 5000) + "\"}", user: "admin", password: "pw")
        XCTAssertEqual(tooLarge.0, 413)
        XCTAssertEqual(tooLarge.1["error"], "too_large")
        let unknown = try await send("GET", "/_nothing_here", user: "device-1", password: "d1")
        XCTAssertEqual(unknown.0, 404)
        XCTAssertEqual(unknown.1["reason"], "Unknown endpoint _nothing_here")
        running.cancel()
        _ = try? await running.value
        await couch.stop()
    }

    /// Docs/Server.md's first example, as written there: DocServer on its own listener, with the
    /// port, administrator and log level of its configuration.
    func testDocServerOnItsOwnListener() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("own-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }

        var settings = ServerConfiguration(dataDirectory: folder)
        settings.port = 0                        // 5984 by default; 0 picks a free port
        settings.admin = ("admin", "secret")
        settings.logLevel = .warning             // .info logs every request
        let server = try await DocServer(configuration: settings)
        let port = try await server.start()      // the port it listens on

        func allDatabases(_ port: Int) async throws -> (Int, JSON) {
            var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)/_all_dbs")!)
            request.setValue("Basic " + Data("admin:secret".utf8).base64EncodedString(), forHTTPHeaderField: "Authorization")
            let (data, response) = try await URLSession.shared.data(for: request)
            return ((response as! HTTPURLResponse).statusCode, try JSON(parsing: data))
        }
        let (status, names) = try await allDatabases(port)
        XCTAssertEqual(status, 200)
        XCTAssertEqual(names.arrayValue?.contains("_users"), true)
        XCTAssertEqual(server.logger.logLevel, .warning)
        await server.stop()

        // What the level does, seen through a logger that keeps its messages: at `.warning` no request
        // line, at the logger's own level (`.info`) one per request.
        for (level, lines) in [(Logger.Level?.some(.warning), 0), (nil, 1)] {
            let log = MessageLog()
            var quiet = settings
            quiet.logLevel = level
            let logged = try await DocServer(configuration: quiet, logger: Logger(label: "test.embedded") { _ in CollectingLogHandler(log: log) })
            _ = try await allDatabases(try await logged.start())
            await logged.stop()
            XCTAssertEqual(log.count(containing: "GET /_all_dbs"), lines, "\(String(describing: level))")
        }

        try assertGuideBlocksAreIn(guide: "Server.md", section: "Embedding it in your service", minimumBlocks: 1)
    }
}
