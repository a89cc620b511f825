@testable import DocServer
import DocStore
@testable import DocSync
import Foundation
import XCTest

/// One replication scenario run over every pairing of endpoints: a local database and a DocServer
/// database over HTTP, as source and as target.
final class EndpointPairingTests: XCTestCase {
    private enum Kind: String, CaseIterable { case local, http }

    /// A database of `kind`: how the replicator reaches it, and a handle to check it with.
    private func endpoint(_ kind: Kind, _ name: String, server: (DocServer, URL)) async throws -> (ReplicationEndpoint, Database) {
        switch kind {
        case .local:
            let database = try await makeDatabase(name)
            return (.local(database), database)
        case .http:
            let (docServer, remoteURL) = server
            let database = try await docServer.registry.open(name)
            return (.remote(remoteURL.deletingLastPathComponent().appendingPathComponent(name)), database)
        }
    }

    func testTheSameScenarioOverEveryPairing() async throws {
        let (server, url, _) = try await makeServer()
        for source in Kind.allCases {
            for target in Kind.allCases {
                try await scenario(from: source, to: target, server: (server, url))
            }
        }
    }

    private func scenario(from sourceKind: Kind, to targetKind: Kind, server: (DocServer, URL)) async throws {
        let label = "\(sourceKind.rawValue)→\(targetKind.rawValue)"
        let (from, source) = try await endpoint(sourceKind, "source-\(sourceKind.rawValue)-\(targetKind.rawValue)", server: server)
        let (to, target) = try await endpoint(targetKind, "target-\(sourceKind.rawValue)-\(targetKind.rawValue)", server: server)
        func replicate() async throws -> ReplicatorStatus {
            var configuration = ReplicationConfiguration(source: from, target: to)
            configuration.batchSize = 40
            return try await Replicator(configuration: configuration).run()
        }

        // Documents with attachments, a deletion, an edit, and a conflict of two branches.
        try await seed(source, prefix: "d", count: 100, attachments: true)
        try await source.delete(try await source.document(withID: "d7")!)
        var edited = try await source.document(withID: "d8")!
        edited["edited"] = true
        _ = try await source.save(edited)
        let root = try Document(json: JSON(parsing: #"{"_id":"fork","_rev":"1-a","v":0}"#))
        let left = try Document(json: JSON(parsing: #"{"_id":"fork","_rev":"2-b","_revisions":{"start":2,"ids":["b","a"]},"v":1}"#))
        let right = try Document(json: JSON(parsing: #"{"_id":"fork","_rev":"2-c","_revisions":{"start":2,"ids":["c","a"]},"v":2}"#))
        let inserted = try await source.insertRevisions([root, left, right])
        XCTAssertTrue(inserted.allSatisfy(\.isSuccess), label)

        let first = try await replicate()
        XCTAssertEqual(first.activity, .idle, label)
        XCTAssertEqual(first.documentWriteFailures, 0, label)
        try await assertConverged(source, target)
        let fork = try await target.document(withID: "fork", includeConflicts: true)
        XCTAssertEqual(fork?.conflicts.count, 1, "\(label): both branches arrive")
        let bytes = try await target.attachmentData(named: "file.bin", documentID: "d9")
        XCTAssertEqual(bytes, Data((0..<19).map { UInt8($0) }), label)
        let deleted = try await target.document(withID: "d7")
        XCTAssertNil(deleted, label)

        let again = try await replicate()
        XCTAssertEqual(again.changesProcessed, 0, "\(label): the checkpoint is used")
        XCTAssertEqual(again.documentsWritten, 0, label)

        // Later edits move, and only they.
        var later = try await source.document(withID: "d3")!
        later.attachments["file.bin"] = Attachment(data: Data("replaced".utf8), contentType: "text/plain")
        _ = try await source.save(later)
        try await source.delete(try await source.document(withID: "d4")!)
        _ = try await source.save(Document(id: "new", body: ["n": 1]))
        let third = try await replicate()
        XCTAssertEqual(third.documentsWritten, 3, label)
        try await assertConverged(source, target)
        let replaced = try await target.attachmentData(named: "file.bin", documentID: "d3")
        XCTAssertEqual(String(decoding: replaced, as: UTF8.self), "replaced", label)
    }
}
