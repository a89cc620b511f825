/// A revision id of the form `N-hash`, where `N` is the generation (1 for a new document, one more
/// for each edit) and `hash` identifies the content.
///
/// Ordering follows CouchDB: by generation, then by the hash compared as bytes.
public struct RevisionID: Sendable, Hashable, Comparable, LosslessStringConvertible, Codable {
    /// The generation, 1 or more.
    public let generation: Int
    /// The part after the dash; DocStore writes 32 lowercase hex digits, peers may write anything.
    public let digest: String

    /// Creates a revision id from its parts.
    /// - Precondition: `generation >= 1` and `digest` is non-empty.
    public init(generation: Int, digest: String) {
        precondition(generation >= 1 && !digest.isEmpty, "invalid revision id")
        self.generation = generation
        self.digest = digest
    }

    /// Parses `"N-hash"`; returns `nil` unless N is a positive decimal integer and the hash is non-empty
    /// printable ASCII without spaces.
    public init?(_ description: String) {
        let utf8 = description.utf8
        guard let dash = utf8.firstIndex(of: UInt8(ascii: "-")), dash != utf8.startIndex else { return nil }
        var generation = 0
        for byte in utf8[..<dash] {
            guard byte >= 48 && byte <= 57, generation < 100_000_000 else { return nil }
            generation = generation * 10 + Int(byte - 48)
        }
        let digestBytes = utf8[utf8.index(after: dash)...]
        guard generation >= 1, !digestBytes.isEmpty, digestBytes.count <= 256,
            digestBytes.allSatisfy({ $0 > 0x20 && $0 < 0x7F })
        else { return nil }
        self.generation = generation
        self.digest = String(decoding: digestBytes, as: UTF8.self)
    }

    /// Parses a revision id, throwing ``DocStoreError/Code/invalidRevision`` if it is malformed.
    public static func parse(_ text: String) throws -> RevisionID {
        guard let revision = RevisionID(text) else {
            throw DocStoreError(.invalidRevision, "Invalid rev format: \"\(text)\"")
        }
        return revision
    }

    /// `"N-hash"`.
    public var description: String { "\(generation)-\(digest)" }

    public static func < (lhs: RevisionID, rhs: RevisionID) -> Bool {
        if lhs.generation != rhs.generation { return lhs.generation < rhs.generation }
        return lhs.digest.utf8.lexicographicallyPrecedes(rhs.digest.utf8)
    }

    public static func == (lhs: RevisionID, rhs: RevisionID) -> Bool {
        lhs.generation == rhs.generation && lhs.digest.utf8.elementsEqual(rhs.digest.utf8)
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(generation)
        hasher.combine(digest)
    }

    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        self = try RevisionID.parse(text)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }
}
