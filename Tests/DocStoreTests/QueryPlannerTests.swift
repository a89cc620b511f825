@testable import DocStore
import Foundation
import XCTest

/// The planner against Apache CouchDB 3.3.3's own choices: `Tests/Interop/mango_plan_record.py` made
/// a set of json indexes on a real CouchDB, asked `_explain` for a set of queries and recorded the index
/// it chose with its start key, end key and direction (or its error) in
/// `Tests/Fixtures/mango/plans.json`. Every case must come out the same here.
final class QueryPlannerTests: XCTestCase {
    private func fixture() throws -> JSON {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/mango/plans.json")
        return try JSON(parsing: Data(contentsOf: url))
    }

    func testEveryRecordedQueryIsPlannedAsCouchDBPlannedIt() throws {
        let fixture = try fixture()
        let indexes = try XCTUnwrap(fixture["indexes"]?.arrayValue).map { entry in
            MangoIndex(designDocument: "_design/" + entry["ddoc"]!.stringValue!, name: entry["name"]!.stringValue!,
                       fields: try SortField.list(from: entry["index"]!["fields"]!),
                       partialFilter: try entry["index"]!["partial_filter_selector"].map { try MangoSelector($0) })
        }
        let cases = try XCTUnwrap(fixture["cases"]?.arrayValue)
        XCTAssertGreaterThan(cases.count, 30)
        for recorded in cases where recorded["name"] != nil || recorded["error"] != nil {
            // (The cases recorded for _find only are replayed by MangoFindHTTPTests.)
            let query = recorded["query"]!
            let useIndex: [String] = switch query["use_index"] {
            case .string(let ddoc)?: [ddoc]
            case .array(let parts)?: parts.compactMap(\.stringValue)
            default: []
            }
            let sort = try query["sort"].map(SortField.list(from:)) ?? []
            do {
                let plan = try QueryPlanner.plan(try MangoSelector(query["selector"]!), sort: sort, indexes: indexes, useIndex: useIndex)
                XCTAssertNil(recorded["error"], "\(query): CouchDB answered \(recorded["error"]!)")
                let (ddoc, name): (JSON, String) = switch plan.choice {
                case .allDocuments: (.null, "_all_docs")
                case .json(let index): (.string(index.designDocument), index.name)
                }
                XCTAssertEqual(ddoc, recorded["ddoc"], "\(query)")
                XCTAssertEqual(name, recorded["name"]?.stringValue, "\(query)")
                XCTAssertEqual(plan.shownKeys.start, recorded["start_key"] ?? .null, "start of \(query)")
                XCTAssertEqual(plan.shownKeys.end, recorded["end_key"] ?? .null, "end of \(query)")
                XCTAssertEqual(plan.descending ? "rev" : "fwd", recorded["direction"]?.stringValue, "\(query)")
            } catch let error as DocStoreError {
                XCTAssertEqual(error.couchDBError, recorded["error"]?.stringValue, "\(query): \(error)")
            }
        }
    }

    func testAUseIndexThatCannotServeIsAWarningNotAnError() throws {
        let index = MangoIndex(designDocument: "_design/a", name: "kind-v", fields: [SortField("kind"), SortField("v")])
        let plan = try QueryPlanner.plan(try MangoSelector(["kind": "x"]), sort: [], indexes: [index], useIndex: ["a", "kind-v"])
        XCTAssertEqual(plan.choice, .allDocuments)
        XCTAssertEqual(plan.warning, "_design/a, kind-v was not used because it is not a valid index for this query.")
        let byDesign = try QueryPlanner.plan(try MangoSelector(["kind": "x"]), sort: [], indexes: [index], useIndex: ["_design/a"])
        XCTAssertEqual(byDesign.warning, "_design/a was not used because it does not contain a valid index for this query.")
    }

    /// Found by Tests/Interop/mango_parity.py: CouchDB reads a usable json index even when `_all_docs`
    /// would score as well and has fewer fields, because it tries view indexes before `_all_docs`.
    func testAUsableJSONIndexIsAlwaysPreferredToAllDocs() throws {
        let index = MangoIndex(designDocument: "_design/iid", name: "id-c", fields: [SortField("_id"), SortField("c")])
        let selector = try MangoSelector(["o.y": ["$gt": 10], "c": ["$mod": [-3, 2]]])
        let plan = try QueryPlanner.plan(selector, sort: [], indexes: [index], useIndex: [])
        XCTAssertEqual(plan.choice, .json(index))
        XCTAssertEqual(plan.shownKeys.start, [])
        let unusable = try QueryPlanner.plan(try MangoSelector(["o.y": ["$gt": 10]]), sort: [], indexes: [index], useIndex: [])
        XCTAssertEqual(unusable.choice, .allDocuments, "without `c` required the index is not usable")
    }

