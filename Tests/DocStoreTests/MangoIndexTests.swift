@testable import DocStore
import Foundation
import XCTest

/// Mango `json` indexes: stored as CouchDB stores them, built on the map/reduce machinery, recognised
/// when their design document arrives by replication.
final class MangoIndexTests: XCTestCase {
    /// The design document CouchDB 3.3.3 wrote for `POST /db/_index` with
    /// `{"index":{"fields":["kind"],"partial_filter_selector":{"v":{"$gt":1}}},"ddoc":"mine","name":"byKind"}`.
    private let couchDBDesignDocument = #"""
    {"language":"query","views":{"byKind":{"map":{"fields":{"kind":"asc"},"partial_filter_selector":{"v":{"$gt":1}}},"reduce":"_count","options":{"def":{"fields":["kind"],"partial_filter_selector":{"v":{"$gt":1}}}}}}}
    """#

    private func seed(_ db: Database) async throws {
        _ = try await db.save([
            Document(id: "a", body: ["kind": "x", "v": 5]), Document(id: "b", body: ["kind": "y", "v": 1]),
            Document(id: "c", body: ["v": 9]), Document(id: "d", body: ["kind": "x", "v": 2]),
        ])
    }

    private func keys(_ db: Database, _ index: MangoIndex) async throws -> [JSON] {
        var rows = IndexQuery()
        rows.reduce = false
        return try await db.query(index.indexName, rows).rows.map(\.key)
    }

    func testAJsonIndexReducesToItsCountAsCouchDBsViewDoes() async throws {
        let db = try await makeDatabase(self)
        try await seed(db)
        try await db.createIndex(fields: [SortField("kind")], name: "byKind", designDocument: "mine")
        let index = try await XCTUnwrapAsync(try await db.mangoIndexes().first)
        let counted = try await db.query(index.indexName)
        XCTAssertEqual(counted.rows.map { $0.value }, [3], "reduce defaults to _count")
        var grouped = IndexQuery()
        grouped.group = true
        let groups = try await db.query(index.indexName, grouped).rows
        XCTAssertEqual(groups.map { $0.key }, [["x"], ["y"]])
        XCTAssertEqual(groups.map { $0.value }, [2, 1])
    }

    func testCreatedAsCouchDBStoresItAndBuiltFromTheDocumentsWithEveryField() async throws {
        let db = try await makeDatabase(self)
        try await seed(db)
        let creation = try await db.createIndex(fields: ["kind"].map { SortField($0) }, name: "byKind", designDocument: "mine",
                                                partialFilter: ["v": ["$gt": 1]])
        XCTAssertEqual(creation, IndexCreation(designDocument: "_design/mine", name: "byKind", created: true))
        let ddoc = try await XCTUnwrapAsync(try await db.document(withID: "_design/mine"))
        XCTAssertEqual(JSON.object(ddoc.body), try JSON(parsing: Data(couchDBDesignDocument.utf8)), "CouchDB's form, member order included")
        XCTAssertEqual(JSON.object(ddoc.body).description, try JSON(parsing: Data(couchDBDesignDocument.utf8)).description)

        let again = try await db.createIndex(fields: [SortField("kind")], name: "byKind", designDocument: "_design/mine",
                                             partialFilter: ["v": ["$gt": 1]])
        XCTAssertFalse(again.created, "the same definition exists")
        let indexes = try await db.mangoIndexes()
        XCTAssertEqual(indexes.map(\.name), ["byKind"])
        // Only documents with the field that match the partial filter: not b (v 1), not c (no kind).
        await XCTAssertEqualAsync(try await keys(db, indexes[0]), [["x"], ["x"]])
        _ = try await db.save(Document(id: "e", body: ["kind": "a", "v": 3]))
        await XCTAssertEqualAsync(try await keys(db, indexes[0]), [["a"], ["x"], ["x"]], "kept up to date")
    }

    func testAGeneratedNameIsTheDefinitionsHashAndTwoFieldsMakeAnArrayKey() async throws {
        let db = try await makeDatabase(self)
        try await seed(db)
        let creation = try await db.createIndex(fields: [.descending("kind"), .descending("v")])
        XCTAssertEqual(creation.name.count, 40)
        XCTAssertTrue(creation.name.allSatisfy(\.isHexDigit))
        XCTAssertEqual(creation.designDocument, "_design/" + creation.name)
        let index = try await XCTUnwrapAsync(try await db.mangoIndexes().first)
        XCTAssertEqual(index.fields, [.descending("kind"), .descending("v")])
        await XCTAssertEqualAsync(try await keys(db, index), [["x", 2], ["x", 5], ["y", 1]])
        XCTAssertEqual(index.listingJSON["def"], ["fields": [["kind": "desc"], ["v": "desc"]]])
        let same = try await db.createIndex(fields: [.descending("kind"), .descending("v")])
        XCTAssertEqual(same, IndexCreation(designDocument: creation.designDocument, name: creation.name, created: false))
    }

    func testAChangedDefinitionReplacesTheIndexOfThatName() async throws {
        let db = try await makeDatabase(self)
        try await seed(db)
        try await db.createIndex(fields: [SortField("kind")], name: "i", designDocument: "d")
        let replaced = try await db.createIndex(fields: [SortField("v")], name: "i", designDocument: "d")
        XCTAssertTrue(replaced.created)
        let indexes = try await db.mangoIndexes()
        XCTAssertEqual(indexes.map(\.fields), [[SortField("v")]])
        await XCTAssertEqualAsync(try await keys(db, indexes[0]), [[1], [2], [5], [9]], "rebuilt on the new field")
    }

    func testADesignDocumentThatArrivesByReplicationIsRecognisedAndBuilt() async throws {
        let db = try await makeDatabase(self)
        try await seed(db)
        let body = try JSON(parsing: Data(couchDBDesignDocument.utf8)).objectValue!
        let results = try await db.insertRevisions([Document(id: "_design/mine", revision: RevisionID("1-0607776b003b5920cfc9e116963ec41e"), body: body)])
        XCTAssertNil(results.first?.error)
        let indexes = try await db.mangoIndexes()
        XCTAssertEqual(indexes, [MangoIndex(designDocument: "_design/mine", name: "byKind", fields: [SortField("kind")],
                                            partialFilter: try MangoSelector(["v": ["$gt": 1]]))])
        await XCTAssertEqualAsync(try await keys(db, indexes[0]), [["x"], ["x"]])
        // A design document of another language holds no Mango index.
        _ = try await db.save(Document(id: "_design/js", body: ["language": "javascript", "views": ["v": ["map": "function(doc){}"]]]))
        await XCTAssertEqualAsync(try await db.mangoIndexes().count, 1)
    }

    func testDeletingAnIndexRemovesItsViewThenItsDesignDocumentAndItsRows() async throws {
        let db = try await makeDatabase(self)
        try await seed(db)
        try await db.createIndex(fields: [SortField("kind")], name: "one", designDocument: "shared")
        try await db.createIndex(fields: [SortField("v")], name: "two", designDocument: "shared")
        await XCTAssertEqualAsync(try await db.mangoIndexes().map(\.name), ["one", "two"])
        try await db.deleteIndex(designDocument: "shared", name: "one")
        await XCTAssertEqualAsync(try await db.mangoIndexes().map(\.name), ["two"])
        let names = await db.indexNames
        XCTAssertEqual(names, ["mango:_design/shared/two"], "the deleted index's rows are dropped")
        try await db.deleteIndex(designDocument: "_design/shared", name: "two")
        await XCTAssertEqualAsync(try await db.document(withID: "_design/shared") == nil, true, "the last view takes the design document")
        await XCTAssertEqualAsync(await db.indexNames, [])
        do {
            try await db.deleteIndex(designDocument: "shared", name: "two")
            XCTFail("deleted twice")
        } catch let error as DocStoreError {
            XCTAssertEqual(error.code, .notFound)
        }
    }

    func testMalformedDefinitionsGetCouchDBsErrors() async throws {
        let db = try await makeDatabase(self)
        let cases: [([SortField], JSON?, DocStoreError.Code)] = [
            ([SortField("a"), .descending("b")], nil, .unsupportedMixedSort),
            ([SortField("a..b")], nil, .invalidFieldName),
            ([SortField("a")], ["x": ["$foo": 1]], .invalidOperator),
            ([SortField("a")], ["x": ["$in": 1]], .badArgument),
        ]
        for (fields, filter, code) in cases {
            do {
                try await db.createIndex(fields: fields, partialFilter: filter)
                XCTFail("\(fields) \(String(describing: filter)) was accepted")
            } catch let error as DocStoreError {
                XCTAssertEqual(error.code, code, "\(fields)")
            }
        }
        _ = try await db.save(Document(id: "_design/js", body: ["language": "javascript"]))
        do {
            try await db.createIndex(fields: [SortField("a")], designDocument: "js")
            XCTFail("wrote into a javascript design document")
        } catch let error as DocStoreError {
            XCTAssertEqual(error.code, .invalidIndex)
        }
        await XCTAssertEqualAsync(try await db.mangoIndexes().count, 0, "nothing was written")
    }
}

private func XCTUnwrapAsync<T>(_ expression: @autoclosure () async throws -> T?, file: StaticString = #filePath,
                               line: UInt = #line) async throws -> T {
    let value = try await expression()
    return try XCTUnwrap(value, file: file, line: line)
}

/// `find`'s options that the recorded answers do not cover.
final class FindOptionTests: XCTestCase {
    func testConflictsStaleReadsAndUseIndexOfAPartialIndex() async throws {
        let db = try await makeDatabase(self)
        _ = try await db.save([Document(id: "a", body: ["n": 1]), Document(id: "b", body: ["n": 2])])
        // A conflict on b, as replication brings one.
        _ = try await db.insertRevisions([Document(id: "b", revision: RevisionID("1-ffffffffffffffffffffffffffffffff"), body: ["n": 3])])
        try await db.createIndex(fields: [SortField("n")], name: "n", designDocument: "d")

        var query = FindQuery(selector: try MangoSelector(["n": ["$gt": 0]]))
        query.conflicts = true
        let withConflicts = try await db.find(query)
        XCTAssertEqual(withConflicts.documents.map(\.id), ["a", "b"])
        XCTAssertEqual(withConflicts.documents[1].conflicts.count, 1, "b's losing leaf is listed")
        XCTAssertEqual(withConflicts.documents[0].conflicts, [])
        query.conflicts = false
        let withoutConflicts = try await db.find(query)
        XCTAssertEqual(withoutConflicts.documents[1].conflicts, [], "not asked: not listed")

        // update: false reads the index as it is; the next default read brings it up to date.
        _ = try await db.save(Document(id: "c", body: ["n": 4]))
        query.update = false
        let stale = try await db.find(query)
        XCTAssertEqual(stale.documents.map(\.id), ["a", "b"], "the index was not updated")
        query.update = true
        let fresh = try await db.find(query)
        XCTAssertEqual(fresh.documents.map(\.id), ["a", "b", "c"])

        // A partial index answers only when use_index names it.
        try await db.createIndex(fields: [SortField("n")], name: "big", designDocument: "p", partialFilter: ["n": ["$gte": 3]])
        var partial = FindQuery(selector: try MangoSelector(["n": ["$gt": 0]]))
        let global = try await db.explain(partial)
        XCTAssertEqual(global.index?.name, "n")
        partial.useIndex = ["p", "big"]
        let named = try await db.explain(partial)
        XCTAssertEqual(named.index?.name, "big")
        let fromPartial = try await db.find(partial)
        XCTAssertEqual(fromPartial.documents.map(\.id), ["b", "c"], "only what the partial index holds")
    }
}
