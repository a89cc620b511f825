@testable import DocStore
import Foundation
import XCTest

/// Contents streamed in with an ``AttachmentWriter`` and out with ``AttachmentContent``, in chunks.
final class AttachmentStreamingTests: XCTestCase {
    private func bytes(_ count: Int, seed: UInt8 = 1) -> Data {
        Data((0..<count).map { UInt8(truncatingIfNeeded: ($0 &* 31) ^ ($0 >> 11) &+ Int(seed)) })
    }

    private func count(_ table: String, in db: Database) throws -> Int64 {
        try db.readNow { try $0.scalarInt("SELECT count(*) FROM \(table)") ?? -1 }
    }

    /// Writes `data` in pieces of `piece` bytes.
    private func stream(_ data: Data, piece: Int, into writer: AttachmentWriter) async throws {
        var offset = 0
        while offset < data.count {
            let end = min(offset + piece, data.count)
            try await writer.write(data[offset..<end])
            offset = end
        }
    }

    func testStreamedContentIsStoredInChunksAndReadBackInPieces() async throws {
        let db = try await makeDatabase(self)
        let content = bytes(5 * AttachmentStorage.chunkSize + 777)
        let writer = try db.attachmentWriter(contentType: "application/octet-stream", encodedLength: content.count)
        try await stream(content, piece: 10_000, into: writer)
        XCTAssertEqual(try count("attachment_chunks", in: db), 5, "full chunks are written as they come")
        let attachment = try await writer.finish()
        XCTAssertNil(attachment.data, "a large content is not held in memory")
        XCTAssertEqual(attachment.length, content.count)
        XCTAssertEqual(attachment.digest, Attachment.digest(of: content))

        var doc = Document(id: "big")
        doc.attachments["blob.bin"] = attachment
        let saved = try await db.save(doc)
        XCTAssertTrue(saved.attachments["blob.bin"]!.isStub)
        XCTAssertEqual(try count("attachment_chunks", in: db), 6)

        let stub = try await db.document(withID: "big")!.attachments["blob.bin"]!
        var received = Data()
        var pieces = 0
        for try await piece in try db.attachmentContent(stub) {
            XCTAssertLessThanOrEqual(piece.count, AttachmentStorage.chunkSize)
            received.append(piece)
            pieces += 1
        }
        XCTAssertEqual(received, content)
        XCTAssertEqual(pieces, 6)
    }

    /// Pieces larger than a chunk, or exactly one, are cut into the same chunks as small pieces are.
    func testPiecesOfAnySizeMakeTheSameChunks() async throws {
        let db = try await makeDatabase(self)
        for (index, piece) in [2 * AttachmentStorage.chunkSize + 1, AttachmentStorage.chunkSize, 4 * AttachmentStorage.chunkSize + 3].enumerated() {
            let content = bytes(4 * AttachmentStorage.chunkSize + 3, seed: UInt8(index))
            let writer = try db.attachmentWriter(contentType: "application/octet-stream", encodedLength: content.count)
            try await stream(content, piece: piece, into: writer)
            var doc = Document(id: "piece-\(index)")
            doc.attachments["blob.bin"] = try await writer.finish()
            _ = try await db.save(doc)
            let read = try await db.attachmentData(named: "blob.bin", documentID: "piece-\(index)")
            XCTAssertEqual(read, content, "pieces of \(piece) bytes")
            // Each chunk of the stored content is full but the last.
            let sizes = try db.readNow { connection in
                let statement = try connection.prepare("SELECT length(data) FROM attachment_chunks WHERE content = (SELECT max(content) FROM attachments) ORDER BY position")
                var sizes: [Int] = []
                while try statement.step() { sizes.append(statement.int(0)) }
                return sizes
            }
            XCTAssertEqual(sizes, Array(repeating: AttachmentStorage.chunkSize, count: 4) + [3], "pieces of \(piece) bytes")
        }
    }

