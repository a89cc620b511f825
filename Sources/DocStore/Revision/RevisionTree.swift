/// The revision history of one document: a forest of revisions, each with at most one parent.
///
/// A linear edit history is a single chain. Replication can add branches (conflicts) and, after
/// stemming (``stem(limit:)``), disconnected roots whose generation is above 1. The tree is a pure value:
/// the storage layer keeps it encoded next to the document row and rewrites it on each write.
///
/// Invariant: every node's parent comes before it in ``nodes``, and a child's generation is its
/// parent's plus one.
public struct RevisionTree: Sendable, Hashable {
    /// One revision in the tree.
    public struct Node: Sendable, Hashable {
        /// The revision id.
        public let revision: RevisionID
        /// The index in ``RevisionTree/nodes`` of the parent, or `nil` for a root.
        public internal(set) var parent: Int?
        /// Whether this revision is a deletion (tombstone).
        public let isDeleted: Bool
    }

    /// All revisions, parents before children.
    public internal(set) var nodes: [Node] = []

    /// An empty tree.
    public init() {}

    /// Whether the tree has no revisions.
    public var isEmpty: Bool { nodes.isEmpty }

    /// The number of revisions.
    public var count: Int { nodes.count }

    /// The index of `revision` in ``nodes``.
    /// - Complexity: O(n).
    public func index(of revision: RevisionID) -> Int? {
        nodes.lastIndex { $0.revision == revision }
    }

    /// Whether the tree holds `revision`.
    public func contains(_ revision: RevisionID) -> Bool { index(of: revision) != nil }

    /// For each node, whether some other node has it as parent.
    private var hasChildren: [Bool] {
        var flags = [Bool](repeating: false, count: nodes.count)
        for node in nodes { if let p = node.parent { flags[p] = true } }
        return flags
    }

    /// The leaf revisions (those with no children), in tree order.
    public var leaves: [Node] {
        // A single revision, as most documents have: no table to build.
        if nodes.count <= 1 { return nodes }
        let flags = hasChildren
        var leaves: [Node] = []
        for index in nodes.indices where !flags[index] { leaves.append(nodes[index]) }
        return leaves
    }

    /// Whether `revision` is in the tree and has no children.
    public func isLeaf(_ revision: RevisionID) -> Bool {
        guard let i = index(of: revision) else { return false }
        return !nodes.contains { $0.parent == i }
    }

    /// CouchDB's order of leaves: live before deleted, then higher generation, then greater hash.
    static func ranksAbove(_ a: Node, _ b: Node) -> Bool {
        if a.isDeleted != b.isDeleted { return !a.isDeleted }
        return b.revision < a.revision
    }

    /// The leaves in the order CouchDB 3.3 walks its revision tree (`couch_key_tree`), the order of its
    /// `_bulk_get` answers: roots from the greatest (generation, then hash) down, and under each root
    /// its leaves depth first, children in ascending order.
    /// - Complexity: O(n log n).
    public var leavesInWalkOrder: [RevisionID] {
        var children = [[Int]](repeating: [], count: nodes.count)
        var roots: [Int] = []
        for (index, node) in nodes.enumerated() {
            if let parent = node.parent { children[parent].append(index) } else { roots.append(index) }
        }
        var leaves: [RevisionID] = []
        // Depth first without recursion: the next node to visit is on top.
        var stack = roots.sorted { nodes[$0].revision < nodes[$1].revision }
        while let index = stack.popLast() {
            if children[index].isEmpty {
                leaves.append(nodes[index].revision)
            } else {
                stack += children[index].sorted { nodes[$1].revision < nodes[$0].revision }
            }
        }
        return leaves
    }

    /// The leaves ordered as CouchDB ranks them, winner first.
    public var rankedLeaves: [Node] { leaves.sorted(by: RevisionTree.ranksAbove) }

    /// The winning revision, chosen as CouchDB does: among the leaves, a live one before a deleted
    /// one, then the highest generation, then the greatest hash.
    public var winner: Node? {
        if nodes.count <= 1 { return nodes.first }
        let flags = hasChildren
        var best: Node?
        // The first of equally ranked leaves, as `max` would choose (there are none: revisions are unique).
        for index in nodes.indices where !flags[index] {
            if let current = best, !RevisionTree.ranksAbove(nodes[index], current) { continue }
            best = nodes[index]
        }
        return best
    }

    /// The live leaves other than the winner — CouchDB's `_conflicts` — best first.
    public var conflicts: [RevisionID] {
        rankedLeaves.dropFirst().filter { !$0.isDeleted }.map(\.revision)
    }

    /// The deleted leaves other than the winner — CouchDB's `_deleted_conflicts`.
    public var deletedConflicts: [RevisionID] {
        rankedLeaves.dropFirst().filter(\.isDeleted).map(\.revision)
    }

    /// The history of `revision`, newest first, back to its root (as in CouchDB's `_revisions`).
    public func history(of revision: RevisionID) -> [RevisionID] {
        guard var i = index(of: revision) else { return [] }
        var path = [nodes[i].revision]
        while let p = nodes[i].parent {
            path.append(nodes[p].revision)
            i = p
        }
        return path
    }

    /// Whether `revision` is stored as a deletion.
    public func isDeleted(_ revision: RevisionID) -> Bool {
        index(of: revision).map { nodes[$0].isDeleted } ?? false
    }

