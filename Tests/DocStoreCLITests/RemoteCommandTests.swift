import DocStore
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import XCTest

/// The commands on a server's database (`--db http://…/db`): each run on a local
/// database and on a `docstore serve` database of the same records answers the same JSON (sequences
/// aside, which a server gives as strings).
final class RemoteCommandTests: XCTestCase {
    private func json(_ result: CommandResult, file: StaticString = #filePath, line: UInt = #line) throws -> JSON {
        XCTAssertEqual(result.status, 0, result.stderr, file: file, line: line)
        return try JSON(parsing: result.stdout)
    }

    func testEveryCommandAnswersAsForALocalDatabase() async throws {
        let dir = try makeTemporaryDirectory(self)
        let (_, base, _) = try launchServeURL(in: dir)
        var create = URLRequest(url: URL(string: base + "remote")!)
        create.httpMethod = "PUT"
        create.setValue("Basic " + Data("admin:pw".utf8).base64EncodedString(), forHTTPHeaderField: "Authorization")
        let (_, created) = try await URLSession.shared.data(for: create)
        XCTAssertEqual((created as? HTTPURLResponse)?.statusCode, 201)
        let remote = base.replacingOccurrences(of: "http://", with: "http://admin:pw@") + "remote"
        let local = "local/db"
        func both(_ arguments: [String], input: String? = nil) throws -> (local: CommandResult, remote: CommandResult) {
            (try runDocstore(arguments + ["--db", local], input: input, in: dir), try runDocstore(arguments + ["--db", remote], input: input, in: dir))
        }

        // Import in batches: the same result line per record, the same revisions.
        let records = (0..<30).map { n in #"{"_id":"doc\#(n)","n":\#(n),"word":"\#(n % 3 == 0 ? "apple" : "pear")"}"# }
        let imported = try both(["import", "--batch-size", "7", "-q"], input: records.joined(separator: "\n") + "\nnot json\n")
        XCTAssertEqual(imported.local.status, 1, "a bad record fails the import")
        XCTAssertEqual(imported.remote.status, 1)
        XCTAssertEqual(imported.remote.lines, imported.local.lines)
        XCTAssertEqual(imported.remote.lines.count, 31)
        // A record without _rev updates the document, on the server too.
        let updated = try both(["import", "-q", "--batch-size", "2"], input: #"{"_id":"doc1","n":100}"#)
        XCTAssertEqual(updated.remote.stdout, updated.local.stdout)
        XCTAssertTrue(updated.remote.stdout.contains(#""rev":"2-"#), updated.remote.stdout)

        for arguments in [["get", "doc3", "--revs"], ["get", "doc1", "--conflicts"],
                          ["all", "--include-docs", "--start-key", "doc1", "--end-key", "doc2", "--limit", "4", "--skip", "1"],
                          ["all", "--keys", "doc7,doc1,missing", "--descending"],
                          ["find", #"{"n": {"$gt": 25}}"#, "--fields", #"["_id", "n"]"#],
                          ["put", #"{"_id": "new/one", "v": "a+b&c=d"}"#], ["get", "new/one"],
                          ["delete", "doc5"], ["export", "--format", "ndjson", "-q"], ["export", "--compact", "-q"],
                          ["index", "create", #"["n"]"#, "--name", "by-n", "--ddoc", "idx"], ["index", "list"],
                          ["find", #"{"n": {"$gte": 27}}"#, "--sort", #"["n"]"#, "--fields", #"["_id"]"#],
                          ["index", "delete", "idx", "by-n"],
                          ["index", "create", #"["word"]"#, "--type", "text", "--name", "words", "--ddoc", "text"],
                          ["search", "--index", "words", "apple", "--limit", "3"]] {
            let answers = try both(arguments)
            let label = arguments.joined(separator: " ")
            XCTAssertEqual(answers.local.status, 0, "\(label): \(answers.local.stderr)")
            XCTAssertEqual(answers.remote.status, 0, "\(label): \(answers.remote.stderr)")
            if arguments.first == "export" {
                XCTAssertEqual(answers.remote.stdout, answers.local.stdout, label)
                XCTAssertGreaterThan(answers.remote.lines.count, 1, label)
            } else {
                XCTAssertEqual(try JSON(parsing: answers.remote.stdout), try JSON(parsing: answers.local.stdout), label)
            }
        }

        // The changes: the same rows, a server's sequences as it gives them.
        let changes = try both(["changes", "--limit", "5"])
        func rows(_ answer: JSON) -> [JSON] { answer["results"]?.arrayValue?.map { ["id": $0["id"]!, "changes": $0["changes"]!] } ?? [] }
        let (serverChanges, localChanges) = (try json(changes.remote), try json(changes.local))
        XCTAssertEqual(rows(serverChanges), rows(localChanges))
        let since = try XCTUnwrap(serverChanges["last_seq"]?.stringValue)
        let localSince = try XCTUnwrap(localChanges["last_seq"]?.intValue)
        let rest = try json(try runDocstore(["changes", "--since", since, "--db", remote], in: dir))
        let localRest = try json(try runDocstore(["changes", "--since", String(localSince), "--db", local], in: dir))
        XCTAssertEqual(rows(rest), rows(localRest))
        XCTAssertEqual(rows(rest).count, 28, "31 documents and 2 index design documents (deleted ones too), 5 read before")

        // Figures.
        let info = try both(["info"])
        XCTAssertEqual(try json(info.remote)["doc_count"], try json(info.local)["doc_count"])
        XCTAssertEqual(try json(try runDocstore(["compact", "--db", remote], in: dir)), ["ok": true])

        // A server's view, against the local index on the same field.
        _ = try runDocstore(["put", #"{"_id": "_design/app", "views": {"by_n": {"map": "function (doc) { if (doc.n !== undefined) emit(doc.n, null); }"}}}"#,
                             "--db", remote], in: dir)
        let view = try json(try runDocstore(["query", "--view", "app/by_n", "--start-key", "3", "--end-key", "9", "--limit", "4", "--db", remote], in: dir))
        let index = try json(try runDocstore(["query", "--by", "n", "--start-key", "3", "--end-key", "9", "--limit", "4", "--db", local], in: dir))
        XCTAssertEqual(view["rows"]?.arrayValue?.map { [$0["id"]!, $0["key"]!] }, index["rows"]?.arrayValue?.map { [$0["id"]!, $0["key"]!] })
        XCTAssertEqual(view["rows"]?.arrayValue?.count, 4)

        // Errors.
        let missing = try both(["get", "nothing"])
        XCTAssertEqual(missing.remote.status, 1)
        XCTAssertTrue(missing.remote.stderr.hasPrefix("docstore: error: not_found"), missing.remote.stderr)
        let stale = try runDocstore(["delete", "doc6", "--rev", "1-00000000000000000000000000000000", "--db", remote], in: dir)
        XCTAssertEqual(stale.status, 1)
        XCTAssertTrue(stale.stderr.contains("conflict"), stale.stderr)
        let refused = try runDocstore(["get", "doc3", "--db", remote.replacingOccurrences(of: "admin:pw@", with: "admin:bad@")], in: dir)
        XCTAssertTrue(refused.stderr.contains("unauthorized"), refused.stderr)
        let byField = try runDocstore(["query", "--by", "n", "--db", remote], in: dir)
        XCTAssertEqual(byField.status, 1)
        XCTAssertTrue(byField.stderr.contains("--view"), byField.stderr)
        let notADatabase = try runDocstore(["info", "--db", base + "a/b"], in: dir)
        XCTAssertEqual(notADatabase.status, 1)
        XCTAssertTrue(notADatabase.stderr.contains("not a database URL"), notADatabase.stderr)
    }

    /// `docstore serve` in `directory`: the process, its base URL (`http://127.0.0.1:PORT/`).
    private func launchServeURL(in directory: URL) throws -> (Process, String, Pipe) {
        let (process, pipe, url) = try launchServe(in: directory, self)
        return (process, url, pipe)
    }
}
