@testable import DocServer
import DocStore
@testable import DocSync
import Foundation
import XCTest

/// Replication between real databases: local files, and a DocServer on 127.0.0.1 port 0.
final class ReplicationTests: XCTestCase {
    func testPushPullAndBothWithDocServer() async throws {
        let (_, url, remote) = try await makeServer()
        let local = try await makeDatabase("local")
        try await seed(local, prefix: "l", count: 120, attachments: true)
        try await seed(remote, prefix: "r", count: 80)

        var push = ReplicationConfiguration(source: .local(local), target: .remote(url))
        push.batchSize = 50
        let pushed = try await Replicator(configuration: push).run()
        XCTAssertEqual(pushed.documentsWritten, 120)
        let remoteCount = try await remote.info().documentCount
        XCTAssertEqual(remoteCount, 200)

        let pulled = try await Replicator(configuration: .oneTimeServerToClient(with: url, database: local)).run()
        XCTAssertEqual(pulled.documentsWritten, 80, "only what the local side lacks")
        try await assertConverged(local, remote)
        let attachment = try await remote.attachmentData(named: "file.bin", documentID: "l3")
        XCTAssertEqual(attachment.count, 13)

        // Both ways, with edits, deletions and a conflict made on both sides.
        var mine = try await local.document(withID: "r1")!
        mine["by"] = "local"
        _ = try await local.save(mine)
        var theirs = try await remote.document(withID: "r1")!
        theirs["by"] = "remote"
        theirs["extra"] = 1
        _ = try await remote.save(theirs)
        try await local.delete(try await local.document(withID: "l5")!)
        _ = try await remote.save(Document(id: "new-remote", body: [:]))
        let both = try await Replicator(configuration: .oneTimeBidirectional(with: url, database: local)).run()
        XCTAssertGreaterThanOrEqual(both.documentsWritten, 4)
        try await assertConverged(local, remote)
        let conflicted = try await local.document(withID: "r1", includeConflicts: true)
        XCTAssertEqual(conflicted?.conflicts.count, 1, "the conflict is kept on both sides")
        let quiet = try await Replicator(configuration: .oneTimeBidirectional(with: url, database: local)).run()
        XCTAssertEqual(quiet.documentsWritten, 0)

        // CouchDB's checkpoint format on the target.
        let checkpoints = try await remote.changes() // not in the feed
        XCTAssertFalse(checkpoints.changes.contains { $0.id.hasPrefix("_local") })
    }

    func testContinuousReplicationCarriesLaterWritesBothWays() async throws {
        let (_, url, remote) = try await makeServer()
        let local = try await makeDatabase("live")
        var configuration = ReplicationConfiguration.repeatingBidirectional(with: url, database: local)
        configuration.heartbeat = .milliseconds(300)
        let replicator = Replicator(configuration: configuration)
        let pulledNotes = Locked<[DocumentChange.Source]>([])
        let listener = Task {
            for await batch in local.observeChanges() { pulledNotes.withLock { $0 += batch.map(\.source) } }
        }
        replicator.start()
        _ = try await local.save(Document(id: "from-local", body: ["v": 1]))
        _ = try await remote.save(Document(id: "from-remote", body: ["v": 2]))
        try await eventually { try await remote.document(withID: "from-local") != nil }
        try await eventually { try await local.document(withID: "from-remote") != nil }
        // Change batches are delivered asynchronously after the commit, so a document can be read
        // before its announcement has reached the listener.
        await eventually { pulledNotes.withLock { $0.contains(.replication) } }
        XCTAssertTrue(pulledNotes.withLock { $0.contains(.replication) }, "pulled writes are announced as replication")
        XCTAssertNotEqual(replicator.status.activity, .error)
        await replicator.stop()
        XCTAssertEqual(replicator.status.activity, .stopped)
        listener.cancel()
    }

