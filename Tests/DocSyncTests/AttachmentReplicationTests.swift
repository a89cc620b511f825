@testable import DocServer
import DocStore
@testable import DocSync
import Foundation
import XCTest

/// Attachments through replication with DocServer: every leaf of a conflict complete with its own
/// attachments, gzip bytes kept as they are, large ones streamed both ways, refused stubs sent again.
final class AttachmentReplicationTests: XCTestCase {
    private func words(_ count: Int) -> Data {
        Data((0..<count).map { ["leaf ", "stub ", "gzip ", "digest "][$0 % 4] }.joined().utf8)
    }

    private func replicate(_ source: ReplicationEndpoint, _ target: ReplicationEndpoint) async throws -> ReplicatorStatus {
        let status = try await Replicator(configuration: ReplicationConfiguration(source: source, target: target)).run()
        XCTAssertEqual(status.documentWriteFailures, 0)
        return status
    }

    /// A document whose leaves carry different attachments — one gzip-encoded, one large enough to be
    /// streamed through files, a deleted leaf with one — reaches a server and comes back with every
    /// leaf, history, digest and byte intact.
    func testConflictedLeavesWithDifferentAttachmentsTravelComplete() async throws {
        let origin = try await makeDatabase("origin")
        let (_, url, served) = try await makeServer()
        let base = Data("base".utf8)
        let text = words(5000)
        let gzip = try GzipStream.compress(text)
        let large = Data((0..<(3 * 1024 * 1024)).map { UInt8(truncatingIfNeeded: $0 &* 2654435761 >> 13) })
        func revision(_ json: String, _ attachments: Attachments) throws -> Document {
            var document = try Document(json: json)
            for (name, attachment) in attachments { document.attachments[name] = attachment }
            return document
        }
        var baseAttachment = Attachment(data: base, contentType: "text/plain")
        baseAttachment.revpos = 1
        var gzipAttachment = try Attachment(encodedData: gzip, encoding: .gzip, contentType: "text/plain")
        gzipAttachment.revpos = 2
        var largeAttachment = Attachment(data: large, contentType: "application/octet-stream")
        largeAttachment.revpos = 2
        var lastWords = Attachment(data: Data("gone".utf8), contentType: "text/plain")
        lastWords.revpos = 2
        let results = try await origin.insertRevisions([
            try revision(#"{"_id":"c","_rev":"1-a","v":0}"#, ["base.txt": baseAttachment]),
            try revision(#"{"_id":"c","_rev":"2-left","_revisions":{"start":2,"ids":["left","a"]},"side":"left","_attachments":{"base.txt":{"stub":true}}}"#,
                         ["words.txt": gzipAttachment]),
            try revision(#"{"_id":"c","_rev":"2-right","_revisions":{"start":2,"ids":["right","a"]},"side":"right"}"#, ["big.bin": largeAttachment]),
            try revision(#"{"_id":"c","_rev":"2-gone","_revisions":{"start":2,"ids":["gone","a"]},"_deleted":true}"#, ["last.txt": lastWords]),
        ])
        XCTAssertTrue(results.allSatisfy(\.isSuccess), "\(results.compactMap(\.error))")

        _ = try await replicate(.local(origin), .remote(url))
        let expectedFound = try await origin.comparedLeaves(of: "c")
        let expected = try XCTUnwrap(expectedFound)
        XCTAssertEqual(expected.count, 3)
        let onServerFound = try await served.comparedLeaves(of: "c")
        let onServer = try XCTUnwrap(onServerFound)
        XCTAssertEqual(Set(onServer.keys), Set(expected.keys))
        for (revision, leaf) in expected { XCTAssertEqual(leaf.matches(onServer[revision]!), [], revision) }
        let stored = try await served.document(withID: "c", revision: RevisionID("2-left"))?.attachments["words.txt"]
        XCTAssertEqual(stored?.encoding, .gzip, "gzip bytes stay gzip")
        XCTAssertEqual(stored?.digest, Attachment.digest(of: gzip))

        let back = try await makeDatabase("back")
        _ = try await replicate(.remote(url), .local(back))
        let pulledFound = try await back.comparedLeaves(of: "c")
        let pulled = try XCTUnwrap(pulledFound)
        for (revision, leaf) in expected { XCTAssertEqual(leaf.matches(pulled[revision]!), [], revision) }

        // A later revision on one branch carries the others by stub; only its new attachment travels.
        let nextFound = try await origin.document(withID: "c", revision: RevisionID("2-left"))
        var next = try XCTUnwrap(nextFound)
        next.attachments["new.txt"] = Attachment(data: Data("new".utf8), contentType: "text/plain")
        next = try await origin.save(next)
        _ = try await replicate(.local(origin), .remote(url))
        _ = try await replicate(.remote(url), .local(back))
        let latestFound = try await back.comparedLeaves(of: "c")
        let latest = try XCTUnwrap(latestFound)
        let wantFound = try await origin.comparedLeaves(of: "c")
        let want = try XCTUnwrap(wantFound)
        XCTAssertEqual(Set(latest.keys), Set(want.keys))
        for (revision, leaf) in want { XCTAssertEqual(leaf.matches(latest[revision]!), [], revision) }
    }

    /// A stub the target cannot resolve (here: the source claims an attachment dates from a revision
    /// the target holds without it) is refused with `missing_stub`; the revision then goes again with
    /// every attachment.
    func testRefusedStubsAreSentAgainWithTheirBytes() async throws {
        let origin = try await makeDatabase("origin")
        let (_, url, served) = try await makeServer()
        let root = try Document(json: #"{"_id":"s","_rev":"1-a","v":1}"#)
        _ = try await origin.insertRevisions([root])
        _ = try await served.insertRevisions([root])
        var child = try Document(json: #"{"_id":"s","_rev":"2-b","_revisions":{"start":2,"ids":["b","a"]},"v":2}"#)
        var attachment = Attachment(data: Data("claimed old".utf8), contentType: "text/plain")
        attachment.revpos = 1
        child.attachments["old.txt"] = attachment
        let inserted = try await origin.insertRevisions([child])
        XCTAssertTrue(inserted[0].isSuccess)

        _ = try await replicate(.local(origin), .remote(url))
        let bytes = try await served.attachmentData(named: "old.txt", documentID: "s")
        XCTAssertEqual(bytes, Data("claimed old".utf8))
    }

    /// A pull of revisions with small attachments reads them with their contents inline from
    /// `_bulk_get` (one request per group, `atts_since` per revision) instead of one `open_revs` request
    /// each; a revision needing gzip bytes still comes as multipart, which keeps them; a later revision
    /// brings only its new attachment.
    func testSmallAttachmentsArePulledInBulk() async throws {
        let (_, url, served) = try await makeServer()
        var revisions: [Document] = []
        for number in 0..<30 {
            var document = try Document(json: #"{"_id":"d\#(number)","_rev":"1-a\#(number)","n":\#(number)}"#)
            var attachment = Attachment(data: Data("note \(number)".utf8), contentType: "text/plain")
            attachment.revpos = 1
            document.attachments["note.txt"] = attachment
            revisions.append(document)
        }
        var zipped = try Document(json: #"{"_id":"zipped","_rev":"1-z"}"#)
        var gzip = try Attachment(encodedData: GzipStream.compress(words(400)), encoding: .gzip, contentType: "text/plain")
        gzip.revpos = 1
        zipped.attachments["words.txt"] = gzip
        revisions.append(zipped)
        let inserted = try await served.insertRevisions(revisions)
        XCTAssertTrue(inserted.allSatisfy(\.isSuccess))

        let back = try await makeDatabase("back")
        let status = try await replicate(.remote(url), .local(back))
        XCTAssertEqual(status.figures.documentsWritten, 31)
        XCTAssertEqual(status.figures.bulkGetAttempts, 31, "each revision counts once")
        XCTAssertEqual(status.figures.bulkGetDocuments, 30, "the small identity attachments came from _bulk_get")
        for number in [0, 17, 29] {
            let bytes = try await back.attachmentData(named: "note.txt", documentID: "d\(number)")
            XCTAssertEqual(bytes, Data("note \(number)".utf8))
            let stored = try await back.document(withID: "d\(number)")?.attachments["note.txt"]
            XCTAssertEqual(stored?.digest, Attachment.digest(of: Data("note \(number)".utf8)))
            XCTAssertEqual(stored?.revpos, 1)
        }
        let pulledGzip = try await back.document(withID: "zipped")?.attachments["words.txt"]
        XCTAssertEqual(pulledGzip?.encoding, .gzip, "gzip bytes stay gzip")
        XCTAssertEqual(pulledGzip?.digest, gzip.digest)

        // The next revision of one document adds an attachment: only that one comes with its content.
        let current = try await served.document(withID: "d3")
        var next = try XCTUnwrap(current)
        next.attachments["more.txt"] = Attachment(data: Data("more".utf8), contentType: "text/plain")
        _ = try await served.save(next)
        let again = try await replicate(.remote(url), .local(back))
        XCTAssertEqual(again.figures.bulkGetDocuments, 1)
        let latestFound = try await back.document(withID: "d3")
        let latest = try XCTUnwrap(latestFound)
        XCTAssertEqual(latest.revision?.generation, 2)
        XCTAssertEqual(Set(latest.attachments.keys), ["note.txt", "more.txt"])
        let more = try await back.attachmentData(named: "more.txt", documentID: "d3")
        XCTAssertEqual(more, Data("more".utf8))
    }

    /// Attachments of each size a transfer is made for — held in memory, sent from and downloaded to a
    /// file (a large transfer, taking turns) — go to a server and come back byte for byte, whether
    /// just under, at or over the limit.
    func testAttachmentsOfEveryTransferSizeTravelIntact() async throws {
        let origin = try await makeDatabase("origin")
        let (_, url, served) = try await makeServer()
        var generator = SplitMix64(seed: 31)
        let block = (0..<(64 * 1024)).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
        func content(_ size: Int, salt: UInt8) -> Data {
            var bytes = [UInt8](repeating: 0, count: size)
            for offset in 0..<size { bytes[offset] = block[offset % block.count] ^ UInt8(truncatingIfNeeded: offset / block.count) ^ salt }
            return Data(bytes)
        }
        let limit = HTTPPeer.inMemoryAnswerLimit
        let sizes = [100_000, limit - 1024, limit, limit + 1, 3 * limit + 4096]
        var contents: [String: Data] = [:]
        for (index, size) in sizes.enumerated() {
            var document = Document(id: "size-\(index)")
            let bytes = content(size, salt: UInt8(index))
            document.attachments["blob.bin"] = Attachment(data: bytes, contentType: "application/octet-stream")
            _ = try await origin.save(document)
            contents[document.id] = bytes
        }
        _ = try await replicate(.local(origin), .remote(url))
        let back = try await makeDatabase("back")
        let status = try await replicate(.remote(url), .local(back))
        XCTAssertEqual(status.figures.documentsWritten, sizes.count)
        for (id, bytes) in contents {
            let onServer = try await served.attachmentData(named: "blob.bin", documentID: id)
            XCTAssertEqual(onServer, bytes, "\(id) on the server")
            let pulled = try await back.attachmentData(named: "blob.bin", documentID: id)
            XCTAssertEqual(pulled, bytes, "\(id) pulled back")
            let stored = try await back.document(withID: id)?.attachments["blob.bin"]
            XCTAssertEqual(stored?.digest, Attachment.digest(of: bytes))
        }
    }

    func testTransferLimiterRunsAtMostItsLimitAtOnce() async throws {
        let limiter = TransferLimiter(limit: 2)
        final class Counts: Sendable { let state = Locked((running: 0, most: 0)) }
        let counts = Counts()
        try await withThrowingTaskGroup(of: Int.self) { group in
            for index in 0..<12 {
                group.addTask {
                    try await limiter.run {
                        counts.state.withLock { $0.running += 1; $0.most = max($0.most, $0.running) }
                        for _ in 0..<50 { await Task.yield() }
                        counts.state.withLock { $0.running -= 1 }
                        return index
                    }
                }
            }
            var finished = Set<Int>()
            for try await index in group { finished.insert(index) }
            XCTAssertEqual(finished, Set(0..<12))
        }
        XCTAssertLessThanOrEqual(counts.state.withLock { $0.most }, 2)
        XCTAssertEqual(counts.state.withLock { $0.running }, 0)
    }
}
