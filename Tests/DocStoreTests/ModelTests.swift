import DocStore
import Foundation
import XCTest

struct Person: Model, Equatable {
    var id: String
    var revision: RevisionID?
    var name: String
    var age: Int
    var email: String?
}

struct Invoice: Model, Equatable {
    static let collection = "invoice"
    var id: String
    var revision: RevisionID?
    var total: Double
}

/// A model whose encoding names the revision `_rev`, as Cloudant-style models do.
struct Ticket: Model, Equatable {
    var id: String
    var revision: RevisionID?
    var title: String

    enum CodingKeys: String, CodingKey {
        case id = "_id", revision = "_rev", title
    }
}

/// Typed models: bulk writes all or nothing with errors that name the item, `_rev` round trips,
/// typed queries, change streams and live queries.
final class ModelTests: XCTestCase {
    func testAddFetchUpdateDeleteRoundTripTheRevision() async throws {
        let db = try await makeDatabase(self)
        let added = try await db.add([Person(id: "ann", name: "Ann", age: 31), Person(id: "", name: "Bob", age: 25)])
        XCTAssertEqual(added[0].revision?.generation, 1)
        XCTAssertFalse(added[1].id.isEmpty, "an empty id is filled in")
        let stored = try await db.document(withID: "ann")
        XCTAssertEqual(stored?.body, ["age": 31, "name": "Ann", "type": "Person"],
                       "id and revision are _id and _rev, not members; the others are in sorted order")
        XCTAssertEqual(stored?.revision, added[0].revision)

        var fetched = try await db.fetch(Person.self, ids: ["ann", added[1].id])
        XCTAssertEqual(fetched, added, "the revision round-trips through fetch")
        fetched[0].age = 32
        fetched[0].email = "ann@example.com"
        let updated = try await db.update(fetched)
        XCTAssertEqual(updated[0].revision?.generation, 2)
        XCTAssertEqual(updated[1].revision?.generation, 2)
        let reread = try await db.fetch(Person.self, id: "ann")
        XCTAssertEqual(reread, updated[0])

        let tombstones = try await db.delete([updated[1]])
        XCTAssertEqual(tombstones[0].generation, 3)
        let gone = try await db.fetch(Person.self, id: added[1].id)
        XCTAssertNil(gone)

        // A model that encodes `_id`/`_rev` itself round-trips the same way.
        let ticket = try await db.add(Ticket(id: "t1", revision: nil, title: "Leak"))
        var copy = try await db.fetch(Ticket.self, id: "t1")
        XCTAssertEqual(copy, ticket)
        copy?.title = "Leak in hall"
        let saved = try await db.update(copy!)
        XCTAssertEqual(saved.revision?.generation, 2)
    }

    /// Ids that differ only in their Unicode normalization are two models.
    func testIDsEqualAsSwiftStringsAreTwoModels() async throws {
        let db = try await makeDatabase(self)
        let nfc = "Ren\u{00E9}e", nfd = "Rene\u{0301}e"
        _ = try await db.add([Person(id: nfc, name: "composed", age: 1), Person(id: nfd, name: "decomposed", age: 2)])
        let fetched = try await db.fetch(Person.self, ids: [nfd, nfc])
        XCTAssertEqual(fetched.map(\.name), ["decomposed", "composed"])
        XCTAssertEqual(fetched.map { Array($0.id.utf8) }, [Array(nfd.utf8), Array(nfc.utf8)])
    }