    func testFiltersLimitWhatMoves() async throws {
        let (_, url, remote) = try await makeServer()
        let local = try await makeDatabase("filters")
        _ = try await local.save([
            Document(id: "red", body: ["channels": ["red"], "kind": "a"]), Document(id: "blue", body: ["channels": ["blue"], "kind": "b"]),
            Document(id: "both", body: ["channels": ["red", "blue"], "kind": "a"]), Document(id: "none", body: ["kind": "c"]),
        ])
        // Channels narrow what a local source sends too.
        let pushedRed = try await makeDatabase("pushed-red")
        var pushWithChannels = ReplicationConfiguration(source: .local(local), target: .local(pushedRed))
        pushWithChannels.limitToChannels = ["red"]
        try await Replicator(configuration: pushWithChannels).run()
        await XCTAssertEqualAsync(try await pushedRed.changes().changes.map(\.id).sorted(), ["both", "red"])
        // No channel named (an empty list): everything.
        var pushAll = ReplicationConfiguration(source: .local(local), target: .remote(url))
        pushAll.limitToChannels = []
        try await Replicator(configuration: pushAll).run()
        await XCTAssertEqualAsync(try await remote.changes().changes.map(\.id).sorted(), ["blue", "both", "none", "red"])

        let pullTarget = try await makeDatabase("pulled")
        var pullByChannel = ReplicationConfiguration(source: .remote(url), target: .local(pullTarget))
        pullByChannel.limitToChannels = ["blue"]
        try await Replicator(configuration: pullByChannel).run()
        await XCTAssertEqualAsync(try await pullTarget.changes().changes.map(\.id).sorted(), ["blue", "both"], "server-side bychannel filter")

        let idsTarget = try await makeDatabase("ids")
        var byIDs = ReplicationConfiguration(source: .local(local), target: .local(idsTarget))
        byIDs.documentIDs = ["none", "blue"]
        try await Replicator(configuration: byIDs).run()
        await XCTAssertEqualAsync(try await idsTarget.changes().changes.map(\.id).sorted(), ["blue", "none"])

        let selectorTarget = try await makeDatabase("selected")
        var bySelector = ReplicationConfiguration(source: .remote(url), target: .local(selectorTarget))
        bySelector.selector = ["kind": "a"]
        try await Replicator(configuration: bySelector).run()
        await XCTAssertEqualAsync(try await selectorTarget.changes().changes.map(\.id).sorted(), ["both", "red"])

        let pushFiltered = try await makeDatabase("pushfiltered")
        var byDelegate = ReplicationConfiguration(source: .local(local), target: .local(pushFiltered))
        byDelegate.filterParameters = ["kind": "b"]
        byDelegate.pushFilter = { document, parameters in document["kind"] == parameters["kind"] }
        try await Replicator(configuration: byDelegate).run()
        await XCTAssertEqualAsync(try await pushFiltered.changes().changes.map(\.id), ["blue"])

        // A different filter is a different replication: it does not reuse the blue checkpoint.
        var redToo = pullByChannel
        redToo.limitToChannels = ["red"]
        try await Replicator(configuration: redToo).run()
        await XCTAssertEqualAsync(try await pullTarget.changes().changes.map(\.id).sorted(), ["blue", "both", "red"])
    }

    /// As a CouchDB source answers the replicator (`style=all_docs` with a filter), a local source judges
    /// each leaf of a conflicted document on its own: the leaf that passes moves even where the winner
    /// fails, and the one that fails stays.
    func testALocalSourceJudgesEachLeafOfAConflict() async throws {
        let source = try await makeDatabase("leaves-source")
        let results = try await source.insertRevisions([
            try Document(json: ["_id": "c", "_rev": "1-x", "kind": "a"]),
            try Document(json: ["_id": "c", "_rev": "2-y", "_revisions": ["start": 2, "ids": ["y", "w"]], "kind": "b"]),
            try Document(json: ["_id": "d", "_rev": "1-d", "kind": "b"]),
        ])
        XCTAssertTrue(results.allSatisfy(\.isSuccess))
        for (name, configure) in [("selector", { (c: inout ReplicationConfiguration) in c.selector = ["kind": "a"] }),
                                  ("push filter", { (c: inout ReplicationConfiguration) in
                                      c.pushFilter = { document, _ in document["kind"] == "a" } })] {
            let target = try await makeDatabase("leaves-target-\(name.replacingOccurrences(of: " ", with: "-"))")
            var configuration = ReplicationConfiguration(source: .local(source), target: .local(target))
            configure(&configuration)
            try await Replicator(configuration: configuration).run()
            let tree = try await target.revisionTree(ofDocumentWithID: "c")
            XCTAssertEqual(tree?.leaves.map(\.revision), [RevisionID("1-x")!], name)
            await XCTAssertEqualAsync(try await target.document(withID: "d"), nil, name)
        }
    }

