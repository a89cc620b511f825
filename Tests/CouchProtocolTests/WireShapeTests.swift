import CouchProtocol
import DocStore
import Foundation
import TestSupport
import XCTest

/// Every wire shape: a value survives its encoder and decoder, and CouchDB 3.3.3's own recorded
/// requests and answers decode and encode back to the same JSON, member order included.
final class WireShapeTests: XCTestCase {
    private func exchanges(_ name: String, where matches: (RecordedExchange) -> Bool) throws -> [RecordedExchange] {
        let found = try CouchDBFixtures.exchanges(name + ".ndjson").filter(matches)
        XCTAssertFalse(found.isEmpty, "no exchange of \(name) matched")
        return found
    }

    private func roundTrip(_ json: JSON) throws -> JSON { try JSON(parsing: try json.serialized()) }

    private let rev1 = RevisionID("1-967a00dff5e02add41819138abb3284d")!
    private let rev2 = RevisionID("2-7051cbe5c8faecd085a3fa619e6e6337")!

    // MARK: _changes

    func testChangesRoundTrip() throws {
        let rows = [
            ChangesRow(sequence: 3, id: "a", revisions: [rev2, rev1], deleted: false),
            ChangesRow(sequence: "4-g1AAA", id: "b/é", revisions: [rev1], deleted: true, document: ["_id": "b/é", "_deleted": true]),
        ]
        let answer = ChangesResponse(results: rows, lastSequence: "4-g1AAA", pending: 2)
        XCTAssertEqual(try ChangesResponse(json: try roundTrip(answer.json)), answer)
        XCTAssertEqual(answer.json["last_seq"], "4-g1AAA")
        // The longpoll answer in its two pieces is the same answer.
        XCTAssertEqual(try JSON(parsing: ChangesResponse.streamOpening + "\n\n" + answer.streamClosing), answer.json)
        for line in rows.map(ChangesFeedLine.row) + [.heartbeat, .end(lastSequence: 4, pending: 0)] {
            XCTAssertTrue(line.text.hasSuffix("\n"))
            XCTAssertEqual(try ChangesFeedLine(line: Array(line.text.utf8.dropLast())), line)
        }
        XCTAssertEqual(ChangesFeedLine.event(rows[0]), "data: \(rows[0].json.description)\nid: 3\n\n")
        XCTAssertThrowsError(try ChangesRow(json: ["seq": 1, "id": "x"]), "no changes list")
        XCTAssertThrowsError(try ChangesRow(json: ["seq": 1, "id": "x", "changes": [["rev": "nope"]]]), "a bad rev")
        XCTAssertThrowsError(try ChangesResponse(json: ["last_seq": 1]), "no results")
        XCTAssertEqual(try ChangesResponse(json: ["results": [rows[0].json]]).lastSequence, 3, "an old server without last_seq")
    }

    /// An answer of up to six rows drawn from the given values, with `pending` absent every third round.
    private func randomChangesAnswer(round: Int, revisions: [RevisionID], ids: [String], sequences: [JSON], documents: [JSON?],
                                     using generator: inout SystemRandomNumberGenerator) -> ChangesResponse {
        let rows = (0..<Int.random(in: 0...6, using: &generator)).map { _ in
            ChangesRow(sequence: sequences.randomElement(using: &generator)!, id: ids.randomElement(using: &generator)!,
                       revisions: (0..<Int.random(in: 1...3, using: &generator)).map { _ in revisions.randomElement(using: &generator)! },
                       deleted: Bool.random(using: &generator), document: documents.randomElement(using: &generator)!)
        }
        return ChangesResponse(results: rows, lastSequence: sequences.randomElement(using: &generator)!,
                               pending: round % 3 == 0 ? nil : Int.random(in: 0...100_000, using: &generator))
    }

