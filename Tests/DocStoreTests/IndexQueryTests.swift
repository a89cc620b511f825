@testable import DocStore
import Foundation
import XCTest

/// Query options, alone and combined, on small indexes whose answers are easy to state.
final class IndexQueryTests: XCTestCase {
    /// 20 documents d00…d19 with n = 0…19; `by-n` emits n → n * 10.
    private func numbersDatabase() async throws -> Database {
        let byN = IndexDefinition(name: "by-n", version: "1", reduce: .sum) { doc, emit in
            if let n = doc.int(forKey: "n") { emit(.integer(n), .integer(n * 10)) }
        }
        let db = try await makeDatabase(self) { $0.indexes = [byN] }
        _ = try await db.save((0..<20).map { Document(id: String(format: "d%02d", $0), body: ["n": .integer($0)]) })
        return db
    }

    private func query(_ db: Database, _ configure: (inout IndexQuery) -> Void) async throws -> QueryResult {
        var query = IndexQuery()
        query.reduce = false
        query.includeOffset = true
        configure(&query)
        return try await db.query("by-n", query)
    }

    private func ns(_ result: QueryResult) -> [Int] { result.rows.map { $0.key.intValue! } }

    /// Rows one document emits under one key come in the order of their values — Erlang's term order,
    /// as CouchDB keeps them: numbers, `false`, `null`, `true`, objects, arrays, strings — whatever the
    /// order they were emitted in, and in that order in a descending query too. Another document's
    /// rows under the same key stay apart (ordered by document id).
    func testRowsOfOneKeyFromOneDocumentComeInValueOrder() async throws {
        let emitted: [JSON] = ["b", 2, .null, false, [1], true, ["a": 1], "a", 1.5, [0, 9]]
        let byKind = IndexDefinition(name: "by-kind", version: "1") { doc, emit in
            guard let kind = doc["kind"] else { return }
            for value in emitted { emit(kind, value) }
        }
        let db = try await makeDatabase(self) { $0.indexes = [byKind] }
        _ = try await db.save([Document(id: "one", body: ["kind": "k"]), Document(id: "two", body: ["kind": "k"])])
        let expected: [JSON] = [1.5, 2, false, .null, true, ["a": 1], [0, 9], [1], "a", "b"]
        var query = IndexQuery()
        query.key = "k"
        let ascending = try await db.query("by-kind", query)
        XCTAssertEqual(ascending.rows.map(\.documentID), Array(repeating: "one", count: 10) + Array(repeating: "two", count: 10))
        XCTAssertEqual(ascending.rows.prefix(10).map(\.value), expected)
        query.descending = true
        let descending = try await db.query("by-kind", query)
        XCTAssertEqual(descending.rows.map(\.documentID), Array(repeating: "two", count: 10) + Array(repeating: "one", count: 10))
        XCTAssertEqual(descending.rows.prefix(10).map(\.value), expected, "each document's run keeps its order")
    }

    /// A `keys` query's offset is its first row's position (skipped rows counted), or without a row
    /// the position after the last key's rows, as CouchDB counts it.
    func testOffsetOfAKeyListQuery() async throws {
        let db = try await numbersDatabase()
        let first = try await query(db) { $0.keys = [7, 3] }
        XCTAssertEqual(ns(first), [7, 3])
        XCTAssertEqual(first.offset, 7)
        let skipped = try await query(db) { $0.keys = [7, 3]; $0.skip = 1 }
        XCTAssertEqual(ns(skipped), [3])
        XCTAssertEqual(skipped.offset, 3)
        let none = try await query(db) { $0.keys = [99, 5.5] }
        XCTAssertEqual(none.rows.count, 0)
        XCTAssertEqual(none.offset, 6, "after the rows of 5.5, the last key: 0…5")
        let descending = try await query(db) { $0.keys = [7, 3]; $0.descending = true }
        XCTAssertEqual(ns(descending), [3, 7])
        XCTAssertEqual(descending.offset, 16, "3 counted from the end: 19…4 come first")
    }