    /// The delegate is an adapter over the status stream: one sending call per batch that the stream
    /// shows starting, then the completion, all made before `run()` or `stop()` returns; a second run
    /// of the same replicator is told again.
    func testTheDelegateFollowsTheStatusStream() async throws {
        let (_, url, _) = try await makeServer()
        let local = try await makeDatabase("delegate")
        try await seed(local, prefix: "d", count: 250)
        var configuration = ReplicationConfiguration(source: .local(local), target: .remote(url))
        configuration.batchSize = 100
        let replicator = Replicator(configuration: configuration)
        let delegate = RecordingReplicatorDelegate()
        replicator.delegate = delegate
        let statuses = replicator.statusChanges()
        try await replicator.run()
        XCTAssertEqual(delegate.calls.withLock { $0 }, ["sending", "sending", "sending", "complete"], "three batches of 250")

        var batchesSeen = 0
        var previous = ReplicatorStatus()
        for await status in statuses {
            if status.transferring.contains(.push) && !previous.transferring.contains(.push) { batchesSeen += 1 }
            XCTAssertFalse(status.transferring.contains(.pull), "a push never receives")
            previous = status
        }
        XCTAssertEqual(batchesSeen, 3, "the stream shows the batches the delegate was told of")
        XCTAssertEqual(previous.transferring, [], "nothing moves after the end")

        _ = try await local.save(Document(id: "late", body: [:]))
        try await replicator.run()
        XCTAssertEqual(delegate.calls.withLock { $0 }.suffix(2), ["sending", "complete"], "the second run is told too")

        var continuous = configuration
        continuous.continuous = true
        let watched = Replicator(configuration: continuous)
        watched.delegate = delegate
        let busy = watched.statusChanges()
        watched.start()
        for await status in busy where status.activity == .idle { break }
        await watched.stop()
        XCTAssertEqual(delegate.calls.withLock { $0 }.last, "complete", "told before stop() returned")
    }

    /// How far a one-shot replication is: after each page the source's count of the changes left
    /// (`pending` over HTTP, counted locally), so that done + remaining is the whole, falling to zero.
    func testTheStatusSaysHowManyChangesRemain() async throws {
        let (_, url, _) = try await makeServer()
        let source = try await makeDatabase("remaining-source")
        try await seed(source, prefix: "r", count: 250)
        for endpoint in [ReplicationEndpoint.local(source), .remote(url)] {
            if case .remote = endpoint {
                try await Replicator(configuration: ReplicationConfiguration(source: .local(source), target: .remote(url))).run()
            }
            let target = try await makeDatabase("remaining-target-\(endpoint.isLocal ? "local" : "http")")
            var configuration = ReplicationConfiguration(source: endpoint, target: .local(target))
            configuration.batchSize = 100
            let replicator = Replicator(configuration: configuration)
            let statuses = replicator.statusChanges()
            try await replicator.run()
            var totals: [Int] = []
            var last = ReplicatorStatus()
            for await status in statuses {
                if let remaining = status.changesRemaining { totals.append(status.changesProcessed + remaining) }
                last = status
            }
            XCTAssertFalse(totals.isEmpty, "the source said how many were left")
            XCTAssertEqual(Set(totals), [250], "done and remaining add up to every change: \(totals)")
            XCTAssertEqual(last.changesRemaining, 0)
            XCTAssertEqual(last.changesProcessed, 250)
        }
    }

    func testAMalformedSelectorFailsTheReplicationInsteadOfMovingEverything() async throws {
        let source = try await makeDatabase("bad-selector-source")
        _ = try await source.save(Document(id: "x", body: ["v": 1]))
        let target = try await makeDatabase("bad-selector-target")
        var configuration = ReplicationConfiguration(source: .local(source), target: .local(target))
        configuration.selector = ["v": ["$foo": 1]]
        do {
            try await Replicator(configuration: configuration).run()
            XCTFail("expected a failure")
        } catch let error as ReplicationError {
            XCTAssertEqual(error.code, .invalidConfiguration)
            XCTAssertTrue(error.reason.contains("$foo"), error.reason)
        }
        await XCTAssertEqualAsync(try await target.changes().changes.count, 0, "nothing moved")
    }