    /// Writes that overlap (the writer waits for the database in the middle of one) are refused, not
    /// interleaved: the content is exactly the pieces that were taken, each whole.
    func testOverlappingWritesAreRefusedAndLoseNothing() async throws {
        let db = try await makeDatabase(self)
        let writer = try db.attachmentWriter(contentType: "application/octet-stream")
        let pieces = (0..<8).map { bytes(2 * AttachmentStorage.chunkSize + 100, seed: UInt8($0)) }
        let taken = try await withThrowingTaskGroup(of: Int?.self) { group in
            for (index, piece) in pieces.enumerated() {
                group.addTask {
                    do {
                        try await writer.write(piece)
                        return index
                    } catch let error as DocStoreError where error.code == .badRequest {
                        return nil
                    }
                }
            }
            var taken: [Int] = []
            for try await index in group { if let index { taken.append(index) } }
            return taken
        }
        XCTAssertFalse(taken.isEmpty)
        var document = Document(id: "overlapped")
        document.attachments["blob.bin"] = try await writer.finish()
        _ = try await db.save(document)
        let read = try await db.attachmentData(named: "blob.bin", documentID: "overlapped")
        XCTAssertEqual(read.count, taken.count * pieces[0].count)
        // Each piece taken is whole and in one place: the content is some order of them.
        var rest = read[...]
        while !rest.isEmpty {
            let next = rest.prefix(pieces[0].count)
            XCTAssertTrue(taken.contains { pieces[$0] == next }, "a piece was cut or mixed with another")
            rest = rest.dropFirst(pieces[0].count)
        }
    }

    func testSmallStreamedContentStaysInMemoryUntilSaved() async throws {
        let db = try await makeDatabase(self)
        let writer = try db.attachmentWriter(contentType: "text/plain")
        try await writer.write(Data("small".utf8))
        let attachment = try await writer.finish()
        XCTAssertEqual(attachment.data, Data("small".utf8))
        XCTAssertEqual(try count("attachments", in: db), 0)
        await assertThrowsDocStoreError(.badRequest) { try await writer.write(Data("more".utf8)) }
    }

    /// A streamed content that another document already holds is stored once.
    func testStreamedDuplicateIsStoredOnce() async throws {
        let db = try await makeDatabase(self)
        let content = bytes(3 * AttachmentStorage.chunkSize)
        var first = Document(id: "a")
        first.attachments["x"] = Attachment(data: content, contentType: "application/octet-stream")
        _ = try await db.save(first)
        let writer = try db.attachmentWriter(contentType: "application/octet-stream")
        try await stream(content, piece: 65536, into: writer)
        var second = Document(id: "b")
        second.attachments["y"] = try await writer.finish()
        _ = try await db.save(second)
        XCTAssertEqual(try count("attachments", in: db), 1)
        XCTAssertEqual(try count("attachment_chunks", in: db), 3)
        let read = try await db.attachmentData(named: "y", documentID: "b")
        XCTAssertEqual(read, content)
    }

    func testWriterChecksLengthDigestLimitAndGzip() async throws {
        let db = try await makeDatabase(self)
        let content = bytes(2 * AttachmentStorage.chunkSize + 5)

        let short = try db.attachmentWriter(contentType: "a/b", encodedLength: content.count + 1)
        try await stream(content, piece: 100_000, into: short)
        await assertThrowsDocStoreError(.invalidAttachment) { try await short.finish() }

        let long = try db.attachmentWriter(contentType: "a/b", encodedLength: 10)
        await assertThrowsDocStoreError(.invalidAttachment) { try await long.write(content) }

        let wrongDigest = try db.attachmentWriter(contentType: "a/b", digest: "md5-AAAAAAAAAAAAAAAAAAAAAA==")
        try await stream(content, piece: 100_000, into: wrongDigest)
        await assertThrowsDocStoreError(.digestMismatch) { try await wrongDigest.finish() }

        let limited = try db.attachmentWriter(contentType: "a/b", maximumLength: AttachmentStorage.chunkSize)
        let error = await assertThrowsDocStoreError(.attachmentTooLarge) {
            try await self.stream(content, piece: 100_000, into: limited)
        }
        XCTAssertEqual(error?.httpStatus, 413)
        await assertThrowsDocStoreError(.attachmentTooLarge) {
            _ = try db.attachmentWriter(contentType: "a/b", encodedLength: 11, maximumLength: 10)
        }

        let notGzip = try db.attachmentWriter(contentType: "text/plain", encoding: .gzip)
        await assertThrowsDocStoreError(.invalidAttachment) { try await notGzip.write(content) }

        let text = Data(String(repeating: "stream me ", count: 200_000).utf8)
        let gzip = try GzipStream.compress(text)
        let wrongLength = try db.attachmentWriter(contentType: "text/plain", encoding: .gzip, length: text.count - 1)
        try await stream(gzip, piece: 999, into: wrongLength)
        await assertThrowsDocStoreError(.invalidAttachment) { try await wrongLength.finish() }

        let good = try db.attachmentWriter(contentType: "text/plain", encoding: .gzip, digest: Attachment.digest(of: gzip),
                                           encodedLength: gzip.count, length: text.count)
        try await stream(gzip, piece: 999, into: good)
        let attachment = try await good.finish()
        XCTAssertEqual(attachment.length, text.count)
        XCTAssertEqual(attachment.encodedLength, gzip.count)

        // Every failed writer dropped what it had written.
        XCTAssertEqual(try count("attachments", in: db), 0)
        XCTAssertEqual(try count("attachment_chunks", in: db), 0)
    }

