@testable import DocStore
import Foundation
import XCTest

final class IndexLifecycleTests: XCTestCase {
    private func countingIndex(_ calls: Counter, version: String = "1", emitDouble: Bool = false) -> IndexDefinition {
        IndexDefinition(name: "by-score", version: version, reduce: .count) { doc, emit in
            _ = calls.next()
            if let score = doc.int(forKey: "score") { emit(.integer(emitDouble ? score * 2 : score), .string(doc.id)) }
        }
    }

    func testIncrementalUpdateMapsOnlyChangedDocuments() async throws {
        let directory = try makeTemporaryDirectory(self)
        let calls = Counter()
        var config = DatabaseConfiguration(name: "big", directory: directory)
        config.indexes = [countingIndex(calls)]
        var db = try await Database.open(config)
        for batch in 0..<10 {
            _ = try await db.save((0..<1000).map { i in
                let n = batch * 1000 + i
                return Document(id: String(format: "doc-%05d", n), body: ["score": .integer(n)])
            })
        }
        let first = try await db.query("by-score")
        XCTAssertEqual(first.rows.first?.value, 10_000)
        XCTAssertEqual(calls.count, 10_000)

        // Change 10 documents: exactly 10 are mapped again.
        let changed = try await db.documents(withIDs: (0..<10).map { String(format: "doc-%05d", $0 * 997) })
        _ = try await db.save(changed.map { var d = $0; d["score"] = .integer(-1 - $0.int(forKey: "score")!); return d })
        var lowest = IndexQuery()
        lowest.reduce = false
        lowest.endKey = -1
        let moved = try await db.query("by-score", lowest)
        XCTAssertEqual(calls.count, 10_010)
        XCTAssertEqual(moved.rows.count, 10)
        XCTAssertEqual(moved.totalRows, 10_000)

        // Nothing changed: nothing mapped.
        _ = try await db.query("by-score")
        XCTAssertEqual(calls.count, 10_010)

        // Deleting a document removes its rows; purging too.
        let victim = try await db.document(withID: "doc-00001")!
        try await db.delete(victim)
        try await db.purge(documentIDs: ["doc-00002"])
        var around = IndexQuery()
        around.reduce = false
        around.startKey = 0
        around.endKey = 3
        let rows = try await db.query("by-score", around)
        XCTAssertEqual(rows.rows.map(\.documentID), ["doc-00003"], "0 moved to -1, 1 deleted, 2 purged")
        XCTAssertEqual(rows.totalRows, 9_998)
        XCTAssertEqual(calls.count, 10_010, "the deleted document is not mapped; the purged one needs no map")

        // Reopening with the same version keeps the index: no mapping at all.
        await db.close()
        db = try await Database.open(config)
        let reopened = try await db.query("by-score")
        XCTAssertEqual(reopened.rows.first?.value, 9_998)
        XCTAssertEqual(calls.count, 10_010)

        // A version bump rebuilds from scratch with the new map function.
        await db.close()
        let rebuildCalls = Counter()
        config.indexes = [countingIndex(rebuildCalls, version: "2", emitDouble: true)]
        db = try await Database.open(config)
        var doubled = IndexQuery()
        doubled.reduce = false
        doubled.key = 6
        let rebuilt = try await db.query("by-score", doubled)
        XCTAssertEqual(rebuilt.rows.map(\.documentID), ["doc-00003"])
        XCTAssertEqual(rebuildCalls.count, 9_998)
        await db.close()
    }

    /// A first build skips deleting rows of documents it has not indexed yet; documents rewritten while
    /// it runs are read again and must replace, not add to, their rows.
    func testDocumentsWrittenDuringTheFirstBuildKeepOneRowEach() async throws {
        let calls = Counter()
        let db = try await makeDatabase(self) { $0.indexes = [self.countingIndex(calls)] }
        let count = 6_000
        _ = try await db.save((0..<count).map { Document(id: String(format: "d%05d", $0), body: ["score": .integer($0)]) })
        // Rewrite documents from every part of the feed while the build runs, twice each.
        async let build = db.query("by-score")
        for round in 1...2 {
            for n in stride(from: 0, to: count, by: 150) {
                var doc = try await db.document(withID: String(format: "d%05d", n))!
                doc["score"] = .integer(-n - round * 100_000)
                _ = try await db.save(doc)
            }
        }
        _ = try await build
        var all = IndexQuery()
        all.reduce = false
        let rows = try await db.query("by-score", all).rows
        XCTAssertEqual(rows.count, count, "one row per document")
        XCTAssertEqual(Set(rows.compactMap(\.documentID)).count, count)
        for row in rows {
            let id = row.documentID ?? ""
            let n = Int(id.dropFirst()) ?? -1
            let expected = n % 150 == 0 ? -n - 200_000 : n
            XCTAssertEqual(row.key, .integer(expected), id)
        }
        let total = try await db.query("by-score")
        XCTAssertEqual(total.rows.first?.value, .integer(count))
    }

