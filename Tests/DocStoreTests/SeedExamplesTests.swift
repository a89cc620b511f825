import DocStore
import Foundation
import TestSupport
import XCTest

/// The examples of the PredixSDK documentation — its "PredixSDK Database Guide" and the guide's
/// "NoSQL Database Advance Topics" page, which repeats the guide's last part — each translated only from
/// completion handlers to `await` and from its type names to DocStore's as Docs/Porting.md maps them;
/// what an example prints is collected and compared with what the documentation says it prints. The
/// comment above each test quotes the guide and the first words of its example. Its replication
/// examples are in `SeedReplicationExamplesTests`, the views of its "PredixMobilityConfiguration" page
/// in `SeedViewExamplesTests`.
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
        let database = try await Database.open(configuration)
        addTeardownBlock { [weak database] in await database?.close() }
        return database
    }

    // The tests up to the guide's examples below check what the guide says in prose (opening only when
    // asked, add/update/save, fetching, deleting, literal metadata) and the SDK's demo apps; each
    // example of the guide itself has a test of its own further down.

    // MARK: Opening

    /// The guide's `Database.open(with:create:)` is two calls here, one rule per name: `open` creates,
    /// `openExisting` never does; `openedWith` finds the open one.
    func testOpenRefusesToCreateUnlessAsked() async throws {
        let config = try configuration()
        let absent = try await Database.openExisting(config)            // never creates
        XCTAssertNil(absent)
        XCTAssertFalse(FileManager.default.fileExists(atPath: config.fileURL.path), "nothing was created")
        XCTAssertNil(Database.openedWith(config))

        let database = try await Database.open(config)
        XCTAssertTrue(Database.openedWith(config) === database, "the same instance")
        let again = try await Database.openExisting(config)              // exists now
        XCTAssertTrue(again === database)
        await database.close()
        XCTAssertNil(Database.openedWith(config))

        _ = try await Database.open(DatabaseConfiguration(name: "team/notes", directory: config.directory))
        XCTAssertEqual(try Database.allDatabaseNames(in: config.directory), ["pm", "team/notes"])
        try await Database.delete(config)
        XCTAssertFalse(FileManager.default.fileExists(atPath: config.fileURL.path))
        XCTAssertEqual(try Database.allDatabaseNames(in: config.directory), ["team/notes"])
        await Database.openedWith(DatabaseConfiguration(name: "team/notes", directory: config.directory))?.close()
        let gone = try await Database.openExisting(config)
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
            let documentId = "document1"
            let tombstone = try await myDatabase.delete(documentWithID: documentId)   // answers the deletion's revision
            output.print("deleted document with id: \(documentId) at generation \(tombstone.generation)")
        } catch {
            output.print("encountered error deleting the document: \(error)")
        }
        do {
            let documentId = "document1"
            let tombstone = try await myDatabase.delete(documentWithID: documentId)   // answers the deletion's revision
            output.print("deleted document with id: \(documentId) at generation \(tombstone.generation)")
        } catch let error as DocStoreError {
            output.print("encountered error deleting the document: \(error.code)")
        }
        XCTAssertEqual(output.lines, ["deleted document with id: document1 at generation 3", "encountered error deleting the document: notFound"])
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
        XCTAssertNotEqual(notAString.id, "7", "the document has an id of its own")
        XCTAssertEqual(notAString.id.count, 32)

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

        let database = try await Database.open(.default)
        addTeardownBlock { try? await Database.delete(.default) }
        if try await database.fetchDocument("0") == nil {
            for (rowIndex, item) in items.enumerated() {
                let document: Document = ["id": .string("\(rowIndex)"), fruitNameKey: .string(item), notesKey: ""]
                _ = try await database.add(document)
            }
        }
        await XCTAssertEqualAsync(try await database.info().documentCount, 3)

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
        await database.close()
        let relaunched = try await Database.openExisting(.default)
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

// MARK: - The guide's examples, in its order

extension SeedExamplesTests {
    /// PredixSDK Database Guide — "let configuration = Database.OpenDatabaseConfiguration.default
    /// do { let database = try Database.open(with: configuration, create: true)".
    func testGuideOpenTheDefaultDatabase() async throws {
        let data = try makeTemporaryDirectory(self)
        setenv("XDG_DATA_HOME", data.path, 1)
        defer { unsetenv("XDG_DATA_HOME") }
        let output = Output()

        let configuration = DatabaseConfiguration.default
        do {
            let database = try await Database.open(configuration)
            output.print("open: \(database.configuration.name)")
            await database.close()
        } catch let error {
            output.print("error: \(error)")
        }
        XCTAssertEqual(output.lines, ["open: default"])
        try await Database.delete(configuration)
    }