    /// A content streamed in but never saved is deleted: at once when cancelled, and by the next open
    /// when the process stopped before saving.
    func testUnsavedStreamedContentIsDiscarded() async throws {
        let directory = try makeTemporaryDirectory(self)
        let db = try await Database.open(name: "staging", directory: directory)
        let content = bytes(3 * AttachmentStorage.chunkSize)
        let cancelled = try db.attachmentWriter(contentType: "a/b")
        try await stream(content, piece: 100_000, into: cancelled)
        XCTAssertEqual(try count("attachment_chunks", in: db), 2)
        await cancelled.cancel()
        XCTAssertEqual(try count("attachments", in: db), 0)
        XCTAssertEqual(try count("attachment_chunks", in: db), 0)

        let abandoned = try db.attachmentWriter(contentType: "a/b")
        try await stream(content, piece: 100_000, into: abandoned)
        let attachment = try await abandoned.finish()
        XCTAssertEqual(try count("attachment_chunks", in: db), 3)
        await db.close()
        _ = attachment
        let reopened = try await Database.open(name: "staging", directory: directory)
        XCTAssertEqual(try count("attachments", in: reopened), 0, "opening deletes contents no document adopted")
        XCTAssertEqual(try count("attachment_chunks", in: reopened), 0)
        await reopened.close()
    }

    /// A content being read survives a compaction that finds it unused, until the read ends.
    func testContentBeingReadSurvivesCompaction() async throws {
        let db = try await makeDatabase(self)
        let content = bytes(3 * AttachmentStorage.chunkSize)
        var doc = Document(id: "c")
        doc.attachments["c.bin"] = Attachment(data: content, contentType: "application/octet-stream")
        doc = try await db.save(doc)
        let stub = doc.attachments["c.bin"]!
        let stream = try db.attachmentContent(stub)
        var iterator = stream.makeAsyncIterator()
        var received = try await iterator.next()!

        doc.attachments = [:]
        _ = try await db.save(doc)
        _ = try await db.compact()
        XCTAssertEqual(try count("attachments", in: db), 1, "pinned while read")
        while let piece = try await iterator.next() { received.append(piece) }
        XCTAssertEqual(received, content)
        iterator = AttachmentContent.Iterator(reader: ChunkReader(source: .memory(Data()), attachment: stub, decode: false))
        _ = try await db.compact()
        XCTAssertEqual(try count("attachments", in: db), 0, "collected once no longer read")
        XCTAssertEqual(try count("attachment_chunks", in: db), 0)
    }

    /// Files of the version 2 schema keep their attachments through the migration to version 3.
    func testVersionTwoAttachmentsSurviveTheMigration() async throws {
        let directory = try makeTemporaryDirectory(self)
        let url = directory.appendingPathComponent("old.sqlite")
        let content = Data("version two".utf8)
        let digest = Attachment.digest(of: content)
        try ThreadRule.allowing(.testing) {
            let connection = try SQLiteConnection(path: url.path)
            try Schema.migrate(connection, uuid: { "uuid-v2" }, to: 2)
            let body = #"{"_attachments":{"a.txt":{"content_type":"text/plain","digest":"\#(digest)","length":11,"revpos":1,"stub":true}}}"#
            var tree = RevisionTree()
            tree.addRevision(RevisionID("1-abc")!, parent: nil, isDeleted: false)
            try connection.run("INSERT INTO docs (doc, seq, id, rev, deleted, body, tree, created, updated) VALUES (1, 1, 'd', '1-abc', 0, ?, ?, 0, 0)",
                               [.blob(Array(body.utf8)), .blob(tree.encoded())])
            try connection.run("INSERT INTO changes (seq, doc, prev) VALUES (1, 1, NULL)")
            try connection.run("INSERT INTO attachments (digest, length, data) VALUES (?, 11, ?)", [.text(digest), .blob(Array(content))])
            try connection.run("INSERT INTO attachment_refs (id, rev, digest) VALUES ('d', '1-abc', ?)", [.text(digest)])
            connection.close()
        }

        let db = try await Database.open(name: "old", directory: directory)
        XCTAssertEqual(try db.readNow { try $0.scalarInt("PRAGMA user_version") }, Schema.currentVersion)
        let stub = try await db.document(withID: "d")!.attachments["a.txt"]!
        XCTAssertEqual(stub.encoding, .identity)
        let read = try await db.attachmentData(stub)
        XCTAssertEqual(read, content)
        await db.close()
    }
}
