import DocStore
import Foundation
import XCTest

struct Chore: Model, Equatable {
    static let collection = "task"
    static let history: HistoryPolicy? = .keeping(last: 3, properties: ["status": .init(age: 3600)])
    var id: String
    var revision: RevisionID?
    var title: String
    var status: String
    var assignee: String?
}

/// Property history: what an edit records, trimming, and the merge of two replicas' conflicting edits.
final class PropertyHistoryTests: XCTestCase {
    func testEditsRecordEachChangedPropertyNewestFirst() async throws {
        let db = try await makeDatabase(self)
        var task = try await db.add(Chore(id: "t", title: "Write", status: "open", assignee: "ann"))
        task.status = "doing"
        task = try await db.update(task)
        task.assignee = nil
        task.status = "done"
        task = try await db.update(task)
        task.title = "Write" // unchanged: nothing recorded
        task = try await db.update(task)

        let statuses = try await db.history(of: task, property: "status")
        XCTAssertEqual(try statuses.map { try $0.decode(as: String.self) }, ["done", "doing", "open"])
        let uuid = try await db.info().uuid
        XCTAssertTrue(statuses.allSatisfy { $0.replica == uuid })
        XCTAssertTrue(zip(statuses, statuses.dropFirst()).allSatisfy { $0.milliseconds > $1.milliseconds },
                      "dates strictly decrease even for edits in one millisecond")
        let assignees = try await db.history(of: Chore.self, id: "t", property: "assignee")
        XCTAssertEqual(assignees.map(\.value), [.null, "ann"], "a removed property records null")
        let titles = try await db.history(of: task, property: "title")
        XCTAssertEqual(titles.count, 1)

        let document = try await db.document(withID: "t")
        XCTAssertNil(document?["assignee"], "a property whose newest value is null is absent")
        XCTAssertEqual(document?["status"], "done")
        XCTAssertEqual(document?[PropertyHistory.member]?["keep"], ["count": 3, "properties": ["status": ["seconds": 3600.0]]])
    }

    func testTrimmingByCountAndAgePerProperty() async throws {
        let db = try await makeDatabase(self)
        var task = try await db.add(Chore(id: "t", title: "v0", status: "s0"))
        for n in 1...5 {
            task.title = "v\(n)"
            task.status = "s\(n)"
            task = try await db.update(task)
        }
        let titles = try await db.history(of: task, property: "title")
        XCTAssertEqual(titles.map(\.value), ["v5", "v4", "v3"], "the type keeps 3 values")
        let statuses = try await db.history(of: task, property: "status")
        XCTAssertEqual(statuses.count, 6, "status keeps an hour, however many")

        // Age is measured from the property's newest value: an old value goes once a newer one is set.
        var body = try await db.document(withID: "t")!.body
        var history = try XCTUnwrap(PropertyHistory(body: body))
        let old = PropertyValue(value: "ancient", milliseconds: history.values["status"]![0].milliseconds - 7_200_000,
                                replica: "x")
        history.values["status"]!.append(old)
        body[PropertyHistory.member] = ["keep": ["count": 3, "properties": ["status": ["seconds": 3600]]],
                                        "values": ["status": .array(history.values["status"]!.map { value in
                                            ["at": .string(Self.format(value.milliseconds)), "by": .string(value.replica),
                                             "value": value.value]
                                        })]]
        let merged = try XCTUnwrap(PropertyHistory.merged([body]))
        let kept = PropertyHistory(body: merged)?.values["status"] ?? []
        XCTAssertEqual(kept.count, 6, "the value two hours older than the newest is dropped, the others kept")
        XCTAssertFalse(kept.contains { $0.value == "ancient" })
    }

    func testTheMergeKeepsEditsToDifferentPropertiesAndIsOrderFree() throws {
        func body(_ values: [String: [(String, Int64, String)]]) -> JSONObject {
            var properties = JSONObject()
            for name in values.keys.sorted() {
                properties[name] = .array(values[name]!.map { ["at": .string(Self.format($0.1)), "by": .string($0.2),
                                                              "value": .string($0.0)] })
            }
            return ["type": "task", "title": "?", PropertyHistory.member: ["keep": [:], "values": .object(properties)]]
        }
        let base: [(String, Int64, String)] = [("open", 1_000, "a")]
        // Replica a changed the title, replica b the status, concurrently.
        let fromA = body(["title": [("Ship", 5_000, "a"), ("Write", 1_000, "a")], "status": base])
        let fromB = body(["title": [("Write", 1_000, "a")], "status": [("done", 4_000, "b")] + base])
        let fromC = body(["title": [("Write", 1_000, "a")], "status": [("late", 4_000, "c")] + base])
        let merged = try XCTUnwrap(PropertyHistory.merged([fromA, fromB, fromC]))
        XCTAssertEqual(merged["title"], "Ship")
        XCTAssertEqual(merged["status"], "late", "equal dates: the greater replica id wins")
        XCTAssertEqual(PropertyHistory(body: merged)?.values["status"]?.map(\.value), ["late", "done", "open"])
        XCTAssertEqual(PropertyHistory.merged([fromA, fromC, fromB]), merged, "the losers' order does not matter")
        XCTAssertNil(PropertyHistory.merged([fromA, ["type": "task", "title": "plain"]]), "a leaf without history is not merged")
    }