    func testAFailureInTheMiddleWritesNothingAndNamesTheItem() async throws {
        let db = try await makeDatabase(self)
        let first = try await db.add([Person(id: "a", name: "A", age: 1), Person(id: "b", name: "B", age: 2),
                                      Person(id: "c", name: "C", age: 3)])
        let before = try await db.info().updateSequence

        // Adding: the second id exists.
        do {
            try await db.add([Person(id: "x", name: "X", age: 9), Person(id: "b", name: "B2", age: 2),
                              Person(id: "y", name: "Y", age: 9)])
            XCTFail("adding an existing id must fail")
        } catch let error as DocStoreError {
            XCTAssertEqual(error.code, .conflict)
            XCTAssertEqual(error.itemIndex, 1)
            XCTAssertEqual(error.documentID, "b")
        }
        // Updating: the third carries a stale revision, the second a missing document.
        var stale = first
        stale[0].age = 10
        stale[2].revision = RevisionID("1-00000000000000000000000000000000")
        do {
            try await db.update(stale)
            XCTFail("a stale revision must fail")
        } catch let error as DocStoreError {
            XCTAssertEqual(error.code, .conflict)
            XCTAssertEqual(error.itemIndex, 2)
            XCTAssertEqual(error.documentID, "c")
        }
        var missing = first
        missing[1].id = "nobody"
        do {
            try await db.update(missing)
            XCTFail("a missing document must fail")
        } catch let error as DocStoreError {
            XCTAssertEqual(error.code, .notFound)
            XCTAssertEqual(error.itemIndex, 1)
            XCTAssertEqual(error.documentID, "nobody")
        }
        // An invalid value: a reserved id.
        do {
            try await db.add([Person(id: "ok", name: "OK", age: 1), Person(id: "_bad", name: "Bad", age: 1)])
            XCTFail("a reserved id must fail")
        } catch let error as DocStoreError {
            XCTAssertEqual(error.code, .invalidDocumentID)
            XCTAssertEqual(error.itemIndex, 1)
            XCTAssertTrue(error.description.contains("item 1"), error.description)
        }
        // Fetching: one id is missing, one is another collection.
        _ = try await db.add(Invoice(id: "inv", revision: nil, total: 10))
        do {
            _ = try await db.fetch(Person.self, ids: ["a", "zzz"])
            XCTFail("a missing id must fail")
        } catch let error as DocStoreError {
            XCTAssertEqual(error.code, .notFound)
            XCTAssertEqual(error.itemIndex, 1)
        }
        do {
            _ = try await db.fetch(Person.self, ids: ["inv"])
            XCTFail("an invoice is not a person")
        } catch let error as DocStoreError {
            XCTAssertEqual(error.code, .invalidModel)
            XCTAssertEqual(error.documentID, "inv")
        }
        do {
            try await db.update([Invoice(id: "a", revision: first[0].revision, total: 1)])
            XCTFail("a person is not an invoice")
        } catch let error as DocStoreError {
            XCTAssertEqual(error.code, .invalidModel)
        }

        // Nothing of the failed batches was written.
        let after = try await db.info().updateSequence
        XCTAssertEqual(after, before + 1, "only the invoice was written")
        let people = try await db.fetchAll(Person.self)
        XCTAssertEqual(people, first)
        let x = try await db.document(withID: "x")
        XCTAssertNil(x)
    }

    func testADocumentThatDoesNotDecodeNamesTheMember() async throws {
        let db = try await makeDatabase(self)
        try await db.save(Document(id: "p", body: ["type": "Person", "name": "P", "age": "old"]))
        do {
            _ = try await db.fetch(Person.self, id: "p")
            XCTFail("age is not a number")
        } catch let error as DocStoreError {
            XCTAssertEqual(error.code, .invalidModel)
            XCTAssertTrue(error.reason.contains("age"), error.reason)
        }
    }

    func testTypedQueriesSeeOnlyTheirCollection() async throws {
        let db = try await makeDatabase(self)
        try await db.add([Person(id: "a", name: "Ann", age: 31), Person(id: "b", name: "Bob", age: 17),
                          Person(id: "c", name: "Cid", age: 45)])
        try await db.add([Invoice(id: "i", revision: nil, total: 99)])
        try await db.save(Document(id: "raw", body: ["age": 50]))

        let adults = try await db.fetch(Person.self, where: QueryField("age") >= 18)
        XCTAssertEqual(adults.map(\.id), ["a", "c"])
        try await db.createIndex(fields: [.ascending("type"), .ascending("age")], name: "by-age", designDocument: "people")
        let sorted = try await db.fetch(Person.self, try FindQuery(where: QueryField("age") > 0)
            .sorted(by: .ascending("type"), .ascending("age")).limited(to: 2))
        XCTAssertEqual(sorted.map(\.name), ["Bob", "Ann"])
        let all = try await db.fetchAll(Invoice.self)
        XCTAssertEqual(all.map(\.id), ["i"])
    }

    func testChangeStreamsAndLiveQueriesAreTyped() async throws {
        let db = try await makeDatabase(self)
        let changes = db.observeChanges(of: Person.self)
        var iterator = changes.makeAsyncIterator()
        let live = db.observe(Person.self, where: QueryField("age") >= 18)
        var results = live.makeAsyncIterator()
        let initial = try await results.next()
        XCTAssertEqual(initial, [])

        let ann = try await db.add(Person(id: "ann", name: "Ann", age: 31))
        let first = await iterator.next()
        XCTAssertEqual(first?.model, ann)
        let withAnn = try await results.next()
        XCTAssertEqual(withAnn, [ann], "the live query saw Ann arrive")

        try await db.add(Invoice(id: "inv", revision: nil, total: 3))
        try await db.add(Person(id: "kid", name: "Kid", age: 9))
        let second = await iterator.next()
        XCTAssertEqual(second?.id, "kid", "the invoice is not a person")
        XCTAssertEqual(second?.source, .local)

        try await db.delete([ann])
        let third = await iterator.next()
        XCTAssertEqual(third?.id, "ann")
        XCTAssertEqual(third?.isDeleted, true)
        let withoutAnn = try await results.next()
        XCTAssertEqual(withoutAnn, [], "and leave; the kid never matched")
    }
}
