/// The compact binary form of a revision tree kept in the `docs.tree` column.
///
/// Layout: format byte `1`, varint node count, then per node: varint generation, varint digest
/// length, digest bytes (UTF-8), varint parent index + 1 (0 for a root), flags byte (bit 0: deleted).
extension RevisionTree {
    static let encodingFormat: UInt8 = 1

    /// Encodes the tree.
    /// - Complexity: O(n).
    func encoded() -> [UInt8] {
        var bytes: [UInt8] = [RevisionTree.encodingFormat]
        bytes.reserveCapacity(1 + nodes.count * 40)
        appendVarint(UInt64(nodes.count), to: &bytes)
        for node in nodes {
            appendVarint(UInt64(node.revision.generation), to: &bytes)
            node.revision.withDigestBytes { digest in
                appendVarint(UInt64(digest.count), to: &bytes)
                bytes.append(contentsOf: digest)
            }
            appendVarint(UInt64(node.parent.map { $0 + 1 } ?? 0), to: &bytes)
            bytes.append(node.isDeleted ? 1 : 0)
        }
        return bytes
    }

    /// Decodes a tree written by ``encoded()``.
    /// - Throws: ``DocStoreError/Code/storage`` if the bytes are not a valid tree.
    /// - Complexity: O(n).
    init(decoding bytes: UnsafeRawBufferPointer) throws {
        var loaded: [Node] = []
        try RevisionTree.decodeNodes(bytes) { generation, digest, parent, isDeleted in
            loaded.append(Node(revision: RevisionID(generation: generation, digestBytes: digest), parent: parent,
                               isDeleted: isDeleted))
        }
        self.init(nodes: loaded)
    }

    /// The live and the deleted leaves other than the winner of an encoded tree (CouchDB's
    /// `_conflicts` and `_deleted_conflicts`); a history without branches (the common case) makes no
    /// revision id.
    /// - Complexity: O(n).
    static func otherLeaves(decoding bytes: UnsafeRawBufferPointer) throws -> (conflicts: [RevisionID], deletedConflicts: [RevisionID]) {
        var isLinear = true
        var count = 0
        try decodeNodes(bytes) { _, _, parent, _ in
            if count > 0 && parent != count - 1 { isLinear = false }
            count += 1
        }
        guard !isLinear else { return ([], []) }
        let tree = try RevisionTree(decoding: bytes)
        return (tree.conflicts, tree.deletedConflicts)
    }

    /// The leaves of an encoded tree in CouchDB's order (``rankedLeaves``), without building the tree:
    /// only the leaves' revision ids are made. The changes feed's per-row work.
    /// - Complexity: O(n).
    static func rankedLeaves(decoding bytes: UnsafeRawBufferPointer) throws -> [Node] {
        // One pass keeps each node's digest bytes (a view of `bytes`); ids are made for leaves only.
        var nodes: [(generation: Int, digest: UnsafeRawBufferPointer, isDeleted: Bool)] = []
        var hasChildren: [Bool] = []
        try decodeNodes(bytes) { generation, digest, parent, isDeleted in
            nodes.append((generation, digest, isDeleted))
            hasChildren.append(false)
            if let parent { hasChildren[parent] = true }
        }
        var leaves: [Node] = []
        for (node, hasChild) in zip(nodes, hasChildren) where !hasChild {
            let revision = RevisionID(generation: node.generation, digestBytes: node.digest)
            leaves.append(Node(revision: revision, parent: nil, isDeleted: node.isDeleted))
        }
        if leaves.count > 1 { leaves.sort(by: RevisionTree.ranksAbove) }
        return leaves
    }

    /// The winning leaf of an encoded tree and the other leaves in CouchDB's order, as
    /// ``rankedLeaves(decoding:)``; a history without branches (the common case) allocates nothing.
    /// Returns `nil` for an empty tree.
    /// - Complexity: O(n).
    static func winnerAndOtherLeaves(decoding bytes: UnsafeRawBufferPointer) throws -> (winner: Node, others: [RevisionID])? {
        // A linear history — each node the child of the one before — has its last node as its only leaf.
        var isLinear = true
        var count = 0
        var last: (generation: Int, digest: UnsafeRawBufferPointer, isDeleted: Bool)?
        try decodeNodes(bytes) { generation, digest, parent, isDeleted in
            if count > 0 && parent != count - 1 { isLinear = false }
            last = (generation, digest, isDeleted)
            count += 1
        }
        guard let last else { return nil }
        if isLinear {
            let revision = RevisionID(generation: last.generation, digestBytes: last.digest)
            return (Node(revision: revision, parent: nil, isDeleted: last.isDeleted), [])
        }
        let leaves = try rankedLeaves(decoding: bytes)
        return (leaves[0], leaves.dropFirst().map(\.revision))
    }

    /// Walks the encoded nodes in order, checking the structure: each parent comes before its child,
    /// whose generation is one more.
    private static func decodeNodes(_ bytes: UnsafeRawBufferPointer,
                                    _ body: (_ generation: Int, _ digest: UnsafeRawBufferPointer, _ parent: Int?,
                                             _ isDeleted: Bool) throws -> Void) throws {
        var reader = ByteReader(bytes: bytes)
        func corrupt() -> DocStoreError { DocStoreError(.storage, "Corrupt revision tree in database") }
        guard try reader.byte() == RevisionTree.encodingFormat else { throw corrupt() }
        let count = Int(try reader.varint())
        guard count <= bytes.count else { throw corrupt() }
        // Each node's generation, for its children's check: on the stack for a short history (a read
        // of the changes feed decodes one tree per row, and most trees are a node or a few).
        try withUnsafeTemporaryAllocation(of: Int.self, capacity: count) { generations in
            for i in 0..<count {
                let generation = Int(try reader.varint())
                let digestLength = Int(try reader.varint())
                let digest = try reader.bytes(length: digestLength)
                let parentPlusOne = Int(try reader.varint())
                let flags = try reader.byte()
                guard generation >= 1, parentPlusOne <= i else { throw corrupt() }
                let parent = parentPlusOne == 0 ? nil : parentPlusOne - 1
                if let parent, generations[parent] + 1 != generation { throw corrupt() }
                generations[i] = generation
                try body(generation, digest, parent, flags & 1 != 0)
            }
        }
    }

    /// A tree of nodes already in order (parents first, as ``decodeNodes(_:_:)`` checks).
    init(nodes: [Node]) {
        self.init()
        self.nodes = nodes
    }
}

@inline(__always)
func appendVarint(_ value: UInt64, to bytes: inout [UInt8]) {
    var v = value
    while v >= 0x80 {
        bytes.append(UInt8(truncatingIfNeeded: v) | 0x80)
        v >>= 7
    }
    bytes.append(UInt8(v))
}

struct ByteReader {
    let bytes: UnsafeRawBufferPointer
    var offset = 0

    mutating func byte() throws -> UInt8 {
        guard offset < bytes.count else { throw DocStoreError(.storage, "Truncated data in database") }
        defer { offset += 1 }
        return bytes[offset]
    }

    mutating func varint() throws -> UInt64 {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            let b = try byte()
            result |= UInt64(b & 0x7F) << shift
            if b & 0x80 == 0 { return result }
            shift += 7
            if shift > 63 { throw DocStoreError(.storage, "Corrupt varint in database") }
        }
    }

    mutating func bytes(length: Int) throws -> UnsafeRawBufferPointer {
        guard length >= 0, offset + length <= bytes.count else {
            throw DocStoreError(.storage, "Truncated data in database")
        }
        defer { offset += length }
        return UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + length])
    }
}
