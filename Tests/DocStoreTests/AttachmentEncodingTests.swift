@testable import DocStore
import Foundation
import XCTest

/// Attachments stored gzip-encoded, as CouchDB sends compressible types: the stored bytes and their
/// digest stay as received, the content is served decoded unless the encoded bytes are asked for.
final class AttachmentEncodingTests: XCTestCase {
    /// A text long enough to compress, different for each seed.
    private func text(_ seed: Int, words: Int = 4000) -> Data {
        let vocabulary = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india"]
        var state = UInt64(seed &+ 1) &* 6364136223846793005
        var out = ""
        for _ in 0..<words {
            state = state &* 6364136223846793005 &+ 1442695040888963407
            out += vocabulary[Int(state >> 33) % vocabulary.count] + " "
        }
        return Data(out.utf8)
    }

    func testGzipAttachmentKeepsItsBytesDigestAndLengths() async throws {
        let db = try await makeDatabase(self)
        let content = text(1)
        let gzip = try GzipStream.compress(content)
        var doc = Document(id: "g", revision: RevisionID("1-a"), body: [:])
        doc.attachments["notes.txt"] = try Attachment(encodedData: gzip, encoding: .gzip, contentType: "text/plain",
                                                      digest: Attachment.digest(of: gzip), length: content.count, revpos: 1)
        let inserted = try await db.insertRevisions([doc])
        XCTAssertTrue(inserted[0].isSuccess)

        let stub = try await db.document(withID: "g")!.attachments["notes.txt"]!
        XCTAssertTrue(stub.isStub)
        XCTAssertEqual(stub.encoding, .gzip)
        XCTAssertEqual(stub.length, content.count, "length is the content's")
        XCTAssertEqual(stub.encodedLength, gzip.count, "encoded_length is the stored bytes'")
        XCTAssertEqual(stub.digest, Attachment.digest(of: gzip), "the digest of the gzip bytes, as received")
        let decoded = try await db.attachmentData(stub)
        XCTAssertEqual(decoded, content)
        let encoded = try db.attachmentContent(stub, encoded: true)
        XCTAssertTrue(encoded.isEncoded)
        XCTAssertEqual(encoded.byteCount, gzip.count)
        var received = Data()
        for try await piece in encoded { received.append(piece) }
        XCTAssertEqual(received, gzip, "the stored bytes, byte for byte")

        // CouchDB's JSON: metadata in its order; encoding and encoded_length only when asked for.
        XCTAssertEqual(stub.json(.stub, encodingInfo: false).description,
                       #"{"content_type":"text/plain","revpos":1,"digest":"\#(stub.digest)","length":\#(content.count),"stub":true}"#)
        XCTAssertEqual(stub.json(.stub, encodingInfo: true).description,
                       #"{"content_type":"text/plain","revpos":1,"digest":"\#(stub.digest)","length":\#(content.count),"stub":true,"encoding":"gzip","encoded_length":\#(gzip.count)}"#)
        let loaded = try db.loadingContent(of: stub)
        XCTAssertEqual(loaded.json(.inline, encodingInfo: false)["data"], .string(content.base64EncodedString()),
                       "inline data is the decoded content")
    }

    /// The same bytes stored gzip-encoded and stored as they are are two contents: one is a text, the
    /// other a gzip file.
    func testTheSameBytesInTwoEncodingsAreTwoContents() async throws {
        let db = try await makeDatabase(self)
        let gzip = try GzipStream.compress(text(2))
        var doc = Document(id: "two")
        doc.attachments["text.txt"] = try Attachment(encodedData: gzip, encoding: .gzip, contentType: "text/plain")
        doc.attachments["archive.gz"] = Attachment(data: gzip, contentType: "application/gzip")
        _ = try await db.save(doc)
        let archive = try await db.attachmentData(named: "archive.gz", documentID: "two")
        XCTAssertEqual(archive, gzip)
        let textContent = try await db.attachmentData(named: "text.txt", documentID: "two")
        XCTAssertEqual(textContent, text(2))
        XCTAssertEqual(try db.readNow { try $0.scalarInt("SELECT count(*) FROM attachments") }, 2)
    }

    /// A decoded read yields bounded pieces however much the stored bytes expand.
    func testDecodedReadsAreBoundedForHighlyCompressibleContent() async throws {
        let db = try await makeDatabase(self)
        let zeros = Data(count: 20 * AttachmentStorage.chunkSize)
        let gzip = try GzipStream.compress(zeros, level: 9)
        XCTAssertLessThan(gzip.count, AttachmentStorage.chunkSize / 10)
        var doc = Document(id: "z")
        doc.attachments["zeros"] = try Attachment(encodedData: gzip, encoding: .gzip, contentType: "text/plain")
        _ = try await db.save(doc)
        let stub = try await db.document(withID: "z")!.attachments["zeros"]!
        var total = 0
        var pieces = 0
        for try await piece in try db.attachmentContent(stub) {
            XCTAssertLessThanOrEqual(piece.count, AttachmentStorage.chunkSize)
            XCTAssertTrue(piece.allSatisfy { $0 == 0 })
            total += piece.count
            pieces += 1
        }
        XCTAssertEqual(total, zeros.count)
        XCTAssertGreaterThanOrEqual(pieces, 20)
    }

    /// Gzip streams: round trips in pieces of every size, truncated data, data after the end.
    func testGzipStreamRoundTripsAndRejectsDamagedData() throws {
        let content = text(3, words: 20_000)
        let gzip = try GzipStream.compress(content)
        XCTAssertEqual(try GzipStream.decompress(gzip), content)
        for pieceSize in [1, 7, 4096, gzip.count] {
            let stream = try GzipStream(.inflate)
            var out = Data()
            var offset = 0
            while offset < gzip.count {
                let end = min(offset + pieceSize, gzip.count)
                try gzip[offset..<end].withUnsafeBytes { try stream.update($0) { out.append(contentsOf: $0) } }
                offset = end
            }
            try stream.finish { out.append(contentsOf: $0) }
            XCTAssertEqual(out, content, "pieces of \(pieceSize)")
        }
        XCTAssertThrowsError(try GzipStream.decompress(gzip.prefix(gzip.count - 10)), "truncated")
        XCTAssertThrowsError(try GzipStream.decompress(gzip + Data("x".utf8)), "bytes after the end")
        XCTAssertThrowsError(try GzipStream.decompress(Data("not gzip at all".utf8)))
        XCTAssertEqual(try GzipStream.decompress(try GzipStream.compress(Data())), Data())
    }
}
