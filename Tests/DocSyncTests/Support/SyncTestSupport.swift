@testable import DocServer
import DocStore
@testable import DocSync
import Foundation
import Logging
@_exported import TestSupport
import XCTest

extension XCTestCase {
    func makeDatabase(_ name: String) async throws -> Database {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("docsync-\(UUID().uuidString)")
        let db = try await Database.open(name: name, directory: folder)
        // Weakly: XCTest keeps each test case, and what its teardown blocks hold, to the end of the run.
        addTeardownBlock { [weak db] in
            await db?.close()
            try? FileManager.default.removeItem(at: folder)
        }
        return db
    }

    /// A server with database `remote`; returns the server, the database URL with admin credentials and
    /// the server's own handle on that database.
    func makeServer(filters: [String: ChangesFilterFunction] = [:],
                    indexes: @escaping @Sendable (String) -> [IndexDefinition] = { _ in [] },
                    logger: Logger = Logger(label: "test.server"),
                    configure: (inout ServerConfiguration) -> Void = { _ in }) async throws -> (DocServer, URL, Database) {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("docsync-server-\(UUID().uuidString)")
        var configuration = ServerConfiguration(dataDirectory: folder)
        configuration.port = 0
        configuration.admin = ("admin", "pw")
        configuration.passwordIterations = 1000
        configure(&configuration)
        let server = try await DocServer(configuration: configuration, indexes: indexes, filters: filters, logger: logger)
        let port = try await server.start()
        let database = try await server.registry.open("remote")
        addTeardownBlock { [weak server] in
            await server?.stop()
            try? FileManager.default.removeItem(at: folder)
        }
        return (server, URL(string: "http://admin:pw@127.0.0.1:\(port)/remote")!, database)
    }

    /// Same ids, same winning revisions, same leaf sets on both sides.
    func assertConverged(_ a: Database, _ b: Database, file: StaticString = #filePath, line: UInt = #line) async throws {
        let idsA = try await a.changes().changes.map(\.id).sorted()
        let idsB = try await b.changes().changes.map(\.id).sorted()
        XCTAssertEqual(idsA, idsB, "document ids", file: file, line: line)
        for id in idsA {
            let treeA = try await a.revisionTree(ofDocumentWithID: id)
            let treeB = try await b.revisionTree(ofDocumentWithID: id)
            XCTAssertEqual(treeA?.winner?.revision, treeB?.winner?.revision, "winner of \(id)", file: file, line: line)
            XCTAssertEqual(Set(treeA?.leaves.map(\.revision) ?? []), Set(treeB?.leaves.map(\.revision) ?? []), "leaves of \(id)", file: file, line: line)
        }
    }

    func seed(_ db: Database, prefix: String, count: Int, attachments: Bool = false) async throws {
        _ = try await db.save((0..<count).map { n in
            var doc = Document(id: "\(prefix)\(n)", body: ["n": .integer(n), "side": .string(prefix)])
            if attachments, n % 3 == 0 {
                doc.attachments["file.bin"] = Attachment(data: Data((0..<(n + 10)).map { UInt8($0 % 256) }), contentType: "application/octet-stream")
            }
            return doc
        })
    }

}

