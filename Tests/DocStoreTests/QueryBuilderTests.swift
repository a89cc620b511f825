import DocStore
import Foundation
import XCTest

/// The Swift query builder gives the selectors one would write by hand, and the same answers.
final class QueryBuilderTests: XCTestCase {
    func testConditionsAreTheSelectorsWrittenByHand() throws {
        let built = QueryCondition.collection("invoice") && QueryField("total") > 100
            && (QueryField("status") == "open" || QueryField("due") < "2026-12-01")
        XCTAssertEqual(built.json, ["$and": [["type": ["$eq": "invoice"]], ["total": ["$gt": 100]],
                                             ["$or": [["status": ["$eq": "open"]], ["due": ["$lt": "2026-12-01"]]]]]])
        XCTAssertEqual((QueryField("a") >= 1 && QueryField("b") <= 2 && QueryField("c") != 3).json,
                       ["$and": [["a": ["$gte": 1]], ["b": ["$lte": 2]], ["c": ["$ne": 3]]]], "a chain stays flat")
        XCTAssertEqual((!(QueryField("a") == 1)).json, ["$not": ["a": ["$eq": 1]]])
        XCTAssertEqual(QueryField("tags").anyElement(QueryField.element == "swift").json, ["tags": ["$elemMatch": ["$eq": "swift"]]])
        XCTAssertEqual(QueryField("items").everyElement(QueryField("n") > 0 && QueryField("n") < 9).json,
                       ["items": ["$allMatch": ["$and": [["n": ["$gt": 0]], ["n": ["$lt": 9]]]]]])
        XCTAssertEqual(QueryField("v").modulo(2, is: 1).json, ["v": ["$mod": [2, 1]]])
        XCTAssertEqual(QueryField("v").isOfType(.string).json, ["v": ["$type": "string"]])
        XCTAssertEqual(QueryField("v").isMissing.json, ["v": ["$exists": false]])
        XCTAssertEqual(QueryField("meta").anyKey(QueryField.element.matches("^x-")).json, ["meta": ["$keyMapMatch": ["$regex": "^x-"]]])
    }

    func testABuiltQueryFindsWhatTheHandWrittenOneFinds() async throws {
        let db = try await makeDatabase(self)
        _ = try await db.save([
            Document(id: "i1", body: ["type": "invoice", "total": 120, "status": "open", "tags": ["a"]]),
            Document(id: "i2", body: ["type": "invoice", "total": 80, "status": "open", "tags": ["b"]]),
            Document(id: "i3", body: ["type": "invoice", "total": 300, "status": "paid", "due": "2026-11-01", "tags": ["a", "b"]]),
            Document(id: "n1", body: ["type": "note", "total": 500]),
        ])
        try await db.createIndex(fields: [.descending("total")], name: "by-total", designDocument: "invoices")
        let built = try FindQuery(where: .collection("invoice") && QueryField("total") > 100
                                      && (QueryField("status") == "open" || QueryField("due") < "2026-12-01"))
            .sorted(by: .descending("total")).selecting("_id", "total").limited(to: 10)
        var written = FindQuery(selector: try MangoSelector(["type": "invoice", "total": ["$gt": 100],
                                                         "$or": [["status": "open"], ["due": ["$lt": "2026-12-01"]]]]))
        written.sort = [.descending("total")]
        written.fields = ["_id", "total"]
        written.limit = 10
        let (fromBuilder, fromJSON) = (try await db.find(built), try await db.find(written))
        XCTAssertEqual(fromBuilder.documents.map(\.id), ["i3", "i1"])
        XCTAssertEqual(fromBuilder.documents.map(\.id), fromJSON.documents.map(\.id))
        let tagged = try await db.find(try FindQuery(where: QueryField("tags").containsAll(["a", "b"])))
        XCTAssertEqual(tagged.documents.map(\.id), ["i3"])
    }

    func testMisuseThatCompilesIsAClearError() {
        XCTAssertThrowsError(try FindQuery(where: QueryField("a..b") == 1)) { error in
            XCTAssertEqual((error as? DocStoreError)?.code, .invalidFieldName)
        }
        XCTAssertThrowsError(try FindQuery(where: QueryField.element > 5), "an operator on no field") { error in
            XCTAssertEqual((error as? DocStoreError)?.code, .invalidSelector)
        }
        XCTAssertThrowsError(try FindQuery(where: QueryField("v").matches("("))) { error in
            XCTAssertEqual((error as? DocStoreError)?.code, .badArgument)
        }
    }
}
