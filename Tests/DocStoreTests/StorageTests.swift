@testable import DocStore
import CSQLite
import Foundation
import XCTest

final class StorageTests: XCTestCase {
    func testSameConfigurationGivesSameInstanceUntilClosed() async throws {
        let directory = try makeTemporaryDirectory(self)
        let a = try await Database.open(name: "shared", directory: directory)
        let b = try await Database.open(name: "shared", directory: directory.appendingPathComponent("."))
        XCTAssertTrue(a === b)
        await a.close()
        XCTAssertTrue(b.isClosed)
        await assertThrowsDocStoreError(.databaseClosed) { try await b.save(Document(id: "x", body: [:])) }
        await assertThrowsDocStoreError(.databaseClosed) { try await b.document(withID: "x") }
        let c = try await Database.open(name: "shared", directory: directory)
        XCTAssertFalse(a === c)
        await Database.closeAll()
        XCTAssertTrue(c.isClosed)
    }

    func testReopeningSeesEverything() async throws {
        let directory = try makeTemporaryDirectory(self)
        var db = try await Database.open(name: "persist", directory: directory)
        var doc = Document(id: "doc", body: ["n": 1, "big": .bigInteger("123456789012345678901234567890")])
        doc.attachments["a.txt"] = Attachment(data: Data("attached".utf8), contentType: "text/plain")
        doc = try await db.save(doc)
        var conflict = Document(id: "doc", revision: RevisionID("1-zzzz"), body: ["n": "other"])
        conflict.revisionHistory = []
        _ = try await db.insertRevisions([conflict])
        _ = try await db.save((0..<100).map { Document(id: String(format: "bulk-%03d", $0), body: ["i": .integer($0)]) })
        let gone = try await db.save(Document(id: "gone", body: [:]))
        try await db.delete(gone)
        try await db.saveLocalDocument(withID: "ck", body: ["since": 42])
        let sequence = await db.updateSequence
        let uuid = try await db.info().uuid
        await db.close()

        db = try await Database.open(name: "persist", directory: directory)
        let fetched = try await db.document(withID: "doc", includeConflicts: true)!
        let ours = try await db.document(withID: "doc", revision: doc.revision)
        XCTAssertEqual(ours?["big"], .bigInteger("123456789012345678901234567890"))
        XCTAssertEqual(fetched["n"], "other")
        XCTAssertEqual(fetched.revision, RevisionID("1-zzzz"), "higher hash wins at equal generation")
        XCTAssertEqual(fetched.conflicts, [doc.revision!])
        let attached = try await db.attachmentData(named: "a.txt", documentID: "doc", revision: doc.revision)
        XCTAssertEqual(attached, Data("attached".utf8))
        let info = try await db.info()
        XCTAssertEqual(info.documentCount, 101)
        XCTAssertEqual(info.deletedDocumentCount, 1)
        XCTAssertEqual(info.updateSequence, sequence)
        XCTAssertEqual(info.uuid, uuid)
        XCTAssertGreaterThan(info.fileSize, 0)
        let local = try await db.localDocument(withID: "ck")
        XCTAssertEqual(local?.body["since"], 42)
        let next = try await db.save(Document(id: "next", body: [:]))
        XCTAssertEqual(next.sequence, sequence + 1)
        await db.close()
    }

    func testForeignFilesAreRefusedWithClearErrors() async throws {
        let directory = try makeTemporaryDirectory(self)
        // Not SQLite at all.
        try Data("this is a text file, not a database at all, but long enough to look like one".utf8)
            .write(to: directory.appendingPathComponent("text.sqlite"))
        let textError = await assertThrowsDocStoreError(.notADocStoreDatabase) {
            try await Database.open(name: "text", directory: directory)
        }
        XCTAssertTrue(textError?.reason.contains("not an SQLite file") == true, textError?.reason ?? "")

        // SQLite, but another application's.
        var handle: OpaquePointer?
        XCTAssertEqual(sqlite3_open(directory.appendingPathComponent("other.sqlite").path, &handle), SQLITE_OK)
        XCTAssertEqual(sqlite3_exec(handle, "CREATE TABLE people (name TEXT); INSERT INTO people VALUES ('x')", nil, nil, nil), SQLITE_OK)
        sqlite3_close(handle)
        let foreign = await assertThrowsDocStoreError(.notADocStoreDatabase) {
            try await Database.open(name: "other", directory: directory)
        }
        XCTAssertTrue(foreign?.reason.contains("another application") == true)
        // The foreign file was not touched (still rollback-journal mode, data intact).
        XCTAssertEqual(sqlite3_open(directory.appendingPathComponent("other.sqlite").path, &handle), SQLITE_OK)
        var statement: OpaquePointer?
        sqlite3_prepare_v2(handle, "PRAGMA journal_mode", -1, &statement, nil)
        XCTAssertEqual(sqlite3_step(statement), SQLITE_ROW)
        XCTAssertEqual(String(cString: sqlite3_column_text(statement, 0)), "delete")
        sqlite3_finalize(statement)
        sqlite3_close(handle)

        // A DocStore file from the future.
        let future = try await Database.open(name: "future", directory: directory)
        _ = try await future.save(Document(id: "x", body: [:]))
        await future.close()
        XCTAssertEqual(sqlite3_open(directory.appendingPathComponent("future.sqlite").path, &handle), SQLITE_OK)
        XCTAssertEqual(sqlite3_exec(handle, "PRAGMA user_version = 99", nil, nil, nil), SQLITE_OK)
        sqlite3_close(handle)
        let newer = await assertThrowsDocStoreError(.incompatibleVersion) {
            try await Database.open(name: "future", directory: directory)
        }
        XCTAssertTrue(newer?.reason.contains("99") == true)
    }

