import DocStore
import Foundation
import XCTest

/// `_changes` parameters read as CouchDB 3.3.3 reads them (each answer below was checked against one).
final class ChangesParametersTests: XCTestCase {
    /// Three documents with two leaves each, written as a replication writes them: `a` (winner n 99,
    /// conflict n 0), `v` (winner n 3, conflict n 1), `w` (winner n 2, conflict n 1).
    private func conflicted() async throws -> TestServer {
        let server = try await TestServer.withDatabase(self)
        let docs: JSON = ["new_edits": false, "docs": [
            ["_id": "a", "_rev": "1-zzz", "n": 99], ["_id": "a", "_rev": "1-2739a38ff0b26d47e5f07677eac736ba", "n": 0],
            ["_id": "v", "_rev": "1-aaa", "n": 1], ["_id": "v", "_rev": "1-bbb", "n": 3],
            ["_id": "w", "_rev": "1-aaa", "n": 1], ["_id": "w", "_rev": "1-bbb", "n": 2],
        ]]
        await XCTAssertEqualAsync(try await server.request("POST", "/db/_bulk_docs", json: docs).status, 201)
        await XCTAssertEqualAsync(try await server.request("PUT", "/db/_design/g", json: [
            "filters": ["odd": "function(doc) { return doc.n % 2 == 1; }"],
            "views": ["odd": ["map": "function(doc) { if (doc.n % 2 == 1) emit(doc._id); }"]],
        ]).status, 201)
        return server
    }

    private func leaves(_ reply: TestServer.Reply) -> [String: [String]] {
        var result: [String: [String]] = [:]
        for row in reply.json["results"]?.arrayValue ?? [] where row["id"]?.stringValue?.hasPrefix("_design/") == false {
            result[row["id"]!.stringValue!] = row["changes"]?.arrayValue?.compactMap { $0["rev"]?.stringValue }
        }
        return result
    }

    /// With `style=all_docs` a filter judges every leaf, and a row lists the leaves that pass — also
    /// when the winner does not; without it, only the winner is judged.
    func testFiltersJudgeEachLeafWithStyleAllDocs() async throws {
        let server = try await conflicted()
        let odd: [String: [String]] = ["a": ["1-zzz"], "v": ["1-bbb", "1-aaa"], "w": ["1-aaa"]]
        let byFunction = try await server.request("GET", "/db/_changes?filter=g/odd&style=all_docs")
        XCTAssertEqual(leaves(byFunction), odd)
        let byView = try await server.request("GET", "/db/_changes?filter=_view&view=g/odd&style=all_docs")
        XCTAssertEqual(leaves(byView), odd)
        let winners = try await server.request("GET", "/db/_changes?filter=g/odd")
        XCTAssertEqual(leaves(winners), ["a": ["1-zzz"], "v": ["1-bbb"]])
        let selector = try await server.request("POST", "/db/_changes?filter=_selector&style=all_docs", json: ["selector": ["n": ["$gt": 1]]])
        XCTAssertEqual(leaves(selector), ["a": ["1-zzz"], "v": ["1-bbb"], "w": ["1-bbb"]])
        // No filter: every leaf.
        let unfiltered = try await server.request("GET", "/db/_changes?style=all_docs")
        XCTAssertEqual(leaves(unfiltered)["a"], ["1-zzz", "1-2739a38ff0b26d47e5f07677eac736ba"])

        // A limit counts the rows that pass, over as many pages as that takes; `last_seq` is the last row's.
        let first = try await server.request("GET", "/db/_changes?filter=g/odd&style=all_docs&limit=2")
        XCTAssertEqual(first.json["results"]?.arrayValue?.compactMap { $0["id"]?.stringValue }, ["a", "v"])
        let since = try XCTUnwrap(first.json["last_seq"]?.stringValue)
        let rest = try await server.request("GET", "/db/_changes?filter=g/odd&style=all_docs&since=\(since)")
        XCTAssertEqual(rest.json["results"]?.arrayValue?.compactMap { $0["id"]?.stringValue }, ["w"])
    }

