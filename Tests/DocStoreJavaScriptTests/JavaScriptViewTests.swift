import DocStore
import DocStoreJavaScript
import Foundation
import XCTest

/// JavaScript views of design documents, queried through the Swift API.
final class JavaScriptViewTests: XCTestCase {
    private func fruit(_ db: Database) async throws {
        let items: [(String, String, Int)] = [("apple", "fruit", 3), ("banana", "fruit", 5), ("carrot", "vegetable", 2),
                                              ("date", "fruit", 7), ("eggplant", "vegetable", 1)]
        for (id, type, count) in items {
            _ = try await db.save(Document(id: id, body: ["type": .string(type), "count": .integer(count)]))
        }
    }

    private func design(_ db: Database, _ body: JSONObject, id: String = "_design/app") async throws -> Document {
        try await db.save(Document(id: id, body: body))
    }

    func testMapReduceWithGroupingAndBuiltins() async throws {
        let db = try await makeDatabase(self)
        try await fruit(db)
        _ = try await design(db, ["views": [
            "by_type": ["map": "function(doc) { if (doc.type) emit(doc.type, doc.count); }", "reduce": "_sum"],
            "js_sum": ["map": "function(doc) { emit([doc.type, doc._id], doc.count); }",
                       "reduce": "function(keys, values, rereduce) { return sum(values); }"],
            "distinct": ["map": "function(doc) { emit(doc.type, 1); }", "reduce": "_approx_count_distinct"],
            "stats": ["map": "function(doc) { emit(doc.type, doc.count); }", "reduce": "_stats"],
        ]])
        var query = IndexQuery()
        query.reduce = false
        let rows = try await db.query(designDocument: "app", view: "by_type", query)
        XCTAssertEqual(rows.rows.map(\.documentID), ["apple", "banana", "date", "carrot", "eggplant"])
        XCTAssertEqual(rows.totalRows, 5)

        query = IndexQuery()
        query.group = true
        let grouped = try await db.query(designDocument: "app", view: "by_type", query)
        XCTAssertEqual(grouped.rows.map(\.key), ["fruit", "vegetable"])
        XCTAssertEqual(grouped.rows.map(\.value), [15, 3])

        query = IndexQuery()
        query.groupLevel = 1
        let level = try await db.query(designDocument: "app", view: "js_sum", query)
        XCTAssertEqual(level.rows.map(\.key), [["fruit"], ["vegetable"]])
        XCTAssertEqual(level.rows.map(\.value), [15, 3])

        let distinct = try await db.query(designDocument: "app", view: "distinct")
        XCTAssertEqual(distinct.rows.map(\.value), [2])
        query = IndexQuery()
        query.group = true
        let value1 = try await db.query(designDocument: "app", view: "distinct", query).rows.map(\.value)
        XCTAssertEqual(value1, [1, 1])

        let stats = try await db.query(designDocument: "app", view: "stats")
        XCTAssertEqual(stats.rows.first?.value, ["sum": 18, "count": 5, "min": 1, "max": 7, "sumsqr": 88])
    }

    func testRereduceAcrossManyChunks() async throws {
        let db = try await makeDatabase(self)
        let documents = (0..<2500).map { Document(id: String(format: "d%05d", $0), body: ["n": .integer($0 % 10)]) }
        _ = try await db.save(documents)
        _ = try await design(db, ["views": ["total": [
            "map": "function(doc) { emit(doc.n, doc.n); }",
            // Counts its calls: a rereduce must have combined several chunk results.
            "reduce": "function(keys, values, rereduce) { if (rereduce) { var t = {sum: 0, calls: 1}; values.forEach(function(v) { t.sum += v.sum; t.calls += v.calls; }); return t; } return {sum: sum(values), calls: 1}; }",
        ]]])
        let result = try await db.query(designDocument: "app", view: "total")
        guard case .object(let value)? = result.rows.first?.value else { return XCTFail("no reduce row") }
        XCTAssertEqual(value["sum"], .integer((0..<2500).reduce(0) { $0 + $1 % 10 }))
        XCTAssertGreaterThan(value["calls"]?.intValue ?? 0, 3)
    }