    /// A catch-up longer than one transaction, whose windows are read and mapped on another thread
    /// while the one before is written: every window's rows, purges, deletions and map failures land,
    /// and the map function is never called twice at once.
    func testLongCatchUpAcrossTransactionsWithPurgesDeletionsAndFailures() async throws {
        struct Refused: Error {}
        let calls = Counter()
        let running = Counter()
        let overlapped = Counter()
        let index = IndexDefinition(name: "by-n", version: "1", reduce: .count) { doc, emit in
            _ = calls.next()
            if running.next() > 1 { _ = overlapped.next() }
            defer { running.decrement() }
            let n = doc.int(forKey: "n")!
            if n % 1_000 == 999 { throw Refused() }
            emit(.integer(n), nil)
        }
        let db = try await makeDatabase(self) { $0.indexes = [index] }
        // More windows than one transaction writes (500 documents a window, 20 windows a transaction).
        let count = 500 * 20 + 2_700
        let ids = (0..<count).map { String(format: "n%05d", $0) }
        for start in stride(from: 0, to: count, by: 2_000) {
            _ = try await db.save((start..<min(start + 2_000, count)).map { Document(id: ids[$0], body: ["n": .integer($0)]) })
        }
        // Purges and deletions land between the documents of many windows.
        let purged = stride(from: 7, to: count, by: 1_301).map { ids[$0] }
        try await db.purge(documentIDs: purged)
        var deleted: [String] = []
        for n in stride(from: 11, to: count, by: 1_703) {
            try await db.delete(try await db.document(withID: ids[n])!)
            deleted.append(ids[n])
        }
        var all = IndexQuery()
        all.reduce = false
        let result = try await db.query("by-n", all)
        let failing = (0..<count).filter { $0 % 1_000 == 999 }.map { ids[$0] }
        let expected = ids.filter { !purged.contains($0) && !deleted.contains($0) && !failing.contains($0) }
        XCTAssertEqual(result.rows.compactMap(\.documentID), expected)
        XCTAssertEqual(result.rows.map(\.key), expected.map { .integer(Int($0.dropFirst())!) })
        XCTAssertEqual(result.totalRows, expected.count)
        XCTAssertEqual(result.mapErrors.map(\.documentID), failing.filter { !purged.contains($0) && !deleted.contains($0) })
        let reduced = try await db.query("by-n")
        XCTAssertEqual(reduced.rows.first?.value, .integer(expected.count))
        XCTAssertEqual(calls.count, count - purged.count - deleted.count, "each live document mapped once")
        XCTAssertEqual(overlapped.count, 0, "map calls never overlap")
    }

    func testFailingMapFunctionsAreReportedWithoutCorruptingTheIndex() async throws {
        struct Refused: Error {}
        let picky = IndexDefinition(name: "picky", version: "1") { doc, emit in
            switch doc.string(forKey: "kind") {
            case "throw": throw Refused()
            case "nan": emit("nan", .double(.nan))
            case "infinite-key": emit(.double(.infinity), nil)
            default: emit(.string(doc.id), 1)
            }
        }
        let db = try await makeDatabase(self) { $0.indexes = [picky] }
        _ = try await db.save([
            Document(id: "a", body: ["kind": "fine"]), Document(id: "b", body: ["kind": "throw"]),
            Document(id: "c", body: ["kind": "nan"]), Document(id: "d", body: ["kind": "infinite-key"]),
            Document(id: "e", body: ["kind": "fine"]),
        ])
        let result = try await db.query("picky")
        XCTAssertEqual(result.rows.map(\.documentID), ["a", "e"])
        XCTAssertEqual(result.totalRows, 2)
        XCTAssertEqual(result.mapErrors.map(\.documentID), ["b", "c", "d"])
        XCTAssertTrue(result.mapErrors[0].reason.contains("Refused"), result.mapErrors[0].reason)
        XCTAssertTrue(result.mapErrors[1].reason.contains("cannot represent"), result.mapErrors[1].reason)

        // Fixing the document clears its error and indexes it.
        var fixed = try await db.document(withID: "b")!
        fixed["kind"] = "fine"
        _ = try await db.save(fixed)
        let after = try await db.query("picky")
        XCTAssertEqual(after.rows.map(\.documentID), ["a", "b", "e"])
        XCTAssertEqual(after.mapErrors.map(\.documentID), ["c", "d"])
    }