    func testKeyRangesAndOpenEnds() async throws {
        let db = try await numbersDatabase()
        let all = try await query(db) { _ in }
        XCTAssertEqual(ns(all), Array(0..<20))
        XCTAssertEqual(all.totalRows, 20)
        XCTAssertEqual(all.offset, 0)
        XCTAssertEqual(all.rows[3].value, 30)
        XCTAssertEqual(all.rows[3].documentID, "d03")

        let key = try await query(db) { $0.key = 7 }
        XCTAssertEqual(ns(key), [7])
        XCTAssertEqual(key.offset, 7)
        let range = try await query(db) { $0.startKey = 5; $0.endKey = 8 }
        XCTAssertEqual(ns(range), [5, 6, 7, 8])
        XCTAssertEqual(range.offset, 5)
        let exclusive = try await query(db) { $0.startKey = 5; $0.endKey = 8; $0.inclusiveEnd = false }
        XCTAssertEqual(ns(exclusive), [5, 6, 7])
        let openEnd = try await query(db) { $0.startKey = 17 }
        XCTAssertEqual(ns(openEnd), [17, 18, 19])
        let openStart = try await query(db) { $0.endKey = 2 }
        XCTAssertEqual(ns(openStart), [0, 1, 2])
        let between = try await query(db) { $0.startKey = 4.5; $0.endKey = 6.5 }
        XCTAssertEqual(ns(between), [5, 6])
        let withoutOffset = try await query(db) { $0.includeOffset = false; $0.startKey = 5 }
        XCTAssertNil(withoutOffset.offset, "offset costs a count, so it is computed only on request")
        let none = try await query(db) { $0.key = 99 }
        XCTAssertEqual(none.rows.count, 0)
        XCTAssertEqual(none.offset, 20)
    }

    func testDescendingSwapsStartAndEnd() async throws {
        let db = try await numbersDatabase()
        let descending = try await query(db) { $0.descending = true; $0.startKey = 8; $0.endKey = 5 }
        XCTAssertEqual(ns(descending), [8, 7, 6, 5])
        XCTAssertEqual(descending.offset, 11, "rows after 8, counted from the top")
        let exclusive = try await query(db) { $0.descending = true; $0.startKey = 8; $0.endKey = 5; $0.inclusiveEnd = false }
        XCTAssertEqual(ns(exclusive), [8, 7, 6])
        let all = try await query(db) { $0.descending = true; $0.limit = 3 }
        XCTAssertEqual(ns(all), [19, 18, 17])

        let wrongWay = await assertThrowsDocStoreError(.invalidQuery) {
            try await self.query(db) { $0.descending = true; $0.startKey = 5; $0.endKey = 8 }
        }
        XCTAssertEqual(wrongWay?.couchDBError, "query_parse_error")
        XCTAssertTrue(wrongWay?.reason.contains("descending=false") == true)
        await assertThrowsDocStoreError(.invalidQuery) { try await self.query(db) { $0.startKey = 8; $0.endKey = 5 } }
    }

    func testSkipAndLimitPaging() async throws {
        let db = try await numbersDatabase()
        var pages: [[Int]] = []
        for page in 0..<4 {
            pages.append(ns(try await query(db) { $0.skip = page * 6; $0.limit = 6 }))
        }
        XCTAssertEqual(pages, [[0, 1, 2, 3, 4, 5], [6, 7, 8, 9, 10, 11], [12, 13, 14, 15, 16, 17], [18, 19]])
        let offset = try await query(db) { $0.startKey = 10; $0.skip = 2; $0.limit = 2 }
        XCTAssertEqual(ns(offset), [12, 13])
        XCTAssertEqual(offset.offset, 12)
        let zero = try await query(db) { $0.limit = 0 }
        XCTAssertEqual(zero.rows.count, 0)
        await assertThrowsDocStoreError(.invalidQuery) { try await self.query(db) { $0.limit = -1 } }
        await assertThrowsDocStoreError(.invalidQuery) { try await self.query(db) { $0.skip = -1 } }
    }