    func testRequireFromViewsLibAndChangedViewRebuilds() async throws {
        let db = try await makeDatabase(self)
        try await fruit(db)
        var ddoc = try await design(db, ["views": [
            "lib": ["util": "exports.label = function(doc) { return doc.type + ':' + doc._id; };",
                    "nested": ["relative": "var u = require('../util'); exports.upper = function(d) { return u.label(d).toUpperCase(); };"]],
            "labels": ["map": "function(doc) { var util = require('views/lib/nested/relative'); emit(util.upper(doc), null); }"],
        ]])
        var labels = try await db.query(designDocument: "app", view: "labels")
        XCTAssertEqual(labels.rows.first?.key, "FRUIT:APPLE")

        ddoc.body["views"] = ["labels": ["map": "function(doc) { emit(doc._id.length, null); }"]]
        _ = try await db.save(ddoc)
        labels = try await db.query(designDocument: "app", view: "labels")
        XCTAssertEqual(labels.rows.map(\.key), [4, 5, 6, 6, 8])
    }

    func testThrowingMapSkipsDocumentsAndSyntaxErrorFailsOnlyItsView() async throws {
        let db = try await makeDatabase(self)
        try await fruit(db)
        _ = try await design(db, ["views": [
            "picky": ["map": "function(doc) { if (doc._id == 'banana') throw new Error('no bananas'); emit(doc._id, null); }"],
            "broken": ["map": "function(doc) { emit(doc._id, ; }"],
            "fine": ["map": "function(doc) { emit(doc.count, null); }"],
        ]])
        let picky = try await db.query(designDocument: "app", view: "picky")
        XCTAssertEqual(picky.rows.map(\.documentID), ["apple", "carrot", "date", "eggplant"])
        let error = await assertThrowsDocStoreError(.compilationError) {
            try await db.query(designDocument: "app", view: "broken")
        }
        XCTAssertEqual(error?.couchDBError, "compilation_error")
        XCTAssert(error?.reason.contains("'broken' view") ?? false, error?.reason ?? "")
        let value2 = try await db.query(designDocument: "app", view: "fine").rows.count
        XCTAssertEqual(value2, 5)
        await assertThrowsDocStoreError(.notFound) { try await db.query(designDocument: "app", view: "nothing") }
        await assertThrowsDocStoreError(.notFound) { try await db.query(designDocument: "none", view: "fine") }
    }

    func testMapCannotMutateDocuments() async throws {
        let db = try await makeDatabase(self)
        try await fruit(db)
        _ = try await design(db, ["views": [
            "mutate": ["map": "function(doc) { doc.count = 100; doc.extra = 'x'; if (doc.tags) doc.tags.push(1); emit(doc.count, doc.extra || null); }"],
        ]])
        let rows = try await db.query(designDocument: "app", view: "mutate")
        // Frozen, as CouchDB seals documents: the assignments did nothing.
        XCTAssertEqual(rows.rows.map(\.key), [2, 1, 3, 5, 7].sorted().map { JSON.integer($0) })
        XCTAssertEqual(Set(rows.rows.map(\.value)), [.null])
        let stored = try await db.document(withID: "apple")
        XCTAssertEqual(stored?["count"], 3)
        XCTAssertNil(stored?["extra"])

        // All the way down, and a strict-mode assignment throws (the document is left out): CouchDB
        // 3.3.3 emits 1 for `deep` and nothing for `strict` over {"o": {"p": 1}, "a": [[1]]}.
        _ = try await db.save(Document(id: "nested", body: ["o": ["p": 1], "a": [[1]]]))
        _ = try await design(db, ["views": [
            "deep": ["map": "function(doc) { if (doc.o) { doc.o.p = 5; doc.a[0][0] = 9; emit(doc.o.p, doc.a[0][0]); } }"],
            "strict": ["map": "function(doc) { 'use strict'; if (doc.o) { doc.o.p = 7; emit(doc.o.p, null); } }"],
        ]], id: "_design/frozen")
        await XCTAssertEqualAsync(try await db.query(designDocument: "frozen", view: "deep").rows.map { [$0.key, $0.value] }, [[1, 1]])
        await XCTAssertEqualAsync(try await db.query(designDocument: "frozen", view: "strict").rows.count, 0)
    }

    func testTextOutsideASCIIReachesMapsIntact() async throws {
        let db = try await makeDatabase(self)
        let texts = ["Zürich", "Kraków €5", "😀 and 𝄞", "tab\t\"quoted\"", "日本語"]
        _ = try await db.save(texts.enumerated().map { Document(id: "t\($0.offset)", body: ["s": .string($0.element)]) })
        _ = try await db.save(Document(id: "_design/app", body: ["views": ["text": [
            "map": "function(doc) { var codes = []; for (var i = 0; i < doc.s.length; i++) codes.push(doc.s.charCodeAt(i)); emit(doc.s, codes); }",
        ]]]))
        let rows = try await db.query(designDocument: "app", view: "text").rows
        XCTAssertEqual(Set(rows.compactMap(\.key.stringValue)), Set(texts))
        for row in rows {
            // JavaScript sees UTF-16 code units: surrogate pairs for characters beyond the BMP.
            let expected = Array(row.key.stringValue!.utf16).map { JSON.integer(Int($0)) }
            XCTAssertEqual(row.value, .array(expected), row.documentID ?? "")
        }
    }

