import DocStore
import Foundation
import XCTest

/// Export and import: a full export reproduces a database with conflicts, tombstones, attachments
/// (compressed ones too) and property history exactly; the compact form; bad files.
final class InterchangeTests: XCTestCase {
    /// A database with a bit of everything.
    private func makeSource() async throws -> Database {
        let db = try await makeDatabase(self, name: "source")
        // History, edited twice.
        var chore = try await db.add(Chore(id: "chore", title: "Sweep", status: "open"))
        chore.status = "done"
        chore = try await db.update(chore)
        // A conflict: two branches inserted as replication would.
        try await db.save(Document(id: "conflicted", body: ["v": 1]))
        let base = try await db.document(withID: "conflicted")!
        var mine = base
        mine["v"] = "mine"
        try await db.save(mine)
        var other = Document(id: "conflicted", revision: RevisionID("2-bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"), body: ["v": "theirs"])
        other.revisionHistory = [base.revision!]
        _ = try await db.insertRevisions([other])
        // A tombstone, and a deleted conflict leaf.
        let doomed = try await db.save(Document(id: "deleted", body: ["gone": true]))
        try await db.delete(doomed)
        // Attachments: plain and gzip-stored.
        var files = Document(id: "files", body: ["kind": "files"])
        files.attachments["a.bin"] = Attachment(data: Data((0..<300).map { UInt8($0 % 251) }), contentType: "application/octet-stream")
        try await db.save(files)
        let content = Data(String(repeating: "compressible text ", count: 200).utf8)
        let gzip = try GzipStream.compress(content)
        var compressed = Document(id: "gz", revision: RevisionID("1-abcdef"), body: ["kind": "gz"])
        compressed.attachments["notes.txt"] = try Attachment(encodedData: gzip, encoding: .gzip, contentType: "text/plain",
                                                             digest: Attachment.digest(of: gzip), length: content.count, revpos: 1)
        _ = try await db.insertRevisions([compressed])
        try await db.save(Document(id: "_design/app", body: ["language": "query"]))
        return db
    }

    func testAFullExportReproducesEveryLeafHistoryAndAttachment() async throws {
        let source = try await makeSource()
        for format in ExportOptions.Format.allCases {
            var exported = Data()
            let count = try await source.export(ExportOptions(format: format)) { exported.append($0) }
            XCTAssertEqual(count, 7, "chore, the two leaves of conflicted, the tombstone, files, gz and the design document")

            let copy = try await makeDatabase(self, name: "copy-\(format)")
            let summary = try await copy.importDocuments(from: exported)
            XCTAssertEqual(summary.records, count)
            XCTAssertEqual(summary.revisionsWritten, count)
            try await assertSameDatabase(source, copy)

            // Importing it again changes nothing.
            let again = try await copy.importDocuments(from: exported)
            XCTAssertEqual(again.revisionsWritten, 0)
        }
    }

    private func assertSameDatabase(_ a: Database, _ b: Database) async throws {
        let ids = try await a.changes().changes.map(\.id).sorted()
        let copied = try await b.changes().changes.map(\.id).sorted()
        XCTAssertEqual(copied, ids)
        for id in ids {
            let treeA = try await a.revisionTree(ofDocumentWithID: id)!
            let treeB = try await b.revisionTree(ofDocumentWithID: id)!
            XCTAssertEqual(treeB.winner?.revision, treeA.winner?.revision, id)
            XCTAssertEqual(Set(treeB.leaves.map(\.revision)), Set(treeA.leaves.map(\.revision)), id)
            for leaf in treeA.leaves {
                let docA = try await a.document(withID: id, revision: leaf.revision, includeRevisionHistory: true)
                let docB = try await b.document(withID: id, revision: leaf.revision, includeRevisionHistory: true)
                XCTAssertEqual(docB?.body, docA?.body, "\(id) \(leaf.revision)")
                XCTAssertEqual(docB?.revisionHistory, docA?.revisionHistory, "\(id) \(leaf.revision)")
                XCTAssertEqual(docB?.isDeleted, docA?.isDeleted)
                for (name, attachment) in docA?.attachments ?? [:] {
                    let other = try XCTUnwrap(docB?.attachments[name], "\(id)/\(name)")
                    XCTAssertEqual(other.digest, attachment.digest, "\(id)/\(name)")
                    XCTAssertEqual(other.encoding, attachment.encoding, "\(id)/\(name)")
                    XCTAssertEqual(other.revpos, attachment.revpos, "\(id)/\(name)")
                    let bytesA = try a.loadingContent(of: attachment).encodedData
                    let bytesB = try b.loadingContent(of: other).encodedData
                    XCTAssertEqual(bytesB, bytesA, "\(id)/\(name) byte for byte")
                }
            }
        }
    }