    func testKeyListKeepsTheOrderGiven() async throws {
        let db = try await numbersDatabase()
        let result = try await query(db) { $0.keys = [15, 3, 99, 3, 0] }
        XCTAssertEqual(ns(result), [15, 3, 3, 0], "missing keys give no rows, repeated keys repeat")
        let paged = try await query(db) { $0.keys = [15, 3, 99, 3, 0]; $0.skip = 1; $0.limit = 2 }
        XCTAssertEqual(ns(paged), [3, 3])
        await assertThrowsDocStoreError(.invalidQuery) { try await self.query(db) { $0.keys = [1]; $0.startKey = 0 } }
    }

    /// Rows with equal keys are ordered by document id, and the doc-id bounds cut inside such a run.
    func testDocumentIDTieBreakBounds() async throws {
        let byColour = IndexDefinition(name: "colour", version: "1") { doc, emit in
            if let colour = doc["colour"] { emit(colour, nil) }
        }
        let db = try await makeDatabase(self) { $0.indexes = [byColour] }
        let colours = ["blue", "red", "red", "green", "red", "blue", "red"]
        _ = try await db.save(colours.enumerated().reversed().map { Document(id: "c\($0.offset)", body: ["colour": .string($0.element)]) })
        var query = IndexQuery()
        let all = try await db.query("colour", query)
        XCTAssertEqual(all.rows.map { "\($0.key.stringValue!):\($0.documentID!)" },
                       ["blue:c0", "blue:c5", "green:c3", "red:c1", "red:c2", "red:c4", "red:c6"])
        query.startKey = "red"
        query.startKeyDocID = "c2"
        query.endKey = "red"
        query.endKeyDocID = "c4"
        await XCTAssertEqualAsync(try await db.query("colour", query).rows.map(\.documentID), ["c2", "c4"])
        query.inclusiveEnd = false
        await XCTAssertEqualAsync(try await db.query("colour", query).rows.map(\.documentID), ["c2"])
        var descending = IndexQuery()
        descending.descending = true
        descending.startKey = "red"
        descending.startKeyDocID = "c4"
        descending.endKey = "blue"
        descending.endKeyDocID = "c5"
        await XCTAssertEqualAsync(try await db.query("colour", descending).rows.map(\.documentID), ["c4", "c2", "c1", "c3", "c5"])
        var colourKeys = IndexQuery()
        colourKeys.keys = ["red", "blue"]
        colourKeys.limit = 5
        await XCTAssertEqualAsync(try await db.query("colour", colourKeys).rows.map(\.documentID), ["c1", "c2", "c4", "c6", "c0"])
    }

    func testIncludeDocsAndLinkedDocuments() async throws {
        let links = IndexDefinition(name: "links", version: "1") { doc, emit in
            guard doc.type == "order" else { return }
            emit(["order", .string(doc.id)], nil)
            if let customer = doc.string(forKey: "customer") { emit(["customer", .string(doc.id)], ["_id": .string(customer)]) }
        }
        let db = try await makeDatabase(self) { $0.indexes = [links] }
        _ = try await db.save(Document(id: "acme", body: ["name": "ACME Corp"]))
        _ = try await db.save(Document(id: "o1", body: ["type": "order", "customer": "acme"]))
        _ = try await db.save(Document(id: "o2", body: ["type": "order", "customer": "ghost"]))
        var query = IndexQuery()
        query.includeDocuments = true
        let result = try await db.query("links", query)
        XCTAssertEqual(result.rows.map(\.key), [["customer", "o1"], ["customer", "o2"], ["order", "o1"], ["order", "o2"]])
        XCTAssertEqual(result.rows[0].document?.id, "acme", "a value {_id} links to that document")
        XCTAssertEqual(result.rows[0].document?.string(forKey: "name"), "ACME Corp")
        XCTAssertNil(result.rows[1].document, "a link to a missing document gives no document")
        XCTAssertEqual(result.rows[2].document?.id, "o1")
        let plain = try await db.query("links", IndexQuery())
        XCTAssertNil(plain.rows[0].document)

        // The documents are read with the rows (a join): by key list too, and from a stale index
        // each row gets its document's current revision, or none once it is deleted.
        var byKeys = IndexQuery()
        byKeys.keys = [["order", "o2"], ["order", "o1"]]
        byKeys.includeDocuments = true
        let listed = try await db.query("links", byKeys)
        XCTAssertEqual(listed.rows.map { $0.document?.id }, ["o2", "o1"])
        let current = try await db.document(withID: "o2")
        XCTAssertEqual(listed.rows[0].document?.revision, current?.revision)
        var o2 = try XCTUnwrap(current)
        o2["note"] = "rush"
        let updated = try await db.save(o2)
        let o1 = try await db.document(withID: "o1")
        _ = try await db.delete(XCTUnwrap(o1))
        byKeys.stale = .ok
        let stale = try await db.query("links", byKeys)
        XCTAssertEqual(stale.rows.count, 2, "the stale index still has both rows")
        XCTAssertEqual(stale.rows[0].document?.revision, updated.revision)
        XCTAssertEqual(stale.rows[0].document?.string(forKey: "note"), "rush")
        XCTAssertNil(stale.rows[1].document, "a row of a deleted document has no document")
    }

