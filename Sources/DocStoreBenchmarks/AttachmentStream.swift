import DocServer
import DocStore
import DocSync
import Foundation

/// `attachment_stream`: large attachments pushed from a local database to a DocServer and pulled back
/// into another local database, with DocSync over HTTP on 127.0.0.1 — against copying the same bytes
/// from file to file twice with plain reads and writes. Also measures how much the resident memory
/// grows meanwhile (server and client are this process): attachments move in chunks, so it should not
/// grow with their size.
struct AttachmentStream {
    /// Attachments of this size make up the total.
    static let attachmentSize = 4 * 1024 * 1024

    let megabytes: Int
    let folder: URL

    /// Seconds for ours and for the baseline, the resident memory growth in MB, and the process's
    /// resident memory high-water mark before the measurement restarted it.
    func run() async throws -> (ours: Double, baseline: Double, rssGrowthMB: Double, peakBeforeMB: Double) {
        let total = megabytes * 1024 * 1024
        let count = max(1, total / AttachmentStream.attachmentSize)
        let work = folder.appendingPathComponent("attachment-stream")
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: work) }

        // The source: `count` documents with a pseudo-random attachment each, streamed in.
        let source = try await Database.open(name: "attachments", directory: work)
        var generator = SplitMix64(seed: 7)
        var piece = [UInt8](repeating: 0, count: 1024 * 1024)
        let file = work.appendingPathComponent("raw.bin")
        _ = FileManager.default.createFile(atPath: file.path, contents: nil)
        let rawFile = try FileHandle(forWritingTo: file)
        for index in 0..<count {
            let writer = try source.attachmentWriter(contentType: "application/octet-stream")
            for _ in 0..<(AttachmentStream.attachmentSize / piece.count) {
                piece.withUnsafeMutableBytes { bytes in
                    let words = bytes.bindMemory(to: UInt64.self)
                    for offset in words.indices { words[offset] = generator.next() }
                }
                try await writer.write(piece)
                try rawFile.write(contentsOf: piece)
            }
            var document = Document(id: String(format: "video-%04d", index))
            document.attachments["video.bin"] = try await writer.finish()
            try await source.save(document)
        }
        try rawFile.close()
        try await source.flushWriteAheadLog()

        // The baseline: the same bytes copied file to file, there and back.
        let baseline = try time {
            try AttachmentStream.copy(file, to: work.appendingPathComponent("copy-1.bin"))
            try AttachmentStream.copy(work.appendingPathComponent("copy-1.bin"), to: work.appendingPathComponent("copy-2.bin"))
        }
        try FileManager.default.removeItem(at: work.appendingPathComponent("copy-1.bin"))
        try FileManager.default.removeItem(at: work.appendingPathComponent("copy-2.bin"))

        let (server, port) = try await startBenchServer(dataDirectory: work.appendingPathComponent("server"), label: "attachments")
        let pulled = try await Database.open(name: "pulled", directory: work.appendingPathComponent("client"))
        let url = URL(string: "http://127.0.0.1:\(port)/attachments")!
        releaseFreeMemory()
        let before = residentMegabytes()
        let peakBefore = resetPeakResidentMemory()
        let ours = try await timeAsync {
            var push = ReplicationConfiguration(source: .local(source), target: .remote(url))
            push.createTarget = true
            let pushed = try await Replicator(configuration: push).run()
            let pulledStatus = try await Replicator(configuration: ReplicationConfiguration(source: .remote(url), target: .local(pulled))).run()
            guard pushed.documentWriteFailures == 0, pulledStatus.documentWriteFailures == 0,
                pulledStatus.documentsWritten == count else {
                throw DocStoreError(.io, "attachment_stream: the replications did not move every document")
            }
        }
        let growth = peakResidentMegabytes() - before
        // The bytes came back as they went.
        let sample = try await pulled.attachmentData(named: "video.bin", documentID: "video-0000")
        let original = try await source.attachmentData(named: "video.bin", documentID: "video-0000")
        guard sample == original else { throw DocStoreError(.io, "attachment_stream: the pulled bytes differ") }
        await pulled.close()
        await server.stop()
        await source.close()
        return (ours, baseline, growth, peakBefore)
    }

    /// Copies a file in 1 MiB reads and writes.
    static func copy(_ source: URL, to target: URL) throws {
        let input = try FileHandle(forReadingFrom: source)
        defer { try? input.close() }
        _ = FileManager.default.createFile(atPath: target.path, contents: nil)
        let output = try FileHandle(forWritingTo: target)
        defer { try? output.close() }
        while let data = try input.read(upToCount: 1024 * 1024), !data.isEmpty {
            try output.write(contentsOf: data)
        }
    }
}

func time(_ body: () throws -> Void) throws -> Double {
    let start = ContinuousClock.now
    try body()
    return (ContinuousClock.now - start).seconds
}
