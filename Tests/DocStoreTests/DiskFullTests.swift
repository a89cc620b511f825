@testable import DocStore
import Foundation
import XCTest

/// A database that runs out of room (Docs/Reliability.md): writes, attachments and an index build fail whole
/// with ``DocStoreError/Code/diskFull``, nothing committed is lost, and once there is room the same
/// database takes writes again and passes SQLite's integrity check.
///
/// The room is ``DatabaseConfiguration/maximumFileSize`` (SQLite's `max_page_count`), which fails a
/// write exactly where a full disk does; `Tests/Interop/full_disk_check.py` fills a real file system.
final class DiskFullTests: XCTestCase {
    private static let byN = IndexDefinition(name: "by-n", version: "1") { doc, emit in
        if let n = doc["n"] { emit(n, doc["pad"] ?? .null) }
    }

    private func configuration(_ directory: URL, limit: Int64?, indexes: [IndexDefinition] = []) -> DatabaseConfiguration {
        var configuration = DatabaseConfiguration(name: "full", directory: directory)
        configuration.maximumFileSize = limit
        configuration.indexes = indexes
        return configuration
    }

    private func batch(_ number: Int) -> [Document] {
        (0..<50).map { Document(id: "b\(number)-\($0)", body: ["n": .integer(number * 50 + $0), "pad": .string(String(repeating: "x", count: 400))]) }
    }

    /// Fills `db` batch by batch until a batch fails; the revision of every document saved, and the error.
    private func fill(_ db: Database) async throws -> (saved: [String: RevisionID], failedBatch: Int, error: DocStoreError?) {
        var saved: [String: RevisionID] = [:]
        for number in 0..<10_000 {
            do {
                for result in try await db.save(batch(number)) { saved[result.id] = try XCTUnwrap(result.revision) }
            } catch let error as DocStoreError {
                return (saved, number, error)
            }
        }
        return (saved, -1, nil)
    }

    private func integrity(of directory: URL) throws -> [String] {
        try ThreadRule.allowing(.testing) {
            var results: [String] = []
            for file in ["full.sqlite", "full.sqlite-idx"] {
                let connection = try SQLiteConnection(path: directory.appendingPathComponent(file).path)
                let statement = try connection.prepare("PRAGMA integrity_check")
                while try statement.step() { results.append(statement.text(0)) }
            }
            return results
        }
    }

    func testWritesThatFindNoRoomFailWholeAndTheDatabaseTakesWritesOnceThereIsRoom() async throws {
        let directory = try makeTemporaryDirectory(self)
        var db = try await Database.open(configuration(directory, limit: 1 << 20))
        let (saved, failedBatch, error) = try await fill(db)
        XCTAssertEqual(error?.code, .diskFull, "\(String(describing: error))")
        XCTAssertEqual(error?.code.status, 507)
        XCTAssertGreaterThan(saved.count, 500, "the file held a megabyte of documents first")
        // The failed batch left nothing; every committed document is there.
        for document in batch(failedBatch) { await XCTAssertEqualAsync(try await db.document(withID: document.id) == nil, true, document.id) }
        for (id, revision) in saved.prefix(200) { await XCTAssertEqualAsync(try await db.document(withID: id)?.revision, revision) }
        await XCTAssertEqualAsync(try await db.info().documentCount, saved.count)
        // So does an attachment, and a single document.
        var attached = Document(id: "attached", body: [:])
        attached.attachments["big.bin"] = Attachment(data: Data((0..<(256 << 10)).map { UInt8(truncatingIfNeeded: $0 &* 2_654_435_761 >> 13) }),
                                                     contentType: "application/octet-stream")
        await assertThrowsDocStoreError(.diskFull) { try await db.save(attached) }
        await XCTAssertEqualAsync(try await db.document(withID: "attached") == nil, true)
        await db.close()

        // Room again (a larger limit, as space freed on the disk): the same file takes the same writes.
        db = try await Database.open(configuration(directory, limit: 64 << 20))
        await XCTAssertEqualAsync(try await db.info().documentCount, saved.count)
        let retried = try await db.save(batch(failedBatch))
        XCTAssertEqual(retried.count, batch(failedBatch).count)
        _ = try await db.save(attached)
        await XCTAssertEqualAsync(try await db.document(withID: "attached")?.attachments["big.bin"]?.length, 256 << 10)
        await db.close()
        XCTAssertEqual(try integrity(of: directory), ["ok", "ok"])
    }

    func testAnIndexBuildThatFindsNoRoomFailsAndCompletesOnceThereIsRoom() async throws {
        let directory = try makeTemporaryDirectory(self)
        // The documents fit; the index of their padding does not.
        var db = try await Database.open(configuration(directory, limit: 4 << 20))
        var count = 0
        for number in 0..<120 { count += try await db.save(batch(number)).count }
        await db.close()
        db = try await Database.open(configuration(directory, limit: 1 << 20, indexes: [DiskFullTests.byN]))
        await assertThrowsDocStoreError(.diskFull) { _ = try await db.query("by-n") }
        await XCTAssertEqualAsync(try await db.info().documentCount, count)
        await db.close()

        db = try await Database.open(configuration(directory, limit: 64 << 20, indexes: [DiskFullTests.byN]))
        let rows = try await db.query("by-n").rows
        XCTAssertEqual(rows.count, count)
        XCTAssertEqual(rows.first?.key, 0)
        XCTAssertEqual(rows.last?.key, .integer(count - 1))
        await db.close()
        XCTAssertEqual(try integrity(of: directory), ["ok", "ok"])
    }
}
