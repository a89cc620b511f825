@testable import DocStore
import Foundation
import XCTest

final class ChangesFeedTests: XCTestCase {
    func testOrderAndDeduplication() async throws {
        let db = try await makeDatabase(self)
        let a = try await db.save(Document(id: "a", body: ["v": 1]))
        _ = try await db.save(Document(id: "b", body: ["v": 1]))
        _ = try await db.save(Document(id: "c", body: ["v": 1]))
        var a2 = a
        a2["v"] = 2
        _ = try await db.save(a2)

        let all = try await db.changes()
        XCTAssertEqual(all.changes.map(\.id), ["b", "c", "a"], "each document once, at its latest sequence")
        XCTAssertEqual(all.changes.map(\.sequence), [2, 3, 4])
        XCTAssertEqual(all.lastSequence, 4)
        XCTAssertEqual(all.changes.last?.revision.generation, 2)

        let sinceB = try await db.changes(since: 2)
        XCTAssertEqual(sinceB.changes.map(\.id), ["c", "a"])
        let limited = try await db.changes(since: 0, limit: 2)
        XCTAssertEqual(limited.changes.map(\.id), ["b", "c"])
        XCTAssertEqual(limited.lastSequence, 3)
        let rest = try await db.changes(since: limited.lastSequence)
        XCTAssertEqual(rest.changes.map(\.id), ["a"])
        let none = try await db.changes(since: 4)
        XCTAssertEqual(none.changes.count, 0)
        XCTAssertEqual(none.lastSequence, 4)
        await assertThrowsDocStoreError(.badRequest) { try await db.changes(limit: -1) }
    }

    /// A whole feed longer than ``Database/splitChangesRange`` is read in two halves at once: the same
    /// rows as pages read one after another; and with writes going on meanwhile, each document once, in
    /// sequence order, and none lost (those that moved on come with the next page).
    func testALongFeedReadInHalvesIsTheFeed() async throws {
        let db = try await makeDatabase(self)
        let count = Int(Database.splitChangesRange) + 4000
        let saved = try await db.save((0..<count).map { Document(id: String(format: "d%06d", $0), body: ["n": .integer($0)]) })
        // Some documents updated and deleted, so the log has superseded entries in both halves.
        for k in stride(from: 0, to: count, by: 997) {
            var edited = saved[k]
            edited["n"] = .integer(-k)
            _ = try await db.save(edited)
        }
        _ = try await db.delete(id: saved[5].id, revision: saved[5].revision!)
        let whole = try await db.changes(since: 0)
        var paged: [ChangesFeedRow] = []
        var since: Int64 = 0
        while true {
            let page = try await db.changes(since: since, limit: 1000)
            if page.changes.isEmpty { break }
            paged += page.changes
            since = page.lastSequence
        }
        XCTAssertEqual(whole.changes, paged)
        XCTAssertEqual(whole.changes.count, count)
        let updateSequence = await db.updateSequence
        XCTAssertEqual(whole.lastSequence, updateSequence)
        let withDocuments = try await db.changes(since: 0, includeDocuments: true)
        XCTAssertEqual(withDocuments.changes.map(\.id), whole.changes.map(\.id))
        for change in withDocuments.changes {
            XCTAssertEqual(change.document?.id, change.id)
            XCTAssertEqual(change.document?.revision, change.revision)
        }

        // Reads while a writer moves documents from the start of the log to its end.
        let writer = Task {
            for k in 0..<200 {
                var edited = try await db.document(withID: saved[k * 3].id)!
                edited["n"] = .integer(k)
                _ = try await db.save(edited)
            }
        }
        for _ in 0..<6 {
            let page = try await db.changes(since: 0)
            let sequences = page.changes.map(\.sequence)
            XCTAssertEqual(sequences, sequences.sorted())
            XCTAssertEqual(Set(sequences).count, sequences.count)
            XCTAssertEqual(Set(page.changes.map(\.id)).count, page.changes.count, "each document once")
            let next = try await db.changes(since: page.lastSequence)
            XCTAssertEqual(Set(page.changes.map(\.id)).union(next.changes.map(\.id)).count, count, "none lost")
        }
        try await writer.value
    }

