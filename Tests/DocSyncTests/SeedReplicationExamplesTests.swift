@testable import DocServer
import DocStore
import DocStoreJavaScript
@testable import DocSync
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import XCTest

/// The replication examples of the PredixSDK Database Guide, each against a real DocServer on 127.0.0.1
/// (or a CouchDB's welcome in front of it), translated from completion handlers and delegates to
/// `await` and from its type names to DocStore's as Docs/Porting.md maps them: the configuration's
/// static initializers, starting and stopping, the status delegate's four events, channels (an empty
/// list is everything the user may see; CouchDB gets a selector), the filter delegate and its
/// parameters, closing a database, and a resolver that merges. The comment above each test quotes the
/// guide and the first words of its example.
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
        func replicationFailed(_ replicator: Replicator, error: ReplicationError) { calls.append("failed: \(error.code)") }
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

    // MARK: The guide's configurations, start and stop

    /// PredixSDK Database Guide — "let replicationConfig =
    /// ReplicationConfiguration.repeatingBidirectionalReplication(with: myPredixSyncURL)", the two
    /// one-time initializers, and "database.startReplication(with: replicationConfig)" /
    /// "database.stopReplication()": a repeating exchange goes both ways until stopped.
    func testGuideConfigurationsStartAndStop() async throws {
        let (_, myPredixSyncURL, remote) = try await makeServer()
        let database = try await makeDatabase("guide")

        let repeating = ReplicationConfiguration.repeatingBidirectional(with: myPredixSyncURL, database: database)
        XCTAssertTrue(repeating.continuous)
        XCTAssertEqual(repeating.direction, .pushAndPull)
        let oneTime = ReplicationConfiguration.oneTimeBidirectional(with: myPredixSyncURL, database: database)
        XCTAssertFalse(oneTime.continuous)
        XCTAssertEqual(oneTime.direction, .pushAndPull)
        let serverToClient = ReplicationConfiguration.oneTimeServerToClient(with: myPredixSyncURL, database: database)
        XCTAssertFalse(serverToClient.continuous)
        XCTAssertEqual(serverToClient.direction, .pull)

        let replicator = Replicator(configuration: repeating)              // startReplication(with:)
        replicator.start()
        _ = try await database.save(["id": "from-device"])
        _ = try await remote.save(["id": "from-server"])
        try await eventually { try await remote.fetchDocument("from-device") != nil }
        try await eventually { try await database.fetchDocument("from-server") != nil }
        await replicator.stop()                                            // stopReplication()
        XCTAssertEqual(replicator.status.activity, .stopped)
        XCTAssertNil(replicator.status.error)
    }

    /// PredixSDK Database Guide — "Stopping a non-repeating replication is not necessary, as the
    /// replication will automatically stop when the data exchange has completed. However,
    /// stopReplication() can still be called on a non-repeating replication to cancel a long-running
    /// in-process replication."
    func testGuideStoppingAOneTimeReplicationCancelsIt() async throws {
        let (_, url, remote) = try await makeServer()
        try await seed(remote, prefix: "r", count: 30)
        let proxy = FaultProxy(upstream: "http://127.0.0.1:\(url.port!)", rules: [.init(pathContains: "_bulk_get", fault: .stall, remaining: 1)])
        let port = try await proxy.start()
        let held = Held(proxy)
        addTeardownBlock { await held.take()?.stop() }
        let slowURL = URL(string: "http://admin:pw@127.0.0.1:\(port)/remote")!

        // Completing by itself: no stop needed.
        let quick = try await makeDatabase("quick")
        let finished = try await Replicator(configuration: .oneTimeServerToClient(with: url, database: quick)).run()
        XCTAssertEqual(finished.activity, .idle)
        await XCTAssertEqualAsync(try await quick.changes().changes.count, 30)

        // Held up in the middle (its `_bulk_get` gets no answer): stop cancels it.
        let database = try await makeDatabase("cancelled")
        let replicator = Replicator(configuration: .oneTimeServerToClient(with: slowURL, database: database))
        let delegate = FlowDelegate()
        replicator.delegate = delegate
        let run = Task { try await replicator.run() }
        await proxy.waitForStalls(1)
        await replicator.stop()
        let status = try await run.value
        XCTAssertEqual(status.activity, .stopped, "cancelled, not completed")
        XCTAssertNil(status.error)
        XCTAssertEqual(delegate.calls.last, "complete", "a stopped run ends as the guide's replicationDidComplete, not as a failure")
        await XCTAssertEqualAsync(try await database.changes().changes.count, 0, "the held batch was not written")
    }

    /// PredixSDK Database Guide — "The object associated with the replicationStatusDelegate property of
    /// the database will be called for these replication events: … replicationFailed": a server that
    /// refuses the credentials fails the run, and the delegate hears of it with the error.
    func testGuideReplicationFailed() async throws {
        let (_, url, _) = try await makeServer()
        var wrong = URLComponents(url: url, resolvingAgainstBaseURL: false)!
        wrong.password = "not-the-password"
        let database = try await makeDatabase("failing")
        let replicator = Replicator(configuration: .oneTimeServerToClient(with: wrong.url!, database: database))
        let delegate = FlowDelegate()
        replicator.delegate = delegate
        do {
            try await replicator.run()
            XCTFail("the run should fail")
        } catch let error as ReplicationError {
            XCTAssertEqual(error.code, .unauthorized)
        }
        XCTAssertEqual(delegate.calls, ["failed: unauthorized"])
        XCTAssertEqual(replicator.status.activity, .error)
    }
}