    func testInvalidNamesAndDeletion() async throws {
        let directory = try makeTemporaryDirectory(self)
        for name in ["", "../escape", "a/b", ".hidden", "sp ace"] {
            await assertThrowsDocStoreError(.badRequest) { try await Database.open(name: name, directory: directory) }
        }
        let db = try await Database.open(name: "doomed", directory: directory)
        _ = try await db.save(Document(id: "x", body: [:]))
        XCTAssertTrue(Database.exists(name: "doomed", directory: directory))
        try await Database.delete(name: "doomed", directory: directory)
        XCTAssertTrue(db.isClosed)
        XCTAssertFalse(Database.exists(name: "doomed", directory: directory))
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        XCTAssertEqual(leftovers, [])
        let reborn = try await Database.open(name: "doomed", directory: directory)
        let missing = try await reborn.document(withID: "x")
        XCTAssertNil(missing)
        await reborn.close()
    }

    func testSchemaIsStrictAndVersioned() async throws {
        let db = try await makeDatabase(self)
        let (version, application, journal) = try db.read { connection in
            (try connection.scalarInt("PRAGMA user_version"), try connection.scalarInt("PRAGMA application_id"),
             try connection.prepare("PRAGMA journal_mode").step())
        }
        XCTAssertEqual(version, Schema.currentVersion)
        XCTAssertEqual(application, Schema.applicationID)
        XCTAssertTrue(journal)
        let mode = try db.read { connection -> String in
            let statement = try connection.prepare("PRAGMA journal_mode")
            _ = try statement.step()
            return statement.text(0)
        }
        XCTAssertEqual(mode, "wal")
        // Point reads and the changes feed use indexes, never a scan of the table.
        let plans = try db.read { connection -> [String] in
            var plans: [String] = []
            for sql in ["SELECT * FROM docs WHERE id = 'x'", "SELECT * FROM docs WHERE seq > 5 ORDER BY seq"] {
                let statement = try connection.prepare("EXPLAIN QUERY PLAN " + sql)
                while try statement.step() { plans.append(statement.text(3)) }
            }
            return plans
        }
        XCTAssertTrue(plans[0].contains("USING INDEX"), plans[0])
        XCTAssertTrue(plans[1].contains("INTEGER PRIMARY KEY"), plans[1])
    }

    /// Eight tasks read continuously while one task writes; every read sees a consistent document and
    /// readers never block on the writer.
    func testConcurrentReadersWhileOneWrites() async throws {
        let db = try await makeDatabase(self)
        let writes = 400
        _ = try await db.save(Document(id: "seed", body: ["n": 0, "check": 0]))
        try await withThrowingTaskGroup(of: Int.self) { group in
            group.addTask {
                var doc = try await db.document(withID: "seed")!
                for n in 1...writes {
                    doc["n"] = .integer(n)
                    doc["check"] = .integer(n * 7)
                    doc = try await db.save(doc)
                    _ = try await db.save(Document(id: "w\(n)", body: ["n": .integer(n)]))
                }
                return writes
            }
            for _ in 0..<8 {
                group.addTask {
                    var reads = 0
                    var lastSeen = -1
                    while lastSeen < writes {
                        guard let doc = try await db.document(withID: "seed") else {
                            XCTFail("seed vanished")
                            return reads
                        }
                        let n = doc.int(forKey: "n")!
                        XCTAssertEqual(doc.int(forKey: "check"), n * 7, "torn read")
                        XCTAssertEqual(doc.revision?.generation, n + 1)
                        XCTAssertGreaterThanOrEqual(n, lastSeen, "reads went back in time")
                        lastSeen = n
                        let page = try await db.changes(since: 0, limit: 5)
                        XCTAssertLessThanOrEqual(page.changes.count, 5)
                        reads += 1
                        await Task.yield()
                    }
                    return reads
                }
            }
            var total = 0
            for try await count in group { total += count }
            XCTAssertGreaterThan(total, writes)
        }
        let info = try await db.info()
        XCTAssertEqual(info.documentCount, writes + 1)
    }
}