    func testBuiltinReduces() async throws {
        let db = try await numbersDatabase()
        let sum = try await db.query("by-n")
        XCTAssertEqual(sum.rows.map(\.value), [1900])
        XCTAssertEqual(sum.rows.first?.key, .null)
        XCTAssertNil(sum.totalRows)
        var range = IndexQuery()
        range.startKey = 10
        range.endKey = 12
        await XCTAssertEqualAsync(try await db.query("by-n", range).rows.map(\.value), [330])
        range.startKey = 100
        range.endKey = 200
        await XCTAssertEqualAsync(try await db.query("by-n", range).rows.count, 0, "reducing no rows gives no row")

        let stats = IndexDefinition(name: "stats", version: "1", reduce: .stats) { doc, emit in
            if let v = doc["v"] { emit(doc["g"] ?? .null, v) }
        }
        let count = IndexDefinition(name: "count", version: "1", reduce: .count) { doc, emit in emit(doc["g"] ?? .null, doc["v"]) }
        try await db.register(stats)
        try await db.register(count)
        _ = try await db.save([
            Document(id: "s1", body: ["g": "x", "v": 2]), Document(id: "s2", body: ["g": "x", "v": 3.5]),
            Document(id: "s3", body: ["g": "y", "v": -1]), Document(id: "s4", body: ["g": "y", "v": 4]),
        ])
        await XCTAssertEqualAsync(try await db.query("stats").rows.first?.value,
                       ["sum": 8.5, "count": 4, "min": -1.0, "max": 4.0, "sumsqr": 33.25])
        var grouped = IndexQuery()
        grouped.group = true
        let perGroup = try await db.query("stats", grouped)
        XCTAssertEqual(perGroup.rows.map(\.key), ["x", "y"])
        XCTAssertEqual(perGroup.rows[1].value, ["sum": 3, "count": 2, "min": -1, "max": 4, "sumsqr": 17], "integers stay integers")
        await XCTAssertEqualAsync(try await db.query("count", grouped).rows.map(\.value), [20, 2, 2], "20 numbers docs have no g")
        await XCTAssertEqualAsync(try await db.query("count", grouped).rows.map(\.key), [.null, "x", "y"])
        var groupedKeys = IndexQuery()
        groupedKeys.group = true
        groupedKeys.keys = ["y", "nope", "x"]
        await XCTAssertEqualAsync(try await db.query("count", groupedKeys).rows.map(\.key), ["y", "x"])
    }

