@testable import DocStore
import Foundation
import XCTest

/// Mango text indexes (Cloudant Query's `"type": "text"`) and `$text` in `find`.
final class MangoTextIndexTests: XCTestCase {
    private func notesDatabase() async throws -> Database {
        let db = try await makeDatabase(self)
        _ = try await db.save([
            Document(id: "n1", body: ["type": "note", "title": "Green tea", "body": "Brew it at 80 degrees", "year": 2021]),
            Document(id: "n2", body: ["type": "note", "title": "Black tea", "body": "Strong and dark, tea for breakfast", "year": 2019]),
            Document(id: "n3", body: ["type": "note", "title": "Coffee", "body": "Not tea at all", "tags": ["green", "bean"], "year": 2023]),
            Document(id: "r1", body: ["type": "recipe", "title": "Matcha latte", "body": "Green tea powder and milk", "year": 2022]),
            Document(id: "x1", body: ["type": "note", "title": 42, "body": ["nested": "tea"]]),
        ])
        return db
    }

    private func ids(_ result: FindResult) -> [String] { result.documents.map(\.id) }

    func testATextIndexIsStoredAsCouchDBStoresItAndListed() async throws {
        let db = try await notesDatabase()
        let creation = try await db.createTextIndex(fields: ["title", "body"], name: "notes", designDocument: "search")
        XCTAssertEqual(creation, IndexCreation(designDocument: "_design/search", name: "notes", created: true))
        let again = try await db.createTextIndex(fields: ["title", "body"], name: "notes", designDocument: "search")
        XCTAssertFalse(again.created)
        let stored = try await db.document(withID: "_design/search")
        let ddoc = try XCTUnwrap(stored)
        XCTAssertEqual(ddoc["language"], "query")
        XCTAssertEqual(ddoc["indexes"]?["notes"], [
            "index": ["default_analyzer": "keyword", "default_field": [:], "selector": [:], "partial_filter_selector": [:],
                      "fields": [["name": "title", "type": "string"], ["name": "body", "type": "string"]], "index_array_lengths": true],
            "analyzer": ["name": "perfield", "default": "keyword", "fields": ["$default": "standard"]],
        ])
        let indexes = try await db.mangoIndexes()
        XCTAssertEqual(indexes.map(\.type), [.text])
        XCTAssertEqual(indexes.first?.listingJSON, [
            "ddoc": "_design/search", "name": "notes", "type": "text", "partitioned": false,
            "def": ["default_analyzer": "keyword", "default_field": [:], "selector": [:],
                    "fields": [["title": "string"], ["body": "string"]], "index_array_lengths": true],
        ])
        try await db.deleteIndex(designDocument: "search", name: "notes", type: .text)
        let gone = try await db.document(withID: "_design/search")
        XCTAssertNil(gone, "the design document had nothing else")
        await assertThrowsDocStoreError(.notFound) { try await db.deleteIndex(designDocument: "search", name: "notes", type: .text) }
    }

