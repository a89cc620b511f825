@testable import DocServer
import DocStore
import Foundation
import Logging
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@_exported import TestSupport
import XCTest

/// A DocServer on 127.0.0.1, port 0, over a temporary data folder, with an HTTP client for it.
final class TestServer: Sendable {
    let server: DocServer
    let port: Int
    let directory: URL
    let session: URLSession
    static let admin = (name: "admin", password: "admin-secret")

    /// A server with the empty database `name`, whose creation answered 201 `{"ok": true}`.
    static func withDatabase(_ testCase: XCTestCase, _ name: String = "db") async throws -> TestServer {
        let server = try await TestServer(testCase)
        let created = try await server.request("PUT", "/\(name)")
        XCTAssertEqual(created.status, 201)
        XCTAssertEqual(created.json, ["ok": true])
        return server
    }

    /// - Parameter directory: the data folder; a new temporary one when `nil` (a test that restarts a
    ///   server passes the folder of the one it stopped).
    init(_ testCase: XCTestCase, directory: URL? = nil, configure: (inout ServerConfiguration) -> Void = { _ in },
         indexes: @escaping @Sendable (String) -> [IndexDefinition] = { _ in [] }, logger: Logger? = nil) async throws {
        self.directory = directory ?? FileManager.default.temporaryDirectory.appendingPathComponent("docserver-tests-\(UUID().uuidString)")
        var configuration = ServerConfiguration(dataDirectory: self.directory)
        configuration.port = 0
        configuration.admin = TestServer.admin
        configuration.passwordIterations = 1000
        configure(&configuration)
        server = try await DocServer(configuration: configuration, indexes: indexes, logger: logger ?? Logger(label: "docstore.server"))
        port = try await server.start()
        let sessionConfiguration = URLSessionConfiguration.ephemeral
        sessionConfiguration.httpShouldSetCookies = false
        sessionConfiguration.timeoutIntervalForRequest = 30
        sessionConfiguration.urlCache = nil
        // As many clients as a test runs at once, each on a connection of its own (URLSession queues a
        // seventh request to one host behind the six it has open).
        sessionConfiguration.httpMaximumConnectionsPerHost = 64
        // Redirects (`_session?next=`) are answers to look at, not to follow.
        session = URLSession(configuration: sessionConfiguration, delegate: NoRedirects(), delegateQueue: nil)
        let server = self.server, directory = self.directory
        // Weakly: XCTest keeps each test case, and what its teardown blocks hold, to the end of the run.
        testCase.addTeardownBlock { [weak server] in
            await server?.stop()
            try? FileManager.default.removeItem(at: directory)
        }
    }

    /// Adds (or replaces) user `name` as CouchDB's `_users` wants its document (`name`, `type`,
    /// `roles`), with the password and channel grants of `fields`; returns the status (201).
    func addUser(_ name: String, _ fields: JSON, roles: [String] = []) async throws -> Int {
        var body = fields.objectValue ?? [:]
        body["name"] = .string(name)
        body["type"] = "user"
        body["roles"] = JSON(roles)
        body["_rev"] = try await request("GET", "/_users/org.couchdb.user:\(name)").json["_rev"]
        return try await request("PUT", "/_users/org.couchdb.user:\(name)", json: .object(body)).status
    }

    struct Reply {
        let status: Int
        let headers: [String: String]
        let body: Data
        var json: JSON { (try? JSON(parsing: body)) ?? .null }
        var text: String { String(decoding: body, as: UTF8.self) }
        func header(_ name: String) -> String? {
            headers.first { $0.key.lowercased() == name.lowercased() }?.value
        }
    }

    enum Credentials {
        case admin
        case user(String, String)
        case none
        case cookie(String)
    }

    /// Sends a request; `path` may include a query string and must be percent-encoded as a client would.
    @discardableResult
    func request(_ method: String, _ path: String, json: JSON? = nil, body: Data? = nil, contentType: String? = nil,
                 headers: [String: String] = [:], as credentials: Credentials = .admin) async throws -> Reply {
        var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)\(path)")!)
        request.httpMethod = method
        if let json {
            request.httpBody = try json.serializedData()
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        } else if let body {
            request.httpBody = body
            request.setValue(contentType ?? "application/octet-stream", forHTTPHeaderField: "Content-Type")
        }
        if let contentType { request.setValue(contentType, forHTTPHeaderField: "Content-Type") }
        switch credentials {
        case .admin: request.setValue(TestServer.basic(TestServer.admin.name, TestServer.admin.password), forHTTPHeaderField: "Authorization")
        case .user(let name, let password): request.setValue(TestServer.basic(name, password), forHTTPHeaderField: "Authorization")
        case .cookie(let cookie): request.setValue("AuthSession=\(cookie)", forHTTPHeaderField: "Cookie")
        case .none: break
        }
        // As CouchDB clients do; a test that wants multipart answers says so.
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        let (data, response) = try await session.data(for: request)
        let http = response as! HTTPURLResponse
        var fields: [String: String] = [:]
        for (name, value) in http.allHeaderFields { fields["\(name)"] = "\(value)" }
        return Reply(status: http.statusCode, headers: fields, body: data)
    }

    static func basic(_ name: String, _ password: String) -> String {
        "Basic " + Data("\(name):\(password)".utf8).base64EncodedString()
    }
}

/// A session delegate that hands 3xx answers back instead of following them.
private final class NoRedirects: NSObject, URLSessionTaskDelegate, Sendable {
    func urlSession(_ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
                    newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void) {
        completionHandler(nil)
    }
}
