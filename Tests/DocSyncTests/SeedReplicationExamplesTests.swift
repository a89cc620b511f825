@testable import DocServer
import DocStore
import DocStoreJavaScript
@testable import DocSync
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import XCTest

/// What the seeds ask of replication, each against a real DocServer on 127.0.0.1 (or a CouchDB's
/// welcome in front of it): channels (an empty list is everything the user may see; a local source
/// is narrowed too; CouchDB gets a selector), the receiving status, closing a database, filter
/// parameters that are not strings, a resolver that merges, and the draft/CQRS example.
final class SeedReplicationExamplesTests: XCTestCase {
    private func channelDocuments(_ database: Database) async throws {
        _ = try await database.save([
            ["id": "red", "channels": ["red"]], ["id": "blue", "channels": ["blue"]],
            ["id": "both", "channels": ["red", "blue"]], ["id": "none", "n": 0],
        ])
    }

    private func userURL(_ url: URL, _ name: String, _ password: String) -> URL {
        var components = URLComponents(url: url, resolvingAgainstBaseURL: false)!
        components.user = name
        components.password = password
        return components.url!
    }

    private func pulledIDs(from url: URL, channels: [String]?) async throws -> [String] {
        let target = try await makeDatabase("pulled-\(UUID().uuidString.prefix(8))")
        var configuration = ReplicationConfiguration(source: .remote(url), target: .local(target))
        configuration.limitToChannels = channels
        try await Replicator(configuration: configuration).run()
        return try await target.changes().changes.map(\.id).sorted()
    }

    /// "An empty list sends every document in every channel the user can access."
    func testEmptyChannelsMeanEverythingTheUserMaySee() async throws {
        let (server, url, remote) = try await makeServer()
        try await channelDocuments(remote)
        try await server.users.setUser(name: "ann", password: "secret", readChannels: ["red"])
        let ann = userURL(url, "ann", "secret")

        await XCTAssertEqualAsync(try await pulledIDs(from: ann, channels: []), ["both", "red"])
        await XCTAssertEqualAsync(try await pulledIDs(from: ann, channels: ["blue"]), ["both"], "blue alone: only what ann may read")
        await XCTAssertEqualAsync(try await pulledIDs(from: url, channels: []), ["blue", "both", "none", "red"], "the administrator sees all")

        // Over HTTP, the bychannel filter with no channel named answers the same, not a 400.
        var request = URLRequest(url: URL(string: url.absoluteString + "/_changes?filter=sync_gateway/bychannel&channels=")!)
        let credentials = Data("ann:secret".utf8).base64EncodedString()
        request.setValue("Basic \(credentials)", forHTTPHeaderField: "Authorization")
        let (data, response) = try await URLSession.shared.data(for: request)
        XCTAssertEqual((response as? HTTPURLResponse)?.statusCode, 200)
        let ids = try JSON(parsing: data)["results"]?.arrayValue?.compactMap { $0["id"]?.stringValue }.sorted()
        XCTAssertEqual(ids, ["both", "red"])
    }