    func testIndexesAreIndependentAndRegisteredLate() async throws {
        let db = try await makeDatabase(self)
        _ = try await db.save((0..<30).map { Document(id: "p\($0)", body: ["price": .integer($0), "colour": $0 % 2 == 0 ? "red" : "blue"]) })
        try await db.register(.field("colour", reduce: .count))
        try await db.register(.field("price", value: "price", reduce: .sum))
        let names = await db.indexNames
        XCTAssertEqual(names, ["by:colour|count", "by:price->price|sum"])
        var grouped = IndexQuery()
        grouped.group = true
        await XCTAssertEqualAsync(try await db.query("by:colour|count", grouped).rows.map(\.value), [15, 15])
        await XCTAssertEqualAsync(try await db.query("by:price->price|sum").rows.first?.value, 435)
        // Registering the same definition again keeps the rows; the file holds both tables.
        try await db.register(.field("colour", reduce: .count))
        await XCTAssertEqualAsync(try await db.query("by:colour|count").rows.first?.value, 30)
    }

    func testLongEmissionsAndManyRowsPerDocument() async throws {
        let words = IndexDefinition(name: "words", version: "1", reduce: .count) { doc, emit in
            for word in (doc.string(forKey: "text") ?? "").split(separator: " ") { emit(.string(String(word)), nil) }
        }
        let db = try await makeDatabase(self) { $0.indexes = [words] }
        _ = try await db.save(Document(id: "t", body: ["text": "the quick brown fox jumps over the lazy dog the end"]))
        var grouped = IndexQuery()
        grouped.group = true
        grouped.key = "the"
        await XCTAssertEqualAsync(try await db.query("words", grouped).rows.first?.value, 3)
        var edit = try await db.document(withID: "t")!
        edit["text"] = "the end"
        _ = try await db.save(edit)
        await XCTAssertEqualAsync(try await db.query("words").rows.first?.value, 2, "old rows of the document are replaced")
    }

    /// Compaction keeps the newest `purgedInfosLimit` purge records, as CouchDB's does; the purge count
    /// still counts every purge; an index that had read the dropped records keeps its rows, one that
    /// had not is built again when next read — and neither shows a purged document.
    func testCompactionDropsPurgeRecordsPastTheLimitAndIndexesBehindThemAreRebuilt() async throws {
        let calls = (current: Counter(), behind: Counter())
        func index(_ name: String, _ counter: Counter) -> IndexDefinition {
            IndexDefinition(name: name, version: "1", reduce: .count) { doc, emit in
                _ = counter.next()
                emit(.string(doc.id), nil)
            }
        }
        let db = try await makeDatabase(self) { $0.indexes = [index("current", calls.current), index("behind", calls.behind)] }
        _ = try await db.save((0..<20).map { Document(id: String(format: "d%02d", $0), body: [:]) })
        await XCTAssertEqualAsync(try await db.query("current").rows.first?.value, 20)
        await XCTAssertEqualAsync(try await db.query("behind").rows.first?.value, 20)
        await XCTAssertEqualAsync(try await db.purgedInfosLimit, 1000)
        try await db.setPurgedInfosLimit(2)
        for n in 0..<5 { try await db.purge(documentIDs: [String(format: "d%02d", n)]) }
        _ = try await db.save(Document(id: "late", body: [:]))
        await XCTAssertEqualAsync(try await db.query("current").rows.first?.value, 16, "read the five purges")
        try await db.compact()

        XCTAssertEqual(try db.readNow { try $0.scalarInt("SELECT count(*) FROM purges") }, 2, "the newest two records stay")
        await XCTAssertEqualAsync(try await db.info().purgeCount, 5, "every purge still counts")
        let sequence = await db.updateSequence
        _ = try await db.save(Document(id: "after", body: [:]))
        await XCTAssertEqualAsync(await db.updateSequence, sequence + 1, "sequences go on from the last purge")

        // Up to date with the purges: it maps the new document only.
        let before = (current: calls.current.count, behind: calls.behind.count)
        var ids = IndexQuery()
        ids.reduce = false
        let current = try await db.query("current", ids)
        XCTAssertEqual(current.rows.map(\.documentID), ["after"] + (5..<20).map { String(format: "d%02d", $0) } + ["late"])
        XCTAssertEqual(calls.current.count - before.current, 1)
        // Behind the dropped records: built again from the documents, without the purged ones.
        let behind = try await db.query("behind", ids)
        XCTAssertEqual(behind.rows.map(\.documentID), current.rows.map(\.documentID))
        XCTAssertEqual(calls.behind.count - before.behind, 17, "every live document mapped again")
        // Rebuilt once: current now.
        _ = try await db.save(Document(id: "later", body: [:]))
        await XCTAssertEqualAsync(try await db.query("behind").rows.first?.value, 18)
        XCTAssertEqual(calls.behind.count - before.behind, 18)
    }
}