    func testRunawayMapIsStoppedAndOtherWorkGoesOn() async throws {
        let db = try await makeDatabase(self)
        try await fruit(db)
        let engine = JavaScriptEngine(timeLimit: .milliseconds(300))
        _ = try await design(db, ["views": [
            "forever": ["map": "function(doc) { if (doc._id == 'carrot') { while (true) {} } emit(doc._id, null); }"],
            "fine": ["map": "function(doc) { emit(doc._id, null); }"],
        ]])
        let started = ContinuousClock.now
        await assertThrowsDocStoreError(.scriptTimeout) {
            try await db.query(designDocument: "app", view: "forever", engine: engine)
        }
        XCTAssertLessThan(ContinuousClock.now - started, .seconds(4))
        let value3 = try await db.query(designDocument: "app", view: "fine", engine: engine).rows.count
        XCTAssertEqual(value3, 5)
    }

    /// A map function that goes on allocating is stopped once it has grown the process's memory past
    /// the engine's bound (Docs/JavaScript.md), long before its time limit, and the engine goes on; each
    /// call is judged on its own.
    func testAMapThatEatsMemoryIsStoppedAndOtherWorkGoesOn() async throws {
        let db = try await makeDatabase(self)
        try await fruit(db)
        let engine = JavaScriptEngine(timeLimit: .seconds(60), memoryLimit: 64 * 1024 * 1024)
        _ = try await design(db, ["views": [
            "greedy": ["map": "function(doc) { if (doc._id == 'carrot') { var kept = []; while (true) { kept.push(new Array(1024).join('x') + kept.length); } } emit(doc._id, null); }"],
            "modest": ["map": "function(doc) { var s = []; for (var i = 0; i < 20000; i++) s.push('' + i); emit(doc._id, s.length); }"],
        ]])
        let started = ContinuousClock.now
        do {
            _ = try await db.query(designDocument: "app", view: "greedy", engine: engine)
            XCTFail("the greedy map was not stopped")
        } catch let error as DocStoreError {
            XCTAssertEqual(error.code, .scriptTimeout)
            XCTAssertTrue(error.reason.contains("carrot") && error.reason.contains("64 MB of memory"), error.reason)
        }
        XCTAssertLessThan(ContinuousClock.now - started, .seconds(30), "stopped for its memory, not its time")
        let modest = try await db.query(designDocument: "app", view: "modest", engine: engine).rows
        XCTAssertEqual(modest.count, 5)
        XCTAssertEqual(modest.first?.value, 20000)
    }

    func testDesignDocumentsMappedOnlyWithIncludeDesignAndRawCollation() async throws {
        let db = try await makeDatabase(self)
        for id in ["a", "B", "c"] { _ = try await db.save(Document(id: id)) }
        _ = try await design(db, ["options": ["include_design": true, "collation": "raw"],
                                  "views": ["ids": ["map": "function(doc) { emit(doc._id, null); }"]]])
        _ = try await design(db, ["views": ["ids": ["map": "function(doc) { emit(doc._id, null); }"]]], id: "_design/plain")
        let raw = try await db.query(designDocument: "app", view: "ids")
        XCTAssertEqual(raw.rows.map(\.key), ["B", "_design/app", "_design/plain", "a", "c"])
        let plain = try await db.query(designDocument: "plain", view: "ids")
        XCTAssertEqual(plain.rows.map(\.key), ["a", "B", "c"])
    }
}

/// Documents written after the design document, in one batch, are all mapped (the design document
/// shares their window but is not mapped).
final class JavaScriptBatchMapTests: XCTestCase {
    func testAWindowWithTheDesignDocumentFirst() async throws {
        let db = try await makeDatabase(self)
        _ = try await db.save(Document(id: "_design/app", body: ["views": ["ids": ["map": "function(doc) { emit(doc._id, doc.n); }"]]]))
        _ = try await db.save((0..<5).map { Document(id: "d\($0)", body: ["n": .integer($0)]) })
        let rows = try await db.query(designDocument: "app", view: "ids")
        XCTAssertEqual(rows.rows.map(\.documentID), ["d0", "d1", "d2", "d3", "d4"])
        XCTAssertEqual(rows.rows.map(\.value), [0, 1, 2, 3, 4])
    }
}
