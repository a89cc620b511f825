import DocStore
import Foundation
import XCTest

/// The examples of Docs/Queries.md, run as written there.
final class QueriesGuideTests: XCTestCase {
    struct Person: Decodable, Equatable {
        let name: String
        let age: Int
    }

    func testGuideExamples() async throws {
        let db = try await makeDatabase(self)
        _ = try await db.save([
            Document(id: "ann", body: ["type": "person", "name": "Ann", "age": 34, "address": ["city": "Paris"], "tags": ["swift"]]),
            Document(id: "bob", body: ["type": "person", "name": "Bob", "age": 12, "address": ["city": "Oslo"], "tags": []]),
            Document(id: "cy", body: ["type": "person", "name": "Cy", "age": 70, "address": ["city": "Paris"], "tags": ["couch"]]),
            Document(id: "dee", body: ["type": "person", "name": "Dee", "age": 18, "address": ["city": "Lyon"], "tags": ["swift", "couch"]]),
        ])

        // Selectors
        let adults = try MangoSelector(["type": "person", "age": ["$gte": 18]])
        let inParis = try MangoSelector(["address.city": "Paris"])
        let tagged = try MangoSelector(["tags": ["$elemMatch": ["$eq": "swift"]]])
        let either = try MangoSelector(["$or": [["age": ["$lt": 13]], ["age": ["$gt": 64]]]])
        let everyone = try await db.allDocuments(AllDocumentsQuery(includeDocuments: true)).rows.compactMap(\.document)
        XCTAssertEqual(everyone.filter(adults.matches).map(\.id), ["ann", "cy", "dee"])
        XCTAssertEqual(everyone.filter(inParis.matches).map(\.id), ["ann", "cy"])
        XCTAssertEqual(everyone.filter(tagged.matches).map(\.id), ["ann", "dee"])
        XCTAssertEqual(everyone.filter(either.matches).map(\.id), ["bob", "cy"])

        // Indexes
        try await db.createIndex(fields: [.ascending("type"), .ascending("age")], name: "by-type-age", designDocument: "people")
        try await db.createIndex(fields: [.ascending("age")], name: "adults", designDocument: "people",
                                 partialFilter: ["age": ["$gte": 18]])
        let indexes = try await db.mangoIndexes()
        XCTAssertEqual(indexes.map(\.name), ["adults", "by-type-age"])
        try await db.deleteIndex(designDocument: "people", name: "adults")

        // Finding
        var query = FindQuery(selector: try MangoSelector(["type": "person", "age": ["$gte": 18]]))
        query.sort = [.ascending("type"), .ascending("age")]
        query.fields = ["name", "age"]
        query.limit = 2
        let page = try await db.find(query)
        XCTAssertEqual(try page.decode(as: Person.self), [Person(name: "Dee", age: 18), Person(name: "Ann", age: 34)])
        query.bookmark = page.bookmark
        let next = try await db.find(query)
        XCTAssertEqual(try next.decode(as: Person.self), [Person(name: "Cy", age: 70)])

        // The query builder
        let builder = try FindQuery(where: .collection("person") && QueryField("age") >= 18
                                        && (QueryField("address.city") == "Paris" || QueryField("tags").anyElement(QueryField.element == "couch")))
            .sorted(by: .ascending("type"), .ascending("age"))
            .selecting("name", "age")
            .limited(to: 10)
        let grownUps = try await db.find(builder).decode(as: Person.self)
        XCTAssertEqual(grownUps, [Person(name: "Dee", age: 18), Person(name: "Ann", age: 34), Person(name: "Cy", age: 70)])

        // Explaining
        query.bookmark = nil
        let plan = try await db.explain(query)
        XCTAssertEqual(plan.index?.name, "by-type-age")
        XCTAssertEqual(plan.startKey, ["person", 18])
        XCTAssertTrue(plan.coversSelector)
        let unsorted = try await db.explain(FindQuery(selector: try MangoSelector(["name": "Ann"])))
        XCTAssertNil(unsorted.index, "no index on name: _all_docs")
        XCTAssertFalse(unsorted.coversSelector)
    }
}