    /// The whole-index `.sum` and `.count` the index writer keeps agree with the SQL aggregate (forced by
    /// a range covering every key) through inserts, updates, deletions, purges, doubles, non-numbers
    /// and 64-bit overflow.
    func testMaintainedWholeIndexTotalsMatchTheRows() async throws {
        let sum = IndexDefinition(name: "sum", version: "1", reduce: .sum) { doc, emit in
            if let v = doc["v"] { emit(.integer(doc.int(forKey: "k") ?? 0), v) }
        }
        let count = IndexDefinition(name: "count", version: "1", reduce: .count) { doc, emit in
            if let v = doc["v"] { emit(.integer(doc.int(forKey: "k") ?? 0), v) }
        }
        let db = try await makeDatabase(self) { $0.indexes = [sum, count] }
        func check(_ expectedSum: JSON?, _ expectedCount: Int, _ message: String) async throws {
            var everything = IndexQuery()
            everything.startKey = .integer(Int.min)
            everything.endKey = .integer(Int.max)
            for name in ["sum", "count"] {
                let whole = try await db.query(name)
                let ranged = try await db.query(name, everything)
                XCTAssertEqual(whole.rows.map(\.value), ranged.rows.map(\.value), "\(name): \(message)")
            }
            let total = try await db.query("sum").rows.first?.value
            XCTAssertEqual(total, expectedSum, message)
            let rows = try await db.query("count").rows.first?.value
            XCTAssertEqual(rows, expectedCount == 0 ? nil : .integer(expectedCount), message)
        }
        try await check(nil, 0, "empty index: no row")
        var docs = try await db.save((1...50).map { Document(id: "d\($0)", body: ["k": .integer($0), "v": .integer($0)]) })
        try await check(1275, 50, "first build")
        docs[0]["v"] = 1000
        docs[0] = try await db.save(docs[0])
        try await db.delete(docs[1])
        try await check(.integer(1275 - 1 + 1000 - 2), 49, "an update and a deletion")
        _ = try await db.purge(documentIDs: ["d3"])
        try await check(.integer(1275 - 1 + 1000 - 2 - 3), 48, "a purge")
        _ = try await db.save(Document(id: "big", body: ["k": 0, "v": .integer(Int.max)]))
        let overflowed = try await db.query("sum").rows.first?.value
        XCTAssertEqual(overflowed?.doubleValue ?? 0, Double(Int.max) + 2269, accuracy: 1e6, "past 64 bits: the SQL path")
        try await db.delete(try await db.document(withID: "big")!)
        _ = try await db.save(Document(id: "half", body: ["k": 0, "v": 0.5]))
        try await check(.double(2269.5), 49, "a double: the SQL path")
        try await db.delete(try await db.document(withID: "half")!)
        _ = try await db.save(Document(id: "text", body: ["k": 0, "v": "x"]))
        await assertThrowsDocStoreError(.reduceFailure) { try await db.query("sum") }
        try await db.delete(try await db.document(withID: "text")!)
        let back = try await db.query("sum").rows.first?.value
        XCTAssertEqual(back?.doubleValue, 2269, "the SQL path again after the overflow")
    }

    /// An index file from before the totals were kept gets them computed when it is registered.
    func testTotalsOfAnOlderIndexFileAreComputedOnOpen() async throws {
        let directory = try makeTemporaryDirectory(self)
        let sum = IndexDefinition(name: "sum", version: "1", reduce: .sum) { doc, emit in emit(.string(doc.id), doc["v"]) }
        var configuration = DatabaseConfiguration(name: "old", directory: directory)
        configuration.indexes = [sum]
        var db = try await Database.open(configuration)
        _ = try await db.save((1...10).map { Document(id: "d\($0)", body: ["v": .integer($0 * $0)]) })
        await XCTAssertEqualAsync(try await db.query("sum").rows.first?.value, 385)
        await db.close()
        let file = SQLiteConnection.self
        try ThreadRule.allowing(.testing) {
            let raw = try file.init(path: IndexSchema.fileURL(for: configuration.fileURL).path)
            try raw.execute("UPDATE indexes SET int_sum = NULL, other_values = NULL")
            raw.close()
        }
        db = try await Database.open(configuration)
        _ = try await db.save(Document(id: "d11", body: ["v": 121]))
        await XCTAssertEqualAsync(try await db.query("sum").rows.first?.value, 506)
        await db.close()
        try ThreadRule.allowing(.testing) {
            let check = try file.init(path: IndexSchema.fileURL(for: configuration.fileURL).path)
            XCTAssertEqual(try check.scalarInt("SELECT int_sum FROM indexes WHERE name = 'sum'"), 506)
            XCTAssertEqual(try check.scalarInt("SELECT other_values FROM indexes WHERE name = 'sum'"), 0)
            check.close()
        }
    }

