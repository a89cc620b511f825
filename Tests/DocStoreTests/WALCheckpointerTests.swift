@testable import DocStore
import CSQLite
import Foundation
import XCTest

/// The background checkpointer on plain SQLite connections, with small thresholds so that a few
/// hundred commits cross them.
final class WALCheckpointerTests: XCTestCase {
    /// These tests drive SQLite connections themselves.
    override func invokeTest() {
        ThreadRule.allowing(.testing) { super.invokeTest() }
    }

    /// A WAL-mode file with one table, and its writer connection.
    private func makeWriter() throws -> (SQLiteConnection, String) {
        let path = try makeTemporaryDirectory(self).appendingPathComponent("wal.sqlite").path
        let writer = try SQLiteConnection(path: path)
        let mode = try writer.prepare("PRAGMA journal_mode = WAL")
        XCTAssertTrue(try mode.step())
        XCTAssertEqual(mode.text(0), "wal")
        writer.resetActiveStatements()
        try writer.execute("CREATE TABLE t (n INTEGER PRIMARY KEY, data BLOB NOT NULL)")
        return (writer, path)
    }

    /// Commits `count` transactions of one row with a blob of about a page.
    private func commit(_ count: Int, on writer: SQLiteConnection, from start: Int = 0) throws {
        for n in start..<start + count {
            try writer.transaction(immediate: true) {
                try writer.run("INSERT INTO t (n, data) VALUES (?, ?)", [.integer(Int64(n)), .blob(Array(repeating: 7, count: 3000))])
            }
        }
    }

    private func fileSize(_ path: String) -> Int {
        ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? NSNumber)?.intValue ?? 0
    }

    func testTurnsOffTheWritersOwnCheckpoints() async throws {
        let (writer, _) = try makeWriter()
        defer { writer.close() }
        XCTAssertEqual(try writer.scalarInt("PRAGMA wal_autocheckpoint"), 1000)
        let checkpointer = try WALCheckpointer(writer: writer, synchronous: "NORMAL")
        XCTAssertEqual(try writer.scalarInt("PRAGMA wal_autocheckpoint"), 0)
        await checkpointer.close()
    }

    /// In WAL mode only a checkpoint writes the database file, so its growth shows that the pages
    /// were copied — by the checkpointer's thread, since the writer's own checkpoints are off.
    func testCopiesTheWALInTheBackgroundAfterThresholdPages() async throws {
        let (writer, path) = try makeWriter()
        defer { writer.close() }
        let checkpointer = try WALCheckpointer(writer: writer, synchronous: "NORMAL", thresholdPages: 50, hardLimitPages: 100_000)
        let before = fileSize(path)
        try commit(300, on: writer)
        let deadline = Date.now.addingTimeInterval(20)
        while fileSize(path) < before + 200 * 4096 && Date.now < deadline { usleep(10_000) }
        XCTAssertGreaterThanOrEqual(fileSize(path), before + 200 * 4096, "the WAL was not copied into the database file")
        await checkpointer.close()
        XCTAssertEqual(try writer.scalarInt("SELECT count(*) FROM t"), 300)
    }

    func testBelowTheThresholdNothingIsCopied() async throws {
        let (writer, path) = try makeWriter()
        defer { writer.close() }
        let checkpointer = try WALCheckpointer(writer: writer, synchronous: "NORMAL", thresholdPages: 10_000, hardLimitPages: 100_000)
        let before = fileSize(path)
        try commit(100, on: writer)
        await checkpointer.close()  // waits for any checkpoint that was started
        XCTAssertEqual(fileSize(path), before)
        XCTAssertGreaterThan(fileSize(path + "-wal"), 100 * 4096)
    }

    /// With background checkpoints never due, the hard limit makes the writer copy the WAL itself,
    /// after which the WAL starts over from its beginning instead of growing.
    func testHardLimitBoundsTheWAL() async throws {
        let (writer, path) = try makeWriter()
        defer { writer.close() }
        let checkpointer = try WALCheckpointer(writer: writer, synchronous: "NORMAL", thresholdPages: 100_000, hardLimitPages: 60)
        try commit(600, on: writer)
        await checkpointer.close()
        // One page and a header per frame; 600 commits of a page each would make a WAL of over
        // 600 frames without the limit.
        XCTAssertLessThan(fileSize(path + "-wal"), 150 * 4120)
        XCTAssertEqual(try writer.scalarInt("SELECT count(*) FROM t"), 600)
    }

    /// One transaction that alone takes the WAL past the hard limit does not copy it in its commit;
    /// the next commit, with the WAL still past the limit, does.
    func testOneLargeCommitLeavesTheCopyForLater() async throws {
        let (writer, path) = try makeWriter()
        defer { writer.close() }
        let checkpointer = try WALCheckpointer(writer: writer, synchronous: "NORMAL", thresholdPages: 100_000, hardLimitPages: 60)
        let before = fileSize(path)
        try writer.transaction(immediate: true) {
            for n in 0..<200 { try writer.run("INSERT INTO t (n, data) VALUES (?, ?)", [.integer(Int64(n)), .blob(Array(repeating: 7, count: 3000))]) }
        }
        XCTAssertEqual(fileSize(path), before, "the large commit copied the WAL itself")
        XCTAssertGreaterThan(fileSize(path + "-wal"), 150 * 4096)
        try commit(1, on: writer, from: 200)
        XCTAssertGreaterThan(fileSize(path), before + 150 * 4096, "the next commit past the limit copies the WAL")
        await checkpointer.close()
        XCTAssertEqual(try writer.scalarInt("SELECT count(*) FROM t"), 201)
    }

    /// A database whose writes crossed the threshold many times holds every committed document
    /// after it is closed and opened again.
    func testDatabaseReopensWithEveryDocumentAfterBackgroundCheckpoints() async throws {
        let directory = try makeTemporaryDirectory(self)
        var db = try await Database.open(name: "ckpt", directory: directory)
        let filler = String(repeating: "x", count: 2000)
        for n in 0..<1500 {
            _ = try await db.save(Document(id: String(format: "d%05d", n), body: ["n": .integer(n), "filler": .string(filler)]))
        }
        await db.close()
        db = try await Database.open(name: "ckpt", directory: directory)
        let info = try await db.info()
        XCTAssertEqual(info.documentCount, 1500)
        let last = try await db.document(withID: "d01499")
        XCTAssertEqual(last?.int(forKey: "n"), 1499)
        await db.close()
    }

    /// `checkpoint()` copies what the background threshold has not reached yet.
    func testDatabaseCheckpointCopiesTheLogNow() async throws {
        let directory = try makeTemporaryDirectory(self)
        let db = try await Database.open(name: "now", directory: directory)
        let file = directory.appendingPathComponent("now.sqlite").path
        let filler = String(repeating: "y", count: 2000)
        _ = try await db.save((0..<200).map { Document(id: "d\($0)", body: ["filler": .string(filler)]) })
        let before = fileSize(file)
        XCTAssertLessThan(before, 200 * 2000, "the documents are still only in the WAL")
        try await db.flushWriteAheadLog()
        XCTAssertGreaterThanOrEqual(fileSize(file), 200 * 2000)
        await db.close()
        await assertThrowsDocStoreError(.databaseClosed) { try await db.flushWriteAheadLog() }
    }
}
