import DocStore
import Foundation
import XCTest

struct Customer: Model, Equatable {
    var id: String
    var revision: RevisionID?
    var name: String
    var city: String?
}

struct Order: Model, Equatable {
    var id: String
    var revision: RevisionID?
    var customer: Reference<Customer>
    var items: [Line]

    struct Line: Codable, Equatable, Sendable {
        var product: DocumentReference
        var quantity: Int
    }
}

struct Label: Model, Equatable {
    static let history: HistoryPolicy? = .unlimited
    var id: String
    var revision: RevisionID?
    var name: String
    var colour: String
}

/// References between documents: the stored form, lookups in both directions through the index of
/// references, related documents in results, and resolve-or-create (also across replicas).
final class RelationshipTests: XCTestCase {
    func testReferencesAreFoundInBothDirections() async throws {
        let db = try await makeDatabase(self)
        let ann = try await db.add(Customer(id: "ann", name: "Ann"))
        let bob = try await db.add(Customer(id: "bob", name: "Bob"))
        try await db.save(Document(id: "p1", body: ["type": "product", "title": "Pen"]))
        try await db.add([
            Order(id: "o1", customer: Reference(ann), items: [.init(product: DocumentReference(id: "p1", type: "product"), quantity: 2)]),
            Order(id: "o2", customer: Reference(ann), items: []),
            Order(id: "o3", customer: Reference(bob), items: [.init(product: DocumentReference(id: "p1"), quantity: 1)]),
        ])
        let stored = try await db.document(withID: "o1")
        XCTAssertEqual(stored?["customer"], ["~ref": "ann", "~type": "Customer"])
        XCTAssertEqual(stored?["items"]?[0]?["product"], ["~ref": "p1", "~type": "product"])

        let annsOrders = try await db.referencing(Order.self, to: "ann")
        XCTAssertEqual(annsOrders.map(\.id), ["o1", "o2"])
        let penOrders = try await db.referencingIDs(to: "p1")
        XCTAssertEqual(penOrders, ["o1", "o3"], "a reference inside an array is found")
        let customer = try await db.referenced(Customer.self, from: "o3")
        XCTAssertEqual(customer, [bob])
        let none = try await db.referenced(Customer.self, from: "o3", property: "items")
        XCTAssertEqual(none, [])

        // The index follows edits and deletions.
        var moved = annsOrders[1]
        moved.customer = Reference(bob)
        try await db.update(moved)
        try await db.delete([annsOrders[0]])
        let nowAnns = try await db.referencing(Order.self, to: "ann")
        XCTAssertEqual(nowAnns, [])
        let bobs = try await db.referencing(Order.self, to: "bob")
        XCTAssertEqual(bobs.map(\.id), ["o2", "o3"])

        let related = try await db.fetchRelated(Customer.self, ids: ["bob"])
        XCTAssertEqual(related[0].referencedBy.map(\.id), ["o2", "o3"])
        let orderRelated = try await db.fetchRelated(Order.self, ids: ["o3"])
        XCTAssertEqual(Set(orderRelated[0].references.keys), ["bob", "p1"])
        XCTAssertEqual(orderRelated[0].references["p1"]?["title"], "Pen")
    }

    func testResolveOrCreateInOneTransaction() async throws {
        let db = try await makeDatabase(self)
        try await db.add(Customer(id: "c1", name: "Ann", city: "Paris"))
        let keys: [ReferenceKey] = [.match(property: "name", value: "Ann"), .match(property: "name", value: "Zoe"),
                                    .id("c9"), .match(property: "name", value: "Zoe")]
        let resolved = try await db.resolve(Customer.self, keys) { key in
            switch key {
            case .match(_, let value): Customer(id: "", name: value.stringValue!, city: "new")
            case .id(let id): Customer(id: id, name: "By id", city: "new")
            }
        }
        XCTAssertEqual(resolved.map(\.name), ["Ann", "Zoe", "By id", "Zoe"])
        XCTAssertEqual(resolved[0].id, "c1", "an existing match is used")
        XCTAssertEqual(resolved[1], resolved[3], "a key given twice resolves once")
        XCTAssertTrue(resolved[1].id.hasPrefix("Customer-"), resolved[1].id)
        XCTAssertEqual(resolved[2].id, "c9")
        let all = try await db.fetchAll(Customer.self)
        XCTAssertEqual(all.count, 3)

        // Resolving again creates nothing.
        let sequence = try await db.info().updateSequence
        let again = try await db.resolve(Customer.self, keys) { _ in XCTFail("nothing to create"); return Customer(id: "", name: "") }
        XCTAssertEqual(again, resolved)
        let after = try await db.info().updateSequence
        XCTAssertEqual(after, sequence)

        // A failed creation creates nothing and names the key; so does a document of another type.
        do {
            _ = try await db.resolve(Customer.self, [.match(property: "name", value: "Yan"), .id("_bad")]) { key in
                Customer(id: "", name: "x")
            }
            XCTFail("a reserved id cannot be created")
        } catch let error as DocStoreError {
            XCTAssertEqual(error.code, .invalidDocumentID)
            XCTAssertEqual(error.itemIndex, 1)
        }
        let yan = try await db.fetch(Customer.self, where: QueryField("name") == "Yan")
        XCTAssertEqual(yan, [], "all or nothing")
        try await db.save(Document(id: "p", body: ["type": "product"]))
        do {
            _ = try await db.resolve(Customer.self, [.id("c1"), .id("p")]) { _ in Customer(id: "", name: "x") }
            XCTFail("a product is not a customer")
        } catch let error as DocStoreError {
            XCTAssertEqual(error.code, .invalidModel)
            XCTAssertEqual(error.itemIndex, 1)
        }
    }