    /// `_changes` answers are written without building their JSON: the same bytes as the tree serialized,
    /// for rows of every kind — text revisions that need escaping, string sequences, deletions,
    /// documents, an empty answer, no `pending`.
    func testChangesAnswersWrittenDirectlyAreTheTreeSerialized() throws {
        var generator = SystemRandomNumberGenerator()
        let revisions = [rev1, rev2, RevisionID(generation: 3, digest: "needs\"escaping\\\n\u{1}"), RevisionID("12-short")!,
                         RevisionID(generation: 40, digest: RandomHex.make()), RevisionID(generation: 1, digest: "")]
        let ids = ["a", "b/é", "quote\"and\\back", "tab\tline\n", "_design/x", String(repeating: "z", count: 300)]
        let sequences: [JSON] = [0, 7, 123_456_789, "4-g1AAAAB", "1-\"odd\""]
        let documents: [JSON?] = [nil, ["_id": "a", "n": 1.5, "list": [true, .null, "é"]], ["_deleted": true], .null]
        for round in 0..<300 {
            let answer = randomChangesAnswer(round: round, revisions: revisions, ids: ids, sequences: sequences,
                                             documents: documents, using: &generator)
            XCTAssertEqual(try answer.serialized(), try answer.json.serialized(), "round \(round)")
            for row in answer.results { XCTAssertEqual(row.text, row.json.description) }
        }
    }

    /// `_all_docs` and view answers are written without building their JSON: the same bytes as the tree
    /// serialized, for every kind of row (error rows with and without a reason, reduced rows without
    /// an id, documents, `null` documents) and every head (figures, `offset` null, none, `update_seq`).
    func testViewAnswersWrittenDirectlyAreTheTreeSerialized() throws {
        var generator = SystemRandomNumberGenerator()
        let keys: [JSON] = ["a", "quote\"é\n", 7, 2.5, .null, [1, "x"], ["k": false]]
        let values: [JSON] = [["rev": "1-abc"], ["rev": "2-def", "deleted": true], .null, 12, "text"]
        let documents: [JSON?] = [nil, .null, ["_id": "a", "_rev": "1-abc", "list": [1, 2.25, "é"]]]
        for round in 0..<300 {
            let rows: [ViewRow] = (0..<Int.random(in: 0...6, using: &generator)).map { _ in
                switch Int.random(in: 0..<4, using: &generator) {
                case 0:
                    var row = ViewRow(id: nil, key: keys.randomElement(using: &generator)!, value: .null,
                                      error: ["not_found", "reduce_overflow_error"].randomElement(using: &generator)!)
                    if Bool.random(using: &generator) { row.reason = "too \"big\"" }
                    return row
                case 1:
                    return ViewRow(id: nil, key: keys.randomElement(using: &generator)!, value: values.randomElement(using: &generator)!)
                default:
                    return ViewRow(id: ["a", "b/é", "tab\t"].randomElement(using: &generator)!, key: keys.randomElement(using: &generator)!,
                                   value: values.randomElement(using: &generator)!, document: documents.randomElement(using: &generator)!)
                }
            }
            let total: Int? = round % 4 == 0 ? nil : Int.random(in: 0...1000, using: &generator)
            let offset: Int? = round % 3 == 0 ? nil : Int.random(in: 0...1000, using: &generator)
            let sequence: JSON? = round % 5 == 0 ? nil : (round % 2 == 0 ? .null : "12-g1AAA")
            let answer = ViewResponse(totalRows: total, offset: offset, rows: rows, updateSequence: sequence)
            XCTAssertEqual(try answer.serialized(), try answer.json.serialized(), "round \(round)")
        }
        // A number JSON cannot hold (a Swift map may emit one) is refused, or written as `null` as the
        // tree's description writes it — what the server answers.
        let odd = ViewResponse(totalRows: 1, offset: 0, rows: [ViewRow(id: "a", key: .double(.nan), value: .double(.infinity))])
        XCTAssertThrowsError(try odd.serialized())
        XCTAssertEqual(try odd.serialized(nonFiniteAsNull: true), Array(odd.json.description.utf8))
        let oddChanges = ChangesResponse(results: [ChangesRow(sequence: .double(.nan), id: "a", revisions: [rev1], deleted: false)],
                                         lastSequence: 1, pending: nil)
        XCTAssertEqual(try oddChanges.serialized(nonFiniteAsNull: true), Array(oddChanges.json.description.utf8))
    }

