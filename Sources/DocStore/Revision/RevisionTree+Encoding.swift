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
            let digest = node.revision.digest.utf8
            appendVarint(UInt64(digest.count), to: &bytes)
            bytes.append(contentsOf: digest)
            appendVarint(UInt64(node.parent.map { $0 + 1 } ?? 0), to: &bytes)
            bytes.append(node.isDeleted ? 1 : 0)
        }
        return bytes
    }

    /// Decodes a tree written by ``encoded()``.
    /// - Throws: ``DocStoreError/Code/storage`` if the bytes are not a valid tree.
    init(decoding bytes: UnsafeRawBufferPointer) throws {
        var reader = ByteReader(bytes: bytes)
        func corrupt() -> DocStoreError { DocStoreError(.storage, "Corrupt revision tree in database") }
        guard try reader.byte() == RevisionTree.encodingFormat else { throw corrupt() }
        let count = Int(try reader.varint())
        guard count <= bytes.count else { throw corrupt() }
        self.init()
        var loaded: [Node] = []
        loaded.reserveCapacity(count)
        for i in 0..<count {
            let generation = Int(try reader.varint())
            let digestLength = Int(try reader.varint())
            let digest = try reader.string(length: digestLength)
            let parentPlusOne = Int(try reader.varint())
            let flags = try reader.byte()
            guard generation >= 1, !digest.isEmpty, parentPlusOne <= i else { throw corrupt() }
            let parent = parentPlusOne == 0 ? nil : parentPlusOne - 1
            loaded.append(Node(revision: RevisionID(generation: generation, digest: digest), parent: parent,
                               isDeleted: flags & 1 != 0))
        }
        self.init(nodes: loaded)
    }

    init(nodes: [Node]) {
        self.init()
        for node in nodes {
            let parentRevision = node.parent.map { nodes[$0].revision }
            addRevision(node.revision, parent: parentRevision, isDeleted: node.isDeleted)
        }
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

    mutating func string(length: Int) throws -> String {
        guard length >= 0, offset + length <= bytes.count else {
            throw DocStoreError(.storage, "Truncated data in database")
        }
        defer { offset += length }
        return String(decoding: UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + length]), as: UTF8.self)
    }
}
