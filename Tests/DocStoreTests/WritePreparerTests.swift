import DocStore
import XCTest

/// `Database.writePreparer` (CouchDB's `before_doc_update`) and what validators are shown.
final class WritePreparerTests: XCTestCase {
    func testPreparerChangesEveryWritePathAndMayRefuse() async throws {
        let db = try await makeDatabase(self)
        db.writePreparer = { document, isReplicated, _ in
            if document["forbidden"] != nil { throw DocStoreError(.forbidden, "no forbidden members") }
            guard let secret = document["secret"]?.stringValue else { return false }
            document["secret"] = nil
            document["digest"] = .string(String(secret.reversed()))
            document["replicated"] = .bool(isReplicated)
            return true
        }
        let saved = try await db.save(Document(id: "one", body: ["secret": "abc"]))
        XCTAssertNil(saved["secret"])
        let stored = try await db.document(withID: "one")
        XCTAssertEqual(stored?["digest"], "cba")
        XCTAssertEqual(stored?["replicated"], false)

        let bulk = try await db.save(each: [Document(id: "two", body: ["secret": "xy"]), Document(id: "three", body: ["forbidden": 1]),
                                      Document(id: "four", body: ["plain": true])])
        XCTAssertNotNil(bulk[0].revision)
        XCTAssertEqual(bulk[1].error?.code, .forbidden)
        XCTAssertNotNil(bulk[2].revision)
        await XCTAssertEqualAsync(try await db.document(withID: "two")?["digest"], "yx")
        await XCTAssertEqualAsync(try await db.document(withID: "three"), nil)

        // A replicated revision is prepared too, and keeps its revision id.
        var replicated = Document(id: "five", revision: RevisionID("1-abc"), body: ["secret": "pq"])
        replicated.revisionHistory = []
        let inserted = try await db.insertRevisions([replicated])
        XCTAssertNil(inserted[0].error)
        let five = try await db.document(withID: "five")
        XCTAssertEqual(five?.revision, RevisionID("1-abc"))
        XCTAssertEqual(five?["digest"], "qp")
        XCTAssertEqual(five?["replicated"], true)
    }

    func testARecreatedDocumentHasNoOldDocumentForValidators() async throws {
        let db = try await makeDatabase(self)
        _ = try await db.save(Document(id: "_design/check", body: ["validate_doc_update": "native"]))
        let seen = OldDocuments()
        db.writeValidator = { write in
            guard !write.newDocument.id.hasPrefix("_design/") else { return }
            seen.append(write.oldDocument?.revision)
        }
        let first = try await db.save(Document(id: "doc", body: ["v": 1]))
        let deleted = try await db.delete(first)
        _ = try await db.save(Document(id: "doc", body: ["v": 2]))
        XCTAssertEqual(seen.values, [nil, first.revision, nil], "created, deleted (old: the live one), created again")
        XCTAssertEqual(deleted.generation, 2)
    }
}

/// What a validator saw, across the writer's threads.
private final class OldDocuments: Sendable {
    private let state = Locked<[RevisionID?]>([])
    func append(_ value: RevisionID?) { state.withLock { $0.append(value) } }
    var values: [RevisionID?] { state.withLock { $0 } }
}