    /// A page with documents of at least ``Database/splitChangesPage`` rows is read in two halves at
    /// once: the same rows, sequences and documents as pages read whole; with a first half whose range
    /// is all superseded entries (its rows read after the second half); and, with writes going on
    /// meanwhile, each document once per page, in sequence order, none lost.
    func testAPageWithDocumentsReadInHalvesIsThePage() async throws {
        let db = try await makeDatabase(self)
        let count = 3000
        let saved = try await db.save((0..<count).map { Document(id: String(format: "p%05d", $0), body: ["n": .integer($0)]) })
        // The first 700 writes superseded (the first page's first half holds none of its rows), and
        // some more here and there; one deletion.
        _ = try await db.save(saved[0..<700].map { var edited = $0; edited["n"] = .integer(-1); return edited })
        for k in stride(from: 900, to: count, by: 311) {
            var edited = try await db.document(withID: saved[k].id)!
            edited["n"] = .integer(-k)
            _ = try await db.save(edited)
        }
        _ = try await db.delete(id: saved[1500].id, revision: saved[1500].revision!)

        func pages(limit: Int, includeDocuments: Bool) async throws -> [ChangesPage] {
            var pages: [ChangesPage] = []
            var since: Int64 = 0
            while true {
                let page = try await db.changes(since: since, limit: limit, includeDocuments: includeDocuments)
                pages.append(page)
                if page.changes.isEmpty { break }
                since = page.lastSequence
            }
            return pages
        }
        for limit in [Database.splitChangesPage, 1000, 1001] {
            let split = try await pages(limit: limit, includeDocuments: true)
            let whole = try await pages(limit: limit, includeDocuments: false)
            XCTAssertEqual(split.map { $0.changes.map(\.sequence) }, whole.map { $0.changes.map(\.sequence) }, "limit \(limit)")
            XCTAssertEqual(split.map(\.lastSequence), whole.map(\.lastSequence), "limit \(limit)")
            XCTAssertEqual(split.flatMap(\.changes).count, count)
            for (row, plain) in zip(split.flatMap(\.changes), whole.flatMap(\.changes)) {
                XCTAssertEqual(row.id, plain.id)
                XCTAssertEqual(row.leafRevisions, plain.leafRevisions)
                XCTAssertEqual(row.document?.id, row.id)
                XCTAssertEqual(row.document?.revision, row.revision)
                XCTAssertEqual(row.document?.isDeleted, row.isDeleted)
            }
        }

        // Pages read while a writer moves documents from the start of the log to its end.
        let writer = Task {
            for k in 0..<300 {
                var edited = try await db.document(withID: saved[700 + k * 2].id)!
                edited["n"] = .integer(k)
                _ = try await db.save(edited)
            }
        }
        for _ in 0..<4 {
            var seen: [String] = []
            var since: Int64 = 0
            while true {
                let page = try await db.changes(since: since, limit: 1000, includeDocuments: true)
                if page.changes.isEmpty { break }
                let sequences = page.changes.map(\.sequence)
                XCTAssertEqual(sequences, sequences.sorted())
                XCTAssertEqual(Set(page.changes.map(\.id)).count, page.changes.count, "each document once in a page")
                XCTAssertTrue(sequences.allSatisfy { $0 > since })
                seen += page.changes.map(\.id)
                since = page.lastSequence
            }
            XCTAssertEqual(Set(seen).count, count, "none lost")
        }
        try await writer.value
    }

    /// `pending` is exact from every starting point, whichever way it is counted (short and long spans).
    func testPendingCountsTheDocumentsAfterEverySequence() async throws {
        let db = try await makeDatabase(self)
        var saved = try await db.save((0..<60).map { Document(id: "d\($0)", body: ["n": .integer($0)]) })
        for k in stride(from: 0, to: 60, by: 7) {
            saved[k]["n"] = .integer(-k)
            saved[k] = try await db.save(saved[k])
        }
        try await db.delete(saved[3])
        let feed = try await db.changes().changes.map(\.sequence)
        let last = await db.updateSequence
        for since in Int64(0)...last + 1 {
            let pending = try await db.pendingChangeCount(since: since)
            XCTAssertEqual(pending, feed.filter { $0 > since }.count, "since \(since)")
        }
    }

    func testDeletionsStayInTheFeedWithDocuments() async throws {
        let db = try await makeDatabase(self)
        let doc = try await db.save(Document(id: "gone", body: ["x": 1]))
        _ = try await db.save(Document(id: "kept", body: ["x": 2]))
        try await db.delete(doc)
        let page = try await db.changes(includeDocuments: true)
        XCTAssertEqual(page.changes.map(\.id), ["kept", "gone"])
        XCTAssertEqual(page.changes.map(\.isDeleted), [false, true])
        XCTAssertEqual(page.changes[0].document?.int(forKey: "x"), 2)
        XCTAssertEqual(page.changes[1].document?.isDeleted, true)
        let withoutDocuments = try await db.changes().changes
        XCTAssertNil(withoutDocuments[0].document)
    }

