import DocStore
import Foundation
import TestSupport
import XCTest

/// The examples of the PredixSDK database documentation (the API the seeds describe), each translated
/// only from completion handlers to `await` and from its type names to DocStore's as Docs/Porting.md
/// maps them; what an example prints is collected and compared with what the documentation says.
final class SeedExamplesTests: XCTestCase {
    /// What the examples "print".
    private final class Output: @unchecked Sendable {
        // Only the test's own task appends and reads (no concurrent access): @unchecked is safe.
        var lines: [String] = []
        func print(_ line: String) { lines.append(line) }
    }

    private func configuration(_ name: String = "pm") throws -> DatabaseConfiguration {
        DatabaseConfiguration(name: name, directory: try makeTemporaryDirectory(self))
    }

    private func open(_ configuration: DatabaseConfiguration) async throws -> Database {
        let database = try await Database.open(with: configuration, create: true)!
        addTeardownBlock { [weak database] in await database?.close() }
        return database
    }

    // MARK: Opening

    /// `Database.open(with:create:)` creates only when asked, and `openedWith` finds the open one.
    func testOpenRefusesToCreateUnlessAsked() async throws {
        let config = try configuration()
        let absent = try await Database.open(with: config)            // create defaults to false
        XCTAssertNil(absent)
        XCTAssertFalse(FileManager.default.fileExists(atPath: config.fileURL.path), "nothing was created")
        XCTAssertNil(Database.openedWith(config))

        let database = try await Database.open(with: config, create: true)
        XCTAssertNotNil(database)
        XCTAssertTrue(Database.openedWith(config) === database, "the same instance")
        let again = try await Database.open(with: config)              // exists now: no create needed
        XCTAssertTrue(again === database)
        await database?.close()
        XCTAssertNil(Database.openedWith(config))

        _ = try await Database.open(with: DatabaseConfiguration(name: "team/notes", directory: config.directory), create: true)
        XCTAssertEqual(try Database.allDatabaseNames(in: config.directory), ["pm", "team/notes"])
        try await Database.delete(config)
        XCTAssertFalse(FileManager.default.fileExists(atPath: config.fileURL.path))
        XCTAssertEqual(try Database.allDatabaseNames(in: config.directory), ["team/notes"])
        await Database.openedWith(DatabaseConfiguration(name: "team/notes", directory: config.directory))?.close()
        let gone = try await Database.open(with: config)
        XCTAssertNil(gone)
    }

    /// `DatabaseConfiguration.default` names the database `default` in the platform's data folder.
    func testTheDefaultConfiguration() {
        let config = DatabaseConfiguration.default
        XCTAssertEqual(config.name, "default")
        XCTAssertEqual(config.directory, DatabaseConfiguration.defaultDirectory)
        #if os(Linux)
        let home = FileManager.default.homeDirectoryForCurrentUser.path
        let xdg = ProcessInfo.processInfo.environment["XDG_DATA_HOME"]
        XCTAssertTrue(config.directory.path.hasSuffix("docstore"))
        XCTAssertTrue(config.directory.path.hasPrefix(xdg.flatMap { $0.hasPrefix("/") ? $0 : nil } ?? home))
        #endif
    }

    // MARK: Documents

