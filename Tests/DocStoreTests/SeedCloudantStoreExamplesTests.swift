import DocStore
import Foundation
import TestSupport
import XCTest

/// The examples of TheraForge's OTFCloudantStore README, each translated from completion handlers to
/// `await` and from its type names to DocStore's as Docs/Porting.md maps them: an entity that is
/// `Codable & Identifiable & OTFCloudantRevision` is a ``Model``; `collection(…).where(…)` is a
/// ``QueryCondition`` built with ``QueryField``; `OTFCloudantError` is a ``DocStoreError``. The
/// comment above each test quotes the README and the first words of its example.
final class SeedCloudantStoreExamplesTests: XCTestCase {
    /// The README's CareKit contact, reduced to the fields its queries name.
    struct OCKContact: Model, Equatable {
        var id: String
        var revision: RevisionID?
        var title: String
        var age: Int
        var effectiveDate: String
    }

    private func store() async throws -> Database {
        try await makeDatabase(self)
    }

    private static let contacts = [
        OCKContact(id: "c1", title: "Family Practice Doctor", age: 15, effectiveDate: "2020-11-28T09:00:00Z"),
        OCKContact(id: "c2", title: "Family Practice Doctor", age: 42, effectiveDate: "2020-11-20T09:00:00Z"),
        OCKContact(id: "c3", title: "Test", age: 25, effectiveDate: "2021-01-05T09:00:00Z"),
        OCKContact(id: "c4", title: "Test", age: 31, effectiveDate: "2021-02-01T09:00:00Z"),
        OCKContact(id: "c5", title: "Nurse", age: 19, effectiveDate: "2020-12-01T09:00:00Z"),
        OCKContact(id: "c6", title: "Family Practice Doctor", age: 30, effectiveDate: "2020-11-27T22:00:00Z"),
    ]

    private func filled() async throws -> Database {
        let database = try await store()
        try await database.add(Self.contacts)
        return database
    }

    private func ids(_ models: [OCKContact]) -> [String] { models.map(\.id) }

    /// OTFCloudantStore — "let store = OTFCloudantStore(storeName: “your store name”)": a store is a
    /// database; its name follows CouchDB's rules, which have no spaces.
    func testOpeningAStore() async throws {
        let folder = try makeTemporaryDirectory(self)
        do {
            _ = try await Database.open(DatabaseConfiguration(name: "your store name", directory: folder))
            XCTFail("a name with spaces is refused")
        } catch let error as DocStoreError {
            XCTAssertEqual(error.code, .badRequest)
            XCTAssertTrue(error.reason.contains("your store name"), error.reason)
        }
        let store = try await Database.open(DatabaseConfiguration(name: "your_store_name", directory: folder))
        await store.close()
    }

    /// OTFCloudantStore — "add<Entity: Codable & Identifiable & OTFCloudantRevision>(_ items: [Entity]",
    /// "get<Entity…>(callbackQueue:completion:)", "update<Entity…>(_ items: [Entity]" and
    /// "delete<Entity…>(_ items: [Entity]": bulk, each with the revision MVCC needs
    /// ("every Entity has revision id in order to serve the MVCC").
    func testAddGetUpdateDelete() async throws {
        let store = try await store()
        let added = try await store.add(Self.contacts)
        XCTAssertTrue(added.allSatisfy { $0.revision?.generation == 1 })
        await XCTAssertEqualAsync(try await store.fetchAll(OCKContact.self), added)

        var changed = added
        changed[0].age = 16
        changed[1].title = "Cardiologist"
        let updated = try await store.update(Array(changed.prefix(2)))
        XCTAssertEqual(updated.map { $0.revision?.generation }, [2, 2])
        await XCTAssertEqualAsync(try await store.fetch(OCKContact.self, id: "c1")?.age, 16)

        // A stale revision (the README's conflict) fails the whole update: nothing is written.
        var stale = added[1]                                       // c2 at revision 1; it is at 2
        stale.age = 99
        var fresh = updated[0]
        fresh.age = 17
        await assertThrowsDocStoreError(.conflict) { try await store.update([fresh, stale]) }
        await XCTAssertEqualAsync(try await store.fetch(OCKContact.self, id: "c1")?.age, 16, "all or nothing")

        try await store.delete(Array(updated))
        await XCTAssertEqualAsync(try await ids(store.fetchAll(OCKContact.self)), ["c3", "c4", "c5", "c6"])
    }

