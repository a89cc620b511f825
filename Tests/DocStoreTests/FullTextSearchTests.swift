@testable import DocStore
import Foundation
import XCTest

/// Full-text indexes and `search` against Docs/Search.md: each syntax element and its precedence,
/// folding, fields, NEAR distances, prefixes, deletions and updates, snippets, ranking, errors — and a
/// seeded comparison of hundreds of random queries with a reference evaluator of §8 written here.
final class FullTextSearchTests: XCTestCase {
    /// `text`: each document's `fields` (an array of strings) are its fields; `value` is the field's
    /// position.
    private static let fieldsIndex = IndexDefinition(name: "text", version: "1") { doc, emit in
        guard case .array(let fields)? = doc["fields"] else { return }
        for (position, field) in fields.enumerated() {
            if let text = field.stringValue { emit(FullTextSearch.createKey(text), .integer(position)) }
        }
    }

    private func database(_ documents: [String: [String]], indexes: [IndexDefinition] = [fieldsIndex]) async throws -> Database {
        let db = try await makeDatabase(self) { $0.indexes = indexes }
        _ = try await db.save(documents.sorted { $0.key < $1.key }.map { id, fields in
            Document(id: id, body: ["fields": .array(fields.map { .string($0) })])
        })
        return db
    }

    private func ids(_ db: Database, _ query: String, index: String = "text") async throws -> [String] {
        try await db.search(index: index, query: query).rows.map(\.documentID).sorted()
    }

    func testWordsImplicitAndExplicitOperatorsAndPrecedence() async throws {
        let db = try await database([
            "a": ["apple pie with cream"], "b": ["apple crumble"], "c": ["pear pie"], "d": ["cream and sugar"],
            "e": ["apple and pear"],
        ])
        var result = try await ids(db, "apple")
        XCTAssertEqual(result, ["a", "b", "e"])
        result = try await ids(db, "apple pie")
        XCTAssertEqual(result, ["a"], "words side by side are ANDed")
        result = try await ids(db, "apple AND pie")
        XCTAssertEqual(result, ["a"])
        result = try await ids(db, "crumble OR pear")
        XCTAssertEqual(result, ["b", "c", "e"])
        result = try await ids(db, "apple NOT pie")
        XCTAssertEqual(result, ["b", "e"])
        result = try await ids(db, "pie OR apple crumble")
        XCTAssertEqual(result, ["a", "b", "c"], "AND binds tighter than OR: pie OR (apple AND crumble)")
        result = try await ids(db, "(pie OR apple) crumble")
        XCTAssertEqual(result, ["b"], "parentheses group")
        result = try await ids(db, "apple NOT pie OR sugar")
        XCTAssertEqual(result, ["b", "d", "e"], "NOT binds tighter than OR")
        result = try await ids(db, "apple pear NOT pie")
        XCTAssertEqual(result, ["e"], "NOT binds tighter than AND: apple AND (pear NOT pie)")
        result = try await ids(db, "apple and")
        XCTAssertEqual(result, ["e"], "lower-case operators are words")
        result = try await ids(db, "\"apple AND pear\"")
        XCTAssertEqual(result, ["e"], "inside quotes everything is words")
        result = try await ids(db, "banana")
        XCTAssertEqual(result, [])
    }

    func testCaseAndDiacriticsFoldInDocumentsAndQueries() async throws {
        let db = try await database(["a": ["Café CRÈME brûlée"], "b": ["cafe creme"], "c": ["Ἀθῆναι"], "d": ["cafe\u{301}"]])
        for query in ["café", "CAFE", "Cafe\u{301}", "cafÉ"] {
            let result = try await ids(db, query)
            XCTAssertEqual(result, ["a", "b", "d"], query)
        }
        var result = try await ids(db, "creme brulee")
        XCTAssertEqual(result, ["a"])
        result = try await ids(db, "αθηναι")
        XCTAssertEqual(result, ["c"])
        result = try await ids(db, "brû*")
        XCTAssertEqual(result, ["a"], "prefixes fold too")
    }

