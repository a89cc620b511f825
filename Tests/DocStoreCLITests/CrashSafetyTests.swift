import DocStore
import Foundation
import XCTest

/// A child process writes documents in a loop and is killed with SIGKILL; every document whose save
/// had returned (the child printed it) must be in the database when the parent reopens it.
final class CrashSafetyTests: XCTestCase {
    func testKilledWriterLosesNoCommittedDocument() async throws {
        let dir = try makeTemporaryDirectory(self)
        var reported: [String: String] = [:]   // id → rev, as the child printed them
        for round in 0..<2 {
            let input = dir.appendingPathComponent("round\(round).ndjson")
            let lines = (0..<20_000).map { #"{"_id":"r\#(round)-\#(String(format: "%05d", $0))","round":\#(round),"n":\#($0),"pad":"\#(String(repeating: "x", count: 200))"}"# }
            try Data((lines.joined(separator: "\n") + "\n").utf8).write(to: input)

            let process = Process()
            process.executableURL = productsDirectory.appendingPathComponent("docstore")
            process.arguments = ["import", input.path, "--db", "crash/db", "--batch-size", "1"]
            process.currentDirectoryURL = dir
            let stdout = Pipe()
            process.standardOutput = stdout
            process.standardError = FileHandle.nullDevice
            try process.run()

            // Let it commit a few hundred documents, then kill it without warning.
            var output = Data()
            let reader = stdout.fileHandleForReading
            while output.filter({ $0 == 0x0A }).count < 300 + round * 200 {
                let chunk = reader.availableData
                if chunk.isEmpty { break }
                output.append(chunk)
            }
            kill(process.processIdentifier, SIGKILL)
            output.append(reader.readDataToEndOfFile())
            process.waitUntilExit()
            XCTAssertEqual(process.terminationReason, .uncaughtSignal, "the child must die mid-import")

            // Only complete lines count; a line cut by the kill was not fully reported.
            var text = String(decoding: output, as: UTF8.self)
            if !text.hasSuffix("\n"), let lastNewline = text.lastIndex(of: "\n") {
                text = String(text[...lastNewline])
            }
            for line in text.split(separator: "\n") {
                let result = try JSON(parsing: String(line))
                XCTAssertEqual(result["ok"], true, String(line))
                reported[result["id"]!.stringValue!] = result["rev"]!.stringValue!
            }
        }
        XCTAssertGreaterThanOrEqual(reported.count, 800)

        let db = try await Database.open(name: "db", directory: dir.appendingPathComponent("crash"))
        for (id, rev) in reported {
            let document = try await db.document(withID: id)
            XCTAssertEqual(document?.revision?.description, rev, "reported document \(id) lost")
        }
        // What is there is a prefix of each round's input: nothing half-written, no holes.
        for round in 0..<2 {
            let ids = try await db.allDocuments(AllDocumentsQuery(startKey: "r\(round)-", endKey: "r\(round)-~")).rows.map(\.id)
            XCTAssertEqual(ids, (0..<ids.count).map { "r\(round)-" + String(format: "%05d", $0) })
            XCTAssertGreaterThanOrEqual(ids.count, reported.keys.filter { $0.hasPrefix("r\(round)-") }.count)
        }
        let info = try await db.info()
        XCTAssertGreaterThanOrEqual(info.documentCount, reported.count)
        let sequences = try await db.changes().changes.map(\.sequence)
        XCTAssertEqual(sequences, Array(1...Int64(sequences.count)), "sequences continue after recovery without gaps")
        await db.close()
    }
}
