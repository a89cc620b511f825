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

// The draft/CQRS example of the guide.

let getID = IndexDefinition(name: "views/get_id", version: "1", reduce: .custom(applyDrafts)) { doc, emit in
    if doc.type == "draft", case .string(let target)? = doc["target"] {
        emit(.string(target), ["at": doc["at"] ?? .null, "changes": doc["changes"] ?? [:]])
    } else {
        emit(.string(doc.id), ["document": .object(doc.body)])
    }
}

/// A document with its drafts applied in date order. The result keeps the document and the drafts,
/// so that reducing results again (rereduce) gives the same answer.
@Sendable func applyDrafts(_ keys: [JSON], _ values: [JSON], _ rereduce: Bool) throws -> JSON {
    var document = JSON.null
    var drafts: [JSON] = []
    for value in values {
        if let base = value["document"], base != .null { document = base }
        if value["changes"] != nil { drafts.append(value) }
        drafts += value["drafts"]?.arrayValue ?? []
    }
    drafts.sort { ($0["at"]?.stringValue ?? "", $0.description) < ($1["at"]?.stringValue ?? "", $1.description) }
    var current = document.objectValue ?? [:]
    for draft in drafts {
        for (member, value) in draft["changes"]?.objectValue ?? [:] { current[member] = value }
    }
    return ["current": .object(current), "document": document, "drafts": .array(drafts)]
}

/// The examples of Docs/Models.md, run as written there: every ```swift block of the guide must
/// appear in this file (indentation aside), and the draft/CQRS example answers over HTTP with the
/// JSON the guide shows.
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

        try assertGuideBlocksAreIn(guide: "Models.md", minimumBlocks: 6)
    }

    func testTheDraftExampleOverHTTP() async throws {
        let server = try await TestServer(self, indexes: { _ in [getID] })
        await XCTAssertEqualAsync(try await server.request("PUT", "/plant").status, 201)
        let documents = try JSON(parsing: """
            {"docs": [
              {"_id": "pump-7", "type": "asset", "name": "Feed pump", "status": "running", "pressure": 4.2},
              {"_id": "valve-3", "type": "asset", "name": "Inlet valve", "status": "open"},
              {"_id": "tank-1", "type": "asset", "name": "Buffer tank", "level": 0.8},
              {"_id": "draft-1", "type": "draft", "target": "pump-7", "at": "2026-11-20T08:00:00Z", "changes": {"status": "stopped"}},
              {"_id": "draft-2", "type": "draft", "target": "pump-7", "at": "2026-11-20T09:30:00Z", "changes": {"pressure": 0}},
              {"_id": "draft-3", "type": "draft", "target": "valve-3", "at": "2026-11-21T07:15:00Z", "changes": {"status": "closed"}}
            ]}
            """)
        await XCTAssertEqualAsync(try await server.request("POST", "/plant/_bulk_docs", json: documents).status, 201)

        let rows = try await server.request("GET", "/plant/_design/views/_view/get_id?reduce=false")
        XCTAssertEqual(rows.status, 200)
        XCTAssertEqual(rows.json["total_rows"], 6)
        XCTAssertEqual(rows.json["rows"]?.arrayValue?.map { $0["key"]! }, ["pump-7", "pump-7", "pump-7", "tank-1", "valve-3", "valve-3"])
        XCTAssertEqual(rows.json["rows"]?.arrayValue?.map { $0["id"]! }, ["draft-1", "draft-2", "pump-7", "tank-1", "draft-3", "valve-3"])
        XCTAssertEqual(rows.json, try JSON(parsing: Self.guideAnswer("reduce=false")))
        let applied = try await server.request("GET", "/plant/_design/views/_view/get_id?group=true")
        XCTAssertEqual(applied.status, 200)
        let current = applied.json["rows"]?.arrayValue?.map { $0["value"]?["current"] ?? .null } ?? []
        XCTAssertEqual(current.map { $0["status"] }, ["stopped", nil, "closed"], "drafts applied in date order")
        XCTAssertEqual(current.first?["pressure"], 0)
        XCTAssertEqual(current.dropFirst().first?["level"], 0.8, "a document without drafts is as it is")
        XCTAssertEqual(applied.json, try JSON(parsing: Self.guideAnswer("group=true")))
    }

    /// The JSON Docs/Models.md shows for a query of the example (the ```json block after the line
    /// that names the query).
    static func guideAnswer(_ query: String) throws -> String {
        let guide = try String(contentsOf: guideURL("Models.md"), encoding: .utf8)
        let after = try XCTUnwrap(guide.components(separatedBy: "get_id?\(query)`").dropFirst().first, query)
        return try XCTUnwrap(after.components(separatedBy: "```json\n").dropFirst().first?.components(separatedBy: "```").first)
    }
}
