import DocStore
import Foundation
import TestSupport
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import XCTest

/// `docstore serve` and `docstore user`, as a person runs them.
final class ServeCommandTests: XCTestCase {
    func testOutOfRangeTimeoutsAreRefusedBeforeStarting() throws {
        let dir = try makeTemporaryDirectory(self)
        for (flag, message) in [("--lock-timeout", "--lock-timeout must be a number of seconds from 0 to 3600"),
                                ("--javascript-timeout", "--javascript-timeout must be a number of seconds above 0, at most 3600")] {
            let refused = try runDocstore(["serve", "--port", "0", flag, "5000"], in: dir)
            XCTAssertNotEqual(refused.status, 0, flag)
            XCTAssertTrue(refused.stderr.contains(message), refused.stderr)
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir.appendingPathComponent("docstore-data").path), "nothing was started")
    }

    func testServeAnswersWelcomeAndStopsCleanlyOnInterrupt() async throws {
        let dir = try makeTemporaryDirectory(self)
        let added = try runDocstore(["user", "add", "alice", "--password", "pw", "--channels", "red", "--roles", "staff"], in: dir)
        XCTAssertEqual(added.status, 0, added.stderr)
        let listed = try runDocstore(["user", "list"], in: dir)
        XCTAssertEqual(try JSON(parsing: listed.lines[0]), ["name": "alice", "roles": ["staff"], "read_channels": ["red"], "write_channels": ["red"]])

        let (process, stdout, launchedURL) = try launchServe(in: dir, self)
        let output = launchedURL + "\n"
        let url = launchedURL
        XCTAssertTrue(url.hasPrefix("http://127.0.0.1:"), output)
        XCTAssertTrue(FileManager.default.fileExists(atPath: dir.appendingPathComponent("docstore-data").path), "data folder created")

        let (data, _) = try await URLSession.shared.data(from: URL(string: url)!)
        let welcome = try JSON(parsing: data)
        XCTAssertEqual(welcome["couchdb"], "Welcome")
        XCTAssertEqual(welcome["vendor"]?["name"], "DocStore")
        var request = URLRequest(url: URL(string: url + "db")!)
        request.httpMethod = "PUT"
        request.setValue("Basic " + Data("admin:pw".utf8).base64EncodedString(), forHTTPHeaderField: "Authorization")
        let (_, created) = try await URLSession.shared.data(for: request)
        XCTAssertEqual((created as! HTTPURLResponse).statusCode, 201)
        var asAlice = URLRequest(url: URL(string: url + "db")!)
        asAlice.setValue("Basic " + Data("alice:pw".utf8).base64EncodedString(), forHTTPHeaderField: "Authorization")
        let (_, aliceInfo) = try await URLSession.shared.data(for: asAlice)
        XCTAssertEqual((aliceInfo as! HTTPURLResponse).statusCode, 200, "a user added with `docstore user add` can sign in")
        // The server remembers alice's document between requests; a new password set by another process
        // works at once, and the old one stops working (within the second a document is remembered).
        let changed = try runDocstore(["user", "add", "alice", "--password", "pw2", "--channels", "red", "--roles", "staff"], in: dir)
        XCTAssertEqual(changed.status, 0, changed.stderr)
        func status(as credentials: String) async throws -> Int {
            var request = URLRequest(url: URL(string: url + "db")!)
            request.setValue("Basic " + Data(credentials.utf8).base64EncodedString(), forHTTPHeaderField: "Authorization")
            return (try await URLSession.shared.data(for: request).1 as! HTTPURLResponse).statusCode
        }
        await XCTAssertEqualAsync(try await status(as: "alice:pw2"), 200, "the new password, at once")
        try await eventually("the old password refused") { try await status(as: "alice:pw") == 401 }
        // A user the server found missing a moment ago, added by another process, signs in at once.
        await XCTAssertEqualAsync(try await status(as: "bob:pw"), 401)
        XCTAssertEqual(try runDocstore(["user", "add", "bob", "--password", "pw"], in: dir).status, 0)
        await XCTAssertEqualAsync(try await status(as: "bob:pw"), 200, "a user added elsewhere, at once")

        process.interrupt()   // Ctrl-C
        let rest = String(decoding: stdout.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        XCTAssertEqual(process.terminationReason, .exit)
        XCTAssertEqual(process.terminationStatus, 0)
        XCTAssertTrue(rest.contains("stopped"), rest)
        // The database was closed properly: its WAL was checkpointed away, and it opens with its data.
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir.appendingPathComponent("docstore-data/db.sqlite-wal").path))
        let info = try runDocstore(["info", "--db", "docstore-data/db"], in: dir)
        XCTAssertEqual(info.status, 0, info.stderr)

        let removed = try runDocstore(["user", "remove", "alice"], in: dir)
        XCTAssertEqual(removed.status, 0)
        XCTAssertEqual(try runDocstore(["user", "remove", "alice"], in: dir).status, 1)
        XCTAssertEqual(try runDocstore(["user", "remove", "bob"], in: dir).status, 0)
        XCTAssertEqual(try runDocstore(["user", "list"], in: dir).stdout, "")
        let bad = try runDocstore(["serve", "--admin", "nocolon"], in: dir)
        XCTAssertEqual(bad.status, 1)
        XCTAssertTrue(bad.stderr.contains("--admin must be NAME:PASSWORD"), bad.stderr)
    }

    /// The page's address follows the server's; `--no-utils`: no page at `/_utils/`, and no line naming it.
    func testTheWebPageIsAnnouncedAndNoUtilsServesNone() async throws {
        let dir = try makeTemporaryDirectory(self)
        let announcing = Process()
        announcing.executableURL = productsDirectory.appendingPathComponent("docstore")
        announcing.arguments = ["serve", "--port", "0", "--admin", "admin:pw", "--data", dir.appendingPathComponent("announced").path]
        let announced = Pipe()
        announcing.standardOutput = announced
        announcing.standardError = FileHandle.nullDevice
        try announcing.run()
        let lines = readLines(of: announced, count: 2)
        announcing.interrupt()
        announcing.waitUntilExit()
        XCTAssertEqual(lines.count, 2, "\(lines)")
        let address = try XCTUnwrap(lines.first?.split(separator: " ").last)
        XCTAssertEqual(lines.last, "Web administration: \(address)_utils/")

        let (process, stdout, url) = try launchServe(in: dir, self, arguments: ["--no-utils"])
        var request = URLRequest(url: URL(string: url + "_utils/")!)
        request.setValue("Basic " + Data("admin:pw".utf8).base64EncodedString(), forHTTPHeaderField: "Authorization")
        let (body, response) = try await URLSession.shared.data(for: request)
        XCTAssertEqual((response as! HTTPURLResponse).statusCode, 404)
        XCTAssertEqual(try JSON(parsing: body)["error"], "not_found")
        process.interrupt()
        let rest = String(decoding: stdout.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        XCTAssertFalse(rest.contains("_utils"), rest)
    }

    /// The two first-run messages: a port another server holds is named with the way out, and a server
    /// without administrator says how to get one.
    func testATakenPortAndAMissingAdministratorAreExplained() throws {
        let dir = try makeTemporaryDirectory(self)
        let (_, _, url) = try launchServe(in: dir, self)
        let port = try XCTUnwrap(URL(string: url)?.port)
        let taken = try runDocstore(["serve", "--port", String(port), "--data", "other"], in: dir)
        XCTAssertEqual(taken.status, 1)
        XCTAssertTrue(taken.stderr.contains("port \(port) on 127.0.0.1 is already in use"), taken.stderr)
        XCTAssertTrue(taken.stderr.contains("start with --port \(port + 1), or --port 0"), taken.stderr)
        XCTAssertFalse(taken.stderr.contains("errno"), "no bare system error: \(taken.stderr)")

        let process = Process()
        process.executableURL = productsDirectory.appendingPathComponent("docstore")
        process.arguments = ["serve", "--port", "0", "--data", "lonely"]
        process.currentDirectoryURL = dir
        process.environment = ProcessInfo.processInfo.environment.filter { $0.key != "DOCSTORE_ADMIN" }
        let stderr = Pipe()
        process.standardError = stderr
        let stdout = Pipe()
        process.standardOutput = stdout
        try process.run()
        var note = ""
        while !note.contains("--data lonely\n") {
            let chunk = stderr.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            note += String(decoding: chunk, as: UTF8.self)
        }
        // Interrupted once serving, when its handler of SIGINT is in place: before, a SIGINT the test
        // process was started ignoring (a background job of a script) is ignored by the server too.
        XCTAssertTrue(readFirstLine(of: stdout).hasPrefix("DocStore is serving"))
        process.interrupt()
        process.waitUntilExit()
        XCTAssertTrue(note.contains("no administrator"), note)
        XCTAssertTrue(note.contains("docstore serve --admin NAME:PASSWORD"), note)
        XCTAssertTrue(note.contains("DOCSTORE_ADMIN=NAME:PASSWORD"), note)
        XCTAssertTrue(note.contains("docstore user add NAME --password PASSWORD --data lonely"), note)
    }

    /// SIGTERM while a client holds a continuous `_changes` feed open: the server ends the feed (its
    /// last line sent) and exits at once instead of waiting for the client.
    func testSIGTERMEndsAnOpenContinuousFeed() async throws {
        let dir = try makeTemporaryDirectory(self)
        let (process, _, url) = try launchServe(in: dir, self)
        for (method, path, body) in [("PUT", "db", ""), ("PUT", "db/a", #"{"n":1}"#)] {
            var request = URLRequest(url: URL(string: url + path)!)
            request.httpMethod = method
            request.httpBody = Data(body.utf8)
            request.setValue("Basic " + Data("admin:pw".utf8).base64EncodedString(), forHTTPHeaderField: "Authorization")
            let (_, response) = try await URLSession.shared.data(for: request)
            XCTAssertEqual((response as! HTTPURLResponse).statusCode, 201)
        }
        let feed = Process()
        feed.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
        feed.arguments = ["-sN", "-u", "admin:pw", url + "db/_changes?feed=continuous&heartbeat=60000"]
        let output = Pipe()
        feed.standardOutput = output
        try feed.run()
        let received = readFirstLine(of: output)
        XCTAssertTrue(received.contains(#""id":"a""#), "the feed is open: \(received)")

        process.terminate()   // SIGTERM
        await eventually(timeout: .seconds(20), "docstore serve waited for the feed's client") { !process.isRunning }
        XCTAssertEqual(process.terminationStatus, 0)
        let rest = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        feed.waitUntilExit()
        XCTAssertTrue(rest.contains(#""last_seq":"1-"#), rest)
        XCTAssertEqual(feed.terminationStatus, 0, "curl saw a complete answer")
    }

    /// `--log-level` (or `DOCSTORE_LOG_LEVEL`): at `info` one line per request on standard error, at
    /// `warning` none.
    func testLogLevels() async throws {
        for (arguments, environment, logsRequests) in [([String](), [String: String](), true),
                                                        (["--log-level", "warning"], [:], false),
                                                        ([], ["DOCSTORE_LOG_LEVEL": "warning"], false),
                                                        (["--log-level", "debug"], ["DOCSTORE_LOG_LEVEL": "warning"], true)] {
            let dir = try makeTemporaryDirectory(self)
            let stderr = Pipe()
            let (process, _, url) = try launchServe(in: dir, self, arguments: arguments, environment: environment, standardError: stderr)
            var request = URLRequest(url: URL(string: url + "_all_dbs")!)
            request.setValue("Basic " + Data("admin:pw".utf8).base64EncodedString(), forHTTPHeaderField: "Authorization")
            let (_, response) = try await URLSession.shared.data(for: request)
            XCTAssertEqual((response as! HTTPURLResponse).statusCode, 200)
            process.interrupt()
            let logged = String(decoding: stderr.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            XCTAssertEqual(logged.contains("GET /_all_dbs 200"), logsRequests, "\(arguments) \(environment): \(logged)")
        }
        let bad = try runDocstore(["serve", "--log-level", "loud"], in: try makeTemporaryDirectory(self))
        XCTAssertEqual(bad.status, 64)
        XCTAssertTrue(bad.stderr.contains("--log-level must be one of trace, debug, info"), bad.stderr)
    }

    /// At `debug` a replication started with `POST /_replicate` logs its progress (batches,
    /// checkpoints, its end) and the databases their opening; at `warning` none of that, nor the
    /// request lines.
    func testDebugLogsShowReplicationProgress() async throws {
        for (level, shown) in [("debug", true), ("warning", false)] {
            let dir = try makeTemporaryDirectory(self)
            let stderr = Pipe()
            let (process, _, url) = try launchServe(in: dir, self, arguments: ["--log-level", level], standardError: stderr)
            for (method, path, body) in [("PUT", "a", ""), ("PUT", "a/doc", #"{"n":1}"#),
                                         ("POST", "_replicate", #"{"source":"a","target":"b","create_target":true}"#)] {
                var request = URLRequest(url: URL(string: url + path)!)
                request.httpMethod = method
                request.httpBody = Data(body.utf8)
                request.setValue("application/json", forHTTPHeaderField: "Content-Type")
                request.setValue("Basic " + Data("admin:pw".utf8).base64EncodedString(), forHTTPHeaderField: "Authorization")
                let (_, response) = try await URLSession.shared.data(for: request)
                XCTAssertLessThan((response as! HTTPURLResponse).statusCode, 300, path)
            }
            process.interrupt()
            let logged = String(decoding: stderr.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            for line in ["replication a → b starting", "a → b: 1 changes, 1 written, 0 refused", "a → b: checkpoint at 1",
                         "replication a → b ended: 1 changes, 1 written, 0 refused", "opened ", "POST /_replicate 200"] {
                XCTAssertEqual(logged.contains(line), shown, "\(level): \(line)\n\(logged)")
            }
        }
    }
}

/// The PredixSDK's draft/CQRS example through `docstore serve` itself: the page's documents, its view as
/// a JavaScript design document, and its private channel read from the `channel` field.
final class ServeDraftExampleTests: XCTestCase {
    private func request(_ method: String, _ url: String, _ body: JSON? = nil, as user: String = "admin:pw") async throws -> (Int, JSON) {
        var request = URLRequest(url: URL(string: url)!)
        request.httpMethod = method
        request.httpBody = try body?.serializedData()
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.setValue("Basic " + Data(user.utf8).base64EncodedString(), forHTTPHeaderField: "Authorization")
        let (data, response) = try await URLSession.shared.data(for: request)
        return ((response as! HTTPURLResponse).statusCode, try JSON(parsing: data))
    }

    /// `docstore serve --channels-field channel` answers the page's row at the page's URL shape
    /// (`/{db}/_design/views/_view/get_id`), and a user granted only `everyone` sees no draft.
    func testTheDraftExampleWithChannelsInTheChannelField() async throws {
        let dir = try makeTemporaryDirectory(self)
        let (_, _, url) = try launchServe(in: dir, self, arguments: ["--data", dir.appendingPathComponent("data").path,
                                                                    "--channels-field", "channel"])
        await XCTAssertEqualAsync(try await request("PUT", url + "device").0, 201)
        let (bulk, _) = try await request("POST", url + "device/_bulk_docs", ["docs": .array(DraftExample.documents + [DraftExample.designDocument])])
        XCTAssertEqual(bulk, 201)
        let (status, answer) = try await request("GET", url + "device/_design/views/_view/get_id")
        XCTAssertEqual(status, 200)
        XCTAssertEqual(answer, DraftExample.answer)

        let colleague: JSON = ["name": "colleague", "password": "c-secret", "roles": [], "type": "user", "read_channels": ["everyone"]]
        await XCTAssertEqualAsync(try await request("PUT", url + "_users/org.couchdb.user:colleague", colleague).0, 201)
        let (allStatus, all) = try await request("GET", url + "device/_all_docs", as: "colleague:c-secret")
        XCTAssertEqual(allStatus, 200)
        XCTAssertEqual(all["rows"]?.arrayValue?.compactMap { $0["id"]?.stringValue }, ["doc_color", "doc_fruit", "doc_furniture"])
        let (draftStatus, _) = try await request("GET", url + "device/doc_fruit_DRAFT", as: "colleague:c-secret")
        XCTAssertEqual(draftStatus, 403)
    }
}