    /// An answer read from its text without a tree (as DocSync reads them) is the answer decoded from
    /// the tree, and text the tree decoding refuses is refused: random answers written compactly and
    /// with whitespace, and answers with every kind of fault, also cut short at every byte.
    func testChangesAnswersReadWithoutATreeAreTheTreeDecoded() throws {
        func check(_ text: String, _ note: String, file: StaticString = #filePath, line: UInt = #line) {
            let data = Data(text.utf8)
            let fromTree = (try? JSON(parsing: data)).flatMap { try? ChangesResponse(json: $0) }
            let read = try? ChangesResponse(parsing: data)
            XCTAssertEqual(read, fromTree, "\(note): \(text.prefix(300))", file: file, line: line)
        }
        var generator = SystemRandomNumberGenerator()
        let revisions = [rev1, rev2, RevisionID(generation: 3, digest: "needs\"escaping\\"), RevisionID("12-short")!,
                         RevisionID(generation: 40, digest: RandomHex.make())]
        let ids = ["a", "b/é", "quote\"and\\back", "tab\tline\n", "_design/x"]
        let sequences: [JSON] = [0, 7, 123_456_789, "4-g1AAAAB", .null]
        let documents: [JSON?] = [nil, ["_id": "a", "n": 1.5, "list": [true, .null, "é"]], ["_deleted": true], .null]
        for round in 0..<300 {
            let answer = randomChangesAnswer(round: round, revisions: revisions, ids: ids, sequences: sequences,
                                             documents: documents, using: &generator)
            let compact = String(decoding: try answer.serialized(), as: UTF8.self)
            XCTAssertEqual(try ChangesResponse(parsing: Data(compact.utf8)), answer, "round \(round)")
            check(compact, "round \(round)")
            check(compact.replacingOccurrences(of: ",", with: " ,\n ").replacingOccurrences(of: ":", with: " : "), "spaced \(round)")
        }
        let faults = [
            #"{"results":[{"seq":1,"changes":[{"rev":"1-a"}]}],"last_seq":1}"#,
            #"{"results":[{"seq":1,"id":7,"changes":[{"rev":"1-a"}]}],"last_seq":1}"#,
            #"{"results":[{"seq":1,"id":"x","changes":{"rev":"1-a"}}],"last_seq":1}"#,
            #"{"results":[{"seq":1,"id":"x","changes":[{"rev":"1-a"},{}]}],"last_seq":1}"#,
            #"{"results":[{"seq":1,"id":"x","changes":[{"rev":"1-a"},7]}],"last_seq":1}"#,
            #"{"results":[{"seq":1,"id":"x","changes":[{"rev":2}]}],"last_seq":1}"#,
            #"{"results":[{"seq":1,"id":"x","changes":[{"rev":"nope"}]}],"last_seq":1}"#,
            #"{"results":[{"seq":1,"id":"x","changes":[{"rev":"1-abc"}]}],"last_seq":1}"#,
            #"{"results":[{"seq":1,"id":"x","changes":[{"rev":"1-é"}]}],"last_seq":1}"#,
            #"{"results":[{"seq":1,"id":"x","changes":[{"rev":"1-a b"}]}],"last_seq":1}"#,
            #"{"results":[{"seq":1,"id":"x","changes":[{"rev":"1-a","rev":"2-b"}]}],"last_seq":1}"#,
            #"{"results":[{"seq":1,"id":"x","changes":[],"deleted":"yes","extra":[1,{"a":null}]}]}"#,
            #"{"results":[{"seq":1,"id":"x","id":"y","changes":[]}],"last_seq":1}"#,
            #"{"results":[7],"last_seq":1}"#,
            #"{"results":{},"last_seq":1}"#,
            #"{"results":null,"last_seq":1}"#,
            #"{"last_seq":1,"pending":2}"#,
            #"{"results":[],"last_seq":null,"pending":2.5}"#,
            #"{"results":[],"last_seq":"9-x","pending":"2"}"#,
            #"{"results":[{"seq":"1-g","id":"x","changes":[{"rev":"1-a"}],"doc":{"_id":"x","k":[1,2]}}],"last_seq":1} x"#,
            #"[{"results":[]}]"#, "", "null", #"{"results":[]}"#,
        ]
        for (index, fault) in faults.enumerated() { check(fault, "fault \(index)") }
        let short = #"{"results":[{"seq":1,"id":"x","changes":[{"rev":"1-a"}],"deleted":true}],"last_seq":1,"pending":0}"#
        for end in 0...short.utf8.count { check(String(decoding: short.utf8.prefix(end), as: UTF8.self), "cut at \(end)") }
    }