    /// An index file of schema 2 (rows without `doc_row`) is rebuilt with it when its index is next
    /// registered, and `include_docs` reads the documents through it.
    func testAnIndexFileOfSchema2IsRebuiltWithDocumentRows() async throws {
        let directory = try makeTemporaryDirectory(self)
        let byV = IndexDefinition(name: "by-v", version: "1") { doc, emit in emit(doc["v"] ?? nil, nil) }
        var configuration = DatabaseConfiguration(name: "old", directory: directory)
        configuration.indexes = [byV]
        var db = try await Database.open(configuration)
        _ = try await db.save((1...3).map { Document(id: "d\($0)", body: ["v": .integer($0)]) })
        var query = IndexQuery()
        query.includeDocuments = true
        await XCTAssertEqualAsync(try await db.query("by-v", query).rows.compactMap { $0.document?.id }, ["d1", "d2", "d3"])
        await db.close()
        let path = IndexSchema.fileURL(for: configuration.fileURL).path
        try ThreadRule.allowing(.testing) {
            let raw = try SQLiteConnection(path: path)
            let table = IndexSchema.rowsTable(try XCTUnwrap(try raw.scalarInt("SELECT id FROM indexes WHERE name = 'by-v'")))
            // Schema 2 had neither the rows' `doc_row` nor schema 4's full-text columns.
            try raw.execute("""
                ALTER TABLE \(table) DROP COLUMN doc_row; ALTER TABLE indexes DROP COLUMN tokenizer;
                ALTER TABLE indexes DROP COLUMN has_text; PRAGMA user_version = 2
                """)
            raw.close()
        }
        db = try await Database.open(configuration)
        await XCTAssertEqualAsync(try await db.query("by-v", query).rows.compactMap { $0.document?.id }, ["d1", "d2", "d3"])
        await db.close()
        try ThreadRule.allowing(.testing) {
            let check = try SQLiteConnection(path: path)
            XCTAssertEqual(try check.scalarInt("PRAGMA user_version"), IndexSchema.currentVersion)
            let rebuilt = IndexSchema.rowsTable(try XCTUnwrap(try check.scalarInt("SELECT id FROM indexes WHERE name = 'by-v'")))
            XCTAssertEqual(try check.scalarInt("SELECT count(*) FROM pragma_table_info('\(rebuilt)') WHERE name = 'doc_row'"), 1)
            XCTAssertEqual(try check.scalarInt("SELECT count(*) FROM \(rebuilt)"), 3)
            check.close()
        }
    }

    func testReduceOptionErrors() async throws {
        let db = try await numbersDatabase()
        let mapOnly = IndexDefinition(name: "map-only", version: "1") { doc, emit in emit(.string(doc.id), nil) }
        try await db.register(mapOnly)
        var reduce = IndexQuery()
        reduce.reduce = true
        await assertThrowsDocStoreError(.invalidQuery) { try await db.query("map-only", reduce) }
        var group = IndexQuery()
        group.group = true
        await assertThrowsDocStoreError(.invalidQuery) { try await db.query("map-only", group) }
        var docs = IndexQuery()
        docs.includeDocuments = true
        await assertThrowsDocStoreError(.invalidQuery) { try await db.query("by-n", docs) }
        var keys = IndexQuery()
        keys.keys = [1, 2]
        await assertThrowsDocStoreError(.invalidQuery) { try await db.query("by-n", keys) }
        await assertThrowsDocStoreError(.notFound) { try await db.query("no-such-index") }

        let strings = IndexDefinition(name: "strings", version: "1", reduce: .sum) { doc, emit in emit(nil, .string(doc.id)) }
        try await db.register(strings)
        let error = await assertThrowsDocStoreError(.reduceFailure) { try await db.query("strings") }
        XCTAssertEqual(error?.couchDBError, "builtin_reduce_error")
    }

