import DocServer
import DocStore
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Hummingbird
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
}
