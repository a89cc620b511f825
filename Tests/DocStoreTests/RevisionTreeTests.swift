@testable import DocStore
import XCTest

private func rev(_ text: String) -> RevisionID { RevisionID(text)! }

/// `["3-c", "2-b", "1-a"]` → a history newest first.
private func history(_ texts: String...) -> [RevisionID] { texts.map(rev) }

final class RevisionTreeTests: XCTestCase {
    private func tree(_ histories: ([RevisionID], Bool)...) throws -> RevisionTree {
        var tree = RevisionTree()
        for (path, deleted) in histories { try tree.merge(history: path, isDeleted: deleted) }
        tree.checkInvariants()
        return tree
    }

    /// The order of CouchDB 3.3.3's `_bulk_get` answers (`couch_key_tree`), read off one: roots from the
    /// greatest (generation, then hash bytes) down, each root's leaves depth first, children ascending.
    func testLeavesInCouchDBsWalkOrder() throws {
        let t = try tree((history("1-zzz"), false), (history("3-aaa", "2-b", "1-a"), false), (history("2-mmm", "1-a"), false),
                         (history("2-c", "1-a"), true), (history("1-8b2bc181373a348640d43d7830d6abbc"), false), (history("1-b"), false),
                         (history("4-d", "3-s"), false))
        XCTAssertEqual(t.leavesInWalkOrder, history("4-d", "1-8b2bc181373a348640d43d7830d6abbc", "1-zzz", "1-b", "3-aaa", "2-c", "2-mmm"))
        XCTAssertEqual(RevisionTree().leavesInWalkOrder, [])
    }

    func testLinearHistory() throws {
        var t = RevisionTree()
        t.addRevision(rev("1-a"), parent: nil, isDeleted: false)
        t.addRevision(rev("2-b"), parent: rev("1-a"), isDeleted: false)
        t.addRevision(rev("3-c"), parent: rev("2-b"), isDeleted: false)
        XCTAssertEqual(t.winner?.revision, rev("3-c"))
        XCTAssertEqual(t.leaves.map(\.revision), [rev("3-c")])
        XCTAssertEqual(t.history(of: rev("3-c")), history("3-c", "2-b", "1-a"))
        XCTAssertTrue(t.isLeaf(rev("3-c")))
        XCTAssertFalse(t.isLeaf(rev("2-b")))
        XCTAssertEqual(t.conflicts, [])
    }

    /// CouchDB's conflict example: both sides edit 1-a, then one side edits again.
    func testReplicatedBranchesPickCouchDBWinner() throws {
        let t = try tree((history("2-b", "1-a"), false), (history("3-d", "2-c", "1-a"), false))
        XCTAssertEqual(t.count, 4)
        XCTAssertEqual(Set(t.leaves.map(\.revision)), [rev("2-b"), rev("3-d")])
        XCTAssertEqual(t.winner?.revision, rev("3-d"))         // higher generation wins
        XCTAssertEqual(t.conflicts, [rev("2-b")])
        XCTAssertEqual(t.history(of: rev("3-d")), history("3-d", "2-c", "1-a"))
    }

    func testSameGenerationTieBreaksOnGreaterHash() throws {
        let t = try tree((history("2-7051cbe5c8faecd085a3fa619e6e6337", "1-a"), false),
                         (history("2-967a00dff5e02add41819138abb3284d", "1-a"), false))
        XCTAssertEqual(t.winner?.revision.digest, "967a00dff5e02add41819138abb3284d")
        XCTAssertEqual(t.conflicts.map(\.digest), ["7051cbe5c8faecd085a3fa619e6e6337"])
    }

    func testLiveLeafBeatsDeletedLeafOfHigherGeneration() throws {
        let t = try tree((history("2-b", "1-a"), false), (history("4-z", "3-y", "2-x", "1-a"), true))
        XCTAssertEqual(t.winner?.revision, rev("2-b"))
        XCTAssertEqual(t.conflicts, [])
        XCTAssertEqual(t.deletedConflicts, [rev("4-z")])
    }

    func testAllLeavesDeletedPicksHighestTombstone() throws {
        let t = try tree((history("3-c", "2-b", "1-a"), true), (history("2-x", "1-a"), true))
        XCTAssertEqual(t.winner?.revision, rev("3-c"))
        XCTAssertEqual(t.winner?.isDeleted, true)
        XCTAssertEqual(t.deletedConflicts, [rev("2-x")])
    }