    /// PredixSDK Database Guide — "let myValue = myDocument[myKey]" and the Document initializers:
    /// "let document: Document = ["aString": "string data", …]", "let document = Document()",
    /// "Document(id: "my_document")", "Document(dictionary)" (`[String: Any]` and
    /// `[AnyHashable: Any]`), "Document(json: jsonData)", "Document(json: "{/"aString/": …")".
    func testGuideDocumentInitializers() throws {
        let myDocument: Document = ["aString": "string data", "anInt": 123, "aDouble": 3.14]
        let myKey = "anInt"
        let myValue = myDocument[myKey]
        XCTAssertEqual(myValue, 123)

        let literal: Document = ["aString": "string data", "anInt": 123, "aDouble": 3.14]
        XCTAssertEqual(Array(literal.body.keys), ["aString", "anInt", "aDouble"])

        let empty = Document()
        XCTAssertTrue(empty.body.isEmpty)

        let named = Document(id: "my_document")
        XCTAssertEqual(named.id, "my_document")
        XCTAssertTrue(named.body.isEmpty)

        let dictionary: [String: Any] = ["aString": "string data", "anInt": 123, "aDouble": 3.14]
        let fromDictionary = try Document(dictionary)
        XCTAssertEqual(fromDictionary.body, ["aDouble": 3.14, "aString": "string data", "anInt": 123], "members in key order")

        let anyHashable: [AnyHashable: Any] = ["aString": "string data", "anInt": 123, "aDouble": 3.14]
        let fromAnyHashable = try Document(anyHashable)
        XCTAssertEqual(fromAnyHashable.body, fromDictionary.body)
        // "as long as all the dictionary keys are strings"
        let notAllStrings: [AnyHashable: Any] = ["aString": "string data", 7: "seven"]
        XCTAssertThrowsError(try Document(notAllStrings)) { error in
            XCTAssertEqual((error as? DocStoreError)?.code, .invalidDocument)
        }

        let jsonData = Data(#"{"aString": "string data", "anInt": 123, "aDouble": 3.14}"#.utf8)
        let fromData = try Document(json: jsonData)
        XCTAssertEqual(fromData.body, literal.body)
        // The guide's string escapes its quotes with `/"`, a typo for `\"`.
        let fromString = try Document(json: "{\"aString\": \"string data\", \"anInt\": 123, \"aDouble\": 3.14}")
        XCTAssertEqual(fromString.body, literal.body)
        XCTAssertThrowsError(try Document(json: "{/\"aString/\": /\"string data/\"}"), "the typo itself is not JSON")

        // "When document is created without providing an Id, one will be automatically generated for
        // the document." — by every initializer, at once, and a different one each time.
        let generated = [literal.id, empty.id, fromDictionary.id, fromAnyHashable.id, fromData.id, fromString.id]
        XCTAssertEqual(Set(generated).count, generated.count)
        XCTAssertTrue(generated.allSatisfy { $0.count == 32 && $0.allSatisfy(\.isHexDigit) })
    }

    /// PredixSDK Database Guide — "let document1: Document = ["aString": …] let stringValue =
    /// document1["aString"]", "document1["aString"] = "new value"" and "for (key, value) in document1".
    func testGuideDocumentDataAndIteration() {
        let output = Output()
        let document1: Document = ["aString": "string data", "anInt": 123, "aDouble": 3.14]
        let stringValue = document1["aString"]
        XCTAssertEqual(stringValue, "string data")              // "The value of "stringValue" will be "string data""

        var changed: Document = ["aString": "string data", "anInt": 123, "aDouble": 3.14]   // `var`: a value
        changed["aString"] = "new value"
        XCTAssertEqual(changed["aString"], "new value")
        changed["anotherKey"] = "A new key/value pair"          // "this will add a new key/value pair"
        XCTAssertEqual(changed.body.keys.last, "anotherKey")

        // A `JSON` value prints as JSON text, so a string prints quoted; `.stringValue` gives the
        // bare string where the guide prints one.
        for (key, value) in document1 {
            output.print("key: \(key) : value: \(value.stringValue ?? value.description)")
        }
        XCTAssertEqual(output.lines, [
            "key: aString : value: string data",
            "key: anInt : value: 123",
            "key: aDouble : value: 3.14",
        ])
    }

    /// PredixSDK Database Guide — "let document1: Document = ["id": "my_document_id"]
    /// print(document1.metaData.id)", and the metadata it lists (`type` and `channels` read/write).
    func testGuideMetadata() async throws {
        let output = Output()
        let document1: Document = ["id": "my_document_id"]
        output.print(document1.metaData.id)
        XCTAssertEqual(output.lines, ["my_document_id"])

        var document = document1
        document.type = "invoice"
        document.channels = ["sales"]
        let db = try await open(try configuration())
        let saved = try await db.save(document)
        XCTAssertEqual(saved.metaData.type, "invoice")
        XCTAssertEqual(saved.metaData.channels, ["sales"])
        let created = try XCTUnwrap(saved.metaData.createDate)
        XCTAssertEqual(saved.metaData.lastChange, created, "created and last changed by the same save")
    }

    /// PredixSDK Database Guide — "Documents can have associated blobs of data called attachments …
    /// They can be created from either a Data object, or a URL."
    func testGuideAttachmentsFromDataAndURL() async throws {
        let db = try await open(try configuration())
        let folder = try makeTemporaryDirectory(self)
        let file = folder.appendingPathComponent("clip.wav")
        try Data("RIFF-sound".utf8).write(to: file)
        var document = Document(id: "with-attachments")
        document.attachments["photo"] = Attachment(data: Data("JPEG-bytes".utf8), contentType: "image/jpeg")
        document.attachments["clip"] = try Attachment(contentsOf: file, contentType: "audio/wav")
        let saved = try await db.save(document)
        let fetched = try await db.fetchDocument(saved.id)
        XCTAssertEqual(fetched.map { Array($0.attachments.keys) }, ["photo", "clip"])
        await XCTAssertEqualAsync(try await db.attachmentData(fetched!.attachments["clip"]!), Data("RIFF-sound".utf8))
    }

    /// PredixSDK Database Guide — "let database = Database.openedWith(Database.Configuration())
    /// let document1: Document = [...] database.save(document1) { result in switch result {".
    func testGuideSave() async throws {
        let config = try configuration()
        _ = try await open(config)
        let output = Output()

        let database = Database.openedWith(config)!
        let document1: Document = ["aString": "string data", "anInt": 123, "aDouble": 3.14]
        do {
            let savedDocument = try await database.save(document1)
            output.print("Saved document with id: \(savedDocument.metaData.id)")
        } catch {
            output.print("Error saving document: \(error)")
        }
        XCTAssertEqual(output.lines, ["Saved document with id: \(document1.id)"], "the id it was created with")
    }

    /// PredixSDK Database Guide — "let myDocumentId = "my_document" database.fetchDocument(myDocumentId)".
    func testGuideFetchDocument() async throws {
        let config = try configuration()
        _ = try await open(config)
        let output = Output()
        let database = Database.openedWith(config)!
        for myDocumentId in ["my_document", "my_document"] {
            if let document = try await database.fetchDocument(myDocumentId) {
                output.print("Fetched document with id: \(document.metaData.id)")
            } else {
                output.print("No document with id: \(myDocumentId) exists")
            }
            _ = try await database.save(Document(id: "my_document"))
        }
        XCTAssertEqual(output.lines, ["No document with id: my_document exists", "Fetched document with id: my_document"])
    }

    /// PredixSDK Database Guide — "// a document with the id of "my_document" exists, but not
    /// "not_a_document_id". let ids = ["my_document_id", "not_a_document_id"]".
    func testGuideFetchDocuments() async throws {
        let config = try configuration()
        let database = try await open(config)
        _ = try await database.save(Document(id: "my_document_id"))
        let output = Output()

        let ids = ["my_document_id", "not_a_document_id"]
        let fetchedDocuments = try await database.fetchDocuments(ids)
        for (_, document) in fetchedDocuments {
            output.print("fetched document: \(document.metaData.id)")
        }
        XCTAssertEqual(output.lines, ["fetched document: my_document_id"])   // "Will print:"
    }

    /// PredixSDK Database Guide — "database.delete("my_document_id") { result in switch result {".
    func testGuideDelete() async throws {
        let database = try await open(try configuration())
        _ = try await database.save(Document(id: "my_document_id"))
        let output = Output()
        do {
            let deletedDocumentId = "my_document_id"
            try await database.delete(documentWithID: deletedDocumentId)
            output.print("Deleted document with id: \(deletedDocumentId)")
        } catch {
            output.print("Error deleting document: \(error)")
        }
        XCTAssertEqual(output.lines, ["Deleted document with id: my_document_id"])
    }

    /// The invoices the guide's index examples assume.
    private func invoices(_ database: Database) async throws {
        _ = try await database.save([
            ["id": "inv-1", "InvoiceNumber": "A-100", "TotalCost": 250],
            ["id": "inv-2", "InvoiceNumber": "A-101", "TotalCost": 1000],
            ["id": "inv-3", "InvoiceNumber": "A-102", "TotalCost": 4200.5],
            ["id": "inv-4", "InvoiceNumber": "A-103", "TotalCost": 999.99],
            ["id": "inv-5", "InvoiceNumber": "A-104"],                        // no cost: no row
            ["id": "inv-6", "InvoiceNumber": "A-105", "TotalCost": 1500],
        ])
    }

    /// The guide's map: "let map = { document, addIndexRow in if let totalCost = document["TotalCost"] {
    /// addIndexRow(totalCost, document["InvoiceNumber"]".
    static let invoiceCostIndex = IndexDefinition(name: "InvoiceCostIndex", version: "1") { document, addIndexRow in
        if let totalCost = document["TotalCost"] {
            addIndexRow(totalCost, document["InvoiceNumber"])
        }
    }

    /// PredixSDK Database Guide — "let map = { document, addIndexRow in if let totalCost =
    /// document["TotalCost"]", then "let query= QueryByKeyRange() query.startKey = 1000" with and without
    /// "while let queryRow = queryEnumerator.next()": an open-ended ascending range.
    func testGuideMapAndOpenEndedRange() async throws {
        var config = try configuration()
        config.indexes = [Self.invoiceCostIndex]
        let database = try await open(config)
        try await invoices(database)
        let output = Output()

        var query = IndexQuery()
        query.startKey = 1000
        let queryEnumerator = try await database.query("InvoiceCostIndex", query)
        output.print("Returned \(queryEnumerator.count) invoices with a total cost greater than 1000")
        for queryRow in queryEnumerator {
            output.print(" Invoice: \(queryRow.value.stringValue ?? "") - total cost: \(queryRow.key)")
        }
        XCTAssertEqual(output.lines, [
            "Returned 3 invoices with a total cost greater than 1000",   // "1000 or greater", as it explains
            " Invoice: A-101 - total cost: 1000",
            " Invoice: A-105 - total cost: 1500",
            " Invoice: A-102 - total cost: 4200.5",
        ])
        // "a nil end key indicates the results should end at the last row"; a nil start key starts at
        // the first.
        var below = IndexQuery()
        below.endKey = 1000
        below.inclusiveEnd = false
        await XCTAssertEqualAsync(try await database.query("InvoiceCostIndex", below).map(\.key), [250, 999.99])
    }

    /// PredixSDK Database Guide — "let query= QueryByKeyList() query.keys = ["red", "green", "blue",
    /// "purple"] database.runQuery(on: "ColorIndex", with: query)".
    func testGuideQueryByKeyList() async throws {
        var config = try configuration()
        config.indexes = [IndexDefinition(name: "ColorIndex", version: "1") { document, addIndexRow in
            if let color = document["color"] { addIndexRow(color, nil) }
        }]
        let database = try await open(config)
        _ = try await database.save(["red", "green", "orange", "blue", "red", "black"].map { ["color": .string($0)] })
        let output = Output()

        var query = IndexQuery()
        query.keys = ["red", "green", "blue", "purple"]
        let queryEnumerator = try await database.query("ColorIndex", query)
        output.print("Returned \(queryEnumerator.count) rows")
        XCTAssertEqual(output.lines, ["Returned 4 rows"])
        XCTAssertEqual(queryEnumerator.map(\.key), ["red", "red", "green", "blue"], "in the order of the keys")
    }

    /// PredixSDK Database Guide and Advanced Topics — "Given an index that emits the type string of each
    /// document, and no value. let reduce = { ( keys, values, rereduce) in var result: [String: Int]",
    /// as written: without a rereduce it counts each type; with one it counts, per type, the partial
    /// results that name it ("Return the unique key values").
    func testGuideReduceAsWritten() async throws {
        let reduce: @Sendable ([JSON], [JSON], Bool) throws -> JSON = { keys, values, rereduce in
            var result: [String: Int] = [:]
            if !rereduce {
                let sKeys = keys.compactMap(\.stringValue)
                if sKeys.count == keys.count {
                    for key in sKeys {
                        var count = result[key] ?? 0
                        count += 1
                        result[key] = count
                    }
                }
            } else {
                let counts = values.compactMap(\.objectValue)
                if counts.count == values.count {
                    for count in counts {
                        for key in count.keys {
                            var count = result[key] ?? 0
                            count += 1
                            result[key] = count
                        }
                    }
                }
            }
            return .object(JSONObject(result.sorted { $0.key < $1.key }.map { ($0.key, JSON.integer($0.value)) }))
        }
        let types = ["a", "b", "c", "d", "a", "b", "a", "x", "a", "c"]
        // "Given an index that emits the type string of each document, and no value", reduced in one
        // chunk and in chunks of 4 (10 rows: three chunks, then a rereduce).
        func typeIndex(_ name: String, chunkSize: Int) -> IndexDefinition {
            var index = IndexDefinition(name: name, version: "1", reduce: .custom(reduce)) { document, emit in
                if let type = document["type"] { emit(type, nil) }
            }
            index.reduceChunkSize = chunkSize
            return index
        }
        let oneChunk = typeIndex("types", chunkSize: 100)
        let chunked = typeIndex("types-chunked", chunkSize: 4)
        var config = try configuration()
        config.indexes = [oneChunk, chunked]
        let database = try await open(config)
        _ = try await database.save(types.enumerated().map { n, type in ["id": .string("doc\(n)"), "type": .string(type)] })

        let counted = try await database.query("types")
        XCTAssertEqual(counted.first?.value, ["a": 4, "b": 2, "c": 2, "d": 1, "x": 1])
        let rereduced = try await database.query("types-chunked")
        XCTAssertEqual(rereduced.first?.value.objectValue.map { Set($0.keys) }, ["a", "b", "c", "d", "x"],
                       "the unique key values")
        XCTAssertEqual(rereduced.first?.value, ["a": 1, "b": 1, "c": 1, "d": 1, "x": 1],
                       "rows come in key order (a a a a | b b c c | d x), and the guide's rereduce counts the chunks holding each type")
    }

    /// PredixSDK Database Guide and Advanced Topics — "The database function observeQuery(on: with:
    /// changehandler:) is used to observe the query … use the database method removeObserver()".
    func testGuideObserveQuery() async throws {
        var config = try configuration()
        config.indexes = [Self.invoiceCostIndex]
        let database = try await open(config)
        let counts = Locked<[Int]>([])
        let (seen, seenContinuation) = AsyncStream<Int>.makeStream()
        var query = IndexQuery()
        query.startKey = 1000
        let observer = database.addQueryObserver(index: "InvoiceCostIndex", query: query) { result in
            let count = (try? result.get())?.count ?? -1
            counts.withLock { $0.append(count) }
            seenContinuation.yield(count)
        }
        var iterator = seen.makeAsyncIterator()
        await XCTAssertEqualAsync(await iterator.next(), 0, "the result set now")
        try await invoices(database)
        await XCTAssertEqualAsync(await iterator.next(), 3, "and again when a change alters it")
        await observer.remove()
        _ = try await database.save(["id": "inv-7", "InvoiceNumber": "A-106", "TotalCost": 7000])
        _ = try await database.query("InvoiceCostIndex", query)       // the index has seen the change
        XCTAssertEqual(counts.withLock { $0 }, [0, 3], "no call after removeObserver")
    }

    private final class ChangeRecorder: DatabaseChangeDelegate, @unchecked Sendable {
        // Appended to on the database's delivery task and read by the test after awaiting the stream
        // that the same call feeds: the lock orders the two.
        let changes = Locked<[DocumentChange]>([])
        let continuation: AsyncStream<Void>.Continuation
        init(_ continuation: AsyncStream<Void>.Continuation) { self.continuation = continuation }
        func database(_ database: Database, didChange changes: [DocumentChange]) {
            self.changes.withLock { $0 += changes }
            continuation.yield()
        }
    }

    /// PredixSDK Database Guide and Advanced Topics — "A developer can establish a trigger to be informed
    /// of any database changes, by associating a databaseChangeDelegate with the database … the document
    /// id of the changed document, if the source of the change was replication or not, and if the
    /// document change was a deletion or not."
    func testGuideDatabaseChangeDelegate() async throws {
        let database = try await open(try configuration())
        let (calls, continuation) = AsyncStream<Void>.makeStream()
        let recorder = ChangeRecorder(continuation)
        database.changeDelegate = recorder
        var iterator = calls.makeAsyncIterator()
        _ = try await database.save(Document(id: "watched"))
        _ = await iterator.next()
        _ = try await database.delete(documentWithID: "watched")
        _ = await iterator.next()
        let changes = recorder.changes.withLock { $0 }
        XCTAssertEqual(changes.map(\.id), ["watched", "watched"])
        XCTAssertEqual(changes.map(\.isDeleted), [false, true])
        XCTAssertEqual(changes.map(\.source), [.local, .local])
    }

    /// Advanced Topics — "Documents created without an id, are automatically given an id. This id is
    /// generated in a static closure on the Document class: idFactory."
    func testAdvancedIDFactory() async throws {
        let standard = Document.idFactory
        defer { Document.idFactory = standard }
        let database = try await open(try configuration())

        let automatic = Document()
        XCTAssertEqual(automatic.id.count, 32, "by default 128 random bits, as CouchDB writes the ids it makes")
        Document.idFactory = { "sensor-" + UUID().uuidString }          // "a custom-scheme"
        let custom: Document = ["reading": 21.5]
        XCTAssertTrue(custom.id.hasPrefix("sensor-"), "given when created, not when saved")
        let saved = try await database.save(custom)
        XCTAssertEqual(saved.id, custom.id)
    }

    /// Advanced Topics — "the Document object will recogize data that is a date, and automatically
    /// convert it to a Date type. By default the Document class will use the ISO8601 date format
    /// standard, however a custom DataFormatter can be replace this".
    func testAdvancedDates() async throws {
        let when = Date(timeIntervalSince1970: 1_511_000_000.5)
        var document = Document(id: "inspection")
        document.setDate(when, forKey: "inspectedAt")
        XCTAssertEqual(document["inspectedAt"], "2017-11-18T10:13:20.500Z", "stored as an ISO 8601 string")
        XCTAssertEqual(document.date(forKey: "inspectedAt"), when, "and read back as a Date")
        XCTAssertNil(document.date(forKey: "missing"))

        // A custom format for a database: its models and `makeDocument`/`decode` use it.
        struct Inspection: Model {
            var id: String
            var revision: RevisionID?
            var inspectedAt: Date
        }
        var config = try configuration()
        config.dateFormat = .secondsSince1970
        let database = try await open(config)
        let saved = try await database.add(Inspection(id: "i-1", inspectedAt: when))
        let stored = try await database.fetchDocument("i-1")
        XCTAssertEqual(stored?["inspectedAt"], "1511000000.5")
        XCTAssertEqual(stored?.date(forKey: "inspectedAt", format: .secondsSince1970), when)
        await XCTAssertEqualAsync(try await database.fetch(Inspection.self, id: "i-1")?.inspectedAt, saved.inspectedAt)
    }

    /// Advanced Topics — "These defaults can be changed by using a subclass of OpenDatabaseConfiguration
    /// and overriding the defaultDatabaseName() and defaultLocation() methods", and "Two
    /// Database.Configuration objects are equal if their database name, and file location are equal. All
    /// databases opened with equal configurations return the same database object."
    func testAdvancedConfigurationDefaultsAndEquality() async throws {
        let folder = try makeTemporaryDirectory(self)
        SeedDefaults.folder.withLock { $0 = folder }
        let plant = try await Database.open(.plantFloor)
        let clinic = try await Database.open(.clinic)
        addTeardownBlock { await plant.close(); await clinic.close() }
        XCTAssertEqual(plant.configuration.name, "plant")
        XCTAssertEqual(clinic.configuration.name, "clinic")
        XCTAssertEqual(try Database.allDatabaseNames(in: folder), ["clinic", "plant"])

        var tuned = DatabaseConfiguration.plantFloor
        tuned.revisionsLimit = 1000                                     // settings do not make it another database
        XCTAssertEqual(tuned, .plantFloor)
        XCTAssertNotEqual(DatabaseConfiguration.plantFloor, .clinic)
        let sameFolderSpelledOtherwise = DatabaseConfiguration(name: "plant", directory: folder.appendingPathComponent("x/.."))
        XCTAssertEqual(sameFolderSpelledOtherwise, .plantFloor)
        XCTAssertEqual(Set([tuned, .plantFloor, .clinic]).count, 2)
        let again = try await Database.openExisting(sameFolderSpelledOtherwise)
        XCTAssertTrue(again === plant, "equal configurations open the same database object")
    }
}

/// The folder of the configurations below (set by the test that uses them).
private enum SeedDefaults {
    static let folder = Locked(FileManager.default.temporaryDirectory)
}

extension DatabaseConfiguration {
    /// A default of the app's own, as the guide's subclass overriding `defaultDatabaseName()` gives one.
    fileprivate static var plantFloor: DatabaseConfiguration {
        DatabaseConfiguration(name: "plant", directory: SeedDefaults.folder.withLock { $0 })
    }
    /// A second default, as a second subclass would give.
    fileprivate static var clinic: DatabaseConfiguration {
        DatabaseConfiguration(name: "clinic", directory: SeedDefaults.folder.withLock { $0 })
    }
}

// MARK: - What a map function sees

extension SeedExamplesTests {
    /// A map function reads a document as a CouchDB map reads `doc`: `document["_id"]`, `["_rev"]`,
    /// `["_attachments"]` (stubs), `["_conflicts"]` when the index asks for them; a deletion never
    /// reaches a map, so `["_deleted"]` is absent there (a fetched tombstone reads `true`).
    func testAMapSeesTheDocumentAsCouchDBShowsIt() async throws {
        let seen = Locked<[String: JSON]>([:])
        var index = IndexDefinition(name: "meta", version: "1") { document, emit in
            let members: JSONObject = ["_id": document["_id"] ?? .null, "_rev": document["_rev"] ?? .null,
                                       "_deleted": document["_deleted"] ?? .null, "_conflicts": document["_conflicts"] ?? .null,
                                       "_attachments": document["_attachments"] ?? .null]
            seen.withLock { $0[document.id] = .object(members) }
            emit(document["_id"]!, nil)
        }
        index.includesConflicts = true
        var config = try configuration()
        config.indexes = [index]
        let database = try await open(config)
        var withAttachment = Document(id: "att")
        withAttachment.attachments["a.txt"] = Attachment(data: Data("hello".utf8), contentType: "text/plain")
        let saved = try await database.save(withAttachment)
        let base = try await database.save(["id": "conflicted", "v": 1])
        var branch = Document(id: "conflicted", revision: RevisionID("2-bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"), body: ["v": 3])
        branch.revisionHistory = [base.revision!]
        var other = Document(id: "conflicted", revision: RevisionID("2-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"), body: ["v": 2])
        other.revisionHistory = [base.revision!]
        _ = try await database.insertRevisions([branch, other])
        _ = try await database.save(["id": "gone"])
        _ = try await database.delete(documentWithID: "gone")

        let rows = try await database.query("meta")
        XCTAssertEqual(rows.map(\.key), ["att", "conflicted"], "the deletion is not mapped")
        let members = seen.withLock { $0 }
        XCTAssertEqual(members["att"]?["_id"], "att")
        XCTAssertEqual(members["att"]?["_rev"], .string(saved.revision!.description))
        XCTAssertEqual(members["att"]?["_deleted"], .null)
        XCTAssertEqual(members["att"]?["_attachments"]?["a.txt"]?["stub"], true)
        XCTAssertEqual(members["att"]?["_attachments"]?["a.txt"]?["length"], 5)
        XCTAssertEqual(members["conflicted"]?["_rev"], "2-bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", "the winner")
        XCTAssertEqual(members["conflicted"]?["_conflicts"], ["2-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"])

        // Outside a map, the same members read the same way; assigning `_id` sets the id.
        let tombstone = try await database.document(withID: "gone", revision: nil)
        XCTAssertNil(tombstone)
        let changes = try await database.changes().changes.first { $0.id == "gone" }
        let deleted = try await database.document(withID: "gone", revision: changes?.revision)
        XCTAssertEqual(deleted?["_deleted"], true)
        var renamed = Document(id: "old")
        renamed["_id"] = "new"
        XCTAssertEqual(renamed.id, "new")
        XCTAssertNil(renamed.body["_id"])
        renamed["_other"] = 1
        XCTAssertEqual(renamed.body["_other"], 1, "any other _ member is a (reserved) body member")
    }
}