    /// Normal and longpoll answers of CouchDB (all_docs style, include_docs with conflicts, filters,
    /// descending, a longpoll that timed out).
    func testDecodesCouchDBsChangesAnswers() throws {
        // (A longpoll the client hung up on has no complete answer.)
        let recorded = try exchanges("client-api") { $0.path.hasSuffix("/_changes") && $0.query["feed"] != "continuous" && !$0.clientClosed }
            + exchanges("pull-from-source") { $0.path.hasSuffix("/_changes") }
        var rows = 0
        for exchange in recorded {
            let json = try JSON(parsing: exchange.responseBody)
            let answer = try ChangesResponse(json: json)
            XCTAssertEqual(answer.json, json, exchange.target)
            XCTAssertEqual(try ChangesResponse(parsing: exchange.responseBody), answer, exchange.target)
            XCTAssertNotNil(answer.pending, exchange.target)
            XCTAssertNotNil(answer.lastSequence.stringValue, "CouchDB's sequences are strings")
            rows += answer.results.count
        }
        XCTAssertGreaterThan(rows, 150)
    }

    /// Continuous feeds: rows, heartbeats and the final `last_seq` line, line by line.
    func testDecodesCouchDBsContinuousFeeds() throws {
        let recorded = try exchanges("continuous-source") { $0.path.hasSuffix("/_changes") && $0.query["feed"] == "continuous" }
            + exchanges("client-api") { $0.query["feed"] == "continuous" }
        var counts = (rows: 0, heartbeats: 0, ends: 0)
        for exchange in recorded {
            var lines = exchange.responseBody.split(separator: 0x0A, omittingEmptySubsequences: false)
            if lines.last?.isEmpty == true { lines.removeLast() }
            for line in lines {
                let decoded = try ChangesFeedLine(line: line)
                switch decoded {
                case .row: counts.rows += 1
                case .heartbeat: counts.heartbeats += 1
                case .end: counts.ends += 1
                }
                if !line.isEmpty {
                    XCTAssertEqual(try JSON(parsing: Array(decoded.text.utf8)), try JSON(parsing: line), exchange.target)
                }
            }
        }
        XCTAssertGreaterThan(counts.rows, 150)
        XCTAssertGreaterThan(counts.heartbeats, 0)
        XCTAssertGreaterThan(counts.ends, 0)
    }

    // MARK: _revs_diff

    func testRevsDiffRoundTrip() throws {
        let request = RevsDiff.Request([.init(id: "a", revisions: [rev2]), .init(id: "b", revisions: [rev1, rev2])])
        XCTAssertEqual(try RevsDiff.Request(json: try roundTrip(request.json)), request)
        let response = RevsDiff.Response([
            RevisionDifference(id: "a", missing: [rev2], possibleAncestors: [rev1]),
            RevisionDifference(id: "b", missing: [rev1], possibleAncestors: []),
        ])
        XCTAssertEqual(try RevsDiff.Response(json: try roundTrip(response.json)), response)
        XCTAssertNil(response.json["b"]?["possible_ancestors"], "left out when empty, as CouchDB does")
        XCTAssertThrowsError(try RevsDiff.Request(json: ["a": "1-x"]))
        XCTAssertThrowsError(try RevsDiff.Request(json: ["a": ["nope"]]))
    }

    func testDecodesCouchDBsRevsDiffs() throws {
        let recorded = try exchanges("push-to-target") { $0.path.hasSuffix("/_revs_diff") }
            + exchanges("client-api") { $0.path.hasSuffix("/_revs_diff") }
        var missing = 0
        for exchange in recorded {
            let request = try JSON(parsing: exchange.requestBody)
            XCTAssertEqual(try RevsDiff.Request(json: request).json, request)
            let answer = try JSON(parsing: exchange.responseBody)
            let decoded = try RevsDiff.Response(json: answer)
            XCTAssertEqual(decoded.json, answer)
            missing += decoded.differences.reduce(0) { $0 + $1.missing.count }
        }
        XCTAssertGreaterThan(missing, 100)
    }