    /// Against a CouchDB (its welcome), channels become a `_selector` on `channels`; an empty list
    /// sends no filter at all.
    func testChannelsAgainstCouchDBAreASelector() async throws {
        let (_, url, remote) = try await makeServer()
        try await channelDocuments(remote)
        let welcome: JSON = ["couchdb": "Welcome", "version": "3.3.3", "vendor": ["name": "The Apache Software Foundation"]]
        let proxy = FaultProxy(upstream: "http://127.0.0.1:\(url.port!)", rules: [], welcome: welcome)
        let port = try await proxy.start()
        let held = Held(proxy)
        addTeardownBlock { await held.take()?.stop() }
        let viaCouch = URL(string: "http://admin:pw@127.0.0.1:\(port)/remote")!

        await XCTAssertEqualAsync(try await pulledIDs(from: viaCouch, channels: ["blue"]), ["blue", "both"])
        let selectorRequests = proxy.changesRequestsSeen
        XCTAssertTrue(selectorRequests.allSatisfy { $0.contains("filter=_selector") && $0.contains(#""$elemMatch":{"$in":["blue"]}"#) },
                      "\(selectorRequests)")
        XCTAssertFalse(selectorRequests.contains { $0.contains("bychannel") })

        await XCTAssertEqualAsync(try await pulledIDs(from: viaCouch, channels: []), ["blue", "both", "none", "red"])
        let unfiltered = proxy.changesRequestsSeen.dropFirst(selectorRequests.count)
        XCTAssertFalse(unfiltered.isEmpty)
        XCTAssertTrue(unfiltered.allSatisfy { !$0.contains("filter=") }, "\(unfiltered)")
    }

    private final class FlowDelegate: ReplicatorDelegate, @unchecked Sendable {
        // Written by the replicator's delivery task, read by the test after `run()` returned, which
        // happens after every delegate call of the run (the delivery is awaited): no overlap.
        var calls: [String] = []
        func replicationIsSending(_ replicator: Replicator) { calls.append("sending") }
        func replicationIsReceiving(_ replicator: Replicator) { calls.append("receiving") }
        func replicationDidComplete(_ replicator: Replicator) { calls.append("complete") }
        func replicationFailed(_ replicator: Replicator, error: ReplicationError) { calls.append("failed") }
    }

    /// A pull reports receiving (delegate and status), a push sending.
    func testReceivingAndSendingAreReported() async throws {
        let (_, url, remote) = try await makeServer()
        try await channelDocuments(remote)
        let local = try await makeDatabase("flows")
        let pull = Replicator(configuration: .oneTimeServerToClient(with: url, database: local))
        let delegate = FlowDelegate()
        pull.delegate = delegate
        let stream = pull.statusChanges()                 // taken before the run, so it covers all of it
        let statuses = Task { await stream.reduce(into: [ReplicatorStatus]()) { $0.append($1) } }
        try await pull.run()
        let seen = await statuses.value
        XCTAssertEqual(delegate.calls, ["receiving", "complete"])
        XCTAssertTrue(seen.contains { $0.isReceiving }, "a status while receiving")
        XCTAssertFalse(seen.contains { $0.isSending })
        XCTAssertFalse(pull.status.isReceiving, "not receiving any more")

        _ = try await local.save(["id": "from-local", "n": 1])
        var configuration = ReplicationConfiguration(source: .local(local), target: .remote(url))
        configuration.direction = .push
        let push = Replicator(configuration: configuration)
        let pushDelegate = FlowDelegate()
        push.delegate = pushDelegate
        try await push.run()
        XCTAssertEqual(pushDelegate.calls, ["sending", "complete"])
    }

    /// Closing a database stops the replications that use it.
    func testClosingTheDatabaseStopsItsReplications() async throws {
        let (_, url, remote) = try await makeServer()
        try await channelDocuments(remote)
        let folder = try makeTemporaryDirectory(self)
        let local = try await Database.open(name: "closing", directory: folder)
        let replicator = Replicator(configuration: .repeatingBidirectional(with: url, database: local))
        let ended = Task { for await _ in replicator.statusChanges() {} }
        replicator.start()
        try await eventually { try await local.fetchDocument("red") != nil }
        await local.close()
        await ended.value                                   // the status stream ends with the run
        XCTAssertEqual(replicator.status.activity, .stopped)
        XCTAssertNil(replicator.status.error)
    }

    /// Filter parameters are any JSON: a filter function reads them from `req.query` as a URL gives
    /// them (strings: a number's or an array's JSON text), and a push filter gets them as they are.
    func testFilterParametersAreJSON() async throws {
        let (_, url, remote) = try await makeServer()
        _ = try await remote.save([
            Document(id: "_design/app", body: ["filters": ["wanted": """
                function(doc, req) { return doc.n >= Number(req.query.min) && JSON.parse(req.query.kinds).indexOf(doc.kind) >= 0; }
                """]]),
            ["id": "a1", "n": 1, "kind": "a"], ["id": "a7", "n": 7, "kind": "a"],
            ["id": "b9", "n": 9, "kind": "b"], ["id": "c9", "n": 9, "kind": "c"],
        ])
        let target = try await makeDatabase("params")
        var configuration = ReplicationConfiguration.oneTimeServerToClient(with: url, database: target)
        configuration.filterName = "app/wanted"
        configuration.filterParameters = ["min": 5, "kinds": ["a", "b"]]
        try await Replicator(configuration: configuration).run()
        await XCTAssertEqualAsync(try await target.changes().changes.map(\.id).sorted(), ["a7", "b9"])

        let pushed = try await makeDatabase("params-pushed")
        var push = ReplicationConfiguration(source: .local(target), target: .local(pushed))
        push.filterParameters = ["above": 8]
        push.pushFilter = { document, parameters in (document["n"]?.intValue ?? 0) > (parameters["above"]?.intValue ?? 0) }
        try await Replicator(configuration: push).run()
        await XCTAssertEqualAsync(try await pushed.changes().changes.map(\.id), ["b9"])
    }

    /// A resolver may merge the conflicting revisions: the merge is saved on top of the winner and
    /// the other leaf is deleted, leaving one branch.
    func testTheConflictResolverCanMerge() async throws {
        let mine = try await makeDatabase("mine")
        let theirs = try await makeDatabase("theirs")
        let base = try await mine.save(["id": "order", "fruit": "apple", "color": "red"])
        try await Replicator(configuration: ReplicationConfiguration(source: .local(mine), target: .local(theirs))).run()
        var here = base
        here["fruit"] = "banana"
        _ = try await mine.save(here)
        var there = try await theirs.fetchDocument("order")!
        there["color"] = "blue"
        _ = try await theirs.save(there)

        var configuration = ReplicationConfiguration(source: .local(theirs), target: .local(mine))
        configuration.conflictResolver = { winner, conflicts in
            var merged = winner
            for conflict in conflicts {
                for (key, value) in conflict.body where value != base[key] { merged[key] = value }
            }
            return merged
        }
        try await Replicator(configuration: configuration).run()
        let resolved = try await mine.document(withID: "order", includeConflicts: true)!
        XCTAssertEqual(resolved.body, ["fruit": "banana", "color": "blue"])
        XCTAssertTrue(resolved.conflicts.isEmpty)
        XCTAssertEqual(resolved.revision?.generation, 3, "the merge is a child of the winner")
        await XCTAssertEqualAsync(try await mine.revisionTree(ofDocumentWithID: "order")?.leaves.filter { !$0.isDeleted }.count, 1)

        // Returning a leaf unchanged keeps it, as before.
        let a = try await makeDatabase("keep-a"), b = try await makeDatabase("keep-b")
        _ = try await a.save(["id": "x", "v": 1])
        _ = try await b.save(["id": "x", "v": 2])
        var keep = ReplicationConfiguration(source: .local(b), target: .local(a))
        keep.conflictResolver = { winner, conflicts in ([winner] + conflicts).first { $0["v"] == 1 } }
        try await Replicator(configuration: keep).run()
        let kept = try await a.document(withID: "x", includeConflicts: true)!
        XCTAssertEqual(kept["v"], 1)
        XCTAssertEqual(kept.revision?.generation, 1, "no new revision for a kept leaf")
        XCTAssertTrue(kept.conflicts.isEmpty)
    }

    // MARK: The draft/CQRS example

    /// The view of the draft example: each item under its id, each draft (`<item>_DRAFT…`) under the
    /// id of its item; the reduce (written with `keys as? [String]`, as the seed's) applies the drafts
    /// in date order.
    static let draftView = IndexDefinition(name: "views/get_id", version: "1", reduce: .custom(applyDraftsByKey)) { doc, emit in
        if let range = doc.id.range(of: "_DRAFT") {
            emit(.string(String(doc.id[..<range.lowerBound])), ["at": doc["at"] ?? .null, "changes": doc["changes"] ?? [:]])
        } else if doc.type == "item" {
            emit(.string(doc.id), ["document": .object(doc.body)])
        }
    }

    @Sendable static func applyDraftsByKey(_ keys: [JSON], _ values: [JSON], _ rereduce: Bool) throws -> JSON {
        // One item per reduce: the keys (when not rereducing) all name it.
        if !rereduce, Set(keys.compactMap(\.stringValue)).count > 1 { return ["error": "reduce one item at a time"] }
        var document = JSON.null
        var drafts: [JSON] = []
        for value in values {
            if let base = value["document"], base != .null { document = base }
            if value["changes"] != nil { drafts.append(value) }
            drafts += value["drafts"]?.arrayValue ?? []
        }
        drafts.sort { ($0["at"]?.stringValue ?? "") < ($1["at"]?.stringValue ?? "") }
        var current = document.objectValue ?? [:]
        for draft in drafts {
            for (member, value) in draft["changes"]?.objectValue ?? [:] { current[member] = value }
        }
        current["channels"] = nil
        return ["current": .object(current), "document": document, "drafts": .array(drafts)]
    }

    /// Drafts live in their author's private channel: pulled with an empty channel list, ann (who may
    /// read `public` and `private-ann`) gets the item and her drafts, bob only the item; each asks
    /// the same view offline and gets one row — ann banana/table/blue, bob the item as it is.
    func testTheDraftExample() async throws {
        let (server, url, remote) = try await makeServer(indexes: { _ in [Self.draftView] })
        _ = try await remote.save([
            ["id": "item1", "type": "item", "fruit": "apple", "furniture": "chair", "color": "red", "channels": ["public"]],
            ["id": "item1_DRAFT_1", "type": "draft", "at": "2026-11-20T08:00:00Z", "changes": ["fruit": "banana"], "channels": ["private-ann"]],
            ["id": "item1_DRAFT_2", "type": "draft", "at": "2026-11-20T09:00:00Z", "changes": ["furniture": "table"], "channels": ["private-ann"]],
            ["id": "item1_DRAFT_3", "type": "draft", "at": "2026-11-21T10:00:00Z", "changes": ["color": "blue"], "channels": ["private-ann"]],
        ])
        try await server.users.setUser(name: "ann", password: "a-secret", readChannels: ["public", "private-ann"], writeChannels: ["private-ann"])
        try await server.users.setUser(name: "bob", password: "b-secret", readChannels: ["public"])

        var answers: [String: JSON] = [:]
        for (name, password) in [("ann", "a-secret"), ("bob", "b-secret")] {
            let folder = try makeTemporaryDirectory(self)
            var config = DatabaseConfiguration(name: "items", directory: folder)
            config.indexes = [Self.draftView]
            let db = try await Database.open(config)
            var replication = ReplicationConfiguration.oneTimeServerToClient(with: userURL(url, name, password), database: db)
            replication.limitToChannels = []
            try await Replicator(configuration: replication).run()
            var query = IndexQuery()
            query.key = "item1"
            let result = try await db.query("views/get_id", query)
            XCTAssertEqual(result.rows.count, 1, name)
            answers[name] = result.rows.first?.value["current"]
            await db.close()
        }
        XCTAssertEqual(answers["ann"], ["type": "item", "fruit": "banana", "furniture": "table", "color": "blue"])
        XCTAssertEqual(answers["bob"], ["type": "item", "fruit": "apple", "furniture": "chair", "color": "red"])

        // Over HTTP, the server's own view (registered in Swift) answers its administrator the same
        // row as ann's copy: every draft applied.
        var request = URLRequest(url: URL(string: url.absoluteString + "/_design/views/_view/get_id?key=%22item1%22")!)
        request.setValue("Basic \(Data("admin:pw".utf8).base64EncodedString())", forHTTPHeaderField: "Authorization")
        let (data, response) = try await URLSession.shared.data(for: request)
        XCTAssertEqual((response as? HTTPURLResponse)?.statusCode, 200)
        let rows = try JSON(parsing: data)["rows"]?.arrayValue ?? []
        XCTAssertEqual(rows.count, 1)
        XCTAssertEqual(rows.first?["value"]?["current"], answers["ann"])
        XCTAssertEqual(rows.first?["value"]?["drafts"]?.arrayValue?.count, 3)
    }
}