    /// "add: fails if a document with the same id already exists"; "update: fails if no document with
    /// that id exists"; "save: replaces an existing document with the same id, or creates it".
    func testAddUpdateSaveAsTheSeedDescribesThem() async throws {
        let myDatabase = try await open(try configuration())
        let output = Output()

        var myDocument = Document(id: "document1")
        myDocument["someKey"] = "someValue"
        do {
            let addedDocument = try await myDatabase.add(myDocument)
            output.print("added document with id: \(addedDocument.id)")
        } catch {
            output.print("encountered error adding document: \(error)")
        }
        do {
            _ = try await myDatabase.add(myDocument)                   // the id is taken now
            output.print("added it twice")
        } catch let error as DocStoreError {
            output.print("encountered error adding document: \(error.code)")
        }

        myDocument["someKey"] = "someNewValue"                         // no revision: the current one
        do {
            let updatedDocument = try await myDatabase.update(myDocument)
            output.print("updated document with id: \(updatedDocument.id)")
        } catch {
            output.print("encountered error updating the document: \(error)")
        }
        do {
            _ = try await myDatabase.update(Document(id: "no-such-document"))
            output.print("updated a missing document")
        } catch let error as DocStoreError {
            output.print("encountered error updating the document: \(error.code)")
        }

        myDocument["someKey"] = "saved"
        let savedDocument = try await myDatabase.save(myDocument)     // exists: replaced
        output.print("saved document with id: \(savedDocument.id)")
        let created = try await myDatabase.save(["id": "document2", "someKey": "fresh"])   // missing: created
        output.print("saved document with id: \(created.id)")

        XCTAssertEqual(output.lines, [
            "added document with id: document1",
            "encountered error adding document: conflict",
            "updated document with id: document1",
            "encountered error updating the document: notFound",
            "saved document with id: document1",
            "saved document with id: document2",
        ])
        let stored = try await myDatabase.fetchDocument("document1")
        XCTAssertEqual(stored?["someKey"], "saved")
        XCTAssertEqual(stored?.revision?.generation, 3, "add, update, save: three revisions of one branch")
        await XCTAssertEqualAsync(try await myDatabase.revisionTree(ofDocumentWithID: "document1")?.leaves.count, 1, "no conflict")
    }

    /// A stale revision is still refused by `save`: the last writer wins only when it names none.
    func testSaveWithAStaleRevisionIsStillAConflict() async throws {
        let db = try await open(try configuration())
        let first = try await db.save(["id": "doc", "n": 1])
        _ = try await db.save(["id": "doc", "n": 2])
        var stale = first
        stale["n"] = 3
        await assertThrowsDocStoreError(.conflict) { try await db.save(stale) }
        await XCTAssertEqualAsync(try await db.fetchDocument("doc")?["n"], 2)
    }

    /// `fetchDocument` and `fetchDocuments`: a dictionary by id, missing ids left out.
    func testFetchDocumentAndFetchDocuments() async throws {
        let myDatabase = try await open(try configuration())
        _ = try await myDatabase.save(["id": "document1", "n": 1])
        _ = try await myDatabase.save(["id": "document3", "n": 3])
        _ = try await myDatabase.save(["id": "document4", "n": 4])
        try await myDatabase.delete(documentWithID: "document4")
        let output = Output()

        if try await myDatabase.fetchDocument("document1") != nil { output.print("Document retrieved") }
        let idList = ["document1", "document2", "document3", "document4"]
        let documents = try await myDatabase.fetchDocuments(idList)
        output.print("Document retrieved \(documents.count) documents")

        XCTAssertEqual(output.lines, ["Document retrieved", "Document retrieved 2 documents"])
        XCTAssertEqual(Set(documents.keys), ["document1", "document3"], "missing and deleted ids are left out")
        XCTAssertEqual(documents["document3"]?["n"], 3)
    }

    /// `delete(documentWithID:)` needs no revision and answers the deleted id.
    func testDeleteByID() async throws {
        let myDatabase = try await open(try configuration())
        _ = try await myDatabase.save(["id": "document1", "someKey": "someValue"])
        _ = try await myDatabase.save(["id": "document1", "someKey": "changed"])   // any revision goes
        let output = Output()
        do {
            let documentId = try await myDatabase.delete(documentWithID: "document1")
            output.print("deleted document with id: \(documentId)")
        } catch {
            output.print("encountered error deleting the document: \(error)")
        }
        do {
            let documentId = try await myDatabase.delete(documentWithID: "document1")
            output.print("deleted document with id: \(documentId)")
        } catch let error as DocStoreError {
            output.print("encountered error deleting the document: \(error.code)")
        }
        XCTAssertEqual(output.lines, ["deleted document with id: document1", "encountered error deleting the document: notFound"])
        await XCTAssertEqualAsync(try await myDatabase.fetchDocument("document1") == nil, true)
        await XCTAssertEqualAsync(try await myDatabase.changes().changes.first?.isDeleted, true, "a tombstone that replicates")
    }

