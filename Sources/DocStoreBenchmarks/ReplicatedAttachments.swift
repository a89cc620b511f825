import DocServer
import DocStore
import DocSync
import Foundation

/// `replicate_attachments`: many small documents, each with a small text attachment, pushed from a
/// local database to a DocServer on 127.0.0.1 in batches of 500 and pulled back into another local
/// database — the replicator's per-document work with attachments (inline in `_bulk_docs` going, one
/// `open_revs` request each coming back). The result is checked: both sides end with every document
/// and the pulled attachments carry their bytes.
struct ReplicatedAttachments {
    let count: Int
    let folder: URL

    /// Seconds for the push and the pull.
    func run() async throws -> Double {
        let work = folder.appendingPathComponent("replicated-attachments")
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: work) }
        let source = try await Database.open(name: "many", directory: work)
        _ = try await source.save((0..<count).map { n in
            var document = Document(id: String(format: "m%06d", n), body: ["n": .integer(n)])
            document.attachments["a.txt"] = Attachment(data: Data("attachment \(n)".utf8), contentType: "text/plain")
            return document
        })
        try await source.flushWriteAheadLog()
        let (server, port) = try await startBenchServer(dataDirectory: work.appendingPathComponent("server"), label: "replicated-attachments")
        let pulled = try await Database.open(name: "pulled", directory: work.appendingPathComponent("client"))
        let url = URL(string: "http://127.0.0.1:\(port)/many")!
        let seconds = try await timeAsync {
            var push = ReplicationConfiguration(source: .local(source), target: .remote(url))
            push.createTarget = true
            push.batchSize = 500
            let pushed = try await Replicator(configuration: push).run()
            var pull = ReplicationConfiguration(source: .remote(url), target: .local(pulled))
            pull.batchSize = 500
            let pulledStatus = try await Replicator(configuration: pull).run()
            guard pushed.documentsWritten == count, pulledStatus.documentsWritten == count,
                pushed.documentWriteFailures == 0, pulledStatus.documentWriteFailures == 0 else {
                throw DocStoreError(.io, "replicate_attachments: the replications did not move every document")
            }
        }
        let last = String(format: "m%06d", count - 1)
        let sample = try await pulled.attachmentData(named: "a.txt", documentID: last)
        guard String(decoding: sample, as: UTF8.self) == "attachment \(count - 1)" else {
            throw DocStoreError(.io, "replicate_attachments: the pulled attachment differs")
        }
        await pulled.close()
        await server.stop()
        await source.close()
        return seconds
    }
}

/// Samples the process's resident memory every 20 ms from its creation until ``stop()``, which
/// returns the largest rise above the level at creation, in MB.
final class ResidentMemorySampler: Sendable {
    private let before: Double
    private let peak: Locked<Double>
    private let task = Locked<Task<Void, Never>?>(nil)

    init() {
        before = residentMegabytes()
        peak = Locked(before)
        let task = Task.detached { [self] in
            while !Task.isCancelled {
                let now = residentMegabytes()
                peak.withLock { $0 = max($0, now) }
                try? await Task.sleep(for: .milliseconds(20))
            }
        }
        self.task.withLock { $0 = task }
    }

    func stop() async -> Double {
        let running = task.withLock { $0 }
        running?.cancel()
        await running?.value
        let now = residentMegabytes()
        return peak.withLock { max($0, now) } - before
    }
}