    func testTextFindAloneCombinedSortedAndPaged() async throws {
        let db = try await notesDatabase()
        try await db.createTextIndex(fields: ["title", "body"], name: "notes", designDocument: "search")
        var result = try await db.find(FindQuery(selector: try MangoSelector(["$text": "tea"])))
        XCTAssertEqual(Set(ids(result)), ["n1", "n2", "n3", "r1"], "strings only: x1's body is an object")
        XCTAssertEqual(ids(result).first, "n2", "by relevance: n2 has tea in both fields")
        result = try await db.find(FindQuery(selector: try MangoSelector(["$text": "green tea", "type": "note"])))
        XCTAssertEqual(ids(result), ["n1"], "$text and other clauses; tags are not indexed")
        result = try await db.find(FindQuery(selector: try MangoSelector(["$and": [["$text": "tea NOT coffee"], ["year": ["$gte": 2020]]]])))
        XCTAssertEqual(Set(ids(result)), ["n1", "r1"], "$text inside a top-level $and")
        var sorted = FindQuery(selector: try MangoSelector(["$text": "tea"]))
        sorted.sort = [.descending("year")]
        result = try await db.find(sorted)
        XCTAssertEqual(ids(result), ["n3", "r1", "n1", "n2"], "sorted, not by relevance")
        var paged = FindQuery(selector: try MangoSelector(["$text": "tea"]))
        paged.sort = [.ascending("year")]
        paged.limit = 3
        paged.fields = ["_id"]
        let first = try await db.find(paged)
        XCTAssertEqual(ids(first), ["n2", "n1", "r1"])
        paged.bookmark = try XCTUnwrap(first.bookmark)
        let second = try await db.find(paged)
        XCTAssertEqual(ids(second), ["n3"])
        var skipped = FindQuery(selector: try MangoSelector(["$text": "tea"]))
        skipped.sort = [.ascending("year")]
        skipped.skip = 1
        skipped.limit = 1
        skipped.executionStatistics = true
        result = try await db.find(skipped)
        XCTAssertEqual(ids(result), ["n1"])
        XCTAssertEqual(result.executionStatistics?.totalDocumentsExamined, 4)
        let explained = try await db.explain(FindQuery(selector: try MangoSelector(["$text": "tea", "type": "note"])))
        XCTAssertEqual(explained.index?.name, "notes")
        XCTAssertEqual(explained.selector, ["$and": [["$default": ["$text": "tea"]], ["type": ["$eq": "note"]]]])
    }

    func testEveryStringWithoutFieldsArraysPartialFiltersAndUseIndex() async throws {
        let db = try await notesDatabase()
        try await db.createTextIndex(name: "everything", designDocument: "all")
        try await db.createTextIndex(fields: ["tags"], name: "tags", designDocument: "tags", partialFilter: ["type": "note"])
        var query = FindQuery(selector: try MangoSelector(["$text": "bean OR nested OR recipe"]))
        query.useIndex = ["all"]
        var result = try await db.find(query)
        XCTAssertEqual(Set(ids(result)), ["n3", "r1"], "every string, arrays too; objects' strings by path; not nested's key")
        result = try await db.find(FindQuery(selector: try MangoSelector(["$text": "tea"])))
        XCTAssertEqual(Set(ids(result)), ["n1", "n2", "n3", "r1", "x1"], "the first text index: every string, x1's body.nested too")
        query = FindQuery(selector: try MangoSelector(["$text": "green"]))
        query.useIndex = ["_design/tags", "tags"]
        result = try await db.find(query)
        XCTAssertEqual(ids(result), ["n3"], "only the tags of notes")
        query.useIndex = ["nope"]
        result = try await db.find(query)
        XCTAssertEqual(result.warning, "nope was not used because it is not a valid index for this query.")
    }