    // MARK: _bulk_get

    func testBulkGetRoundTrip() throws {
        let request = BulkGet.Request([.init(id: "a", revision: rev1.description, attachmentsSince: [rev1]), .init(id: "b")])
        XCTAssertEqual(try BulkGet.Request(json: try roundTrip(request.json)), request)
        let failure = BulkGet.Failure(id: "b", revision: nil, error: ErrorBody(error: "not_found", reason: "missing"))
        let response = BulkGet.Response([
            .init(id: "a", entries: [.ok(["_id": "a", "_rev": .string(rev1.description)])]),
            .init(id: "b", entries: [.failure(failure)]),
        ])
        XCTAssertEqual(try BulkGet.Response(json: try roundTrip(response.json)), response)
        XCTAssertEqual(response.json["results"]?[1]?["docs"]?[0]?["error"], ["rev": nil, "reason": "missing", "id": "b", "error": "not_found"])
        // Written without building the envelope: the same bytes, a result without an id and an empty one too.
        var more = response
        more.results += [.init(id: nil, entries: [.failure(BulkGet.Failure(id: nil, revision: nil, error: ErrorBody(error: "bad_request", reason: "Missing id")))]),
                         .init(id: "c\"é", entries: []), .init(id: "d", entries: [.ok(["_id": "d"]), .ok(["_id": "d", "_deleted": true])])]
        XCTAssertEqual(try more.serialized(), try more.json.serialized())
        XCTAssertEqual(try BulkGet.Response([]).serialized(), try BulkGet.Response([]).json.serialized())
        XCTAssertThrowsError(try BulkGet.Request(json: ["docs": "a"]))
        // An entry CouchDB cannot read is refused alone, with CouchDB's words.
        let refused = try BulkGet.Request(json: ["docs": [["id": "a", "atts_since": ["bad"]], ["rev": "1-a"], 7, ["id": nil]]]).items
        XCTAssertEqual(refused.map(\.id), ["a", nil, nil, nil])
        XCTAssertEqual(refused.map { $0.refusal?.error.reason }, ["Invalid rev format", "document id missed",
                                                                  "document must be a JSON object", "Document id must be a string"])
        XCTAssertEqual(refused[0].refusal?.revision, "bad", "the faulty value is the row's rev")
    }

    func testDecodesCouchDBsBulkGets() throws {
        let recorded = try exchanges("pull-from-source") { $0.path.hasSuffix("/_bulk_get") }
            + exchanges("client-api") { $0.path.hasSuffix("/_bulk_get") && $0.responseHeader("Content-Type") == "application/json" }
        var documents = 0
        for exchange in recorded {
            // CouchDB's replicator repeats its query parameters in the body, and sends `atts_since: []`.
            let request = try JSON(parsing: exchange.requestBody)
            let decodedRequest = try BulkGet.Request(json: request)
            let asked = try XCTUnwrap(request["docs"]?.arrayValue)
            XCTAssertEqual(decodedRequest.items.map(\.id), asked.map { $0["id"]?.stringValue })
            XCTAssertEqual(decodedRequest.items.map(\.revision), asked.map { $0["rev"]?.stringValue })
            XCTAssertEqual(try BulkGet.Request(json: decodedRequest.json), decodedRequest)
            let answer = try JSON(parsing: exchange.responseBody)
            let decoded = try BulkGet.Response(json: answer)
            XCTAssertEqual(decoded.json, answer)
            XCTAssertEqual(try decoded.serialized(), try decoded.json.serialized(), "written directly, the same bytes")
            XCTAssertEqual(decoded.results.map(\.id), decodedRequest.items.map(\.id), "one result per request, in order")
            // DocSync reads the answer straight into documents: the same results, the same documents.
            let read = try BulkGetAnswer(parsing: exchange.responseBody)
            XCTAssertEqual(read.results.map(\.id), decoded.results.map(\.id))
            for (readResult, result) in zip(read.results, decoded.results) {
                XCTAssertEqual(readResult.entries.count, result.entries.count)
                for (readEntry, entry) in zip(readResult.entries, result.entries) {
                    switch (readEntry, entry) {
                    case (.document(let readDocument), .ok(let document)):
                        XCTAssertEqual(readDocument, try Document(json: document))
                        documents += 1
                    case (.error(let readError), .failure(let failure)):
                        XCTAssertEqual(readError, failure.json)
                    default:
                        XCTFail("\(readEntry) read where the tree has \(entry)")
                    }
                }
            }
        }
        XCTAssertGreaterThan(documents, 150)
    }