    /// Array keys [year, month, day] reduced at each group level.
    func testGroupLevels() async throws {
        let sales = IndexDefinition(name: "sales", version: "1", reduce: .sum) { doc, emit in
            if let date = doc["date"], let amount = doc["amount"] { emit(date, amount) }
        }
        let db = try await makeDatabase(self) { $0.indexes = [sales] }
        let entries: [(JSON, Int)] = [
            ([2025, 12, 31], 5), ([2026, 1, 1], 10), ([2026, 1, 1], 1), ([2026, 1, 15], 20), ([2026, 2, 3], 40), ([2027, 1, 1], 80),
        ]
        _ = try await db.save(entries.enumerated().map { Document(id: "s\($0.offset)", body: ["date": $0.element.0, "amount": .integer($0.element.1)]) })
        func run(_ level: Int?, group: Bool = false, _ configure: (inout IndexQuery) -> Void = { _ in }) async throws -> [String] {
            var query = IndexQuery()
            query.groupLevel = level
            query.group = group
            configure(&query)
            return try await db.query("sales", query).rows.map { "\($0.key)=\($0.value)" }
        }
        await XCTAssertEqualAsync(try await run(nil), ["null=156"])
        await XCTAssertEqualAsync(try await run(0), ["null=156"])
        await XCTAssertEqualAsync(try await run(1), ["[2025]=5", "[2026]=71", "[2027]=80"])
        await XCTAssertEqualAsync(try await run(2), ["[2025,12]=5", "[2026,1]=31", "[2026,2]=40", "[2027,1]=80"])
        await XCTAssertEqualAsync(try await run(3), ["[2025,12,31]=5", "[2026,1,1]=11", "[2026,1,15]=20", "[2026,2,3]=40", "[2027,1,1]=80"])
        await XCTAssertEqualAsync(try await run(nil, group: true), try await run(3))
        await XCTAssertEqualAsync(try await run(2) { $0.startKey = [2026]; $0.endKey = [2026, [:]] }, ["[2026,1]=31", "[2026,2]=40"])
        await XCTAssertEqualAsync(try await run(1) { $0.descending = true }, ["[2027]=80", "[2026]=71", "[2025]=5"])
        await XCTAssertEqualAsync(try await run(2) { $0.skip = 1; $0.limit = 2 }, ["[2026,1]=31", "[2026,2]=40"])
    }

    /// The seed-style "count per type" custom reduce, over more rows than one chunk, so rereduce runs.
    func testCustomReduceWithRereduce() async throws {
        let calls = ReduceCalls()
        var perType = IndexDefinition(name: "per-type", version: "1", reduce: .custom { keys, values, rereduce in
            // The emitted keys (document ids here), one per value; empty when rereducing.
            calls.record(rereduce: rereduce, keysOK: rereduce ? keys.isEmpty
                         : keys.count == values.count && keys.allSatisfy { $0.stringValue?.hasPrefix("t") == true })
            var counts: [String: Int] = [:]
            if rereduce {
                for partial in values { for (type, n) in partial.objectValue! { counts[type, default: 0] += n.intValue! } }
            } else {
                for value in values { counts[value.stringValue!, default: 0] += 1 }
            }
            return .object(JSONObject(counts.sorted { $0.key < $1.key }.map { ($0.key, JSON.integer($0.value)) }))
        }) { doc, emit in
            if let type = doc.type { emit(.string(doc.id), .string(type)) }
        }
        perType.reduceChunkSize = 10
        let db = try await makeDatabase(self) { $0.indexes = [perType] }
        let types = ["invoice", "order", "customer"]
        _ = try await db.save((0..<95).map { Document(id: String(format: "t%03d", $0), body: ["type": .string(types[$0 % 3])]) })

        let total = try await db.query("per-type")
        XCTAssertEqual(total.rows.first?.value, ["customer": 31, "invoice": 32, "order": 32])
        XCTAssertEqual(calls.reduces, 10, "95 rows in chunks of 10")
        XCTAssertEqual(calls.rereduces, 1)
        XCTAssertTrue(calls.keysWereAsPromised)

        var range = IndexQuery()
        range.startKey = "t010"
        range.endKey = "t039"
        await XCTAssertEqualAsync(try await db.query("per-type", range).rows.first?.value, ["customer": 10, "invoice": 10, "order": 10])
        var small = IndexQuery()
        small.key = "t004"
        await XCTAssertEqualAsync(try await db.query("per-type", small).rows.first?.value, ["order": 1])
        var grouped = IndexQuery()
        grouped.group = true
        grouped.limit = 2
        await XCTAssertEqualAsync(try await db.query("per-type", grouped).rows.map(\.value), [["invoice": 1], ["order": 1]])
    }

