import DocStore
import Foundation
import XCTest

final class CLITests: XCTestCase {
    func testPutGetAllChangesInfoDelete() throws {
        let dir = try makeTemporaryDirectory(self)
        let put = try runDocstore(["put", #"{"_id":"ada","name":"Ada","born":1815}"#], in: dir)
        XCTAssertEqual(put.status, 0, put.stderr)
        let written = try JSON(parsing: put.stdout)
        XCTAssertEqual(written["ok"], true)
        XCTAssertEqual(written["id"], "ada")
        let rev = try XCTUnwrap(written["rev"]?.stringValue)
        XCTAssertTrue(rev.hasPrefix("1-"))

        let fromStdin = try runDocstore(["put"], input: #"{"name":"generated"}"#, in: dir)
        XCTAssertEqual(fromStdin.status, 0, fromStdin.stderr)
        XCTAssertEqual(try JSON(parsing: fromStdin.stdout)["id"]?.stringValue?.count, 32)

        let get = try runDocstore(["get", "ada"], in: dir)
        XCTAssertEqual(get.status, 0)
        XCTAssertEqual(try JSON(parsing: get.stdout), ["_id": "ada", "_rev": .string(rev), "name": "Ada", "born": 1815])

        let update = try runDocstore(["put", #"{"_id":"ada","_rev":"\#(rev)","name":"Ada Lovelace"}"#], in: dir)
        XCTAssertEqual(update.status, 0, update.stderr)
        let stale = try runDocstore(["put", #"{"_id":"ada","_rev":"\#(rev)","name":"stale"}"#], in: dir)
        XCTAssertEqual(stale.status, 1)
        XCTAssertEqual(stale.stderr, "docstore: error: conflict: Document update conflict.\n")
        XCTAssertEqual(stale.stdout, "")

        let all = try JSON(parsing: try runDocstore(["all"], in: dir).stdout)
        XCTAssertEqual(all["total_rows"], 2)
        let rows = try XCTUnwrap(all["rows"]?.arrayValue)
        let ids = rows.compactMap { $0["id"]?.stringValue }
        XCTAssertEqual(ids, ids.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }, "byte order of ids")
        let ada = try XCTUnwrap(rows.first { $0["id"] == "ada" })
        XCTAssertEqual(ada["value"]?["rev"]?.stringValue?.prefix(2), "2-")

        let changes = try JSON(parsing: try runDocstore(["changes", "--since", "2"], in: dir).stdout)
        XCTAssertEqual(changes["results"]?.arrayValue?.count, 1)
        XCTAssertEqual(changes["results"]?[0]?["id"], "ada")
        XCTAssertEqual(changes["last_seq"], 3)
        XCTAssertEqual(changes["pending"], 0)
        let first = try JSON(parsing: try runDocstore(["changes", "--limit", "1"], in: dir).stdout)
        XCTAssertEqual(first["pending"], 1)

        let delete = try runDocstore(["delete", "ada"], in: dir)
        XCTAssertEqual(delete.status, 0, delete.stderr)
        XCTAssertTrue(try JSON(parsing: delete.stdout)["rev"]!.stringValue!.hasPrefix("3-"))
        let missing = try runDocstore(["get", "ada"], in: dir)
        XCTAssertEqual(missing.status, 1)
        XCTAssertTrue(missing.stderr.hasPrefix("docstore: error: not_found"), missing.stderr)

        let info = try JSON(parsing: try runDocstore(["info"], in: dir).stdout)
        XCTAssertEqual(info["doc_count"], 1)
        XCTAssertEqual(info["doc_del_count"], 1)
        XCTAssertEqual(info["update_seq"], 4)
        XCTAssertTrue(FileManager.default.fileExists(atPath: dir.appendingPathComponent("docstore-data/default.sqlite").path))
    }

    func testBadInputGivesOneClearLineAndNonZeroExit() throws {
        let dir = try makeTemporaryDirectory(self)
        let cases: [([String], String?, String)] = [
            (["put", "not json"], nil, "docstore: error: bad_request: Invalid literal at byte offset 0"),
            (["put", #"{"a":1,}"#], nil, "docstore: error: bad_request: Expected a string key but found character '}' at byte offset 7"),
            (["put", "[1,2]"], nil, "docstore: error: doc_validation: Document must be a JSON object"),
            (["put"], "", "docstore: error: bad_request: no document JSON given"),
            (["put", #"{"_id":"_foo"}"#], nil, #"docstore: error: illegal_docid: Only reserved document ids may start with underscore."#),
            (["put", #"{"_id":""}"#], nil, "docstore: error: illegal_docid: Document id must not be empty"),
            (["put", #"{"_id":"x","_private":1}"#], nil, "docstore: error: doc_validation: Bad special document member: _private"),
            (["put", #"{"_id":"x","_rev":"banana"}"#], nil, #"docstore: error: bad_request: Invalid rev format: "banana""#),
            (["get", "x", "--rev", "nope"], nil, #"docstore: error: bad_request: Invalid rev format "nope""#),
            (["get", "x"], nil, "docstore: error: not_found: missing (x)"),
        ]
        for (arguments, input, expected) in cases {
            let result = try runDocstore(arguments, input: input, in: dir)
            XCTAssertEqual(result.status, 1, "\(arguments)")
            XCTAssertEqual(result.stderr, expected + "\n", "\(arguments)")
            XCTAssertEqual(result.stdout, "", "\(arguments)")
        }
        // A file that is not a DocStore database.
        try Data("garbage garbage garbage garbage garbage garbage garbage garbage garbage".utf8)
            .write(to: dir.appendingPathComponent("junk.sqlite"))
        let foreign = try runDocstore(["info", "--db", "junk"], in: dir)
        XCTAssertEqual(foreign.status, 1)
        XCTAssertTrue(foreign.stderr.hasPrefix("docstore: error: bad_request: "), foreign.stderr)
        XCTAssertTrue(foreign.stderr.contains("is not a DocStore database"), foreign.stderr)
        XCTAssertEqual(foreign.stderr.filter { $0 == "\n" }.count, 1)
    }

    func testBatchedImportSavesWhatItCan() throws {
        let dir = try makeTemporaryDirectory(self)
        let ndjson = """
            {"_id":"a","n":1}
            {"_id":"b","_attachments":{"t.txt":{"content_type":"text/plain","data":"aGVsbG8="}}}

            {"_id":"c","_bad":true}
            {broken
            {"_id":"d","n":4}
            """
        let imported = try runDocstore(["import", "--db", "src/db", "--batch-size", "2"], input: ndjson, in: dir)
        XCTAssertEqual(imported.status, 1, "some lines failed")
        XCTAssertEqual(imported.lines.count, 5)
        XCTAssertEqual(imported.lines.filter { $0.contains(#""ok":true"#) }.count, 3)
        XCTAssertTrue(imported.stdout.contains(#"{"line":5,"error":"bad_request""#), imported.stdout)

        let exported = try runDocstore(["export", "--db", "src/db", "--format", "ndjson"], in: dir)
        XCTAssertEqual(exported.status, 0)
        guard exported.lines.count == 3 else {
            return XCTFail("export printed \(exported.lines.count) lines: \(exported.stdout)")
        }
        XCTAssertTrue(exported.lines[1].contains(#""data":"aGVsbG8=""#), exported.lines[1])

        let reimported = try runDocstore(["import", "--db", "copy/db", "--batch-size", "10", "--keep-revisions"],
                                         input: exported.stdout, in: dir)
        XCTAssertEqual(reimported.status, 0, reimported.stdout)
        let original = try JSON(parsing: try runDocstore(["get", "d", "--db", "src/db"], in: dir).stdout)
        let copy = try JSON(parsing: try runDocstore(["get", "d", "--db", "copy/db"], in: dir).stdout)
        XCTAssertEqual(copy, original, "revisions are kept")
    }

    func testExportAndImportAllOrNothing() throws {
        let dir = try makeTemporaryDirectory(self)
        for json in [#"{"_id":"a","n":1}"#, #"{"_id":"b","n":2,"_attachments":{"t.txt":{"content_type":"text/plain","data":"aGVsbG8="}}}"#] {
            XCTAssertEqual(try runDocstore(["put", json, "--db", "src/db"], in: dir).status, 0)
        }
        let rev = try JSON(parsing: try runDocstore(["get", "a", "--db", "src/db"], in: dir).stdout)["_rev"]!.stringValue!
        XCTAssertEqual(try runDocstore(["put", #"{"_id":"a","_rev":"\#(rev)","n":10}"#, "--db", "src/db"], in: dir).status, 0)

        // Full JSON by default: one array, with revisions and attachments.
        let full = try runDocstore(["export", "--db", "src/db"], in: dir)
        XCTAssertEqual(full.status, 0, full.stderr)
        let records = try XCTUnwrap(JSON(parsing: full.stdout).arrayValue)
        XCTAssertEqual(records.map { $0["_id"]! }, ["a", "b"])
        XCTAssertEqual(records[0]["_revisions"]?["start"], 2)
        XCTAssertEqual(records[1]["_attachments"]?["t.txt"]?["data"], "aGVsbG8=")
        let file = dir.appendingPathComponent("full.json")
        try Data(full.stdout.utf8).write(to: file)
        let imported = try runDocstore(["import", "--db", "copy/db", file.path], in: dir)
        XCTAssertEqual(imported.stdout, #"{"ok":true,"records":2,"revisions_written":2}"# + "\n")
        let original = try JSON(parsing: try runDocstore(["get", "a", "--db", "src/db"], in: dir).stdout)
        let copy = try JSON(parsing: try runDocstore(["get", "a", "--db", "copy/db"], in: dir).stdout)
        XCTAssertEqual(copy, original, "the revision is kept")

        // Compact NDJSON: current values only.
        let compact = try runDocstore(["export", "--db", "src/db", "--format", "ndjson", "--compact"], in: dir)
        XCTAssertEqual(compact.lines, [#"{"_id":"a","n":10}"#, #"{"_id":"b","n":2}"#])
        let selected = try runDocstore(["export", "--db", "src/db", "--compact", "--selector", #"{"n":{"$gt":5}}"#], in: dir)
        XCTAssertEqual(try JSON(parsing: selected.stdout), [["_id": "a", "n": 10]])

        // A bad line: nothing imported, the line named.
        let bad = try runDocstore(["import", "--db", "fresh/db"], input: #"{"_id":"x"}"# + "\n" + #"{"_id":"y","#, in: dir)
        XCTAssertEqual(bad.status, 1)
        XCTAssertTrue(bad.stderr.hasPrefix("docstore: error: bad_request: line 2 is not valid JSON at byte "), bad.stderr)
        let info = try JSON(parsing: try runDocstore(["info", "--db", "fresh/db"], in: dir).stdout)
        XCTAssertEqual(info["doc_count"], 0)
    }

    func testQueryOnADatabaseBuiltWithPut() throws {
        let dir = try makeTemporaryDirectory(self)
        let people: [(String, String, Int)] = [("ann", "Paris", 30), ("bob", "Lyon", 25), ("cid", "paris", 41),
                                               ("dan", "Paris", 19), ("eve", "Nice", 33)]
        for (id, city, age) in people {
            let put = try runDocstore(["put", #"{"_id":"\#(id)","address":{"city":"\#(city)"},"age":\#(age)}"#], in: dir)
            XCTAssertEqual(put.status, 0, put.stderr)
        }
        _ = try runDocstore(["put", #"{"_id":"nocity","age":1}"#], in: dir)

        let all = try JSON(parsing: try runDocstore(["query", "--by", "address.city"], in: dir).stdout)
        XCTAssertEqual(all["total_rows"], 5)
        XCTAssertEqual(all["rows"]?.arrayValue?.map { $0["key"]! }, ["Lyon", "Nice", "paris", "Paris", "Paris"])
        XCTAssertEqual(all["rows"]?.arrayValue?.map { $0["id"]! }, ["bob", "eve", "cid", "ann", "dan"])

        let paris = try JSON(parsing: try runDocstore(["query", "--by", "address.city", "--key", #""Paris""#, "--include-docs"], in: dir).stdout)
        XCTAssertEqual(paris["rows"]?.arrayValue?.count, 2)
        XCTAssertEqual(paris["offset"], 3)
        XCTAssertEqual(paris["rows"]?[0]?["doc"]?["age"], 30)

        let counts = try JSON(parsing: try runDocstore(["query", "--by", "address.city", "--reduce", "count", "--group"], in: dir).stdout)
        XCTAssertEqual(counts, ["rows": [["key": "Lyon", "value": 1], ["key": "Nice", "value": 1], ["key": "paris", "value": 1], ["key": "Paris", "value": 2]]])

        let ages = try JSON(parsing: try runDocstore(["query", "--by", "address.city", "--value", "age", "--reduce", "stats",
                                                      "--start-key", #""p""#, "--end-key", #""Paris""#], in: dir).stdout)
        XCTAssertEqual(ages["rows"]?[0]?["value"], ["sum": 90, "count": 3, "min": 19, "max": 41, "sumsqr": 2942])

        let byAge = try JSON(parsing: try runDocstore(["query", "--by", "age", "--descending", "--limit", "2", "--skip", "1"], in: dir).stdout)
        XCTAssertEqual(byAge["rows"]?.arrayValue?.map { $0["key"]! }, [33, 30])
        let keys = try JSON(parsing: try runDocstore(["query", "--by", "age", "--keys", "[25,99,1]"], in: dir).stdout)
        XCTAssertEqual(keys["rows"]?.arrayValue?.map { $0["id"]! }, ["bob", "nocity"])

        // The index is kept and updated incrementally: a new document shows up in the next query.
        _ = try runDocstore(["put", #"{"_id":"fay","address":{"city":"Lyon"}}"#], in: dir)
        let lyon = try JSON(parsing: try runDocstore(["query", "--by", "address.city", "--key", #""Lyon""#], in: dir).stdout)
        XCTAssertEqual(lyon["rows"]?.arrayValue?.map { $0["id"]! }, ["bob", "fay"])

        let bad = try runDocstore(["query", "--by", "age", "--start-key", "{oops"], in: dir)
        XCTAssertEqual(bad.status, 1)
        XCTAssertTrue(bad.stderr.hasPrefix("docstore: error: bad_request: --start-key is not valid JSON"), bad.stderr)
        let wrongWay = try runDocstore(["query", "--by", "age", "--start-key", "50", "--end-key", "10"], in: dir)
        XCTAssertEqual(wrongWay.status, 1)
        XCTAssertTrue(wrongWay.stderr.hasPrefix("docstore: error: query_parse_error: No rows can match"), wrongWay.stderr)
        let badReduce = try runDocstore(["query", "--by", "age", "--reduce", "median"], in: dir)
        XCTAssertNotEqual(badReduce.status, 0)
    }
}