    // MARK: _bulk_docs and write results

    func testWriteResultsRoundTrip() throws {
        let rows = [
            WriteResult(id: "a", revision: rev1.description),
            WriteResult(id: "b", failure: ErrorBody(error: "conflict", reason: "Document update conflict.")),
            WriteResult(id: nil, revision: rev2.description, failure: ErrorBody(error: "forbidden", reason: "no")),
        ]
        for row in rows { XCTAssertEqual(try WriteResult(json: try roundTrip(row.json)), row) }
        XCTAssertEqual(rows[1].json, ["id": "b", "error": "conflict", "reason": "Document update conflict."])
        XCTAssertEqual(BulkDocsRequest.answer(rows, newEdits: false).arrayValue?.count, 2, "new_edits=false lists refusals only")
        XCTAssertEqual(try BulkDocsRequest.decodeAnswer(BulkDocsRequest.answer(rows, newEdits: true)), rows)
        XCTAssertThrowsError(try WriteResult(json: ["id": "a"]), "neither ok nor error")

        let request = BulkDocsRequest(documents: [["_id": "a"], ["_id": "b", "_rev": .string(rev1.description)]], newEdits: false)
        let decoded = try BulkDocsRequest(json: try roundTrip(request.json))
        XCTAssertEqual(decoded.documents, request.documents)
        XCTAssertFalse(decoded.newEdits)
        XCTAssertTrue(try BulkDocsRequest(json: ["docs": []]).newEdits)
        XCTAssertThrowsError(try BulkDocsRequest(json: ["docs": [], "new_edits": "no"]))
        XCTAssertThrowsError(try BulkDocsRequest(json: ["doc": []]))
    }

    func testDecodesCouchDBsBulkDocsAndWriteResults() throws {
        for exchange in try exchanges("push-to-target", where: { $0.path.hasSuffix("/_bulk_docs") })
            + exchanges("client-api", where: { $0.path.hasSuffix("/_bulk_docs") && $0.status == 201 }) {
            let request = try JSON(parsing: exchange.requestBody)
            let decoded = try BulkDocsRequest(json: request)
            XCTAssertEqual(decoded.json["docs"], request["docs"])
            let answer = try JSON(parsing: exchange.responseBody)
            let rows = try BulkDocsRequest.decodeAnswer(answer)
            XCTAssertEqual(BulkDocsRequest.answer(rows, newEdits: decoded.newEdits), answer, exchange.target)
        }
        // Single writes.
        let writes = try exchanges("client-api") { $0.method == "PUT" && $0.status == 201 && $0.path.split(separator: "/").count == 2 }
        for exchange in writes {
            let answer = try JSON(parsing: exchange.responseBody)
            let result = try WriteResult(json: answer)
            XCTAssertTrue(result.isSuccess)
            XCTAssertEqual(result.json, answer)
        }
    }

    // MARK: _all_docs and views

    func testViewRowsRoundTrip() throws {
        let document = Document(id: "a", revision: rev1, body: ["n": 1])
        let rows = [
            ViewRow(id: "a", revision: rev1.description, document: document.json()),
            ViewRow(id: "b", revision: rev2.description, deleted: true, document: .null),
            ViewRow(id: nil, key: "c", value: .null, error: "not_found"),
            ViewRow(id: nil, key: ["group"], value: 3),
        ]
        let response = ViewResponse(totalRows: 9, offset: 1, rows: rows, updateSequence: 12)
        XCTAssertEqual(try ViewResponse(json: try roundTrip(response.json)), response)
        XCTAssertEqual(rows[1].json, ["id": "b", "key": "b", "value": ["rev": .string(rev2.description), "deleted": true], "doc": nil])
        XCTAssertEqual(rows[2].json, ["key": "c", "error": "not_found"])
        XCTAssertEqual(rows[0].revision, rev1.description)
        XCTAssertThrowsError(try ViewRow(json: ["id": "a"]), "no key")
    }