    func testPhrasesPrefixesAndNear() async throws {
        let db = try await database([
            "a": ["rock and roll forever"], "b": ["roll and rock"], "c": ["rocking rollers"],
            "d": ["one two three four five six seven eight nine ten eleven twelve"],
        ])
        var result = try await ids(db, "\"rock and roll\"")
        XCTAssertEqual(result, ["a"], "a phrase is consecutive tokens in order")
        result = try await ids(db, "\"rock roll\"")
        XCTAssertEqual(result, [])
        result = try await ids(db, "rock*")
        XCTAssertEqual(result, ["a", "b", "c"])
        result = try await ids(db, "roll*")
        XCTAssertEqual(result, ["a", "b", "c"])
        result = try await ids(db, "rock-and-roll")
        XCTAssertEqual(result, ["a"], "a word of several tokens is a phrase")
        result = try await ids(db, "rock NEAR roll")
        XCTAssertEqual(result, ["a", "b"], "NEAR matches in either order")
        // "one" and "five" have 3 tokens between them; "one" and "twelve" 10.
        for (distance, expected) in [(2, [String]()), (3, ["d"]), (4, ["d"])] {
            result = try await ids(db, "one NEAR/\(distance) five")
            XCTAssertEqual(result, expected, "NEAR/\(distance)")
            result = try await ids(db, "five NEAR/\(distance) one")
            XCTAssertEqual(result, expected, "NEAR/\(distance), reversed")
        }
        result = try await ids(db, "one NEAR twelve")
        XCTAssertEqual(result, ["d"], "NEAR alone allows 10 tokens between")
        result = try await ids(db, "one NEAR/9 twelve")
        XCTAssertEqual(result, [])
        result = try await ids(db, "one NEAR/0 two")
        XCTAssertEqual(result, ["d"], "NEAR/0: adjacent")
        result = try await ids(db, "\"two three\" NEAR/1 \"five six\"")
        XCTAssertEqual(result, ["d"], "NEAR between phrases counts from the end of the first")
        result = try await ids(db, "\"two three\" NEAR/0 \"five six\"")
        XCTAssertEqual(result, [])
        result = try await ids(db, "one NEAR/1 three NEAR/1 five")
        XCTAssertEqual(result, ["d"], "a chain: each neighbouring pair within its distance")
        result = try await ids(db, "one NEAR/1 three NEAR/0 five")
        XCTAssertEqual(result, [])
    }

    func testPhrasesAndNearStayInOneFieldWhileBooleansSpanFields() async throws {
        let db = try await database([
            "a": ["green tea", "black coffee"], "b": ["green", "tea"], "c": ["tea green"],
            "d": ["alpha one two three", "four five six seven eight nine ten eleven omega"],
        ])
        var result = try await ids(db, "\"green tea\"")
        XCTAssertEqual(result, ["a"], "a phrase does not run from one field into the next")
        result = try await ids(db, "green tea")
        XCTAssertEqual(result, ["a", "b", "c"], "AND combines fields")
        result = try await ids(db, "green NEAR/0 tea")
        XCTAssertEqual(result, ["a", "c"], "NEAR stays within a field")
        result = try await ids(db, "tea NOT coffee")
        XCTAssertEqual(result, ["b", "c"], "NOT looks at every field")
        result = try await ids(db, "\"tea black\"")
        XCTAssertEqual(result, [])
        result = try await ids(db, "alpha NEAR omega")
        XCTAssertEqual(result, [], "11 tokens apart only if fields ran together")
        result = try await ids(db, "coffee OR \"tea green\"")
        XCTAssertEqual(result, ["a", "c"])
    }

    func testDeletedAndUpdatedDocuments() async throws {
        let db = try await database(["a": ["old words here"], "b": ["old news"], "c": ["old times"]])
        var result = try await ids(db, "old")
        XCTAssertEqual(result, ["a", "b", "c"])
        var a = try await db.document(withID: "a")!
        a.body["fields"] = ["new words here"]
        _ = try await db.save(a)
        _ = try await db.delete(try await db.document(withID: "b")!)
        result = try await ids(db, "old")
        XCTAssertEqual(result, ["c"], "deleted documents never match; an updated one only on its new text")
        result = try await ids(db, "new OR news")
        XCTAssertEqual(result, ["a"])
        result = try await ids(db, "words")
        XCTAssertEqual(result, ["a"])
    }

