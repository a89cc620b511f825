import DocStore
@testable import DocSync
import Foundation
import XCTest

/// A pull into a database that runs out of room (Docs/Reliability.md): the replication fails with the typed
/// error, the revisions it wrote are all there, and run again once there is room it completes.
final class DiskFullReplicationTests: XCTestCase {
    func testAPullThatFindsNoRoomFailsAndCompletesOnceThereIsRoom() async throws {
        let directory = try makeTemporaryDirectory(self)
        let source = try await Database.open(name: "source", directory: directory)
        for number in 0..<40 {
            _ = try await source.save((0..<50).map {
                Document(id: "d\(number)-\($0)", body: ["n": .integer(number * 50 + $0), "pad": .string(String(repeating: "y", count: 500))])
            })
        }
        var small = DatabaseConfiguration(name: "target", directory: directory)
        small.maximumFileSize = 512 << 10
        var target = try await Database.open(small)
        var configuration = ReplicationConfiguration(source: .local(source), target: .local(target))
        configuration.batchSize = 100
        do {
            _ = try await Replicator(configuration: configuration).run()
            XCTFail("2 000 documents of 500 bytes do not fit in 512 KiB")
        } catch let error as ReplicationError {
            XCTAssertEqual(error.code, .localDatabase)
            XCTAssertEqual((error.cause as? DocStoreError)?.code, .diskFull, "\(error)")
        }
        // What was written is whole: each document there has the source's revision and body.
        let written = try await target.info().documentCount
        XCTAssertGreaterThan(written, 0)
        XCTAssertLessThan(written, 2000)
        for row in try await target.allDocuments(AllDocumentsQuery(includeDocuments: true)).rows {
            let original = try await source.document(withID: row.id)
            XCTAssertEqual(row.document?.revision, original?.revision)
            XCTAssertEqual(row.document?.body, original?.body)
        }
        await target.close()

        var large = small
        large.maximumFileSize = 64 << 20
        target = try await Database.open(large)
        configuration = ReplicationConfiguration(source: .local(source), target: .local(target))
        let status = try await Replicator(configuration: configuration).run()
        XCTAssertNil(status.error)
        await XCTAssertEqualAsync(try await target.info().documentCount, 2000)
        await target.close()
        await source.close()
    }
}