    func testTheCompactFormHoldsCurrentValuesOnly() async throws {
        let source = try await makeSource()
        var exported = Data()
        try await source.export(ExportOptions(format: .ndjson, form: .compact)) { exported.append($0) }
        let lines = String(decoding: exported, as: UTF8.self).split(separator: "\n").map { try! JSON(parsing: String($0)) }
        XCTAssertEqual(lines.map { $0["_id"]?.stringValue ?? "" }, ["_design/app", "chore", "conflicted", "files", "gz"])
        XCTAssertEqual(lines[1], ["_id": "chore", "status": "done", "title": "Sweep", "type": "task"],
                       "no _rev, no history")
        XCTAssertNil(lines[3]["_attachments"])

        // A selection, as a JSON array.
        var selected = Data()
        try await source.export(ExportOptions(format: .json, form: .compact, selector: try MangoSelector(["kind": ["$exists": true]]))) {
            selected.append($0)
        }
        XCTAssertEqual(try JSON(parsing: selected).arrayValue?.map { $0["_id"]! }, ["files", "gz"])

        // Importing compact records creates documents, or updates the current revision.
        let target = try await makeDatabase(self, name: "target")
        try await target.save(Document(id: "chore", body: ["old": true]))
        let summary = try await target.importDocuments(from: exported)
        XCTAssertEqual(summary.revisionsWritten, 5)
        let chore = try await target.document(withID: "chore")
        XCTAssertEqual(chore?.revision?.generation, 2)
        XCTAssertEqual(chore?["status"], "done")
    }

    func testABadFileNamesTheLineAndImportsNothing() async throws {
        let db = try await makeDatabase(self)
        let ndjson = Data("""
            {"_id":"a","n":1}

            {"_id":"b","n":2
            {"_id":"c"}
            """.utf8)
        do {
            try await db.importDocuments(from: ndjson)
            XCTFail("line 3 is broken")
        } catch let error as DocStoreError {
            XCTAssertEqual(error.code, .invalidImport)
            XCTAssertTrue(error.reason.hasPrefix("line 3 "), error.reason)
            XCTAssertEqual(error.byteOffset, 35, "the end of line 3, where the object should have closed")
        }
        let array = Data(#"[{"_id":"a"}, {"_id":"b"} {"_id":"c"}]"#.utf8)
        do {
            try await db.importDocuments(from: array)
            XCTFail("a comma is missing")
        } catch let error as DocStoreError {
            XCTAssertEqual(error.code, .invalidImport)
            XCTAssertEqual(error.byteOffset, 26)
        }
        for (text, message) in [(#"[{"_id":"a"}, {"n":1}]"#, "element 1: A record needs an _id"),
                                (#"[{"_id":"a"}, {"_id":"b","_rev":"x"}]"#, "element 1: "),
                                ("{\"_id\":\"a\"}\n[1]\n", "line 2: A record must be a JSON object")] {
            do {
                try await db.importDocuments(from: Data(text.utf8))
                XCTFail(text)
            } catch let error as DocStoreError {
                XCTAssertEqual(error.code, .invalidImport, text)
                XCTAssertTrue(error.reason.hasPrefix(message), error.reason)
            }
        }
        // A record that cannot be stored (a reserved member) stops the whole import too.
        do {
            try await db.importDocuments(from: Data("{\"_id\":\"a\"}\n{\"_id\":\"b\",\"_bad\":1}\n".utf8))
            XCTFail("_bad is reserved")
        } catch let error as DocStoreError {
            XCTAssertEqual(error.code, .invalidDocument)
            XCTAssertEqual(error.itemIndex, 1)
            XCTAssertTrue(error.reason.hasPrefix("line 2: "), error.reason)
            XCTAssertEqual(error.byteOffset, 12)
        }
        let info = try await db.info()
        XCTAssertEqual(info.documentCount, 0, "nothing was imported")
    }
}