    /// Two ids that differ only in their Unicode normalization are two documents:
    /// updated together, each loses its own old text.
    func testIDsEqualAsSwiftStringsKeepTheirOwnText() async throws {
        let db = try await makeDatabase(self) { $0.indexes = [Self.fieldsIndex] }
        let nfc = "caf\u{00E9}", nfd = "cafe\u{0301}"
        _ = try await db.save([Document(id: nfc, body: ["fields": ["old apple"]]), Document(id: nfd, body: ["fields": ["old pear"]])])
        var result = try await db.search(index: "text", query: "old").rows.map { Array($0.documentID.utf8) }
        XCTAssertEqual(Set(result), [Array(nfc.utf8), Array(nfd.utf8)])
        var a = try await db.document(withID: nfc)!, b = try await db.document(withID: nfd)!
        a.body["fields"] = ["new apple"]
        b.body["fields"] = ["new pear"]
        _ = try await db.save([a, b])
        result = try await db.search(index: "text", query: "old").rows.map { Array($0.documentID.utf8) }
        XCTAssertEqual(result, [], "both old texts are gone")
        result = try await db.search(index: "text", query: "new").rows.map { Array($0.documentID.utf8) }
        XCTAssertEqual(Set(result), [Array(nfc.utf8), Array(nfd.utf8)])
    }

    func testSnippetsMarkMatchedTokensOfPositiveTermsOnly() async throws {
        let db = try await database([
            "a": ["The quick brown fox jumps over the lazy dog"],
            "b": ["A tale of two cities, and of a quick brown fox"],
        ])
        var result = try await db.search(index: "text", query: "fox", snippets: true)
        XCTAssertEqual(Set(result.rows.compactMap(\.snippet)),
                       ["The quick brown [fox] jumps over the lazy dog", "A tale of two cities, and of a quick brown [fox]"])
        result = try await db.search(index: "text", query: "\"quick brown\" dog", snippets: true)
        XCTAssertEqual(result.rows.map(\.snippet), ["The [quick brown] fox jumps over the lazy [dog]"])
        result = try await db.search(index: "text", query: "fox NOT (cities NOT dog)", snippets: true)
        XCTAssertEqual(result.rows.map(\.documentID), ["a"])
        XCTAssertEqual(result.rows.map(\.snippet), ["The quick brown [fox] jumps over the lazy dog"],
                       "dog appears only after a NOT: never marked")
        result = try await db.search(index: "text", query: "qui* NOT cities", snippets: true)
        XCTAssertEqual(result.rows.map(\.snippet), ["The [quick] brown fox jumps over the lazy dog"])
        result = try await db.search(index: "text", query: "fox", snippets: false)
        XCTAssertEqual(result.rows.map(\.snippet), [nil, nil])

        let long = (1...80).map { "word\($0)" }.joined(separator: " ")
        let db2 = try await database(["long": [long + " needle " + long]])
        let snippet = try await db2.search(index: "text", query: "needle", snippets: true).rows.first?.snippet
        XCTAssertTrue(snippet?.contains("[needle]") == true, snippet ?? "")
        XCTAssertTrue(snippet?.hasPrefix("…") == true && snippet?.hasSuffix("…") == true, "an excerpt: \(snippet ?? "")")
        XCTAssertLessThanOrEqual(snippet?.split(separator: " ").count ?? 99, FullTextEngine.snippetTokens + 2)
    }

    func testRankingLimitSkipAndTotal() async throws {
        let filler = (1...60).map { "filler\($0)" }.joined(separator: " ")
        let db = try await database([
            "long": ["\(filler) kiwi \(filler)"], "short": ["kiwi kiwi kiwi kiwi kiwi"], "none": ["plum"],
            "middle": ["kiwi and plum and kiwi"],
        ])
        let result = try await db.search(index: "text", query: "kiwi")
        XCTAssertEqual(result.rows.map(\.documentID), ["short", "middle", "long"],
                       "a short text with the term five times outranks a long one with it once")
        XCTAssertEqual(result.totalRows, 3)
        XCTAssertTrue(result.rows[0].score > result.rows[1].score && result.rows[1].score > result.rows[2].score, "higher is better")
        XCTAssertTrue(result.rows.allSatisfy { $0.score > 0 })
        let page = try await db.search(index: "text", query: "kiwi", limit: 1, skip: 1)
        XCTAssertEqual(page.rows.map(\.documentID), ["middle"])
        XCTAssertEqual(page.totalRows, 3, "total_rows counts every match")
        let best = try await db.search(index: "text", query: "kiwi", limit: 1)
        XCTAssertEqual(best.rows.map(\.documentID), ["short"], "with a limit, the best come back")
        XCTAssertEqual(best.rows.first?.value, 0)
        let none = try await db.search(index: "text", query: "kiwi", limit: 0)
        XCTAssertEqual(none.rows.count, 0)
        XCTAssertEqual(none.totalRows, 3)
    }