    // MARK: Editing

    /// Adds a new revision as the child of `parent` (or as a new root when `parent` is nil), as a local
    /// edit does.
    /// - Precondition: `parent`, if given, is in the tree, and `revision` is not.
    public mutating func addRevision(_ revision: RevisionID, parent: RevisionID?, isDeleted: Bool) {
        let parentIndex = parent.flatMap { index(of: $0) }
        precondition(parent == nil || parentIndex != nil, "parent revision not in tree")
        nodes.append(Node(revision: revision, parent: parentIndex, isDeleted: isDeleted))
    }

    /// Merges a revision together with its history, as replication (`new_edits=false`) does.
    ///
    /// - Parameters:
    ///   - history: the revision first, then its ancestors, newest first, with consecutive
    ///     generations (the shape of CouchDB's `_revisions`).
    ///   - isDeleted: whether the newest revision is a deletion.
    /// - Returns: `true` if the newest revision was added; `false` if the tree already had it.
    /// - Throws: ``DocStoreError/Code/invalidRevision`` if the generations are not consecutive.
    /// - Complexity: O(n · h) for a tree of n nodes and a history of h revisions.
    @discardableResult
    public mutating func merge(history: [RevisionID], isDeleted: Bool) throws -> Bool {
        guard let newest = history.first else {
            throw DocStoreError(.invalidRevision, "Empty revision history")
        }
        for (offset, revision) in history.enumerated() where revision.generation != newest.generation - offset {
            throw DocStoreError(.invalidRevision, "Revision history of \(newest) is not consecutive at \(revision)")
        }
        if contains(newest) { return false }
        // The newest ancestor we already have is where the new branch attaches.
        var attachIndex: Int? = nil
        var firstMissing = history.count - 1
        for (offset, revision) in history.enumerated().dropFirst() {
            if let i = index(of: revision) {
                attachIndex = i
                firstMissing = offset - 1
                break
            }
        }
        var parent = attachIndex
        for offset in stride(from: firstMissing, through: 0, by: -1) {
            nodes.append(Node(revision: history[offset], parent: parent, isDeleted: offset == 0 && isDeleted))
            parent = nodes.count - 1
        }
        return true
    }

    /// Removes revisions that are more than `limit` generations above every leaf below them, as
    /// CouchDB's `_revs_limit` stemming does, and returns the removed revisions.
    ///
    /// - Complexity: O(n).
    @discardableResult
    public mutating func stem(limit: Int) -> [RevisionID] {
        precondition(limit >= 1)
        guard nodes.count > limit else { return [] }
        var distance = [Int](repeating: Int.max, count: nodes.count)
        let flags = hasChildren
        for i in nodes.indices where !flags[i] { distance[i] = 0 }
        for i in nodes.indices.reversed() {
            guard distance[i] != Int.max, let p = nodes[i].parent else { continue }
            distance[p] = min(distance[p], distance[i] + 1)
        }
        return keepOnly { distance[$0] < limit }
    }

    /// Removes leaf revisions together with the part of their branch that no other leaf shares, as
    /// CouchDB's `_purge` does: an ancestor stays as long as another revision descends from it.
    /// Revisions that are not leaves are ignored. Returns the removed revisions; an empty tree means
    /// the whole document went.
    @discardableResult
    public mutating func purge(leaves: Set<RevisionID>) -> [RevisionID] {
        var children = [Int](repeating: 0, count: nodes.count)
        for node in nodes { if let p = node.parent { children[p] += 1 } }
        var removing = Set<Int>()
        for (index, node) in nodes.enumerated() where children[index] == 0 && leaves.contains(node.revision) {
            var current = index
            removing.insert(current)
            while let parent = nodes[current].parent {
                children[parent] -= 1
                guard children[parent] == 0 else { break }
                removing.insert(parent)
                current = parent
            }
        }
        guard !removing.isEmpty else { return [] }
        return keepOnly { !removing.contains($0) }
    }

    /// Removes the given revisions' nodes (used by purge); children of removed nodes become roots.
    @discardableResult
    mutating func remove(_ revisions: Set<RevisionID>) -> [RevisionID] {
        let current = nodes
        return keepOnly { !revisions.contains(current[$0].revision) }
    }

    private mutating func keepOnly(_ keep: (Int) -> Bool) -> [RevisionID] {
        var newIndex = [Int?](repeating: nil, count: nodes.count)
        var kept: [Node] = []
        var removed: [RevisionID] = []
        kept.reserveCapacity(nodes.count)
        for i in nodes.indices {
            if keep(i) {
                var node = nodes[i]
                node.parent = node.parent.flatMap { newIndex[$0] }
                newIndex[i] = kept.count
                kept.append(node)
            } else {
                removed.append(nodes[i].revision)
            }
        }
        nodes = kept
        return removed
    }

    #if DEBUG
    /// Checks the structural invariants; used by tests.
    func checkInvariants() {
        for (i, node) in nodes.enumerated() {
            if let p = node.parent {
                precondition(p < i, "parent after child")
                precondition(nodes[p].revision.generation + 1 == node.revision.generation, "generation gap")
            }
        }
        precondition(Set(nodes.map(\.revision)).count == nodes.count, "duplicate revision")
    }
    #endif
}