    /// A page long enough to be parsed on two threads gives each row its own document, in order —
    /// live ones equal to a direct read, tombstones marked deleted.
    func testLongPagesWithDocumentsKeepEveryRowsOwnDocument() async throws {
        let db = try await makeDatabase(self)
        let count = SharedChangeParse.chunkSize(includeDocuments: true) * 6 + 5
        var batch = (0..<count).map { Document(id: String(format: "p%04d", $0), body: ["n": .integer($0), "tag": .string("t\($0 % 7)")]) }
        batch[17].attachments["note.txt"] = Attachment(data: Data("seventeen".utf8), contentType: "text/plain")
        let saved = try await db.save(batch)
        for index in [3, 90, count - 1] { try await db.delete(id: batch[index].id, revision: saved[index].revision!) }

        // Pages of several chunks and a partial last one, parsed on two threads, with and without a
        // limit.
        for limit in [count + 10, count * 4, nil] {
            let page = try await db.changes(since: 0, limit: limit, includeDocuments: true)
            XCTAssertEqual(page.changes.count, count)
            for change in page.changes {
                let document = try XCTUnwrap(change.document, "row \(change.id) has no document")
                XCTAssertEqual(document.id, change.id)
                XCTAssertEqual(document.revision, change.revision)
                XCTAssertEqual(document.sequence, change.sequence)
                XCTAssertEqual(document.isDeleted, change.isDeleted)
                if change.isDeleted { continue }
                let direct = try await db.document(withID: change.id)
                XCTAssertEqual(document.body, direct?.body)
                XCTAssertEqual(document.int(forKey: "n"), Int(change.id.dropFirst()))
            }
            XCTAssertEqual(page.changes.filter(\.isDeleted).map(\.id), ["p0003", "p0090", String(format: "p%04d", count - 1)])
            XCTAssertEqual(page.changes.first { $0.id == "p0017" }?.document?.attachments["note.txt"]?.length, 9)
        }
    }

    func testSequencesStrictlyIncreaseAcrossBatchesAndReopen() async throws {
        let directory = try makeTemporaryDirectory(self)
        var db = try await Database.open(name: "seq", directory: directory)
        _ = try await db.save((0..<10).map { Document(id: "d\($0)", body: ["i": .integer($0)]) })
        let failed = try? await db.save(Document(id: "bad", body: ["_x": 1]))  // consumes no sequence
        XCTAssertNil(failed)
        await db.close()
        db = try await Database.open(name: "seq", directory: directory)
        let doc = try await db.save(Document(id: "after", body: [:]))
        XCTAssertEqual(doc.sequence, 11)
        let sequences = try await db.changes().changes.map(\.sequence)
        XCTAssertEqual(sequences, Array(1...11))
        await db.close()
    }

    /// A filter that judges each leaf (`style=all_docs` with a filter in CouchDB): a conflicted
    /// document is on the feed with the leaves that pass, also when its winner fails.
    func testAFilterThatJudgesEachLeaf() async throws {
        let db = try await makeDatabase(self)
        _ = try await db.insertRevisions([
            try Document(json: ["_id": "c", "_rev": "1-x", "kind": "a"]),
            try Document(json: ["_id": "c", "_rev": "2-y", "_revisions": ["start": 2, "ids": ["y", "w"]], "kind": "b"]),
            try Document(json: ["_id": "e", "_rev": "1-e", "kind": "a"]),
            try Document(json: ["_id": "f", "_rev": "1-f", "kind": "b"]),
        ])
        var filter = ChangesFilter(selector: try MangoSelector(["kind": "a"]))
        await XCTAssertEqualAsync(try await db.changes(filter: filter).changes.map(\.id), ["e"], "the winner alone decides by default")
        filter = filter.judgingEachLeaf
        for descending in [false, true] {
            let page = try await db.changes(filter: filter, includeDocuments: true, descending: descending)
            let rows = Dictionary(uniqueKeysWithValues: page.changes.map { ($0.id, $0.leafRevisions) })
            XCTAssertEqual(rows, ["c": [RevisionID("1-x")!], "e": [RevisionID("1-e")!]])
            XCTAssertEqual(page.changes.first { $0.id == "c" }?.document?["kind"], "b", "the document is still the winner's")
        }
        await XCTAssertEqualAsync(try await db.changes(limit: 1, filter: filter).changes.map(\.id), ["c"])
    }
}

final class ChangeNotificationTests: XCTestCase {
    func testStreamDeliversLocalChangesInCommitOrder() async throws {
        let db = try await makeDatabase(self)
        let stream = db.observeChanges()
        let first = try await db.save(Document(id: "one", body: [:]))
        _ = try await db.save([Document(id: "two", body: [:]), Document(id: "three", body: [:])])
        try await db.delete(first)

        var iterator = stream.makeAsyncIterator()
        let b1 = await iterator.next()
        let b2 = await iterator.next()
        let b3 = await iterator.next()
        XCTAssertEqual(b1?.map(\.id), ["one"])
        XCTAssertEqual(b1?.first?.source, .local)
        XCTAssertEqual(b1?.first?.revision, first.revision)
        XCTAssertEqual(b2?.map(\.id), ["two", "three"], "one batch per transaction")
        XCTAssertEqual(b2?.map(\.sequence), [2, 3])
        XCTAssertEqual(b3?.first?.isDeleted, true)
        XCTAssertEqual(b3?.first?.sequence, 4)
    }

