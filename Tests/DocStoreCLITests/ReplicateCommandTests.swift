import DocStore
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import XCTest

final class ReplicateCommandTests: XCTestCase {
    /// Starts `docstore serve` on a free port in `dir`; returns the process and its base URL with credentials.
    private func serve(in dir: URL) throws -> (Process, String) {
        let (process, _, url) = try launchServe(in: dir, self)
        return (process, url.replacingOccurrences(of: "http://", with: "http://admin:pw@"))
    }

    private func allDocIDs(_ databaseURL: String) async throws -> [String] {
        let url = URL(string: databaseURL + "/_all_docs")!
        var request = URLRequest(url: URL(string: url.absoluteString.replacingOccurrences(of: "admin:pw@", with: ""))!)
        request.setValue("Basic " + Data("admin:pw".utf8).base64EncodedString(), forHTTPHeaderField: "Authorization")
        let (data, _) = try await URLSession.shared.data(for: request)
        return try JSON(parsing: data)["rows"]?.arrayValue?.compactMap { $0["id"]?.stringValue } ?? []
    }

    /// A continuous replication whose source does not exist ends at once with the error and a
    /// non-zero status, as CouchDB's `_replicate` refuses it, instead of waiting for Ctrl-C.
    func testContinuousReplicationFromAMissingSourceEndsWithItsError() throws {
        let dir = try makeTemporaryDirectory(self)
        let (_, base) = try serve(in: dir)
        let result = try runDocstore(["replicate", "--continuous", "--quiet", base + "nosuch", "local/copy", "--create-target"], in: dir)
        XCTAssertNotEqual(result.status, 0, result.stdout)
        XCTAssertTrue(result.stderr.contains("replication_failed") && result.stderr.contains("databaseNotFound"), result.stderr)
        XCTAssertFalse(result.stdout.contains(#""ok":true"#), result.stdout)
    }

    /// A continuous replication runs until Ctrl-C, then reports what it did and exits 0.
    func testContinuousReplicationStopsOnInterrupt() throws {
        let dir = try makeTemporaryDirectory(self)
        let documents = (0..<5).map { n in #"{"_id":"doc\#(n)","n":\#(n)}"# }.joined(separator: "\n")
        XCTAssertEqual(try runDocstore(["import", "--db", "docstore-data/a"], input: documents, in: dir).status, 0)
        let (_, base) = try serve(in: dir)
        let process = Process()
        process.executableURL = productsDirectory.appendingPathComponent("docstore")
        process.arguments = ["replicate", "--continuous", base + "a", "local/copy", "--create-target"]
        process.currentDirectoryURL = dir
        let stdout = Pipe()
        process.standardOutput = stdout
        process.standardError = FileHandle.nullDevice
        let waitForExit = try process.start()
        // Progress lines until one says all five are written; then Ctrl-C.
        var seen = ""
        while !seen.contains("written=5 ") {
            let chunk = stdout.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            seen += String(decoding: chunk, as: UTF8.self)
        }
        XCTAssertTrue(seen.contains("written=5 "), seen)
        process.interrupt()
        let rest = String(decoding: stdout.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        waitForExit()
        XCTAssertEqual(process.terminationStatus, 0, rest)
        let summary = try JSON(parsing: Data((rest.split(separator: "\n").last ?? "").utf8))
        XCTAssertEqual(summary["ok"], true)
        XCTAssertEqual(summary["docs_written"], 5)
    }

    func testReplicateBetweenServersAndLocalFolders() async throws {
        let dirA = try makeTemporaryDirectory(self)
        let dirB = try makeTemporaryDirectory(self)
        let documents = (0..<30).map { n in #"{"_id":"doc\#(n)","n":\#(n)}"# }.joined(separator: "\n")
        let imported = try runDocstore(["import", "--db", "docstore-data/a"], input: documents, in: dirA)
        XCTAssertEqual(imported.status, 0, imported.stderr)
        let (_, urlA) = try serve(in: dirA)
        let (_, urlB) = try serve(in: dirB)

        // Server to server, creating the target.
        let result = try runDocstore(["replicate", urlA + "a", urlB + "b", "--create-target", "--batch-size", "7"], in: dirA)
        XCTAssertEqual(result.status, 0, result.stderr + result.stdout)
        XCTAssertTrue(result.stdout.contains("progress changes="), "plain progress lines when not on a terminal")
        XCTAssertEqual(try JSON(parsing: result.lines.last!)["docs_written"], 30)
        let copied = try await allDocIDs(urlB + "b")
        XCTAssertEqual(copied.count, 30)

        // A second run moves nothing.
        let again = try runDocstore(["replicate", urlA + "a", urlB + "b"], in: dirA)
        XCTAssertEqual(try JSON(parsing: again.lines.last!)["docs_written"], 0)

        // Local folder to server, with a channel filter, and server back to a new local folder.
        _ = try runDocstore(["put", #"{"_id":"local-red","channels":["red"]}"#, "--db", "local/src"], in: dirB)
        _ = try runDocstore(["put", #"{"_id":"local-blue","channels":["blue"]}"#, "--db", "local/src"], in: dirB)
        let pushed = try runDocstore(["replicate", "local/src", urlB + "b", "--channels", "red"], in: dirB)
        XCTAssertEqual(pushed.status, 0, pushed.stderr)
        let afterPush = try await allDocIDs(urlB + "b")
        XCTAssertTrue(afterPush.contains("local-red"))
        XCTAssertFalse(afterPush.contains("local-blue"))
        let pulled = try runDocstore(["replicate", urlB + "b", "local/copy", "--doc-ids", "doc3,local-red"], in: dirB)
        XCTAssertEqual(pulled.status, 0, pulled.stderr)
        let local = try JSON(parsing: try runDocstore(["all", "--db", "local/copy"], in: dirB).stdout)
        XCTAssertEqual(local["rows"]?.arrayValue?.map { $0["id"]! }, ["doc3", "local-red"])

        let refused = try runDocstore(["replicate", urlA.replacingOccurrences(of: "admin:pw@", with: "admin:bad@") + "a", "local/x"], in: dirB)
        XCTAssertEqual(refused.status, 1)
        XCTAssertTrue(refused.stderr.contains("unauthorized"), refused.stderr)
    }
}
