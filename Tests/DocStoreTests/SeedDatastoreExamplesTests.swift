import DocStore
import Foundation
import TestSupport
import XCTest

/// What the Datastore README ("An asynchronous schema-less object store") says of its entities, each
/// as DocStore's typed models do it (Docs/Porting.md maps the names). The README has no code
/// examples: the comment above each test quotes the sentence it checks.
final class SeedDatastoreExamplesTests: XCTestCase {
    struct Book: Model, Equatable {
        static let history: HistoryPolicy? = .unlimited
        var id: String
        var revision: RevisionID?
        var name: String
        var pages: Int
        var author: Reference<Author>?
    }

    struct Author: Model, Equatable {
        var id: String
        var revision: RevisionID?
        var name: String
    }

    /// Datastore — "For housekeeping purposes, all entities have three guaranteed properties: type,
    /// datestamp and identifier … The entity datestamp indicates the time that it was first added".
    func testEntitiesHaveTypeDatestampAndIdentifier() async throws {
        let store = try await makeDatabase(self)
        let before = Date()
        let book = try await store.add(Book(id: "", name: "Bookish", pages: 120))
        XCTAssertFalse(book.id.isEmpty, "an identifier is made for an entity added without one")
        let document = try await store.fetchDocument(book.id)
        XCTAssertEqual(document?.type, "Book", "the type is the model's collection")
        let added = try XCTUnwrap(document?.metaData.createDate)
        XCTAssertGreaterThanOrEqual(added.timeIntervalSince1970, before.timeIntervalSince1970.rounded(.down))

        var renamed = book
        renamed.name = "Bookish, second edition"
        _ = try await store.update(renamed)
        await XCTAssertEqualAsync(try await store.fetchDocument(book.id)?.metaData.createDate, added, "first added, not last changed")
    }

    /// Datastore — "When a property is changed, a new entry is added, with the updated value, and a
    /// newer datestamp. Thus the multiple entries for a property are a record of its history, with the
    /// newest entry being the current value."
    func testPropertyValuesAreKeptWithTheirDatestamps() async throws {
        let store = try await makeDatabase(self)
        var book = try await store.add(Book(id: "b1", name: "Draft", pages: 10))
        book.name = "Final"
        book = try await store.update(book)
        book.pages = 12
        book = try await store.update(book)

        let names = try await store.history(of: book, property: "name")
        XCTAssertEqual(names.map(\.value), ["Final", "Draft"], "newest first")
        XCTAssertGreaterThanOrEqual(names[0].milliseconds, names[1].milliseconds)
        XCTAssertEqual(names[0].value, .string(book.name), "the newest entry is the current value")
        await XCTAssertEqualAsync(try await store.history(of: book, property: "pages").map(\.value), [12, 10])
    }

    /// Datastore — "References can be created by client code, by specifying an entity identifier to
    /// look for, or a value to match against an entity property (eg name == "test") … if the reference
    /// doesn't match an existing object, a new object is created using supplied type and properties."
    func testReferencesResolveByIdentifierOrValueAndCreateOnDemand() async throws {
        let store = try await makeDatabase(self)
        try await store.add(Author(id: "a1", name: "Sam"))
        let resolved = try await store.resolve(Author.self, [.id("a1"), .match(property: "name", value: "test")]) { key in
            Author(id: "", name: "test")
        }
        XCTAssertEqual(resolved.map(\.name), ["Sam", "test"])
        XCTAssertEqual(resolved[0].id, "a1")
        await XCTAssertEqualAsync(try await store.fetchAll(Author.self).count, 2, "the missing one was created")

        // "Relationships are just properties that tie together two entities": found in both directions.
        try await store.add(Book(id: "b1", name: "Bookish", pages: 1, author: Reference(resolved[1])))
        await XCTAssertEqualAsync(try await store.referencing(Book.self, to: resolved[1].id).map(\.id), ["b1"])
        await XCTAssertEqualAsync(try await store.referenced(Author.self, from: "b1").map(\.name), ["test"])
    }

    /// Datastore — "An output reference contains a dictionary with fetched properties of the entity. The
    /// dictionary is not guaranteed to contain all of the entity's properties - only the ones that were
    /// requested": a model is a complete value, and a query's `fields` gives the partial form.
    func testOnlyTheRequestedProperties() async throws {
        let store = try await makeDatabase(self)
        try await store.add([Book(id: "b1", name: "One", pages: 100), Book(id: "b2", name: "Two", pages: 200)])
        let result = try await store.find(try FindQuery(where: .collection("Book")).selecting("_id", "name"))
        XCTAssertEqual(result.documents.map(\.id), ["b1", "b2"])
        XCTAssertEqual(result.documents.map(\.body), [["name": "One"], ["name": "Two"]])
    }

    /// Datastore — "The store can be read from, and written to, a dictionary-based interchange format.
    /// This only uses JSON-legal types": a full export imports into another store exactly, history
    /// included.
    func testTheInterchangeFormat() async throws {
        let store = try await makeDatabase(self, name: "source")
        var book = try await store.add(Book(id: "b1", name: "Draft", pages: 10))
        book.name = "Final"
        book = try await store.update(book)
        var exported = Data()
        _ = try await store.export(ExportOptions(format: .json, form: .full)) { exported.append($0) }
        XCTAssertNoThrow(try JSON(parsing: exported), "JSON-legal types only")

        let copy = try await makeDatabase(self, name: "copy")
        _ = try await copy.importDocuments(from: exported)
        await XCTAssertEqualAsync(try await copy.fetch(Book.self, id: "b1"), book)
        await XCTAssertEqualAsync(try await copy.history(of: book, property: "name").map(\.value), ["Final", "Draft"])
    }
}