final class LiveQueryTests: XCTestCase {
    private func expensiveIndex() -> IndexDefinition {
        IndexDefinition(name: "expensive", version: "1") { doc, emit in
            if doc.type == "item", let price = doc.int(forKey: "price") { emit(.integer(price), nil) }
        }
    }

    private func expensiveQuery() -> IndexQuery {
        var query = IndexQuery()
        query.startKey = 100
        return query
    }

    func testObserverSeesInsertUpdateOutOfRangeAndDeleteButNotUnrelatedWrites() async throws {
        let db = try await makeDatabase(self) { $0.indexes = [self.expensiveIndex()] }
        _ = try await db.save(Document(id: "cheap", body: ["type": "item", "price": 5]))
        var results = db.observe(index: "expensive", query: expensiveQuery()).makeAsyncIterator()

        let initial = try await results.next()
        XCTAssertEqual(initial?.rows.count, 0)

        let item = try await db.save(Document(id: "tv", body: ["type": "item", "price": 900]))
        let inserted = try await results.next()
        XCTAssertEqual(inserted?.rows.map(\.documentID), ["tv"])

        // Unrelated writes (another type, or a change outside the range) produce nothing; the next
        // result we see is the one caused by the related write after them.
        _ = try await db.save(Document(id: "note", body: ["type": "note", "text": "hello"]))
        _ = try await db.save(Document(id: "cheap2", body: ["type": "item", "price": 7]))
        var cheaper = item
        cheaper["price"] = 50
        let moved = try await db.save(cheaper)
        let outOfRange = try await results.next()
        XCTAssertEqual(outOfRange?.rows.count, 0, "the row left the range")

        var back = moved
        back["price"] = 500
        let returned = try await db.save(back)
        let again = try await results.next()
        XCTAssertEqual(again?.rows.map(\.key), [500])

        try await db.delete(returned)
        let deleted = try await results.next()
        XCTAssertEqual(deleted?.rows.count, 0)
    }

    func testHandlerObserverStopsOnRemoveWithoutLeaks() async throws {
        let db = try await makeDatabase(self) { $0.indexes = [self.expensiveIndex()] }
        let received = Locked<[[String]]>([])
        let observer = db.addQueryObserver(index: "expensive", query: expensiveQuery()) { result in
            received.withLock { $0.append((try? result.get().rows.compactMap(\.documentID)) ?? ["error"]) }
        }
        await eventually { received.withLock { $0.count } >= 1 }
        _ = try await db.save(Document(id: "a", body: ["type": "item", "price": 150]))
        await eventually { received.withLock { $0.count } >= 2 }
        XCTAssertEqual(received.withLock { $0 }, [[], ["a"]])
        XCTAssertEqual(db.notifier.subscriberCount, 1)

        await observer.remove()        // returns only once the observer task has ended
        XCTAssertEqual(db.notifier.subscriberCount, 0, "its change subscription is released")
        // Quiescence point: an observer added after remove() has seen the next write's result, so a
        // removed observer that were still running would have been called by now too.
        let witness = db.observe(index: "expensive", query: expensiveQuery())
        _ = try await db.save(Document(id: "b", body: ["type": "item", "price": 250]))
        for try await result in witness where result.rows.contains(where: { $0.documentID == "b" }) { break }
        XCTAssertEqual(received.withLock { $0.count }, 2, "no call after remove()")
    }

    func testObservationEndsWhenTheDatabaseCloses() async throws {
        let directory = try makeTemporaryDirectory(self)
        var config = DatabaseConfiguration(name: "live", directory: directory)
        config.indexes = [expensiveIndex()]
        let db = try await Database.open(config)
        var results = db.observe(index: "expensive", query: expensiveQuery()).makeAsyncIterator()
        let initial = try await results.next()
        XCTAssertNotNil(initial, "the initial result")
        await db.close()
        let after = try await results.next()
        XCTAssertNil(after, "then the end of the sequence")
    }

    func testUnknownIndexEndsTheSequenceWithAnError() async throws {
        let db = try await makeDatabase(self)
        do {
            for try await _ in db.observe(index: "missing") { XCTFail("no result expected") }
            XCTFail("expected an error")
        } catch let error as DocStoreError {
            XCTAssertEqual(error.code, .notFound)
        }
    }
}