    func testAuthenticationFailureIsATypedError() async throws {
        let (_, url, _) = try await makeServer()
        let local = try await makeDatabase("auth")
        _ = try await local.save(Document(id: "x", body: [:]))
        var configuration = ReplicationConfiguration(source: .local(local), target: .remote(url))
        configuration.authentication = .basic(name: "admin", password: "wrong")
        let replicator = Replicator(configuration: configuration)
        let delegate = RecordingReplicatorDelegate()
        replicator.delegate = delegate
        do {
            try await replicator.run()
            XCTFail("expected a failure")
        } catch let error as ReplicationError {
            XCTAssertEqual(error.code, .unauthorized)
            XCTAssertEqual(error.httpStatus, 401)
        }
        XCTAssertEqual(replicator.status.activity, .error)
        XCTAssertEqual(delegate.failures.withLock { $0.map(\.code) }, [.unauthorized])

        var missing = ReplicationConfiguration(source: .local(local), target: .remote(url.appendingPathComponent("../nosuchdb").standardized))
        missing.retry.maximumAttempts = 1
        do {
            try await Replicator(configuration: missing).run()
            XCTFail("expected a failure")
        } catch let error as ReplicationError {
            XCTAssertEqual(error.code, .databaseNotFound)
        }
        var created = missing
        created.createTarget = true
        try await Replicator(configuration: created).run()
    }

    func testConflictResolverRunsOnPulledConflicts() async throws {
        let a = try await makeDatabase("a")
        let b = try await makeDatabase("b")
        let base = try await a.save(Document(id: "doc", body: ["v": 0]))
        try await Replicator(configuration: ReplicationConfiguration(source: .local(a), target: .local(b))).run()
        var onA = base
        onA["v"] = 1
        _ = try await a.save(onA)
        var onB = try await b.document(withID: "doc")!
        onB["v"] = 2
        _ = try await b.save(onB)
        var pull = ReplicationConfiguration(source: .local(a), target: .local(b))
        pull.conflictResolver = { winner, conflicts in
            ([winner] + conflicts).max { ($0.int(forKey: "v") ?? 0) < ($1.int(forKey: "v") ?? 0) }
        }
        try await Replicator(configuration: pull).run()
        let resolved = try await b.document(withID: "doc", includeConflicts: true)!
        XCTAssertEqual(resolved.conflicts, [])
        XCTAssertEqual(resolved.int(forKey: "v"), 2, "the resolver kept the highest v")
    }

    func testAnEndedReplicatorStartsAgainFromItsCheckpointAndLateStreamsFinishAtOnce() async throws {
        let source = try await makeDatabase("again-source")
        let target = try await makeDatabase("again-target")
        try await seed(source, prefix: "a", count: 5)
        let replicator = Replicator(configuration: ReplicationConfiguration(source: .local(source), target: .local(target)))
        let first = try await replicator.run()
        XCTAssertEqual(first.documentsWritten, 5)
        // Streams taken after the end finish at once; the status one with the final status.
        var late: [ReplicatorActivity] = []
        for await status in replicator.statusChanges() { late.append(status.activity) }
        XCTAssertEqual(late, [.idle])
        for await batch in replicator.replicatedDocuments() { XCTFail("unexpected \(batch)") }

        try await seed(source, prefix: "b", count: 3)
        replicator.start()
        var seen: [ReplicatorActivity] = []
        for await status in replicator.statusChanges() { seen.append(status.activity) }
        XCTAssertEqual(seen.last, .idle, "a stream taken after start() covers the run to its end")
        let second = replicator.status
        XCTAssertEqual(second.changesProcessed, 3, "the second run starts from the checkpoint")
        XCTAssertEqual(second.documentsWritten, 3)
        try await assertConverged(source, target)
    }