    /// The metadata names in a literal or dictionary are metadata; everywhere else `id` is data.
    func testIDInALiteralIsTheDocumentID() async throws {
        let document1: Document = ["id": "my_document_id", "color": "red"]
        XCTAssertEqual(document1.metaData.id, "my_document_id")
        XCTAssertEqual(document1.id, "my_document_id")
        XCTAssertNil(document1["id"], "not a body field")
        XCTAssertEqual(document1.body, ["color": "red"])

        let doc = try Document(["id": "abc123", "foo": "bar"])        // the dictionary initialiser
        XCTAssertEqual("id: \(doc.id)", "id: abc123")
        XCTAssertEqual("foo: \(doc["foo"]?.stringValue ?? "")", "foo: bar")

        let underscore: Document = ["_id": "x", "_rev": "1-abc", "n": 1]
        XCTAssertEqual(underscore.id, "x")
        XCTAssertEqual(underscore.revision, RevisionID("1-abc"))
        XCTAssertEqual(underscore.body, ["n": 1])
        let notAString: Document = ["id": 7]
        XCTAssertEqual(notAString["id"], 7, "only a string id is an id")
        XCTAssertFalse(notAString.hasID)

        // A body that legitimately has an `id` member keeps it: JSON, Codable and `body` are data.
        let db = try await open(try configuration())
        let fromJSON = try Document(json: #"{"_id": "order-1", "id": 4711, "sku": "A"}"#)
        XCTAssertEqual(fromJSON.id, "order-1")
        XCTAssertEqual(fromJSON["id"], 4711)
        struct Line: Codable { var id: String; var qty: Int }
        let fromCodable = try Document(id: "line-1", from: Line(id: "external-9", qty: 2))
        XCTAssertEqual(fromCodable["id"], "external-9")
        var fromBody = Document(id: "b")
        fromBody.body = ["id": "kept"]
        for document in [fromJSON, fromCodable, fromBody] { _ = try await db.save(document) }
        await XCTAssertEqualAsync(try await db.fetchDocument("order-1")?["id"], 4711)
        await XCTAssertEqualAsync(try await db.fetchDocument("line-1")?["id"], "external-9")
        await XCTAssertEqualAsync(try await db.fetchDocument("b")?["id"], "kept")

        // Saved from a literal: the metadata is filled in.
        let saved = try await db.save(["id": "lit", "n": 1])
        XCTAssertEqual(saved.metaData.id, "lit")
        XCTAssertEqual(saved.metaData.revision?.generation, 1)
        XCTAssertNotNil(saved.metaData.createDate)
        XCTAssertNotNil(saved.metaData.lastChange)
        XCTAssertFalse(saved.metaData.isDeleted)
    }

    // MARK: Indexes

    /// The documentation's index (`myView`, by `type`) queried by a key list, and its "count per type"
    /// reduce, written with the emitted keys (`keys as? [String]`) as the seed does.
    func testTheIndexAndReduceExamples() async throws {
        let index = IndexDefinition(name: "myView", version: "1.0") { document, addRow in
            if let type = document["type"] { addRow(type, nil) }
        }
        let myReduce: @Sendable ([JSON], [JSON], Bool) throws -> JSON = { keys, values, rereduce in
            var result: [String: Int] = [:]
            if !rereduce {
                let sKeys = keys.compactMap(\.stringValue)
                for key in sKeys { result[key] = (result[key] ?? 0) + 1 }
            } else {
                for count in values.compactMap(\.objectValue) {
                    for (key, n) in count { result[key] = (result[key] ?? 0) + (n.intValue ?? 0) }
                }
            }
            return .object(JSONObject(result.sorted { $0.key < $1.key }.map { ($0.key, JSON.integer($0.value)) }))
        }
        var myIndex = IndexDefinition(name: "myIndex", version: "1", reduce: .custom(myReduce)) { document, addIndexRow in
            if let type = document.type { addIndexRow(.string(type), nil) }
        }
        myIndex.reduceChunkSize = 4                                    // so that rereduce runs too
        var config = try configuration()
        config.indexes = [index, myIndex]
        let myDatabase = try await open(config)
        _ = try await myDatabase.save(["a", "b", "c", "d", "a", "b", "a", "x", "a", "c"].enumerated().map { n, type in
            ["id": .string("doc\(n)"), "type": .string(type)]
        })

        var parameters = IndexQuery()
        parameters.keys = ["a", "b", "c"]
        let queryResult = try await myDatabase.query("myView", parameters)
        XCTAssertEqual(queryResult.rows.map(\.key), ["a", "a", "a", "a", "b", "b", "c", "c"])
        let counts = try await myDatabase.query("myIndex")
        XCTAssertEqual(counts.rows.first?.value, ["a": 4, "b": 2, "c": 2, "d": 1, "x": 1])
    }

    // MARK: The demos

    /// The database demo: open the default database, fill it on first run with literal documents,
    /// find it again with `openedWith`, edit and save a note; the metadata dates are set.
    func testTheDatabaseDemo() async throws {
        let data = try makeTemporaryDirectory(self)
        setenv("XDG_DATA_HOME", data.path, 1)
        defer { unsetenv("XDG_DATA_HOME") }
        #if os(Linux)
        XCTAssertEqual(DatabaseConfiguration.default.directory.path, data.appendingPathComponent("docstore").path)
        #endif
        let fruitNameKey = "fruit", notesKey = "notes"
        let items = ["Apple", "Banana", "Cherry"]

        let database = try await Database.open(with: .default, create: true)
        addTeardownBlock { try? await Database.delete(.default) }
        if try await database?.fetchDocument("0") == nil {
            for (rowIndex, item) in items.enumerated() {
                let document: Document = ["id": .string("\(rowIndex)"), fruitNameKey: .string(item), notesKey: ""]
                _ = try await database?.add(document)
            }
        }
        await XCTAssertEqualAsync(try await database?.info().documentCount, 3)

        // The detail screen finds the open database and edits a note.
        let detail = Database.openedWith(.default)
        XCTAssertTrue(detail === database)
        var document = try await detail!.fetchDocument("1")!
        XCTAssertEqual(document.id, "1")
        XCTAssertNotNil(document.metaData.createDate)
        let before = try XCTUnwrap(document.metaData.lastChange)
        document[notesKey] = "ripe"
        let saved = try await detail!.save(document)
        XCTAssertEqual(saved[fruitNameKey], "Banana")
        XCTAssertEqual(saved[notesKey], "ripe")
        XCTAssertGreaterThanOrEqual(try XCTUnwrap(saved.metaData.lastChange), before)
        XCTAssertEqual(saved.metaData.createDate, document.metaData.createDate)

        // A second launch: the data is there, nothing is added again.
        await database?.close()
        let relaunched = try await Database.open(with: .default)
        await XCTAssertEqualAsync(try await relaunched?.fetchDocument("0")?[fruitNameKey], "Apple")
        await XCTAssertEqualAsync(try await relaunched?.info().documentCount, 3)
        await relaunched?.close()
    }

    /// The index-and-query demo: a word index, seeded when a key-list query finds nothing, then
    /// searched by an inclusive key range.
    func testTheIndexAndQueryDemo() async throws {
        let index = IndexDefinition(name: "wordIndex", version: "1.0") { document, addIndexRow in
            if let word = document["word"] { addIndexRow(word, document["definition"]) }
        }
        var config = try configuration()
        config.indexes = [index]
        let database = try await open(config)
        if try await database.query("wordIndex", IndexQuery(keys: ["a"])).rows.isEmpty {
            let words = [("a", "the first letter"), ("apple", "a fruit"), ("apply", "to put to use"), ("banana", "another fruit")]
            for (word, definition) in words {
                let document: Document = ["word": .string(word), "definition": .string(definition)]   // id generated
                _ = try await database.add(document)
            }
        }
        let searchText = "app"
        let query = IndexQuery(startKey: .string(searchText), endKey: .string(searchText + "\u{fff0}"))   // inclusive
        let rows = try await database.query("wordIndex", query).rows
        XCTAssertEqual(rows.map(\.key), ["apple", "apply"])
        XCTAssertEqual(rows.map(\.value), ["a fruit", "to put to use"])
        XCTAssertEqual("Found \(rows.count) words", "Found 2 words")
    }
}
