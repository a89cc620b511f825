import DocStore
import Foundation
import TestSupport
import XCTest

/// The three examples of Docs/Indexes.md, run as written there.
final class IndexesGuideTests: XCTestCase {
    // Example 1: invoices by total cost.
    static let invoicesByTotal = IndexDefinition(name: "invoices/by-total", version: "1") { doc, emit in
        guard doc.type == "invoice", let total = doc["TotalCost"], let number = doc["InvoiceNumber"] else { return }
        emit(total, number)
    }

    // Example 2: documents by colour.
    static let byColour = IndexDefinition(name: "by-colour", version: "1") { doc, emit in
        if let colour = doc.string(forKey: "colour") { emit(.string(colour), nil) }
    }

    // Example 3: how many documents of each type.
    static let countByType = IndexDefinition(name: "count-by-type", version: "1", reduce: .count) { doc, emit in
        if let type = doc.type { emit(.string(type), nil) }
    }

    func testGuideExamples() async throws {
        let db = try await makeDatabase(self) { config in
            config.indexes = [Self.invoicesByTotal, Self.byColour, Self.countByType]
        }
        _ = try await db.save([
            Document(id: "inv-1", body: ["type": "invoice", "InvoiceNumber": 1001, "TotalCost": 250.0]),
            Document(id: "inv-2", body: ["type": "invoice", "InvoiceNumber": 1002, "TotalCost": 75.5]),
            Document(id: "inv-3", body: ["type": "invoice", "InvoiceNumber": 1003, "TotalCost": 1200.0]),
            Document(id: "car", body: ["type": "product", "colour": "red"]),
            Document(id: "sky", body: ["type": "product", "colour": "blue"]),
            Document(id: "leaf", body: ["type": "product", "colour": "green"]),
            Document(id: "rose", body: ["type": "product", "colour": "red"]),
        ])

        // Invoices of 100 or more, most expensive first: descending, so the start key is the high end.
        var expensive = IndexQuery()
        expensive.descending = true
        expensive.endKey = 100
        let numbers = try await db.query("invoices/by-total", expensive).rows.map(\.value)
        XCTAssertEqual(numbers, [1003, 1001])

        // Red things, then blue things, in the order asked.
        var colours = IndexQuery()
        colours.keys = ["red", "blue"]
        colours.includeDocuments = true
        let things = try await db.query("by-colour", colours).rows.map { $0.document?.id }
        XCTAssertEqual(things, ["car", "rose", "sky"])

        // How many of each type.
        var perType = IndexQuery()
        perType.group = true
        let counts = try await db.query("count-by-type", perType).rows.map { "\($0.key.stringValue!): \($0.value)" }
        XCTAssertEqual(counts, ["invoice: 3", "product: 4"])
    }

    /// "Work in progress": the guide's watcher, while a build is held on one document until the test
    /// has looked at the database's tasks.
    func testWorkInProgress() async throws {
        let hold = MapHold()
        let byColour = IndexDefinition(name: "by-colour", version: "1") { doc, emit in
            if doc.id == "thing-0700" { hold.hold() }
            if let colour = doc.string(forKey: "colour") { emit(.string(colour), nil) }
        }
        let db = try await makeDatabase(self) { $0.indexes = [byColour] }
        _ = try await db.save((0..<1200).map { Document(id: String(format: "thing-%04d", $0), body: ["colour": "red"]) })
        XCTAssertEqual(db.activeTasks, [])
        defer { hold.release() }
        let seen = Task {
            await hold.reached()
            let tasks = db.activeTasks
            hold.release()
            return tasks
        }

        let watcher = Task {
            while !Task.isCancelled { showProgress(of: db); try await Task.sleep(for: .seconds(1)) }
        }
        _ = try await db.query("by-colour")   // the first query builds the index
        watcher.cancel()

        let listed = await seen.value
        XCTAssertEqual(listed.map(\.kind), [.indexing(indexName: "by-colour")])
        XCTAssertEqual(listed.first?.database, db.name)
        XCTAssertEqual(listed.first?.totalChanges, 1200)
        // The first window of 500 is written, or waits to be while the second is mapped.
        XCTAssertTrue([0, 500].contains(listed.first?.changesDone ?? -1), "\(listed)")
        XCTAssertEqual(db.activeTasks, [], "a task is gone once its work ends")
        try assertGuideBlocksAreIn(guide: "Indexes.md", section: "Work in progress", minimumBlocks: 2)
    }
}

func showProgress(of db: Database) {
    for task in db.activeTasks {
        print(task.kind, "\(task.changesDone) of \(task.totalChanges)", "\(task.progress) %")
    }
}
