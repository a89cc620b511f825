@testable import DocStore
import Foundation
import TestSupport
import XCTest

/// `find` judges a selector on a json index's keys instead of the documents' bodies when every
/// condition is on an indexed field and the index mapped the document's current revision
/// (``KeyConditions``). The answers must be those of the selector on the documents: random selectors
/// over random values of every JSON type, through a one-field and a two-field index, against the
/// selector matched on every document; and a stale index, whose keys are older than the documents,
/// must not be believed.
final class FindKeyConditionsTests: XCTestCase {
    private func value(_ random: inout SplitMix64, depth: Int = 0) -> JSON {
        switch Int.random(in: 0..<(depth > 1 ? 6 : 8), using: &random) {
        case 0: return .null
        case 1: return .bool(Bool.random(using: &random))
        case 2, 3: return .integer(Int.random(in: -5...20, using: &random))
        case 4: return .double(Double(Int.random(in: -40...80, using: &random)) / 4)
        case 5: return .string(["", "a", "B", "b", "ab", "é", "Z", "10"].randomElement(using: &random)!)
        case 6: return .array((0..<Int.random(in: 0...3, using: &random)).map { _ in value(&random, depth: depth + 1) })
        default:
            var object = JSONObject()
            for key in ["x", "y"].shuffled(using: &random).prefix(Int.random(in: 0...2, using: &random)) {
                object[key] = value(&random, depth: depth + 1)
            }
            return .object(object)
        }
    }

    /// A condition on one field's value, of any operator `find` accepts.
    private func condition(_ random: inout SplitMix64) -> JSON {
        let argument = value(&random, depth: 1)
        switch Int.random(in: 0..<14, using: &random) {
        case 0: return ["$eq": argument]
        case 1: return ["$ne": argument]
        case 2: return ["$gt": argument]
        case 3: return ["$gte": argument]
        case 4: return ["$lt": argument]
        case 5: return ["$lte": argument]
        case 6: return ["$gte": .integer(Int.random(in: -5...5, using: &random)), "$lte": .integer(Int.random(in: 0...15, using: &random))]
        case 7: return ["$in": .array((0..<3).map { _ in value(&random, depth: 1) })]
        case 8: return ["$nin": .array((0..<2).map { _ in value(&random, depth: 1) })]
        case 9: return ["$type": .string(["number", "string", "array", "object", "null", "boolean"].randomElement(using: &random)!)]
        case 10: return ["$size": .integer(Int.random(in: 0...2, using: &random))]
        case 11: return ["$mod": [3, .integer(Int.random(in: 0...2, using: &random))]]
        case 12: return ["$regex": "^[aA]"]
        default: return ["$exists": true]
        }
    }

    func testJudgingOnKeysAnswersAsTheSelectorOnTheDocuments() async throws {
        let db = try await makeDatabase(self)
        var random = SplitMix64(seed: 0x5EED)
        var documents: [Document] = []
        for index in 0..<300 {
            var body = JSONObject()
            // Most documents have both fields; some lack one (and are then in neither index or only
            // in the first).
            if Int.random(in: 0..<10, using: &random) > 0 { body["a"] = value(&random) }
            if Int.random(in: 0..<10, using: &random) > 0 { body["b"] = value(&random) }
            documents.append(Document(id: String(format: "doc%03d", index), body: body))
        }
        _ = try await db.save(documents)
        try await db.createIndex(fields: [SortField("a")], name: "a", designDocument: "one")
        try await db.createIndex(fields: [SortField("a"), SortField("b")], name: "ab", designDocument: "two")
        let stored = try await db.allDocuments(AllDocumentsQuery(includeDocuments: true)).rows.compactMap(\.document)
            .filter { !$0.id.hasPrefix("_design/") }
        XCTAssertEqual(stored.count, 300)

        var judgedOnKeys = 0
        for round in 0..<260 {
            let twoFields = round % 2 == 1
            var selector: JSONObject = ["a": condition(&random)]
            if twoFields { selector["b"] = condition(&random) }
            if round % 7 == 0 { selector = ["$and": [.object(selector), ["a": ["$exists": true]]]] }
            let mango = try MangoSelector(.object(selector))
            var query = FindQuery(selector: mango)
            query.useIndex = twoFields ? ["two", "ab"] : ["one", "a"]
            query.limit = 1000
            // Some operands cannot be planned against a json index, as in CouchDB (a list with null…).
            guard let plan = try? await db.plan(query), case .json = plan.choice else { continue }
            if KeyConditions(mango, choice: plan.choice) != nil { judgedOnKeys += 1 }
            let found = try await db.find(query).documents.map(\.id)
            // The same query read without the shortcut (conflicts are read with each document).
            query.conflicts = true
            let checked = try await db.find(query).documents.map(\.id)
            let expected = stored.filter { document in
                mango.matches(document) && (twoFields ? document.body["a"] != nil && document.body["b"] != nil : document.body["a"] != nil)
            }.map(\.id)
            XCTAssertEqual(found, checked, "\(JSON.object(selector))")
            XCTAssertEqual(Set(found), Set(expected), "\(JSON.object(selector))")
        }
        // The shortcut was taken: every selector above is on indexed fields only.
        XCTAssertGreaterThan(judgedOnKeys, 195)
    }

    func testAStaleIndexsKeysAreNotBelieved() async throws {
        let db = try await makeDatabase(self)
        _ = try await db.save([Document(id: "moved", body: ["a": 5]), Document(id: "stays", body: ["a": 6])])
        try await db.createIndex(fields: [SortField("a")], name: "a", designDocument: "one")
        let selector = try MangoSelector(["a": ["$gte": 0, "$lte": 10]])
        var query = FindQuery(selector: selector)
        let before = try await db.find(query).documents.map(\.id)
        XCTAssertEqual(before, ["moved", "stays"])
        // The index still has `moved` at 5 when it is read without an update.
        guard var moved = try await db.document(withID: "moved") else { return XCTFail("moved is gone") }
        moved["a"] = 50
        _ = try await db.save(moved)
        query.update = false
        let stale = try await db.find(query).documents.map(\.id)
        XCTAssertEqual(stale, ["stays"])
        query.update = true
        let updated = try await db.find(query).documents.map(\.id)
        XCTAssertEqual(updated, ["stays"])
    }
}