    /// A query row that asked for its document but has none writes `"doc": null`; one that did not
    /// ask has no `doc`.
    func testIncludedDocumentsAreNullWhenMissing() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("wire-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let db = try await Database.open(name: "wire", directory: directory)
        _ = try await db.save(Document(id: "x", body: ["n": 1]))
        var query = AllDocumentsQuery()
        query.keys = ["x", "gone"]
        query.includeDocuments = true
        let answer = ViewResponse(try await db.allDocuments(query), includeDocuments: true).json
        XCTAssertEqual(answer["rows"]?[0]?["doc"]?["_id"], "x")
        XCTAssertEqual(answer["rows"]?[1]?["error"], "not_found")
        let plain = ViewResponse(try await db.allDocuments(AllDocumentsQuery()), includeDocuments: false).json
        XCTAssertNil(plain["rows"]?[0]?["doc"])
        await db.close()
    }

    func testDecodesCouchDBsAllDocs() throws {
        var rows = 0
        for exchange in try exchanges("client-api", where: { $0.path.hasSuffix("/_all_docs") }) {
            let answer = try JSON(parsing: exchange.responseBody)
            let decoded = try ViewResponse(json: answer)
            XCTAssertEqual(decoded.json, answer, exchange.target)
            XCTAssertNotNil(decoded.totalRows)
            if exchange.query["keys"] != nil || !exchange.requestBody.isEmpty {
                XCTAssertNil(decoded.offset, "CouchDB answers keys with \"offset\": null")
                XCTAssertEqual(answer["offset"], .null)
            }
            rows += decoded.rows.count
        }
        XCTAssertGreaterThan(rows, 10)
    }

    // MARK: open_revs

    func testOpenRevsEntriesRoundTrip() throws {
        let entries: [OpenRevsEntry] = [.ok(["_id": "a", "_rev": .string(rev1.description)]), .missing(rev2.description)]
        XCTAssertEqual(try OpenRevsEntry.decode(try roundTrip(.array(entries.map(\.json)))), entries)
        XCTAssertThrowsError(try OpenRevsEntry(json: ["error": "x"]))
    }

    func testDecodesCouchDBsOpenRevs() throws {
        let recorded = try exchanges("client-api") { $0.query["open_revs"] != nil && $0.responseHeader("Content-Type") == "application/json" }
        var documents = 0
        for exchange in recorded {
            let answer = try JSON(parsing: exchange.responseBody)
            let entries = try OpenRevsEntry.decode(answer)
            XCTAssertEqual(JSON.array(entries.map(\.json)), answer, exchange.target)
            for case .ok(let document) in entries {
                XCTAssertNoThrow(try Document(json: document))
                documents += 1
            }
        }
        XCTAssertGreaterThan(documents, 5)
    }

    // MARK: Error bodies

    func testErrorBodies() throws {
        let body = ErrorBody(error: "conflict", reason: "Document update conflict.")
        XCTAssertEqual(ErrorBody(json: try roundTrip(body.json)), body)
        XCTAssertEqual(ErrorBody(DocStoreError(.missingStub, "gone")), ErrorBody(error: "missing_stub", reason: "gone"))
        XCTAssertEqual(ErrorBody(body: Array("<html>Bad gateway</html>".utf8)), ErrorBody(error: "unknown_error", reason: "<html>Bad gateway</html>"))
        XCTAssertEqual(body.summary, "conflict: Document update conflict.")

        var names: Set<String> = []
        for exchange in try exchanges("client-api", where: { $0.status >= 400 }) {
            let answer = try JSON(parsing: exchange.responseBody)
            let decoded = try XCTUnwrap(ErrorBody(json: answer), exchange.target)
            XCTAssertEqual(decoded.json, answer, exchange.target)
            XCTAssertEqual(ErrorBody(body: exchange.responseBody), decoded)
            names.insert(decoded.error)
        }
        XCTAssertTrue(names.isSuperset(of: ["not_found", "conflict", "bad_request", "file_exists"]), "\(names)")
    }