final class CorruptionTests: XCTestCase {
    private func makeFilledDatabase(_ directory: URL) async throws -> URL {
        let db = try await Database.open(name: "victim", directory: directory)
        _ = try await db.save((0..<300).map { Document(id: String(format: "doc-%04d", $0), body: ["text": .string(String(repeating: "lorem ", count: 40))]) })
        let url = db.fileURL
        await db.close()
        return url
    }

    func testOverwrittenHeaderIsNotADatabase() async throws {
        let directory = try makeTemporaryDirectory(self)
        let url = try await makeFilledDatabase(directory)
        let handle = try FileHandle(forWritingTo: url)
        try handle.write(contentsOf: Data(repeating: 0x5A, count: 100))
        try handle.close()
        let error = await assertThrowsDocStoreError(.notADocStoreDatabase) {
            try await Database.open(name: "victim", directory: directory)
        }
        XCTAssertNotNil(error?.cause)
    }

    /// Garbage in the middle of the file: opening or reading fails with a storage error, never a crash.
    func testCorruptPagesGiveStorageErrors() async throws {
        let directory = try makeTemporaryDirectory(self)
        let url = try await makeFilledDatabase(directory)
        let size = try FileManager.default.attributesOfItem(atPath: url.path)[.size] as! Int
        let handle = try FileHandle(forWritingTo: url)
        var generator = SplitMix64(seed: 7)
        for page in stride(from: 4096 * 2, to: size, by: 4096 * 3) {
            try handle.seek(toOffset: UInt64(page + 100))
            try handle.write(contentsOf: Data((0..<2000).map { _ in UInt8(truncatingIfNeeded: generator.next()) }))
        }
        try handle.close()
        do {
            let db = try await Database.open(name: "victim", directory: directory)
            defer { Task { await db.close() } }
            var sawError = false
            for n in 0..<300 {
                do {
                    _ = try await db.document(withID: String(format: "doc-%04d", n))
                } catch let error as DocStoreError {
                    XCTAssertEqual(error.code, .storage, "\(error)")
                    sawError = true
                }
            }
            do {
                _ = try await db.changes()
                _ = try await db.save(Document(id: "new", body: [:]))
            } catch let error as DocStoreError {
                XCTAssertEqual(error.code, .storage, "\(error)")
                sawError = true
            }
            XCTAssertTrue(sawError, "corruption of every third page must be noticed somewhere")
        } catch let error as DocStoreError {
            XCTAssertTrue([.storage, .notADocStoreDatabase].contains(error.code), "\(error)")
        }
    }

    func testCorruptBodiesFailALongChangesPageAndLeaveTheNextOneWorking() async throws {
        let db = try await makeDatabase(self)
        _ = try await db.save((0..<300).map { Document(id: String(format: "b%03d", $0), body: ["n": .integer($0)]) })
        // One body in the first chunk of the page (the helper thread's) and one near its end.
        try await db.writer.corruptBodyForTesting(id: "b003")
        try await db.writer.corruptBodyForTesting(id: "b250")
        for limit in [nil, 1000] {
            do {
                _ = try await db.changes(since: 0, limit: limit, includeDocuments: true)
                XCTFail("a corrupt stored body must fail the page")
            } catch let error as DocStoreError {
                XCTAssertEqual(error.code, .storage, "\(error)")
            }
        }
        // Pages that do not reach the corrupt bodies, and the feed without documents, still work.
        let before = try await db.changes(since: 0, limit: 3, includeDocuments: true)
        XCTAssertEqual(before.changes.compactMap { $0.document?.int(forKey: "n") }, [0, 1, 2])
        let between = try await db.changes(since: 4, limit: 240, includeDocuments: true)
        XCTAssertEqual(between.changes.compactMap { $0.document?.int(forKey: "n") }, Array(4..<244))
        let all = try await db.changes()
        XCTAssertEqual(all.changes.count, 300)
    }

    func testCorruptRevisionTreeIsAStorageError() async throws {
        let db = try await makeDatabase(self)
        _ = try await db.save(Document(id: "t", body: ["a": 1]))
        try await db.writer.corruptTreeForTesting(id: "t")
        // The body is intact, so a plain read still works; everything that needs the tree reports it.
        let body = try await db.document(withID: "t")
        XCTAssertEqual(body?.int(forKey: "a"), 1)
        await assertThrowsDocStoreError(.storage) { try await db.document(withID: "t", includeConflicts: true) }
        await assertThrowsDocStoreError(.storage) { try await db.changes() }
        let results = try? await db.save([Document(id: "t", body: [:])])
        XCTAssertNil(results, "a corrupt row fails the batch as a storage error")
        let other = try await db.save(Document(id: "fine", body: [:]))
        XCTAssertEqual(other.revision?.generation, 1)
    }
}