    func testAReplicatedConflictIsMergedWithTheSameRevisionOnBothSides() async throws {
        let a = try await makeDatabase(self, name: "a")
        let b = try await makeDatabase(self, name: "b")
        let created = try await a.add(Chore(id: "t", title: "Write", status: "open"))
        try await replicateDocument("t", from: a, to: b)
        var onA = created
        onA.title = "Write docs"
        try await a.update(onA)
        var onB = try await b.fetch(Chore.self, id: "t")!
        onB.status = "doing"
        try await b.update(onB)

        try await replicateDocument("t", from: b, to: a)
        try await replicateDocument("t", from: a, to: b)
        let treeA = try await a.revisionTree(ofDocumentWithID: "t")
        let treeB = try await b.revisionTree(ofDocumentWithID: "t")
        XCTAssertEqual(treeA?.winner?.revision, treeB?.winner?.revision, "both merged to the same revision")
        XCTAssertEqual(treeA?.winner?.revision.generation, 3)
        XCTAssertEqual(treeA?.conflicts, [])
        XCTAssertEqual(Set(treeA?.leaves.map(\.revision) ?? []), Set(treeB?.leaves.map(\.revision) ?? []))
        let merged = try await a.fetch(Chore.self, id: "t")
        XCTAssertEqual(merged?.title, "Write docs")
        XCTAssertEqual(merged?.status, "doing", "edits to different properties both survive")

        // Turned off, the conflict stays as CouchDB would keep it.
        let c = try await makeDatabase(self, name: "c") { $0.mergesPropertyHistory = false }
        try await replicateDocument("t", from: a, to: c)
        var onC = try await c.fetch(Chore.self, id: "t")!
        onC.status = "done"
        try await c.update(onC)
        var again = try await a.fetch(Chore.self, id: "t")!
        again.title = "Edit"
        try await a.update(again)
        try await replicateDocument("t", from: a, to: c)
        let conflicts = try await c.revisionTree(ofDocumentWithID: "t")?.conflicts
        XCTAssertEqual(conflicts?.count, 1)
    }

    func testTheMergeTombstoneKeepsTheLeafsChannels() async throws {
        let db = try await makeDatabase(self)
        func body(_ value: Int, at time: String, by replica: String) -> JSONObject {
            ["a": .integer(value), "channels": ["team"], "type": "x",
             PropertyHistory.member: ["keep": [:], "values": ["a": [["at": .string(time), "by": .string(replica), "value": .integer(value)]]]]]
        }
        var root = Document(id: "d", revision: RevisionID("1-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"), body: body(1, at: "2026-01-01T00:00:00.000Z", by: "r1"))
        root.revisionHistory = []
        var left = Document(id: "d", revision: RevisionID("2-bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"), body: body(2, at: "2026-01-01T00:00:01.000Z", by: "r1"))
        left.revisionHistory = [root.revision!]
        var right = Document(id: "d", revision: RevisionID("2-cccccccccccccccccccccccccccccccc"), body: body(3, at: "2026-01-01T00:00:02.000Z", by: "r2"))
        right.revisionHistory = [root.revision!]
        _ = try await db.insertRevisions([root, left, right])
        let tree = try await db.revisionTree(ofDocumentWithID: "d")
        XCTAssertEqual(tree?.conflicts, [], "merged")
        let closed = try XCTUnwrap(tree?.leaves.first { $0.isDeleted })
        let tombstone = try await db.document(withID: "d", revision: closed.revision)
        XCTAssertEqual(tombstone?["channels"], ["team"])
        let merged = try await db.document(withID: "d")
        XCTAssertEqual(merged?["a"], 3, "the newest value")
        XCTAssertEqual(PropertyHistory(body: merged!.body)?.values["a"]?.count, 2)
    }

    static func format(_ milliseconds: Int64) -> String {
        let date = Date(timeIntervalSince1970: Double(milliseconds) / 1000)
        return date.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true))
    }
}
