import DocStore
import Foundation
import XCTest

// The types of Docs/Models.md, as the guide shows them.

struct Contact: Model, Equatable {
    var id: String
    var revision: RevisionID?
    var name: String
    var email: String?
}

struct Job: Model, Equatable {
    static let collection = "job"
    static let history: HistoryPolicy? = .keeping(last: 20, properties: ["notes": .init(count: 3)])
    var id: String
    var revision: RevisionID?
    var title: String
    var status: String
    var notes: String?
    var client: Reference<Contact>?
}

/// The examples of Docs/Models.md, run as written there: every ```swift block of the guide must
/// appear in this file (indentation aside), but for the draft/CQRS example's, which
/// `SeedViewExamplesTests` (DocSyncTests) runs with replication.
final class ModelsGuideTests: XCTestCase {
    func testGuideExamples() async throws {
        let directory = try makeTemporaryDirectory(self)
        let db = try await Database.open(name: "jobs", directory: directory)
        addTeardownBlock { [weak db] in await db?.close() }

        // Typed models
        let added = try await db.add([Contact(id: "ann", name: "Ann"), Contact(id: "", name: "Bob")])
        var ann = added[0]                       // ann.revision is "1-…"
        ann.email = "ann@example.com"
        ann = try await db.update(ann)           // "2-…"
        let both = try await db.fetch(Contact.self, ids: ["ann", added[1].id])
        let named = try await db.fetch(Contact.self, where: QueryField("name") == "Bob")
        XCTAssertEqual(ann.revision?.generation, 2)
        XCTAssertEqual(both.count, 2)
        XCTAssertEqual(named.map(\.name), ["Bob"])

        do {
            try await db.add([Contact(id: "cid", name: "Cid"), Contact(id: "ann", name: "Ann again")])
        } catch let error as DocStoreError {
            print(error.code, error.itemIndex!, error.documentID!)   // conflict 1 ann — and "cid" was not added
        }
        let cid = try await db.fetch(Contact.self, id: "cid")
        XCTAssertNil(cid)

        // Property history
        var job = try await db.add(Job(id: "j1", title: "Fix the roof", status: "open", client: Reference(ann)))
        job.status = "doing"
        job = try await db.update(job)
        let statuses = try await db.history(of: job, property: "status")
        // statuses[0].value == "doing", statuses[1].value == "open", each with .date and .replica
        XCTAssertEqual(statuses.map(\.value), ["doing", "open"])

        // Relationships
        let annsJobs = try await db.referencing(Job.self, to: "ann")          // [job]
        let client = try await db.referenced(Contact.self, from: "j1")        // [ann]
        let contacts = try await db.resolve(Contact.self, [.id("ann"), .match(property: "name", value: "Dee")]) { key in
            Contact(id: "", name: key == .id("ann") ? "?" : "Dee")              // only Dee is created
        }
        XCTAssertEqual(annsJobs.map(\.id), ["j1"])
        XCTAssertEqual(client, [ann])
        XCTAssertEqual(contacts.map(\.name), ["Ann", "Dee"])

        // Interchange
        var backup = Data()
        try await db.export(ExportOptions(format: .ndjson)) { backup.append($0) }
        let copy = try await Database.open(name: "copy", directory: directory)
        let summary = try await copy.importDocuments(from: backup)   // every leaf, history and attachment
        addTeardownBlock { [weak copy] in await copy?.close() }
        XCTAssertEqual(summary.records, 4)
        let copied = try await copy.fetch(Job.self, id: "j1")
        XCTAssertEqual(copied, job)

        try assertGuideBlocksAreIn(guide: "Models.md", excludingSection: "The draft/CQRS pattern", minimumBlocks: 5)
    }
}