    // MARK: Multipart documents

    func testMultipartDocumentForms() throws {
        var document = Document(id: "a", revision: rev2, body: ["n": 1])
        document.revisionHistory = [rev1]
        document.attachments["b.txt"] = Attachment(data: Data("bee".utf8), contentType: "text/plain")
        document.attachments["a.txt"] = Attachment(data: Data("ay".utf8), contentType: "text/plain")
        let related = MultipartDocument(document, revisions: true, members: ["_conflicts": ["1-x"]], encodingInfo: false) { attachment in
            attachment.length == 3 ? .follows : .stub
        }
        XCTAssertEqual(related.following.map(\.name), ["b.txt"])
        let json = related.json
        XCTAssertEqual(json.objectValue?.keys.map { $0 }, ["_id", "_rev", "n", "_revisions", "_conflicts", "_attachments"])
        XCTAssertEqual(json["_attachments"]?.objectValue?.keys.map { $0 }, ["b.txt", "a.txt"], "in the document's order, as CouchDB")
        XCTAssertEqual(json["_attachments"]?["a.txt"]?["stub"], true)
        XCTAssertEqual(json["_attachments"]?["b.txt"]?["follows"], true)
        XCTAssertEqual(json["_revisions"]?["ids"]?.arrayValue?.count, 2)
        let inline = MultipartDocument(document, revisions: false, encodingInfo: false) { .inline($0) }
        XCTAssertTrue(inline.following.isEmpty)
        XCTAssertEqual(inline.json["_attachments"]?["b.txt"]?["data"], .string(Data("bee".utf8).base64EncodedString()))

        var body = MultipartBody()
        related.appendRelated(to: &body, boundary: "xyz")
        XCTAssertEqual(body.length, body.pieces.reduce(0) { total, piece in
            if case .bytes(let bytes) = piece { return total + bytes.count }
            if case .attachment(let attachment) = piece { return total + attachment.encodedLength }
            return total
        })
    }

    /// The JSON part of each multipart PUT CouchDB's replicator sent: rebuilt from the document it
    /// describes, it is the same JSON.
    func testEncodesMultipartDocumentsAsCouchDBsReplicator() throws {
        let puts = try exchanges("push-to-target") {
            $0.method == "PUT" && ($0.requestHeader("Content-Type") ?? "").hasPrefix("multipart/related")
        }
        for exchange in puts {
            let boundary = try XCTUnwrap(Multipart.boundary(from: exchange.requestHeader("Content-Type")!))
            let parts = try Multipart.parse(Array(exchange.requestBody), boundary: boundary)
            let sent = try JSON(parsing: parts[0].body)
            // Read back as stubs (their bytes are the other parts), then written as the replicator does.
            var stubs = sent
            var following: Set<String> = []
            for (name, member) in sent["_attachments"]?.objectValue ?? [:] where member["follows"] == true {
                stubs["_attachments"]?[name]?["follows"] = nil
                stubs["_attachments"]?[name]?["stub"] = true
                following.insert(name)
            }
            let document = try Document(json: stubs)
            let rebuilt = MultipartDocument(document, revisions: true, encodingInfo: true) { attachment in
                following.contains(where: { document.attachments[$0] == attachment }) ? .follows : .stub
            }
            XCTAssertEqual(Set(rebuilt.following.map(\.name)), following, exchange.target)
            XCTAssertEqual(parts.count, following.count + 1)
            // CouchDB lists attachments in the order they were added, DocStore by name; each member is the same.
            let members = try XCTUnwrap(sent["_attachments"]?.objectValue)
            XCTAssertEqual(rebuilt.json["_attachments"]?.objectValue?.count, members.count)
            for (name, member) in members {
                XCTAssertEqual(rebuilt.json["_attachments"]?[name], member, "\(exchange.target) \(name)")
            }
            XCTAssertEqual(rebuilt.json["_revisions"], sent["_revisions"], exchange.target)
        }
    }
}
