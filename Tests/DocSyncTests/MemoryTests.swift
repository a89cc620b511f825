@testable import DocServer
import DocStore
@testable import DocSync
import Foundation
import Synchronization
import XCTest

/// Pulling a large database holds one batch at a time, not the database.
final class MemoryTests: XCTestCase {
    private static func residentMegabytes() -> Double {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") })
        else { return 0 }
        return (Double(line.split(separator: " ").dropFirst().first ?? "0") ?? 0) / 1024
    }

    func testPullingTwentyThousandDocumentsStaysFarBelowTheDataSize() async throws {
        let (_, url, remote) = try await makeServer()
        let filler = String(repeating: "lorem ipsum dolor sit amet ", count: 190)   // ≈5 KB per document
        for chunk in 0..<20 {
            _ = try await remote.save((0..<1000).map { n in
                Document(id: String(format: "big%05d", chunk * 1000 + n), body: ["text": .string(filler), "n": .integer(n)])
            })
        }
        let dataMegabytes = Double(20_000 * filler.utf8.count) / 1_048_576
        XCTAssertGreaterThan(dataMegabytes, 90)

        let local = try await makeDatabase("memory")
        let before = MemoryTests.residentMegabytes()
        let peak = Mutex(before)
        let sampler = Task {
            while !Task.isCancelled {
                let now = MemoryTests.residentMegabytes()
                peak.withLock { $0 = max($0, now) }
                try? await Task.sleep(for: .milliseconds(20))
            }
        }
        var configuration = ReplicationConfiguration(source: .remote(url), target: .local(local))
        configuration.batchSize = 100
        let status = try await Replicator(configuration: configuration).run()
        sampler.cancel()
        XCTAssertEqual(status.documentsWritten, 20_000)
        let growth = peak.withLock { $0 } - before
        print("pulled \(Int(dataMegabytes)) MB of documents; resident memory grew by at most \(Int(growth)) MB")
        XCTAssertLessThan(growth, dataMegabytes / 3, "the replicator must not hold the pulled documents")
        let count = try await local.info().documentCount
        XCTAssertEqual(count, 20_000)
    }
}