    /// While catching up, checkpoints are written at `checkpointInterval` (after every batch with
    /// `.zero`), and always when the replication ends; a run after one that wrote a single checkpoint
    /// starts where it ended.
    func testCatchingUpCheckpointsAtTheIntervalAndAtTheEnd() async throws {
        let source = try await makeDatabase("interval-source")
        try await seed(source, prefix: "i", count: 35)
        func checkpointWrites(interval: Duration, into name: String) async throws -> (writes: String?, status: ReplicatorStatus) {
            let target = try await makeDatabase(name)
            var configuration = ReplicationConfiguration(source: .local(source), target: .local(target))
            configuration.batchSize = 10
            configuration.checkpointInterval = interval
            let status = try await Replicator(configuration: configuration).run()
            let copied = try await target.info().documentCount
            let expected = try await source.info().documentCount
            XCTAssertEqual(copied, expected)
            let checkpoints = try await target.localDocuments()
            XCTAssertEqual(checkpoints.count, 1)
            return (checkpoints.first?.revision.description, status)
        }
        let everyBatch = try await checkpointWrites(interval: .zero, into: "interval-each")
        XCTAssertEqual(everyBatch.writes, "0-4", "pages of 10, 10, 10 and 5")
        let once = try await checkpointWrites(interval: .seconds(3600), into: "interval-once")
        XCTAssertEqual(once.writes, "0-1", "only the page that caught up")
        XCTAssertEqual(once.status.positions[.push]?.checkpointed, 35)

        // The source ends exactly at a page's end: the empty page that finds it writes the checkpoint.
        try await seed(source, prefix: "j", count: 5)
        let even = try await checkpointWrites(interval: .seconds(3600), into: "interval-even")
        XCTAssertEqual(even.writes, "0-1")
        XCTAssertEqual(even.status.positions[.push]?.checkpointed, 40)
        XCTAssertEqual(even.status.changesProcessed, 40)
    }

    func testADatabaseReplicatesIntoItselfAndReportsItsPosition() async throws {
        // The second checkpoint save (the target, the same database) finds the revision the first
        // wrote: it holds the very checkpoint, so the save counts, as in CouchDB's replicator.
        let database = try await makeDatabase("self")
        try await seed(database, prefix: "s", count: 4)
        let replicator = Replicator(configuration: ReplicationConfiguration(source: .local(database), target: .local(database)))
        let status = try await replicator.run()
        XCTAssertNil(status.error)
        XCTAssertEqual(status.figures.revisionsChecked, 4)
        XCTAssertEqual(status.figures.missingRevisionsFound, 0)
        XCTAssertEqual(status.documentsWritten, 0)
        let position = try XCTUnwrap(status.positions[.push])
        XCTAssertEqual(position.startedFrom, 0)
        XCTAssertEqual(position.checkpointed, 4)
        XCTAssertEqual(position.through, 4)
        let again = try await replicator.run()
        XCTAssertEqual(again.positions[.push]?.startedFrom, 4, "the run resumes from the checkpoint it saved")
        XCTAssertEqual(again.figures.revisionsChecked, 0)
    }

    func testReplicationIDsAndRetryDelays() {
        let base = ReplicationID.make(source: "a", target: "b", filter: SourceFilter())
        XCTAssertEqual(base, ReplicationID.make(source: "a", target: "b", filter: SourceFilter()))
        XCTAssertNotEqual(base, ReplicationID.make(source: "b", target: "a", filter: SourceFilter()))
        var channels = SourceFilter()
        channels.channels = ["x"]
        XCTAssertNotEqual(base, ReplicationID.make(source: "a", target: "b", filter: channels))
        var named = SourceFilter()
        named.named = ("app/f", ["k": "1"])
        var otherParameters = named
        otherParameters.named = ("app/f", ["k": "2"])
        XCTAssertNotEqual(ReplicationID.make(source: "a", target: "b", filter: named),
                          ReplicationID.make(source: "a", target: "b", filter: otherParameters))

        let policy = ReplicationConfiguration.RetryPolicy()
        XCTAssertEqual(policy.delay(forAttempt: 0), .milliseconds(250))
        XCTAssertEqual(policy.delay(forAttempt: 3), .seconds(2))
        XCTAssertEqual(policy.delay(forAttempt: 40), .seconds(300))
    }
}

final class RecordingReplicatorDelegate: ReplicatorDelegate {
    let failures = Locked<[ReplicationError]>([])
    let calls = Locked<[String]>([])
    func replicationFailed(_ replicator: Replicator, error: ReplicationError) {
        failures.withLock { $0.append(error) }
        calls.withLock { $0.append("failed") }
    }
    func replicationDidComplete(_ replicator: Replicator) { calls.withLock { $0.append("complete") } }
    func replicationIsSending(_ replicator: Replicator) { calls.withLock { $0.append("sending") } }
    func replicationIsReceiving(_ replicator: Replicator) { calls.withLock { $0.append("receiving") } }
}

