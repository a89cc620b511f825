@testable import DocStore
import Foundation
import TestSupport
import XCTest

/// `SQLiteConnection.prepare` finds a statement again by its text's address before hashing the text:
/// whatever the addresses, it must hand out the statement of exactly the text asked for.
final class StatementCacheTests: XCTestCase {
    func testEveryTextGetsItsOwnStatement() throws {
        let path = try makeTemporaryDirectory(self).appendingPathComponent("cache.sqlite").path
        let connection = try SQLiteConnection(path: path)
        defer { connection.close() }
        try connection.execute("CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1000)")

        // Texts built at run time (new storage on each build, so new addresses, some reused after
        // being freed) far outnumber the 64 slots; literals are asked for in between.
        var generator = SplitMix64(seed: 31)
        for _ in 0..<3000 {
            let n = Int(generator.next() % 300)
            let statement = try connection.prepare("SELECT \(n) + x FROM t")
            XCTAssertTrue(try statement.step())
            XCTAssertEqual(statement.int64(0), Int64(1000 + n), "the statement of another text")
            let literal = try connection.prepare("SELECT x - 1 FROM t")
            XCTAssertTrue(try literal.step())
            XCTAssertEqual(literal.int64(0), 999)
        }

        // The same text is the same statement, whether it comes from a literal or is built; it comes
        // back reset, its previous step and bindings gone.
        let first = try connection.prepare("SELECT x + ? FROM t")
        try first.bind(Int64(5), at: 1)
        XCTAssertTrue(try first.step())
        XCTAssertEqual(first.int64(0), 1005)
        let built = ["SELECT x", "+ ? FROM t"].joined(separator: " ")
        let again = try connection.prepare(built)
        XCTAssertTrue(again === first)
        XCTAssertTrue(try again.step())
        XCTAssertTrue(again.isNull(0), "a binding left over from the previous use")
        XCTAssertTrue(try connection.prepare("SELECT x + ? FROM t") === first)
    }
}