    func testMergeOfKnownRevisionChangesNothing() throws {
        var t = try tree((history("3-c", "2-b", "1-a"), false))
        XCTAssertFalse(try t.merge(history: history("2-b", "1-a"), isDeleted: false))
        XCTAssertFalse(try t.merge(history: history("3-c", "2-b", "1-a"), isDeleted: false))
        XCTAssertEqual(t.count, 3)
    }

    func testMergeAttachesToNewestKnownAncestor() throws {
        var t = try tree((history("2-b", "1-a"), false))
        XCTAssertTrue(try t.merge(history: history("5-e", "4-d", "3-c", "2-b", "1-a"), isDeleted: false))
        t.checkInvariants()
        XCTAssertEqual(t.count, 5)
        XCTAssertEqual(t.leaves.map(\.revision), [rev("5-e")])
        XCTAssertEqual(t.history(of: rev("5-e")).count, 5)
    }

    func testMergeOfStemmedHistoryCreatesSeparateRoot() throws {
        var t = try tree((history("2-b", "1-a"), false))
        // The peer only kept the last two generations of its branch.
        XCTAssertTrue(try t.merge(history: history("6-f", "5-e"), isDeleted: false))
        t.checkInvariants()
        XCTAssertNil(t.nodes[t.index(of: rev("5-e"))!].parent)
        XCTAssertEqual(t.winner?.revision, rev("6-f"))
        XCTAssertEqual(t.conflicts, [rev("2-b")])
    }

    func testMergeRejectsInconsistentHistory() throws {
        var t = RevisionTree()
        XCTAssertThrowsError(try t.merge(history: history("3-c", "1-a"), isDeleted: false))
        XCTAssertThrowsError(try t.merge(history: [], isDeleted: false))
        XCTAssertTrue(t.isEmpty)
    }

    /// The tree's answers must not depend on the order in which peers' histories arrive.
    func testOutcomeIsIndependentOfArrivalOrder() throws {
        let histories: [([RevisionID], Bool)] = [
            (history("3-c", "2-b", "1-a"), false),
            (history("3-k", "2-j", "1-a"), true),
            (history("2-z", "1-a"), false),
            (history("4-q", "3-p", "2-b", "1-a"), false),
        ]
        var reference: (RevisionID?, Set<RevisionID>, [RevisionID])? = nil
        for order in permutations(Array(histories.indices)) {
            var t = RevisionTree()
            for index in order { try t.merge(history: histories[index].0, isDeleted: histories[index].1) }
            t.checkInvariants()
            let outcome = (t.winner?.revision, Set(t.leaves.map(\.revision)), t.conflicts)
            if let reference {
                XCTAssertEqual(outcome.0, reference.0)
                XCTAssertEqual(outcome.1, reference.1)
                XCTAssertEqual(outcome.2, reference.2)
            } else {
                reference = outcome
            }
        }
        XCTAssertEqual(reference?.0, rev("4-q"))
        XCTAssertEqual(reference?.1, [rev("3-c"), rev("3-k"), rev("2-z"), rev("4-q")])
        XCTAssertEqual(reference?.2, [rev("3-c"), rev("2-z")])
    }

    func testStemmingKeepsLastGenerationsOfEveryBranch() throws {
        var t = RevisionTree()
        var parent: RevisionID? = nil
        for generation in 1...10 {
            let r = RevisionID(generation: generation, digest: "m\(generation)")
            t.addRevision(r, parent: parent, isDeleted: false)
            parent = r
        }
        // A branch off generation 4.
        t.addRevision(rev("5-b5"), parent: rev("4-m4"), isDeleted: false)
        let removed = t.stem(limit: 3)
        t.checkInvariants()
        // Each leaf keeps its own last 3 generations: 10, 9, 8 on the main line; 5-b5, 4, 3 on the branch.
        XCTAssertEqual(Set(removed), [rev("1-m1"), rev("2-m2"), rev("5-m5"), rev("6-m6"), rev("7-m7")])
        XCTAssertEqual(Set(t.nodes.map(\.revision)),
                       [rev("3-m3"), rev("4-m4"), rev("5-b5"), rev("8-m8"), rev("9-m9"), rev("10-m10")])
        XCTAssertEqual(t.history(of: rev("5-b5")), history("5-b5", "4-m4", "3-m3"))
        XCTAssertEqual(t.history(of: rev("10-m10")), history("10-m10", "9-m9", "8-m8"))
        XCTAssertEqual(t.winner?.revision, rev("10-m10"))
        XCTAssertEqual(t.conflicts, [rev("5-b5")])
        XCTAssertEqual(t.stem(limit: 3), [])
    }