    func testTwoReplicasCreatingTheSameEntityConverge() async throws {
        let a = try await makeDatabase(self, name: "a")
        let b = try await makeDatabase(self, name: "b")
        let key = ReferenceKey.match(property: "name", value: "urgent")

        // Same properties, no history: the very same revision — replication has nothing to do.
        let onA = try await a.resolve(Customer.self, [key]) { _ in Customer(id: "", name: "urgent", city: "Oslo") }
        let onB = try await b.resolve(Customer.self, [key]) { _ in Customer(id: "", name: "urgent", city: "Oslo") }
        XCTAssertEqual(onA, onB)
        try await exchange(a, b, id: onA[0].id)
        let tree = try await a.revisionTree(ofDocumentWithID: onA[0].id)
        XCTAssertEqual(tree?.leaves.count, 1)

        // With history, different properties: a conflict that both replicas merge into one revision,
        // the newest colour current and both in the history.
        let labelA = try await a.resolve(Label.self, [key]) { _ in Label(id: "", name: "urgent", colour: "red") }
        let labelB = try await b.resolve(Label.self, [key]) { _ in Label(id: "", name: "urgent", colour: "orange") }
        XCTAssertEqual(labelA[0].id, labelB[0].id, "the same key gives the same id on every replica")
        try await exchange(a, b, id: labelA[0].id)
        try await exchange(a, b, id: labelA[0].id)
        let treeA = try await a.revisionTree(ofDocumentWithID: labelA[0].id)
        let treeB = try await b.revisionTree(ofDocumentWithID: labelA[0].id)
        XCTAssertEqual(treeA?.winner?.revision, treeB?.winner?.revision)
        XCTAssertEqual(treeA?.conflicts, [])
        let mergedA = try await a.fetch(Label.self, id: labelA[0].id)
        let mergedB = try await b.fetch(Label.self, id: labelA[0].id)
        XCTAssertEqual(mergedA, mergedB)
        let colours = try await a.history(of: mergedA!, property: "colour")
        XCTAssertEqual(Set(colours.map(\.value)), ["red", "orange"])
        XCTAssertEqual(mergedA?.colour, colours[0].value.stringValue)

        // Without history and different properties: CouchDB's rule, the same on both sides.
        let plainA = try await a.resolve(Customer.self, [.match(property: "name", value: "x")]) { _ in Customer(id: "", name: "x", city: "A") }
        _ = try await b.resolve(Customer.self, [.match(property: "name", value: "x")]) { _ in Customer(id: "", name: "x", city: "B") }
        try await exchange(a, b, id: plainA[0].id)
        let winnerA = try await a.fetch(Customer.self, id: plainA[0].id)
        let winnerB = try await b.fetch(Customer.self, id: plainA[0].id)
        XCTAssertEqual(winnerA, winnerB)
        let open = try await a.revisionTree(ofDocumentWithID: plainA[0].id)?.conflicts
        XCTAssertEqual(open?.count, 1, "the loser stays a conflict, as in CouchDB")
    }

    /// Both ways: what a bidirectional replication does for one document.
    private func exchange(_ a: Database, _ b: Database, id: String) async throws {
        try await replicateDocument(id, from: a, to: b)
        try await replicateDocument(id, from: b, to: a)
    }
}