    /// OTFCloudantStore — "let query = store.collection(className, fields: [String]?)" and
    /// "query.where(propertyName: propertyName, value: theFilter)": the collection is the documents'
    /// `type`; `fields` narrows what comes back, which for documents is `FindQuery.selecting`.
    func testCollectionWhereAndFields() async throws {
        let store = try await filled()
        let doctors = try await store.fetch(OCKContact.self, where: QueryField("title") == "Family Practice Doctor")
        XCTAssertEqual(ids(doctors), ["c1", "c2", "c6"])

        let narrowed = try await store.find(try FindQuery(where: .collection("OCKContact") && QueryField("title") == "Test")
            .selecting("_id", "age"))
        XCTAssertEqual(narrowed.documents.map(\.body), [["age": 25], ["age": 31]])
        XCTAssertEqual(narrowed.documents.map(\.id), ["c3", "c4"])
    }

    /// OTFCloudantStore — "Ascending: query.sort(ascending: propertyName)" and "Descending:
    /// query.sort(descending: propertyName)", with "An index is already defined, with all the sort
    /// fields in the same order"; and "Note: the propertyName should be an index, if not, the result
    /// will be an empty array" — DocStore answers CouchDB's `no_usable_index` error instead.
    func testSort() async throws {
        let store = try await filled()
        let query = try FindQuery(where: .collection("OCKContact") && QueryField("age") > 0)
        await assertThrowsDocStoreError(.noUsableIndex) { try await store.fetch(OCKContact.self, query.sorted(by: .ascending("age"))) }

        _ = try await store.createIndex(fields: [.ascending("age")])
        let ascending = try await store.fetch(OCKContact.self, query.sorted(by: .ascending("age")))
        XCTAssertEqual(ascending.map(\.age), [15, 19, 25, 30, 31, 42])
        let descending = try await store.fetch(OCKContact.self, query.sorted(by: .descending("age")))
        XCTAssertEqual(descending.map(\.age), [42, 31, 30, 25, 19, 15])
    }

    /// OTFCloudantStore — "let query = OTFCloudantQueryComponent.simpleComponent(field: “title”,
    /// comparisionOperator: .equal, value: “Family Practice Doctor”, )", "…(field: “age”, value: 20,
    /// comparisionOperator: .lessThan)" and "…(field: “age”, comparisionOperator: .in, value: [15,20,30])".
    func testSimpleComponents() async throws {
        let store = try await filled()
        let equal = QueryField("title") == "Family Practice Doctor"
        let lessThan = QueryField("age") < 20
        let isIn = QueryField("age").isIn([15, 20, 30])
        await XCTAssertEqualAsync(try await ids(store.fetch(OCKContact.self, where: equal)), ["c1", "c2", "c6"])
        await XCTAssertEqualAsync(try await ids(store.fetch(OCKContact.self, where: lessThan)), ["c1", "c5"])
        await XCTAssertEqualAsync(try await ids(store.fetch(OCKContact.self, where: isIn)), ["c1", "c6"])
        XCTAssertEqual(isIn.json, ["age": ["$in": [15, 20, 30]]], "the Cloudant Query selector it stands for")
    }

    /// OTFCloudantStore — "let leftComponent = OTFCloudantQueryComponent.simpleComponent(field: “title”,
    /// … let combinedQuery = OTFCloudantCombinationQueryComponent.combinedQueryComponent(leftComponent:
    /// leftComponent, combinationSelector: .and, rightComponent: rightComponent)".
    func testCombinedQueryComponent() async throws {
        let store = try await filled()
        let leftComponent = QueryField("title") == "Family Practice Doctor"
        let rightComponent = QueryField("age").isIn([15, 20, 30])
        let combinedQuery = leftComponent && rightComponent
        await XCTAssertEqualAsync(try await ids(store.fetch(OCKContact.self, where: combinedQuery)), ["c1", "c6"])
        let either = leftComponent || rightComponent                      // combinationSelector: .or
        await XCTAssertEqualAsync(try await ids(store.fetch(OCKContact.self, where: either)), ["c1", "c2", "c6"])
    }

