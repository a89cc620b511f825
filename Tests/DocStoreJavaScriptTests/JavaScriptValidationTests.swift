import DocStore
import DocStoreJavaScript
import Foundation
import XCTest

/// `validate_doc_update` on every write path, and JavaScript changes filters, through the Swift API.
final class JavaScriptValidationTests: XCTestCase {
    private let validator: JSONObject = ["validate_doc_update": """
        function(newDoc, oldDoc, userCtx, secObj) {
          if (newDoc._deleted) { if (oldDoc && oldDoc.locked) throw({forbidden: 'locked documents stay'}); return; }
          if (!newDoc.author) throw({forbidden: 'documents need an author'});
          if (newDoc.author !== userCtx.name && userCtx.roles.indexOf('_admin') < 0) throw({unauthorized: 'only the author may write'});
          if (oldDoc && oldDoc.author !== newDoc.author) throw({forbidden: 'the author cannot change'});
        }
        """]

    func testValidationRefusesWritesOnEveryPath() async throws {
        let db = try await makeDatabase(self)
        db.enableJavaScript()
        _ = try await db.save(Document(id: "_design/rules", body: validator))

        let refused = await assertThrowsDocStoreError(.forbidden) { try await db.save(Document(id: "a", body: ["x": 1])) }
        XCTAssertEqual(refused?.reason, "documents need an author")
        var saved = try await db.save(Document(id: "a", body: ["author": "ann"]))
        saved["author"] = "bob"
        await assertThrowsDocStoreError(.forbidden) { try await db.save(saved) }

        // Bulk: per-document results, the valid ones written.
        let results = try await db.save(each: [Document(id: "b", body: ["author": "ann"]), Document(id: "c", body: [:])])
        XCTAssertNotNil(try results[0].result.get().revision)
        XCTAssertThrowsError(try results[1].result.get()) { XCTAssertEqual(($0 as? DocStoreError)?.code, .forbidden) }
        let missing = try await db.document(withID: "c")
        XCTAssertNil(missing)

        // Replicated revisions are validated too, against the ancestor this database holds.
        var replicated = Document(id: "a", revision: RevisionID("2-0123456789abcdef0123456789abcdef"), body: ["author": "eve"])
        replicated.revisionHistory = [try XCTUnwrap(saved.revision)]
        let inserted = try await db.insertRevisions([replicated])
        XCTAssertThrowsError(try inserted[0].result.get()) { XCTAssertEqual(($0 as? DocStoreError)?.code, .forbidden) }
        let value1 = try await db.document(withID: "a")?["author"]
        XCTAssertEqual(value1, "ann")

        // The user of the write, from the task's WriteContext.
        let bob = WriteContext(userContext: ["db": "test", "name": "bob", "roles": []])
        let unauthorized = await assertThrowsDocStoreError(.unauthorized) {
            try await WriteContext.$current.withValue(bob) { try await db.save(Document(id: "d", body: ["author": "ann"])) }
        }
        XCTAssertEqual(unauthorized?.httpStatus, 401)
        _ = try await WriteContext.$current.withValue(bob) { try await db.save(Document(id: "d", body: ["author": "bob"])) }
    }

    func testDesignDocumentWhoseViewDoesNotCompileIsRefused() async throws {
        let db = try await makeDatabase(self)
        db.enableJavaScript()
        let error = await assertThrowsDocStoreError(.compilationError) {
            try await db.save(Document(id: "_design/bad", body: ["views": ["v": ["map": "function(doc) { emit(doc._id; }"]]]))
        }
        XCTAssert(error?.reason.contains("Compilation of the map function in the 'v' view failed") ?? false)
        await assertThrowsDocStoreError(.invalidDesignDocument) {
            try await db.save(Document(id: "_design/bad", body: ["views": ["v": ["map": "function(doc) {}", "reduce": "_median"]]]))
        }
        // Another language is stored as it is.
        _ = try await db.save(Document(id: "_design/other", body: ["language": "erlang", "views": ["v": ["map": "fun({Doc}) -> ok end."]]]))
    }

    func testFiltersSeeTheRequest() async throws {
        let db = try await makeDatabase(self)
        _ = try await db.save(Document(id: "_design/app", body: [
            "filters": ["by_type": "function(doc, req) { return doc.type === req.query.type && req.userCtx.name === 'ann'; }"],
            "views": ["fruit": ["map": "function(doc) { if (doc.type == 'fruit') emit(doc._id, null); }"]],
        ]))
        for (id, type) in [("a", "fruit"), ("b", "vegetable"), ("c", "fruit")] {
            _ = try await db.save(Document(id: id, body: ["type": .string(type)]))
        }
        let request = JavaScriptRequest.make(database: "test", query: ["type": "fruit"],
                                             userContext: ["db": "test", "name": "ann", "roles": []])
        let filter = try await db.changesFilter(designDocument: "app", filter: "by_type", request: request)
        let value2 = try await db.changes(filter: filter).changes.map(\.id)
        XCTAssertEqual(value2, ["a", "c"])
        let anonymous = try await db.changesFilter(designDocument: "app", filter: "by_type",
                                                   request: JavaScriptRequest.make(database: "test", query: ["type": "fruit"]))
        let value3 = try await db.changes(filter: anonymous).changes.map(\.id)
        XCTAssertEqual(value3, [])
        let byView = try await db.changesFilter(designDocument: "app", view: "fruit")
        let value4 = try await db.changes(filter: byView).changes.map(\.id)
        XCTAssertEqual(value4, ["a", "c"])
        await assertThrowsDocStoreError(.notFound) { try await db.changesFilter(designDocument: "app", filter: "none") }
    }
}
