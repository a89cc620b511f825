@testable import DocStore
import CSQLite
import Foundation
import XCTest

final class StorageTests: XCTestCase {
    /// `SQLiteSettings.apply()` says truly whether SQLite's memory statistics (and their global
    /// mutex) are off: SQLite counts no memory while they are, and counts it once they are on.
    func testSQLiteSettingsReportWhatSQLiteDoes() async throws {
        let directory = try makeTemporaryDirectory(self)
        let db = try await Database.open(name: "settings", directory: directory)
        _ = try await db.save((0..<50).map { Document(id: "d\($0)", body: ["n": .integer($0)]) })
        let applied = SQLiteSettings.apply()
        XCTAssertEqual(SQLiteSettings.apply(), applied, "decided once for the process")
        // A connection of SQLite's own is open meanwhile, so memory is in use whichever way it runs.
        var handle: OpaquePointer?
        XCTAssertEqual(sqlite3_open(":memory:", &handle), SQLITE_OK)
        defer { sqlite3_close(handle) }
        XCTAssertEqual(sqlite3_memory_used() == 0, applied)
        await db.close()
    }

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
        var conflict = Document(id: "doc", revision: RevisionID("1-ffffffffffffffffffffffffffffffff"), body: ["n": "other"])
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
        XCTAssertEqual(fetched.revision, RevisionID("1-ffffffffffffffffffffffffffffffff"), "higher hash wins at equal generation")
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
        for name in ["", "../escape", "a/../b", "a//b", "a/", "/a", ".hidden", "a/.hidden", "sp ace"] {
            await assertThrowsDocStoreError(.badRequest) { try await Database.open(name: name, directory: directory) }
        }
        // As CouchDB keeps them, a name with `/` is a file in a subfolder.
        let nested = try await Database.open(name: "team/notes", directory: directory)
        XCTAssertEqual(nested.name, "team/notes")
        XCTAssertTrue(FileManager.default.fileExists(atPath: directory.appendingPathComponent("team/notes.sqlite").path))
        try await Database.delete(name: "team/notes", directory: directory)
        XCTAssertFalse(Database.exists(name: "team/notes", directory: directory))
        try FileManager.default.removeItem(at: directory.appendingPathComponent("team"))
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
        let (version, application, journal) = try db.readNow { connection in
            (try connection.scalarInt("PRAGMA user_version"), try connection.scalarInt("PRAGMA application_id"),
             try connection.prepare("PRAGMA journal_mode").step())
        }
        XCTAssertEqual(version, Schema.currentVersion)
        XCTAssertEqual(application, Schema.applicationID)
        XCTAssertTrue(journal)
        let mode = try db.readNow { connection -> String in
            let statement = try connection.prepare("PRAGMA journal_mode")
            _ = try statement.step()
            return statement.text(0)
        }
        XCTAssertEqual(mode, "wal")
        // Point reads, the changes feed and `pending` use indexes, never a scan of a table: the feed
        // is a range of the log's primary key, each entry looking its document up by primary key.
        let plans = try db.readNow { connection -> [[String]] in
            var plans: [[String]] = []
            for sql in ["SELECT * FROM docs WHERE id = 'x'",
                        "SELECT \(DocumentRecords.joinedSelectColumns) FROM changes c JOIN docs d ON d.doc = c.doc AND d.seq = c.seq WHERE c.seq > 5 ORDER BY c.seq LIMIT 10",
                        "SELECT count(*) FROM changes WHERE seq > 5 AND (prev IS NULL OR prev <= 5)"] {
                let statement = try connection.prepare("EXPLAIN QUERY PLAN " + sql)
                var plan: [String] = []
                while try statement.step() { plan.append(statement.text(3)) }
                plans.append(plan)
            }
            return plans
        }
        XCTAssertEqual(plans[0].count, 1)
        XCTAssertTrue(plans[0][0].contains("USING INDEX"), "\(plans[0])")
        XCTAssertEqual(plans[1].count, 2, "\(plans[1])")
        XCTAssertTrue(plans[1][0].hasPrefix("SEARCH c USING INTEGER PRIMARY KEY"), "\(plans[1])")
        XCTAssertTrue(plans[1][1].hasPrefix("SEARCH d USING INTEGER PRIMARY KEY"), "\(plans[1])")
        XCTAssertEqual(plans[2].count, 1)
        XCTAssertTrue(plans[2][0].hasPrefix("SEARCH changes USING INTEGER PRIMARY KEY"), "\(plans[2])")
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
        // Without documents, a chunk is 256 rows: one full chunk for the helper, and the rest.
        let all = try await db.changes()
        XCTAssertEqual(all.changes.map(\.id), (0..<300).map { String(format: "b%03d", $0) })
        XCTAssertEqual(all.changes.map(\.sequence), Array(1...300))
        XCTAssertTrue(all.changes.allSatisfy { $0.document == nil && $0.revision.generation == 1 })
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

/// Schema version 2 keeps each document's row in place and reads the changes feed from a log.
final class ChangesLogTests: XCTestCase {
    /// A version-1 file (rows keyed by their latest sequence) opens migrated: same documents, same
    /// feed, exact `pending`, and writes continue after the last sequence.
    func testVersionOneFileIsMigrated() async throws {
        let directory = try makeTemporaryDirectory(self)
        let url = directory.appendingPathComponent("old.sqlite")
        try ThreadRule.allowing(.testing) {
            let connection = try SQLiteConnection(path: url.path)
            defer { connection.close() }
            try Schema.migrate(connection, uuid: { "old-uuid" }, to: 1)
            // Four documents written at sequences 1-4, then "b" updated (5) and "c" deleted (6).
            let rows: [(seq: Int64, id: String, revisions: [String], deleted: Bool, body: String)] = [
                (1, "a", ["1-aaaa"], false, #"{"n":1}"#),
                (4, "d", ["1-dddd"], false, #"{"n":4,"s":"four"}"#),
                (5, "b", ["1-bbbb", "2-bbbb"], false, #"{"n":22}"#),
                (6, "c", ["1-cccc", "2-cccc"], true, "{}"),
            ]
            for row in rows {
                var tree = RevisionTree()
                var parent: RevisionID? = nil
                for (index, text) in row.revisions.enumerated() {
                    let revision = try XCTUnwrap(RevisionID(text))
                    tree.addRevision(revision, parent: parent, isDeleted: row.deleted && index == row.revisions.count - 1)
                    parent = revision
                }
                try connection.run(
                    "INSERT INTO docs (seq, id, rev, deleted, body, tree, created, updated) VALUES (?, ?, ?, ?, ?, ?, 1000, 2000)",
                    [.integer(row.seq), .text(row.id), .text(row.revisions.last!), .integer(row.deleted ? 1 : 0),
                     .blob(Array(row.body.utf8)), .blob(tree.encoded())])
            }
            XCTAssertEqual(try connection.scalarInt("PRAGMA user_version"), 1)
        }

        let db = try await Database.open(name: "old", directory: directory)
        let version = try db.readNow { try $0.scalarInt("PRAGMA user_version") }
        XCTAssertEqual(version, Schema.currentVersion)
        let feed = try await db.changes(includeDocuments: true).changes
        XCTAssertEqual(feed.map(\.id), ["a", "d", "b", "c"])
        XCTAssertEqual(feed.map(\.sequence), [1, 4, 5, 6])
        XCTAssertEqual(feed.map { $0.document?.int(forKey: "n") }, [1, 4, 22, nil])
        XCTAssertEqual(feed.map(\.isDeleted), [false, false, false, true])
        let b = try await db.document(withID: "b")
        XCTAssertEqual(b?.revision?.description, "2-bbbb")
        XCTAssertEqual(b?.sequence, 5)
        XCTAssertEqual(b?.createDate, Date(timeIntervalSince1970: 1000))
        for (since, expected) in [(0, 4), (1, 3), (4, 2), (5, 1), (6, 0)] {
            let pending = try await db.pendingChangeCount(since: Int64(since))
            XCTAssertEqual(pending, expected, "since \(since)")
        }
        // Writes continue after the last sequence, and move the document to the end of the feed.
        let fetched = try await db.document(withID: "a")
        var a = try XCTUnwrap(fetched)
        a["n"] = 100
        a = try await db.save(a)
        XCTAssertEqual(a.sequence, 7)
        let after = try await db.changes(since: 4).changes
        XCTAssertEqual(after.map(\.id), ["b", "c", "a"])
        await db.close()
        let reopened = try await Database.open(name: "old", directory: directory)
        let again = try await reopened.changes().changes
        XCTAssertEqual(again.map(\.id), ["d", "b", "c", "a"])
        let info = try await reopened.info()
        XCTAssertEqual(info.uuid, "old-uuid")
        XCTAssertEqual(info.documentCount, 3)
        await reopened.close()
    }

    /// Random updates, deletions, re-creations, purges and compactions: the feed lists each existing
    /// document once at its latest sequence, pages and descending order agree with it, and `pending`
    /// is exact from every starting point.
    func testFeedAndPendingStayExactThroughUpdatesPurgesAndCompaction() async throws {
        let db = try await makeDatabase(self)
        var g = SplitMix64(seed: 0xFEED)
        let ids = (0..<30).map { String(format: "r%02d", $0) }
        var current: [String: Document] = [:]   // live or deleted; purged ids are absent
        for id in ids { current[id] = try await db.save(Document(id: id, body: ["v": 0])) }
        for step in 1...360 {
            let id = ids[Int(g.next() % UInt64(ids.count))]
            switch g.next() % 10 {
            case 0...5:
                if var doc = current[id], !doc.isDeleted {
                    doc["v"] = .integer(step)
                    current[id] = try await db.save(doc)
                } else {
                    // A deleted document is made again (naming no revision, as CouchDB requires); a
                    // purged id starts again.
                    current[id] = try await db.save(Document(id: id, body: ["v": .integer(step)]))
                }
            case 6, 7:
                if let doc = current[id], !doc.isDeleted {
                    let tombstone = try await db.delete(doc)
                    current[id] = try await db.document(withID: id, revision: tombstone)
                }
            case 8:
                if current[id] != nil {
                    let purged = try await db.purge(documentIDs: [id])
                    XCTAssertEqual(purged, [id])
                    current[id] = nil
                }
            default:
                if step % 3 == 0 { try await db.compact() }
            }
            guard step % 40 == 0 else { continue }
            let feed = try await db.changes(includeDocuments: true).changes
            XCTAssertEqual(Set(feed.map(\.id)), Set(current.keys), "step \(step)")
            XCTAssertEqual(feed.count, current.count)
            XCTAssertEqual(feed.map(\.sequence), feed.map(\.sequence).sorted())
            for change in feed {
                XCTAssertEqual(change.sequence, current[change.id]?.sequence, "\(change.id) at step \(step)")
                XCTAssertEqual(change.revision, current[change.id]?.revision)
                XCTAssertEqual(change.document?.sequence, change.sequence)
            }
            var paged: [Int64] = []
            var since: Int64 = 0
            while true {
                let page = try await db.changes(since: since, limit: 7)
                if page.changes.isEmpty { break }
                paged += page.changes.map(\.sequence)
                since = page.lastSequence
            }
            XCTAssertEqual(paged, feed.map(\.sequence))
            let descending = try await db.changes(descending: true).changes
            XCTAssertEqual(descending.map(\.sequence), feed.map(\.sequence).reversed())
            let last = await db.updateSequence
            for since in stride(from: Int64(0), through: last + 1, by: 3) {
                let pending = try await db.pendingChangeCount(since: since)
                XCTAssertEqual(pending, feed.filter { $0.sequence > since }.count, "since \(since) at step \(step)")
            }
            // Counted again from the earlier counts (nothing was written since them): after a
            // compaction, and from the end back to the start.
            if step % 80 == 0 { try await db.compact() }
            for since in stride(from: last + 2, through: Int64(0), by: -5) {
                let pending = try await db.pendingChangeCount(since: since)
                XCTAssertEqual(pending, feed.filter { $0.sequence > since }.count, "since \(since) backwards at step \(step)")
            }
            for sequence in feed.map(\.sequence) where sequence % 2 == 1 {
                let pending = try await db.pendingChangeCount(since: sequence)
                XCTAssertEqual(pending, feed.filter { $0.sequence > sequence }.count, "since \(sequence) paged at step \(step)")
            }
        }
        // Compaction drops the superseded log entries and keeps one per document.
        try await db.compact()
        let entries = try db.readNow { try $0.scalarInt("SELECT count(*) FROM changes") }
        XCTAssertEqual(entries, Int64(current.count))
    }
}