    /// OTFCloudantStore — "The query: where the title is equal to “Family Practice Doctor” and age is in
    /// [15,20,30] or title is equal to “Test” and age is less than 30 will be translated to: let
    /// leftComponentFirstQuery = …". Its code has two slips the sentence does not: the second pair is
    /// combined with `.or`, and the complex component is built from the second pair's simple components
    /// instead of the two combinations; the test follows the sentence.
    func testComplexQueryComponent() async throws {
        let store = try await filled()
        let leftComponentFirstQuery = QueryField("title") == "Family Practice Doctor"
        let rightComponentFirstQuery = QueryField("age").isIn([15, 20, 30])
        let firstCombinedQuery = leftComponentFirstQuery && rightComponentFirstQuery
        let leftComponentSecondQuery = QueryField("title") == "Test"
        let rightComponentSecondQuery = QueryField("age") < 30
        let secondCombinedQuery = leftComponentSecondQuery && rightComponentSecondQuery
        let complexQuery = firstCombinedQuery || secondCombinedQuery
        await XCTAssertEqualAsync(try await ids(store.fetch(OCKContact.self, where: complexQuery)), ["c1", "c3", "c6"])
    }

    /// OTFCloudantStore — "Short Query … dataStore.collection(name: “OCKContact”).where(.simpleComponent(
    /// “title”, .equal, “Family Practice Doctor”), .and, .simpleComponent(“effectiveDate”, .greaterThan,
    /// “2020-11-27T23:00:00Z”)).get{}": ISO 8601 dates in UTC compare as strings.
    func testShortQuery() async throws {
        let dataStore = try await filled()
        let found = try await dataStore.fetch(OCKContact.self, where: QueryField("title") == "Family Practice Doctor"
                                                && QueryField("effectiveDate") > "2020-11-27T23:00:00Z")
        XCTAssertEqual(ids(found), ["c1"])
    }

    /// OTFCloudantStore — "OTFCloudantError can be thrown in CRDU and synchronization when a failure
    /// occurs": each local case is a ``DocStoreError`` code (Docs/Porting.md's table; the two remote
    /// cases are `ReplicationError`s).
    func testTheErrorCasesAreDocStoreErrors() async throws {
        let store = try await filled()
        // addFailed: the id is taken.
        await assertThrowsDocStoreError(.conflict) { try await store.add(Self.contacts[0]) }
        // updateFailed / deleteFailed: no such entity.
        let ghost = OCKContact(id: "ghost", revision: RevisionID("1-0123456789abcdef0123456789abcdef"), title: "", age: 0, effectiveDate: "")
        await assertThrowsDocStoreError(.notFound) { try await store.update(ghost) }
        await assertThrowsDocStoreError(.notFound) { try await store.delete([ghost]) }
        // fetchFailed: the document is of another collection, or missing.
        _ = try await store.save(["id": "note", "type": "OCKNote"])
        await assertThrowsDocStoreError(.invalidModel) { try await store.fetch(OCKContact.self, ids: ["note"]) }
        await assertThrowsDocStoreError(.notFound) { try await store.fetch(OCKContact.self, ids: ["nobody"]) }
        // invalidValue: a value that cannot be stored (an id CouchDB reserves).
        let reserved = OCKContact(id: "_reserved", title: "", age: 0, effectiveDate: "")
        await assertThrowsDocStoreError(.invalidDocumentID) { try await store.add(reserved) }
        await XCTAssertEqualAsync(try await store.fetchAll(OCKContact.self).count, Self.contacts.count, "nothing written by the failures")
    }
}