    func testFailedWritesAnnounceNothingAndClosingEndsStreams() async throws {
        let db = try await makeDatabase(self)
        let stream = db.observeChanges()
        _ = try? await db.save(Document(id: "_bad", body: [:]))
        _ = try await db.save(Document(id: "good", body: [:]))
        let ended = Task {
            var batches: [[DocumentChange]] = []
            for await batch in stream { batches.append(batch) }
            return batches
        }
        await db.close()   // batches committed before the close are delivered before the end
        let batches = await ended.value
        XCTAssertEqual(batches.map { $0.map(\.id) }, [["good"]])
        XCTAssertEqual(db.notifier.subscriberCount, 0)
    }

    /// A notifier that goes away without `finish()` (its database released unclosed) ends its streams:
    /// their readers would otherwise wait forever (a dropped continuation does not end a stream).
    func testANotifierReleasedWithoutFinishingEndsItsStreams() async throws {
        var notifier: ChangeNotifier? = ChangeNotifier()
        let stream = try XCTUnwrap(notifier).subscribe()
        notifier?.publish([DocumentChange(id: "a", revision: RevisionID(generation: 1, digest: "a"), sequence: 1, isDeleted: false, source: .local)])
        let reader = Task {
            var count = 0
            for await batch in stream { count += batch.count }
            return count
        }
        notifier = nil
        let outcome = await withTaskGroup(of: Int?.self) { group in
            group.addTask { await reader.value }
            group.addTask {
                try? await Task.sleep(for: .seconds(10))
                return nil
            }
            let first = await group.next() ?? nil
            reader.cancel()
            group.cancelAll()
            return first
        }
        XCTAssertEqual(outcome, 1, "the stream delivered its batch, then ended")
    }

    func testDelegateIsCalledAndHeldWeakly() async throws {
        let db = try await makeDatabase(self)
        let delegate = RecordingDelegate()
        db.changeDelegate = delegate
        _ = try await db.save(Document(id: "a", body: [:]))
        _ = try await db.save(Document(id: "b", body: [:]))
        let received = try await delegate.waitForChanges(count: 2)
        XCTAssertEqual(received.map(\.id), ["a", "b"])
        XCTAssertTrue(db.changeDelegate === delegate)

        weak var weakDelegate: RecordingDelegate?
        do {
            let temporary = RecordingDelegate()
            weakDelegate = temporary
            db.changeDelegate = temporary
        }
        XCTAssertNil(weakDelegate)
        XCTAssertNil(db.changeDelegate)
    }
}

final class RecordingDelegate: DatabaseChangeDelegate {
    private let changes = Locked<[DocumentChange]>([])

    func database(_ database: Database, didChange changes: [DocumentChange]) {
        self.changes.withLock { $0.append(contentsOf: changes) }
    }

    func waitForChanges(count: Int) async throws -> [DocumentChange] {
        await eventually("delegate received \(changes.withLock { $0.count }) of \(count) changes") {
            changes.withLock { $0.count } >= count
        }
        return changes.withLock { $0 }
    }
}

extension ChangeNotificationTests {
    func testWaitingForACommitConsumesNothing() async throws {
        let db = try await makeDatabase(self)
        _ = try await db.save(Document(id: "before"))
        let read = await db.updateSequence
        let quiet = await db.waitForCommit(after: read, timeout: .milliseconds(20))
        XCTAssertFalse(quiet, "no commit after the sequence read")
        let again = await db.waitForCommit(after: read, timeout: .milliseconds(20))
        XCTAssertFalse(again, "a second wait is a wait too, not an ended stream")
        let already = await db.waitForCommit(after: read - 1, timeout: .seconds(30))
        XCTAssertTrue(already, "a commit already above: at once")
        async let woken = db.waitForCommit(after: read, timeout: .seconds(30))
        _ = try await db.save(Document(id: "after"))
        let wokenResult = await woken
        XCTAssertTrue(wokenResult)
        let stillAbove = await db.waitForCommit(after: read, timeout: .seconds(30))
        XCTAssertTrue(stillAbove)
        let purged = await db.updateSequence
        _ = try await db.purge(documentIDs: ["before"])
        let afterPurge = await db.waitForCommit(after: purged, timeout: .seconds(30))
        XCTAssertTrue(afterPurge, "a purge moves the sequence too")
        await db.close()
        let closed = await db.waitForCommit(after: .max, timeout: .seconds(30))
        XCTAssertFalse(closed, "a closed database does not wait")
    }
}
