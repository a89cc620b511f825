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