    func testValuesDocumentsAndTheBestFieldOfADocument() async throws {
        let db = try await database(["a": ["nothing here", "tea tea tea"], "b": ["tea for two", "none"]])
        var search = try SearchQuery("tea")
        search.includeDocuments = true
        search.snippets = true
        let result = try await db.search(index: "text", search)
        XCTAssertEqual(result.rows.map(\.documentID), ["a", "b"])
        XCTAssertEqual(result.rows.map(\.value), [1, 0], "the value emitted with the best field")
        XCTAssertEqual(result.rows.map(\.snippet), ["[tea] [tea] [tea]", "[tea] for two"])
        XCTAssertEqual(result.rows.first?.document?["fields"], ["nothing here", "tea tea tea"])
    }

    func testMalformedQueriesAndWrongIndexesAreTypedErrors() async throws {
        let byN = IndexDefinition(name: "by-n", version: "1") { doc, emit in emit(.string(doc.id), nil) }
        let db = try await database(["a": ["apple"]], indexes: [Self.fieldsIndex, byN])
        for (query, position) in [("apple AND", 7), ("\"apple", 1), ("(apple", 1), ("a NEAR/x b", 3), ("NOT apple", 1)] {
            do {
                _ = try await db.search(index: "text", query: query)
                XCTFail("\(query) was accepted")
            } catch let error as DocStoreError {
                XCTAssertEqual(error.code, .invalidQuery, query)
                XCTAssertEqual(error.httpStatus, 400)
                XCTAssertTrue(error.reason.contains("at character \(position):"), "\(query): \(error.reason)")
            }
        }
        await assertThrowsDocStoreError(.notAFullTextIndex) { try await db.search(index: "by-n", query: "apple") }
        await assertThrowsDocStoreError(.notFound) { try await db.search(index: "nope", query: "apple") }
    }

    func testStemmingIsOptionalPerIndexAndChangingItRebuilds() async throws {
        var stemmed = Self.fieldsIndex
        stemmed.fullTextStemming = .english
        let plain = IndexDefinition(name: "plain", version: "1", map: Self.fieldsIndex.map)
        let db = try await database(["a": ["searching searched"], "b": ["search"]], indexes: [stemmed, plain])
        var result = try await ids(db, "search")
        XCTAssertEqual(result, ["a", "b"])
        result = try await ids(db, "search", index: "plain")
        XCTAssertEqual(result, ["b"], "no stemming by default")
        try await db.register(Self.fieldsIndex)
        result = try await ids(db, "search")
        XCTAssertEqual(result, ["b"], "turning stemming off rebuilt the index")
    }

    func testTheIndexIsIncrementalAndKeepsItsTextAcrossReopening() async throws {
        var configuration = DatabaseConfiguration(name: "fts", directory: try makeTemporaryDirectory(self))
        configuration.indexes = [Self.fieldsIndex]
        var db = try await Database.open(configuration)
        _ = try await db.save(Document(id: "a", body: ["fields": ["first text"]]))
        var result = try await ids(db, "text")
        XCTAssertEqual(result, ["a"])
        await db.close()
        db = try await Database.open(configuration)
        _ = try await db.save(Document(id: "b", body: ["fields": ["second text"]]))
        result = try await ids(db, "text")
        XCTAssertEqual(result, ["a", "b"])
        let state = try await db.indexWriter.state(named: "text")
        XCTAssertEqual(state.lastSequence, 2, "only the new document was mapped after reopening")
        await db.close()
    }

    func testALiveSearchYieldsWhenTheResultChanges() async throws {
        let db = try await database(["a": ["apple"]])
        var iterator = db.observe(index: "text", search: try SearchQuery("apple")).makeAsyncIterator()
        let first = try await iterator.next()
        XCTAssertEqual(first?.rows.map(\.documentID), ["a"])
        _ = try await db.save(Document(id: "z", body: ["fields": ["pear"]]))
        _ = try await db.save(Document(id: "b", body: ["fields": ["apple pie"]]))
        let second = try await iterator.next()
        XCTAssertEqual(second?.rows.map(\.documentID).sorted(), ["a", "b"], "a write that leaves the result alone yields nothing")
    }
}