    func testStemmingKeepsSharedAncestorWithinLimitOfAnyLeaf() throws {
        var t = try tree((history("4-d", "3-c", "2-b", "1-a"), false), (history("3-x", "2-b", "1-a"), false))
        t.stem(limit: 2)
        t.checkInvariants()
        // 2-b is within 2 of leaf 3-x, so it stays; 1-a goes.
        XCTAssertEqual(Set(t.nodes.map(\.revision)), [rev("2-b"), rev("3-c"), rev("4-d"), rev("3-x")])
    }

    func testEncodingRoundTrips() throws {
        let t = try tree((history("3-c", "2-b", "1-a"), false), (history("3-k", "2-j", "1-a"), true),
                         (history("9-stemmed", "8-root"), false))
        let bytes = t.encoded()
        let decoded = try bytes.withUnsafeBytes { try RevisionTree(decoding: $0) }
        XCTAssertEqual(decoded, t)
        XCTAssertEqual(decoded.winner, t.winner)
        for cut in [0, 1, 2, bytes.count / 2, bytes.count - 1] {
            let truncated = Array(bytes.prefix(cut))
            XCTAssertThrowsError(try truncated.withUnsafeBytes { try RevisionTree(decoding: $0) }, "cut at \(cut)")
        }
        var wrongFormat = bytes
        wrongFormat[0] = 99
        XCTAssertThrowsError(try wrongFormat.withUnsafeBytes { try RevisionTree(decoding: $0) })
        XCTAssertThrowsError(try wrongFormat.withUnsafeBytes { try RevisionTree.rankedLeaves(decoding: $0) })
    }

    /// The changes feed's leaves-only decoding agrees with decoding the whole tree, on every shape.
    func testLeavesDecodedWithoutTheTreeMatchTheTree() throws {
        let shapes = [
            try tree((history("1-a"), false)),
            try tree((history("3-c", "2-b", "1-a"), false)),
            try tree((history("3-c", "2-b", "1-a"), false), (history("3-k", "2-j", "1-a"), true),
                     (history("9-stemmed", "8-root"), false), (history("2-z", "1-a"), false)),
            try tree((history("2-x", "1-a"), true), (history("2-y", "1-a"), true)),
            // Two roots, each a linear history: not one history, although every node has a parent before it.
            try tree((history("2-b", "1-a"), false), (history("5-e", "4-d"), false)),
            // A branch point at the last node but one, and a deleted linear history.
            try tree((history("3-c", "2-b", "1-a"), false), (history("2-x", "1-a"), false)),
            try tree((history("4-\(String(repeating: "f", count: 32))", "3-\(String(repeating: "0", count: 32))",
                              "2-B", "1-a"), true)),
        ]
        for t in shapes {
            let bytes = t.encoded()
            let leaves = try bytes.withUnsafeBytes { try RevisionTree.rankedLeaves(decoding: $0) }
            XCTAssertEqual(leaves.map(\.revision), t.rankedLeaves.map(\.revision))
            XCTAssertEqual(leaves.map(\.isDeleted), t.rankedLeaves.map(\.isDeleted))
            XCTAssertEqual(leaves.first?.revision, t.winner?.revision)
            // The changes feed's form: the winner, then the other leaves in the same order.
            let split = try XCTUnwrap(try bytes.withUnsafeBytes { try RevisionTree.winnerAndOtherLeaves(decoding: $0) })
            XCTAssertEqual(split.winner.revision, t.winner?.revision)
            XCTAssertEqual(split.winner.isDeleted, t.winner?.isDeleted)
            XCTAssertEqual([split.winner.revision] + split.others, t.rankedLeaves.map(\.revision))
        }
        // A child whose generation is not its parent's plus one is corrupt.
        var bad = RevisionTree()
        bad.addRevision(rev("1-a"), parent: nil, isDeleted: false)
        bad.addRevision(rev("3-b"), parent: rev("1-a"), isDeleted: false)
        let badBytes = bad.encoded()
        XCTAssertThrowsError(try badBytes.withUnsafeBytes { try RevisionTree(decoding: $0) })
        XCTAssertThrowsError(try badBytes.withUnsafeBytes { try RevisionTree.rankedLeaves(decoding: $0) })
        XCTAssertThrowsError(try badBytes.withUnsafeBytes { try RevisionTree.winnerAndOtherLeaves(decoding: $0) })
    }

    private func permutations(_ items: [Int]) -> [[Int]] {
        guard items.count > 1 else { return [items] }
        return items.indices.flatMap { i -> [[Int]] in
            var rest = items
            let first = rest.remove(at: i)
            return permutations(rest).map { [first] + $0 }
        }
    }
}