    /// `.couchDB` is called as CouchDB calls a JavaScript reduce: `[key, id]` pairs, `nil` on rereduce.
    func testCouchDBStyleReduceGetsKeyAndIDPairs() async throws {
        let calls = ReduceCalls()
        var total = IndexDefinition(name: "total", version: "1", reduce: .couchDB { keys, values, rereduce in
            calls.record(rereduce: rereduce, keysOK: rereduce ? keys == nil
                         : keys?.allSatisfy { $0.arrayValue?.count == 2 && $0[0]?.intValue != nil && $0[1]?.stringValue?.hasPrefix("n") == true } == true)
            return .integer(values.compactMap(\.intValue).reduce(0, +))
        }) { doc, emit in
            if let n = doc.int(forKey: "n") { emit(.integer(n), .integer(n)) }
        }
        total.reduceChunkSize = 4
        let db = try await makeDatabase(self) { $0.indexes = [total] }
        _ = try await db.save((1...10).map { Document(id: "n\($0)", body: ["n": .integer($0)]) })
        await XCTAssertEqualAsync(try await db.query("total").rows.first?.value, 55)
        XCTAssertEqual(calls.reduces, 3)
        XCTAssertEqual(calls.rereduces, 1)
        XCTAssertTrue(calls.keysWereAsPromised)
    }

    func testEveryLookupUsesTheIndex() async throws {
        let db = try await numbersDatabase()
        _ = try await db.query("by-n")
        let table = try await db.indexWriter.state(named: "by-n").table
        let plans = try ThreadRule.allowing(.testing) { try db.readIndex { connection -> [String] in
            var plans: [String] = []
            for condition in ["key = ?", "key >= ? AND key <= ?", "(key, doc_key) >= (?, ?) AND key < ?", "key > ?"] {
                let statement = try connection.prepare("EXPLAIN QUERY PLAN SELECT key_json FROM \(table) WHERE \(condition) ORDER BY key, doc_key, emit")
                var plan = ""
                while try statement.step() { plan += statement.text(3) + "; " }
                plans.append(plan)
            }
            return plans
        } }
        for plan in plans {
            XCTAssertTrue(plan.contains("SEARCH") && plan.contains("PRIMARY KEY"), plan)
            XCTAssertFalse(plan.contains("SCAN"), plan)
            XCTAssertFalse(plan.contains("TEMP B-TREE"), "no sorting: \(plan)")
        }
    }

    func testStaleOptionsAndUpdateSequence() async throws {
        let db = try await numbersDatabase()
        var query = IndexQuery()
        query.reduce = false
        query.updateSeq = true
        let fresh = try await db.query("by-n", query)
        XCTAssertEqual(fresh.updateSequence, 20)
        _ = try await db.save(Document(id: "new", body: ["n": 100]))
        query.stale = .ok
        let stale = try await db.query("by-n", query)
        XCTAssertEqual(stale.rows.count, 20)
        XCTAssertEqual(stale.updateSequence, 20)
        query.stale = .updateAfter
        let stillStale = try await db.query("by-n", query)
        XCTAssertEqual(stillStale.rows.count, 20)
        query.stale = .ok
        var caughtUp = try await db.query("by-n", query)
        try await eventually("update_after updated the index in the background") {
            caughtUp = try await db.query("by-n", query)
            return caughtUp.rows.count != 20
        }
        XCTAssertEqual(caughtUp.rows.count, 21, "update_after updated the index in the background")
        XCTAssertEqual(caughtUp.updateSequence, 21)
    }
}

/// Counts calls of a custom reduce.
final class ReduceCalls: Sendable {
    private let state = Locked((reduces: 0, rereduces: 0, keysOK: true))
    /// Records a call; `expected` says what its keys should be.
    func record(rereduce: Bool, keysOK ok: Bool) {
        state.withLock {
            if rereduce { $0.rereduces += 1 } else { $0.reduces += 1 }
            $0.keysOK = $0.keysOK && ok
        }
    }
    var reduces: Int { state.withLock { $0.reduces } }
    var rereduces: Int { state.withLock { $0.rereduces } }
    var keysWereAsPromised: Bool { state.withLock { $0.keysOK } }
}

