import DocStore
import Foundation
import XCTest

/// `docstore find` and `docstore index` on a database folder, printing CouchDB's JSON.
final class MangoCommandTests: XCTestCase {
    func testIndexCreateListFindAndDelete() throws {
        let dir = try makeTemporaryDirectory(self)
        for body in [#"{"_id":"a","type":"invoice","total":120}"#, #"{"_id":"b","type":"invoice","total":80}"#,
                     #"{"_id":"c","type":"invoice","total":300}"#, #"{"_id":"d","type":"note"}"#] {
            XCTAssertEqual(try runDocstore(["put", body], in: dir).status, 0)
        }
        let unsorted = try runDocstore(["find", #"{"type":"invoice","total":{"$gt":100}}"#, "--fields", #"["_id"]"#], in: dir)
        XCTAssertEqual(unsorted.status, 0, unsorted.stderr)
        let answer = try JSON(parsing: unsorted.stdout)
        XCTAssertEqual(answer["docs"], [["_id": "a"], ["_id": "c"]])
        XCTAssertEqual(answer["warning"], "No matching index found, create an index to optimize query time.")

        let refused = try runDocstore(["find", #"{"type":"invoice"}"#, "--sort", #"[{"total":"desc"}]"#], in: dir)
        XCTAssertEqual(refused.status, 1)
        XCTAssertTrue(refused.stderr.hasPrefix("docstore: error: no_usable_index"), refused.stderr)

        let created = try runDocstore(["index", "create", #"[{"total":"desc"}]"#, "--name", "by-total", "--ddoc", "invoices"], in: dir)
        XCTAssertEqual(created.status, 0, created.stderr)
        XCTAssertEqual(try JSON(parsing: created.stdout), ["result": "created", "id": "_design/invoices", "name": "by-total"])
        let listed = try JSON(parsing: try runDocstore(["index", "list"], in: dir).stdout)
        XCTAssertEqual(listed["total_rows"], 2)
        XCTAssertEqual(listed["indexes"]?[1]?["def"], ["fields": [["total": "desc"]]])

        let sorted = try runDocstore(["find", #"{"type":"invoice"}"#, "--sort", #"[{"total":"desc"}]"#, "--fields", #"["_id","total"]"#,
                                      "--limit", "2"], in: dir)
        XCTAssertEqual(sorted.status, 0, sorted.stderr)
        let page = try JSON(parsing: sorted.stdout)
        XCTAssertEqual(page["docs"], [["_id": "c", "total": 300], ["_id": "a", "total": 120]])
        let bookmark = try XCTUnwrap(page["bookmark"]?.stringValue)
        let rest = try JSON(parsing: try runDocstore(["find", #"{"type":"invoice"}"#, "--sort", #"[{"total":"desc"}]"#,
                                                      "--fields", #"["_id"]"#, "--bookmark", bookmark], in: dir).stdout)
        XCTAssertEqual(rest["docs"], [["_id": "b"]])
        let plan = try JSON(parsing: try runDocstore(["find", #"{"type":"invoice"}"#, "--sort", #"[{"total":"desc"}]"#, "--explain"], in: dir).stdout)
        XCTAssertEqual(plan["index"]?["name"], "by-total")
        XCTAssertEqual(plan["mrargs"]?["direction"], "rev")

        let deleted = try runDocstore(["index", "delete", "invoices", "by-total"], in: dir)
        XCTAssertEqual(deleted.status, 0, deleted.stderr)
        let again = try runDocstore(["index", "delete", "invoices", "by-total"], in: dir)
        XCTAssertEqual(again.status, 1)
        XCTAssertTrue(again.stderr.hasPrefix("docstore: error: not_found"), again.stderr)
        let bad = try runDocstore(["find", #"{"total":{"$foo":1}}"#], in: dir)
        XCTAssertEqual(bad.status, 1)
        XCTAssertEqual(bad.stderr, "docstore: error: invalid_operator: Invalid operator: $foo\n")
    }
}