    /// CouchDB 3.3.3 answers 500 (`function_clause`) to `_find` and `_explain` when an operand holds
    /// what its usability check cannot walk (null, a list or a many-member object in a list; a
    /// many-member object) and a json index requires no field the selector leaves out — each case
    /// recorded with curl against it, with an index on `c` (and one on `b`). DocStore answers a 400;
    /// the rest works as in CouchDB.
    func testOperandsCouchDBCannotPlanAreA400() throws {
        let byC = MangoIndex(designDocument: "_design/i", name: "c", fields: [SortField("c")])
        let byB = MangoIndex(designDocument: "_design/ib", name: "b", fields: [SortField("b")])
        let failing: [(JSON, [SortField])] = [
            (["c": ["$in": ["b", nil]]], []), (["c": ["$gt": nil], "d": ["$nin": [[1]]]], []),
            (["c": ["$gt": nil], "$or": [["d": ["$in": [nil]]], ["e": 1]]], []), (["c": ["$gt": nil], "d": ["$eq": [nil]]], []),
            (["c": ["$gt": nil], "d": ["$eq": [[1]]]], []), (["c": ["$gt": nil], "d": ["$in": [["a": 1, "b": 2]]]], []),
            (["c": ["$gt": nil], "d": ["$eq": ["a": 1, "b": 2]]], []), (["c": ["$gt": nil], "d": [nil]], []),
            (["c": ["$gt": nil], "d": ["$in": [["a": [nil]]]]], []), (["c": ["$gt": nil], "d": ["$not": ["$in": [nil]]]], []),
            // `_all_docs` answers, but checking the index on `b` fails first.
            (["b": ["$nin": [["a", "b"]]], "_id": ["$gt": nil]], [.descending("_id")]),
        ]
        for (selector, sort) in failing {
            XCTAssertThrowsError(try QueryPlanner.plan(try MangoSelector(selector), sort: sort, indexes: [byC, byB], useIndex: []), "\(selector)") {
                XCTAssertEqual(($0 as? DocStoreError)?.code, .unsupportedOperator, "\(selector)")
            }
        }
        let working: [JSON] = [
            ["c": ["$in": ["b", ["x": 1]]]], ["c": ["$gt": nil], "d": ["$in": [true]]], ["d": ["$in": [nil]]],
            ["c": ["$gt": nil], "d": ["$eq": [1]]], ["c": ["$gt": nil], "d": ["$in": [["a": 1]]]],
            ["c": ["$gt": nil], "d": ["$elemMatch": ["a": 1, "b": 2]]], ["c": ["$gt": nil], "d": ["$eq": [:]]],
            ["c": ["$gt": nil], "d": ["$in": [[:]]]], ["c": ["$gt": nil], "d": nil],
        ]
        for selector in working {
            XCTAssertNoThrow(try QueryPlanner.plan(try MangoSelector(selector), sort: [], indexes: [byC, byB], useIndex: []), "\(selector)")
        }
    }

    /// CouchDB 3.3.3 narrows `$eq v` then `$gt v` on a field of the chosen index (or `_id` under
    /// `_all_docs`) to a range its end key has no case for, and fails with a 500 (`function_clause` in
    /// `mango_idx_view:end_key` / `mango_idx_special:end_key`). The order matters: `$gt v` then `$eq v`
    /// is empty and answers 200. Each case recorded with curl, with an index on `n`.
    func testAnEqualityThenAStrictLowerBoundIsA400AsCouchDBFailsOnIt() throws {
        let byN = MangoIndex(designDocument: "_design/i", name: "n", fields: [SortField("n")])
        let failing: [JSON] = [
            ["$nor": [["_id": ["$ne": nil]]], "_id": ["$gt": nil]], ["$and": [["_id": "a"], ["_id": ["$gt": "a"]]]],
            ["$and": [["n": 5], ["n": ["$gt": 5]]]], ["$and": [["n": ["$gte": 5]], ["n": ["$lte": 5]], ["n": ["$gt": 5]]]],
        ]
        for selector in failing {
            XCTAssertThrowsError(try QueryPlanner.plan(try MangoSelector(selector), sort: [], indexes: [byN], useIndex: []), "\(selector)") {
                XCTAssertEqual(($0 as? DocStoreError)?.code, .unsupportedOperator, "\(selector)")
            }
        }
        let working: [JSON] = [
            ["_id": ["$gt": "a"], "$and": [["_id": "a"]]], ["$and": [["n": ["$gt": 5]], ["n": 5]]], ["$and": [["n": 5], ["n": ["$gte": 5]]]],
        ]
        for selector in working {
            let plan = try QueryPlanner.plan(try MangoSelector(selector), sort: [], indexes: [byN], useIndex: [])
            XCTAssertNotNil(plan.choice, "\(selector)")
        }
    }
}