    func testTextSelectorsThatCannotBeAnswered() async throws {
        let db = try await notesDatabase()
        // No text index: as CouchDB 3.3.3 answers (recorded with curl), `$text` holds for every
        // document — its matcher believes the text index — and the rest of the selector decides.
        var unindexed = try await db.find(FindQuery(selector: try MangoSelector(["$text": "no such word"])))
        XCTAssertEqual(ids(unindexed), ["n1", "n2", "n3", "r1", "x1"])
        XCTAssertEqual(unindexed.warning, "No matching index found, create an index to optimize query time.")
        unindexed = try await db.find(FindQuery(selector: try MangoSelector(["$or": [["$text": "x"], ["year": 1]], "type": "recipe"])))
        XCTAssertEqual(ids(unindexed), ["r1"], "$text inside $or holds too")
        unindexed = try await db.find(FindQuery(selector: try MangoSelector(["$and": [["$text": "x"], ["$text": "y"]], "type": "recipe"])))
        XCTAssertEqual(ids(unindexed), ["r1"], "two $text hold as well")
        assertThrowsDocStoreErrorSync(.badArgument) { try MangoSelector(["$nor": [["$text": "x"]]]) }
        assertThrowsDocStoreErrorSync(.badArgument) { try MangoSelector(["$or": [["type": "a"], ["$not": ["$text": "x"]]]]) }
        try await db.createIndex(fields: [.ascending("year")], name: "year")
        unindexed = try await db.find(FindQuery(selector: try MangoSelector(["$text": 2021, "year": ["$gt": 2020]])))
        XCTAssertEqual(ids(unindexed), ["n1", "n3", "r1"], "a number is a $text too")
        XCTAssertEqual(unindexed.warning, "No matching index found, create an index to optimize query time.",
                       "to CouchDB a selector with $text is a text search: no json index is usable")
        var sorted = FindQuery(selector: try MangoSelector(["$text": 2021, "year": ["$gt": 2020]]))
        sorted.sort = [.ascending("year")]
        await assertThrowsDocStoreError(.noUsableIndex) { try await db.find(sorted) }
        // With a text index, a $text it cannot search is refused.
        try await db.createTextIndex(fields: ["title"], name: "titles", designDocument: "search")
        await assertThrowsDocStoreError(.unsupportedOperator) {
            try await db.find(FindQuery(selector: try MangoSelector(["$or": [["$text": "tea"], ["year": 1]]])))
        }
        assertThrowsDocStoreErrorSync(.badField) { try MangoSelector(["title": ["$text": "tea"]]) }
        assertThrowsDocStoreErrorSync(.badArgument) { try MangoSelector(["$text": ["tea"]]) }
        let both = try MangoSelector(["$text": "green", "$and": [["$text": "tea OR coffee"]]])
        XCTAssertEqual(try both.textQuery()?.root, try TextQuery("green (tea OR coffee)").root, "several $text are one conjunction")
        let greenTea = try await db.find(FindQuery(selector: both))
        XCTAssertEqual(ids(greenTea), ["n1"])
        await assertThrowsDocStoreError(.invalidQuery) { try await db.find(FindQuery(selector: try MangoSelector(["$text": "tea AND"]))) }
        assertThrowsDocStoreErrorSync(.unsupportedOperator) { try MangoSelector(["$text": "tea"]).withoutText(for: "changes") }
        assertThrowsDocStoreErrorSync(.unsupportedOperator) { try MangoSelector(["$or": [["$text": "tea"]]]).withoutText(for: "changes") }
        await assertThrowsDocStoreError(.unsupportedOperator) {
            try await db.createIndex(fields: [.ascending("year")], partialFilter: ["$text": "tea"])
        }
    }

    func testATextIndexArrivingInADesignDocumentIsBuilt() async throws {
        let db = try await notesDatabase()
        // As CouchDB with a search service writes it (here with the `{path: type}` field form, and a
        // number field, which is not full-text and is left out).
        _ = try await db.save(Document(id: "_design/replicated", body: [
            "language": "query",
            "indexes": ["byTitle": ["index": ["fields": [["title": "string"], ["year": "number"]], "selector": ["type": "recipe"]],
                                    "analyzer": "standard"]],
        ]))
        let indexes = try await db.mangoIndexes()
        XCTAssertEqual(indexes.map(\.name), ["byTitle"])
        XCTAssertEqual(indexes.first?.fields, [SortField("title")])
        let result = try await db.find(FindQuery(selector: try MangoSelector(["$text": "matcha OR tea"])))
        XCTAssertEqual(ids(result), ["r1"], "the selector of the definition is its partial filter")
        let search = try await db.search(index: try XCTUnwrap(indexes.first?.indexName), query: "latte", snippets: true)
        XCTAssertEqual(search.rows.map(\.snippet), ["Matcha [latte]"])
        XCTAssertEqual(search.rows.first?.value, "title", "the value is the field's path")
    }

    func testATextIndexIsSearchableByNameRightAfterOpening() async throws {
        let directory = try makeTemporaryDirectory(self)
        var db = try await Database.open(name: "notes", directory: directory)
        _ = try await db.save(Document(id: "a", body: ["title": "Green tea"]))
        try await db.createTextIndex(fields: ["title"], name: "titles", designDocument: "search")
        let name = try await db.mangoIndexes().first!.indexName
        await db.close()
        db = try await Database.open(name: "notes", directory: directory)
        // No Mango call yet: the design documents are read on demand.
        let found = try await db.search(index: name, query: "tea")
        XCTAssertEqual(found.rows.map(\.documentID), ["a"])
        await db.close()
    }
}
