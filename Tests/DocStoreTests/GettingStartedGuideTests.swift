import DocStore
import Foundation
import TestSupport
import XCTest

/// Docs/GettingStarted.md, every Swift block in order, with what the blocks print checked.
final class GettingStartedGuideTests: XCTestCase {
    private final class Recorder: DatabaseChangeDelegate {
        let ids = Locked<[String]>([])
        func database(_ database: Database, didChange changes: [DocumentChange]) {
            ids.withLock { $0 += changes.map(\.id) }
        }
    }

    func testGuide() async throws {
        let folder = try makeTemporaryDirectory(self)
        let printed = Locked<[String]>([])
        @Sendable func print(_ items: Any...) { printed.withLock { $0.append(items.map { "\($0)" }.joined(separator: " ")) } }
        let jpegURL = folder.appendingPathComponent("photo.jpg")
        try Data([0xFF, 0xD8, 0xFF, 0xE0, 1, 2, 3, 0xFF, 0xD9]).write(to: jpegURL)
        let myDelegate = Recorder()

        var config = DatabaseConfiguration(name: "inventory", directory: folder)
        config.revisionsLimit = 100                     // history kept per branch (default 1000, as CouchDB)
        let db = try await Database.open(config)   // <folder>/inventory.sqlite, created if missing

        XCTAssertTrue(Database.openedWith(config) === db)
        addTeardownBlock { [weak db] in await db?.close() }

        var item: Document = ["id": "lamp", "name": "Lamp", "price": 19.5, "tags": ["light"]]
        item.type = "product"                      // stored as the body field "type"
        item = try await db.save(item)             // created: revision "1-…"

        item["price"] = 17.0
        item = try await db.save(item)             // revision "2-…"
        print(item.id, item.revision!.generation, item["price"]!)   // lamp 2 17.0

        // Another database gets `lamp` at revision 2, to branch from there later as a peer would.
        let other = try await makeDatabase(self, name: "other")
        _ = try await other.insertRevisions([try await db.document(withID: "lamp", includeRevisionHistory: true)!])

        var staleCopy = try await db.fetchDocument("lamp")!
        _ = try await db.save(["id": "lamp", "name": "Lamp", "price": 15.0])   // someone else saves meanwhile
        staleCopy["price"] = 16.0
        do {
            try await db.save(staleCopy)
        } catch let error as DocStoreError where error.code == .conflict {
            var current = try await db.document(withID: staleCopy.id)!
            current["price"] = staleCopy["price"]  // merge your change into `current` and save that
            try await db.save(current)
        }

        let lamp = try await db.fetchDocument("lamp")!
        XCTAssertEqual(lamp["price"], 16.0)
        XCTAssertEqual(lamp.revision?.generation, 4, "the stale save failed; the merge is the fourth revision")
        XCTAssertNil(lamp["type"], "the unconditional save replaced the whole body")

        struct Product: Codable { var name: String; var price: Double }
        let saved = try await db.save(try Document(id: "desk", from: Product(name: "Desk", price: 120)))
        let product = try saved.decode(as: Product.self)
        print(product.name, saved.metaData.revision!.generation)   // Desk 1

        let stock = try await db.save([["id": "stool", "price": 25], ["id": "bench", "price": 80]])   // all or nothing
        print(stock.map(\.id))                                    // ["stool", "bench"], with their revisions

        let results = try await db.save(each: [["id": "chair"], ["id": "_bad"], ["id": "shelf", "price": 40]])
        for result in results where !result.isSuccess {
            print(result.id, result.error!.couchDBError, result.error!.reason)   // _bad illegal_docid …
        }

        XCTAssertEqual(stock.map(\.id), ["stool", "bench"])
        XCTAssertTrue(stock.allSatisfy { $0.revision?.generation == 1 })
        let refused = await assertThrowsDocStoreError(.invalidDocumentID) {
            try await db.save([["id": "table"], ["id": "_bad"]])
        }
        XCTAssertEqual(refused?.itemIndex, 1)
        await XCTAssertEqualAsync(try await db.fetchDocument("table") == nil, true, "all or nothing: the good one is not written")
        XCTAssertEqual(results.map(\.isSuccess), [true, false, true])
        var branch = try await other.fetchDocument("lamp")!
        branch["price"] = 99.0
        branch = try await other.save(branch)
        branch = try await other.save(branch)
        let pulledDocuments = [try await other.document(withID: "lamp", includeRevisionHistory: true)!]

        let inserted = try await db.insertRevisions(pulledDocuments)  // each with revision + revisionHistory
        let doc = try await db.document(withID: "lamp", includeConflicts: true)!
        for loser in doc.conflicts {
            try await db.delete(id: doc.id, revision: loser)          // resolve by deleting the losers
        }

        XCTAssertTrue(inserted.allSatisfy(\.isSuccess))
        XCTAssertEqual(doc.conflicts.count, 1, "the pulled branch conflicted with the local one")
        await XCTAssertEqualAsync(try await db.document(withID: "lamp", includeConflicts: true)?.conflicts, [])

        var photo = Document(id: "photo-1")
        photo.attachments["full.jpg"] = try Attachment(contentsOf: jpegURL, contentType: "image/jpeg")
        photo = try await db.save(photo)
        let bytes = try await db.attachmentData(photo.attachments["full.jpg"]!)

        XCTAssertEqual(bytes, try Data(contentsOf: jpegURL))

        let page = try await db.changes(since: 0, limit: 100)       // each changed doc once, in sequence order
        for change in page.changes { print(change.sequence, change.id, change.revision, change.isDeleted) }
        let next = page.lastSequence                                 // pass as `since` to continue

        let listener = Task {                                        // one batch per committed write
            for await batch in db.observeChanges() { batch.forEach { print($0.id, $0.source) } }   // .local, .replication, .otherConnection
        }
        db.changeDelegate = myDelegate                               // or a delegate (held weakly)

        XCTAssertEqual(page.changes.map(\.id), ["desk", "stool", "bench", "chair", "shelf", "lamp", "photo-1"])
        // The listener and the delegate subscribe as their tasks start: write until both have heard a write.
        var writes = 0
        try await eventually {
            writes += 1
            _ = try await db.save(["id": .string("after-\(writes)")])
            return printed.withLock { $0.last?.hasPrefix("after-") == true } && myDelegate.ids.withLock { !$0.isEmpty }
        }
        await XCTAssertEqualAsync(try await db.changes(since: next).changes.map(\.id), (1...writes).map { "after-\($0)" })
        listener.cancel()

        let lines = printed.withLock { $0 }
        XCTAssertEqual(Array(lines.prefix(4)), ["lamp 2 17.0", "Desk 1", #"["stool", "bench"]"#,
                                                "_bad illegal_docid Only reserved document ids may start with underscore."])
        XCTAssertEqual(lines.count(where: { $0.hasPrefix("after-") }), lines.count - 4 - 7, "the feed's seven lines, then the listener's")
        XCTAssertTrue(lines.dropFirst(11).allSatisfy { $0.hasSuffix(" local") })
        XCTAssertTrue(myDelegate.ids.withLock { $0.allSatisfy { $0.hasPrefix("after-") } })
        try assertGuideBlocksAreIn(guide: "GettingStarted.md", minimumBlocks: 8)
    }
}
