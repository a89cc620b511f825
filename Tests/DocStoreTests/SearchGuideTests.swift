import DocStore
import Foundation
import XCTest

/// The examples of Docs/Search.md, run as written there: every ```swift block of the guide must
/// appear in this file (indented as in a test body).
final class SearchGuideTests: XCTestCase {
    func testGuideExamples() async throws {
        let db = try await makeDatabase(self)
        _ = try await db.save([
            Document(id: "n1", body: ["type": "note", "title": "Green tea", "body": "Brew green tea at 80 degrees for two minutes."]),
            Document(id: "n2", body: ["type": "note", "title": "Matcha", "body": "Whisk the powder; no green tea is greener."]),
            Document(id: "n3", body: ["type": "note", "title": "Black tea", "body": "Searching for the strongest breakfast tea."]),
            Document(id: "n4", body: ["type": "recipe", "title": "Chai", "body": "Black tea, milk and spices, searched for in every market."]),
        ])

        // A full-text index
        let notes = IndexDefinition(name: "notes-text", version: "1") { doc, emit in
            if let title = doc["title"]?.stringValue { emit(FullTextSearch.createKey(title), "title") }
            if let body = doc["body"]?.stringValue { emit(FullTextSearch.createKey(body), "body") }
        }
        try await db.register(notes)
        let result = try await db.search(index: "notes-text", query: "\"green tea\" OR matcha", snippets: true, limit: 10)
        for row in result.rows {
            print(row.documentID, row.score, row.snippet ?? "", row.value)
        }
        XCTAssertEqual(result.rows.map(\.documentID).sorted(), ["n1", "n2"])
        XCTAssertEqual(result.totalRows, 2)
        XCTAssertTrue(result.rows.allSatisfy { $0.snippet?.contains("[") == true })

        // Options
        var search = try SearchQuery("tea NOT (milk OR matcha)")
        search.includeDocuments = true
        search.skip = 0
        search.limit = 10
        let page = try await db.search(index: "notes-text", search)
        XCTAssertEqual(page.rows.map(\.documentID).sorted(), ["n1", "n3"])
        XCTAssertEqual(page.rows.first?.document?.type, "note")

        // Live searches
        for try await result in db.observe(index: "notes-text", search: try SearchQuery("matcha")) {
            print(result.totalRows)   // 1
            break
        }

        // Stemming
        var stemmed = IndexDefinition(name: "notes-stemmed", version: "1", map: notes.map)
        stemmed.fullTextStemming = .english
        try await db.register(stemmed)
        let searching = try await db.search(index: "notes-stemmed", query: "search")
        XCTAssertEqual(searching.rows.map(\.documentID).sorted(), ["n3", "n4"], "searching, searched")
        let unstemmed = try await db.search(index: "notes-text", query: "search")
        XCTAssertEqual(unstemmed.totalRows, 0)

        // Text indexes
        try await db.createTextIndex(fields: ["title", "body"], name: "notes", designDocument: "search")
        let teaNotes = try await db.find(FindQuery(selector: try MangoSelector(["$text": "tea", "type": "note"])))
        XCTAssertEqual(teaNotes.documents.map(\.id).sorted(), ["n1", "n2", "n3"])

        // Errors
        do {
            _ = try await db.search(index: "notes-text", query: "green AND")
        } catch let error as DocStoreError {
            print(error.reason)   // Malformed full-text query at character 7: AND has nothing after it
        }
        let error = await assertThrowsDocStoreError(.invalidQuery) { try await db.search(index: "notes-text", query: "green AND") }
        XCTAssertEqual(error?.reason, "Malformed full-text query at character 7: AND has nothing after it")

        try assertGuideBlocksAreIn(guide: "Search.md", minimumBlocks: 6)
    }
}