    func testParametersAsCouchDBReadsThem() async throws {
        let server = try await conflicted()
        // A longpoll with `limit=0` answers at once (it waited for ever, spinning).
        let started = ContinuousClock.now
        let none = try await server.request("GET", "/db/_changes?feed=longpoll&limit=0&timeout=60000")
        XCTAssertEqual(none.status, 200)
        XCTAssertEqual(none.json["results"], [])
        XCTAssertLessThan(ContinuousClock.now - started, .seconds(30))
        // Flags: `true` turns one on, anything else leaves it off.
        let flags = try await server.request("GET", "/db/_changes?include_docs=yes&descending=1&conflicts=x")
        XCTAssertEqual(flags.status, 200)
        XCTAssertNil(flags.json["results"]?[0]?["doc"])
        XCTAssertEqual(flags.json["results"]?[0]?["id"], "a")
        // A negative limit is none; a descending feed ignores `since` (even one that does not parse).
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_changes?limit=-1").json["results"]?.arrayValue?.count, 4)
        let backwards = try await server.request("GET", "/db/_changes?descending=true&since=now")
        XCTAssertEqual(backwards.json["results"]?.arrayValue?.compactMap { $0["id"]?.stringValue }, ["_design/g", "w", "v", "a"])
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_changes?descending=true&since=x").status, 200)
        // 400 {"error":"bad_request","reason":"invalid_seq_interval"}, before the filter is looked up.
        let interval = try await server.request("GET", "/db/_changes?seq_interval=0&filter=nope/nope")
        XCTAssertEqual(interval.json, ["error": "bad_request", "reason": "invalid_seq_interval"])
        // The filter is looked up before `since` is read: 404 {"error":"not_found","reason":"missing"}.
        let missing = try await server.request("GET", "/db/_changes?since=x&filter=nope/nope")
        XCTAssertEqual(missing.json, ["error": "not_found", "reason": "missing"])
        // CouchDB's words.
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_changes?feed=bad").json["reason"],
                                  "Supported `feed` types: normal, continuous, live, longpoll, eventsource")
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_changes?filter=_doc_ids").json["reason"],
                                  "`doc_ids` filter parameter is not a list of doc ids.")
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_changes?filter=g/none").json["reason"], "missing json key: none")
        await XCTAssertEqualAsync(try await server.request("PUT", "/db/_design/plain", json: ["x": 1]).status, 201)
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_changes?filter=plain/none").json["reason"], "missing json key: filters")
    }

    /// A feed's timeout passes on the server's clock (``ServerConfiguration/clock``): on a test clock a
    /// longpoll of 45 s still waits when the clock has moved 44 s, and ends when it has moved 45 s —
    /// nothing waits in real time.
    func testFeedTimeoutsPassOnTheServersClock() async throws {
        // The server's database events gather for 100 ms on the clock too: those sleeps pass at once.
        let clock = TestClock(advancing: { $0 == .milliseconds(100) })
        let server = try await TestServer(self) { $0.clock = clock }
        _ = try await server.request("PUT", "/db")
        let polls = { clock.sleeps.filter { $0 == .seconds(45) }.count }

        async let first = server.request("GET", "/db/_changes?feed=longpoll&since=now&timeout=45000")
        await eventually("the first longpoll waits") { polls() == 1 }
        clock.advance(by: .seconds(44))
        _ = try await server.request("PUT", "/db/late", json: ["v": 1])
        let answered = try await first
        XCTAssertEqual(answered.json["results"]?[0]?["id"], "late", "44 s into its 45 the longpoll still waited")

        async let second = server.request("GET", "/db/_changes?feed=longpoll&since=now&timeout=45000")
        await eventually("the second longpoll waits") { polls() == 2 }
        clock.advance(by: .seconds(45))
        let timedOut = try await second
        XCTAssertEqual(timedOut.status, 200)
        XCTAssertEqual(timedOut.json["results"], [], "45 s on the clock end it")
    }
}
