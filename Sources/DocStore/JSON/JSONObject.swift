/// The members of a JSON object, in the order they were written or inserted.
///
/// Order matters in DocStore: CouchDB's collation compares objects member by member in order, and a
/// document read back from a CouchDB peer keeps its member order. Equality is therefore order-sensitive:
/// `{"a":1,"b":2}` and `{"b":2,"a":1}` are different objects.
///
/// Keys compare as exact UTF-8 bytes, as in CouchDB: `"café"` written precomposed and written with a
/// combining accent are two keys (a `_revs_diff` body can name both documents). The parser rejects
/// input with two keys of the same bytes.
///
/// - Complexity: the members are one array, searched linearly up to ``indexThreshold`` members; larger
///   objects also keep a key → position table, for O(1) lookup on average. Appending is O(1);
///   removing a member is O(n).
public struct JSONObject: Sendable, Hashable {
    /// One member.
    @usableFromInline struct Member: Sendable, Hashable {
        @usableFromInline var key: String
        @usableFromInline var value: JSON

        @inlinable init(key: String, value: JSON) {
            self.key = key
            self.value = value
        }
    }

    /// Objects with more members than this keep a position table.
    @usableFromInline static let indexThreshold = 16

    /// The members in order. One allocation per object, which parsing and freeing documents feel.
    @usableFromInline private(set) var members: [Member]
    /// Key → position in ``members``, only for objects larger than ``indexThreshold``.
    @usableFromInline private(set) var positions: [ExactString: Int]?

    /// An empty object.
    public init() {
        members = []
        positions = nil
    }

    /// An object with the given members in order.
    /// - Precondition: the keys are unique.
    public init<S: Sequence>(_ members: S) where S.Element == (String, JSON) {
        self.init()
        for (key, value) in members {
            precondition(index(forKey: key) == nil, "Duplicate key \"\(key)\" in JSONObject")
            append(key, value)
        }
    }

    /// An object of members whose keys are known to be unique (the parser checks them).
    init(uniqueMembers: [Member]) {
        members = uniqueMembers
        positions = nil
        if members.count > JSONObject.indexThreshold { rebuildPositions() }
    }

    private mutating func rebuildPositions() {
        var table = [ExactString: Int](minimumCapacity: members.count)
        for (position, member) in members.enumerated() { table[ExactString(member.key)] = position }
        positions = table
    }

    @usableFromInline func index(forKey key: String) -> Int? {
        if let positions { return positions[ExactString(key)] }
        return members.firstIndex { $0.key.isIdentical(to: key) }
    }

    private mutating func append(_ key: String, _ value: JSON) {
        members.append(Member(key: key, value: value))
        if positions != nil {
            positions![ExactString(key)] = members.count - 1
        } else if members.count > JSONObject.indexThreshold {
            rebuildPositions()
        }
    }

    /// The number of members.
    public var count: Int { members.count }

    /// Whether the object has no members.
    public var isEmpty: Bool { members.isEmpty }

    /// The member keys, in order.
    public var keys: [String] { members.map(\.key) }

    /// The member values, in key order.
    public var values: [JSON] { members.map(\.value) }

    /// The value of member `key`; assigning `nil` removes the member, assigning a new key appends it.
    public subscript(key: String) -> JSON? {
        get { index(forKey: key).map { members[$0].value } }
        set {
            guard let newValue else {
                removeValue(forKey: key)
                return
            }
            if let position = index(forKey: key) {
                members[position].value = newValue
            } else {
                append(key, newValue)
            }
        }
    }

    /// Removes a member and returns its value.
    @discardableResult
    public mutating func removeValue(forKey key: String) -> JSON? {
        guard let position = index(forKey: key) else { return nil }
        let removed = members.remove(at: position)
        if positions != nil {
            if members.count > JSONObject.indexThreshold { rebuildPositions() } else { positions = nil }
        }
        return removed.value
    }

    /// Whether the object has a member named `key`.
    public func contains(key: String) -> Bool { index(forKey: key) != nil }

    /// Reserves room for `n` members.
    public mutating func reserveCapacity(_ n: Int) { members.reserveCapacity(n) }

    /// Order-sensitive: the same keys (by their bytes) with the same values in the same order.
    public static func == (lhs: JSONObject, rhs: JSONObject) -> Bool {
        lhs.members.count == rhs.members.count
            && zip(lhs.members, rhs.members).allSatisfy { $0.key.isIdentical(to: $1.key) && $0.value == $1.value }
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(members.count)
        for member in members {
            hasher.combine(ExactString(member.key))
            hasher.combine(member.value)
        }
    }
}

extension JSONObject: Sequence {
    /// Iterates the members in order as `(key, value)` pairs.
    public struct Iterator: IteratorProtocol {
        var base: IndexingIterator<[Member]>
        public mutating func next() -> (key: String, value: JSON)? {
            guard let member = base.next() else { return nil }
            return (member.key, member.value)
        }
    }

    public func makeIterator() -> Iterator { Iterator(base: members.makeIterator()) }

    public var underestimatedCount: Int { members.count }
}

extension JSONObject: ExpressibleByDictionaryLiteral {
    public typealias Key = String
    public typealias Value = JSON
    public init(dictionaryLiteral elements: (String, JSON)...) {
        self.init(elements)
    }
}

extension JSONObject: CustomStringConvertible {
    /// The compact JSON text of the object.
    public var description: String { JSON.object(self).description }
}

extension JSONObject: Codable {
    struct CodingName: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { return nil }
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingName.self)
        var object = JSONObject()
        for key in container.allKeys {
            object[key.stringValue] = try container.decode(JSON.self, forKey: key)
        }
        self = object
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingName.self)
        for member in members {
            try container.encode(member.value, forKey: CodingName(stringValue: member.key))
        }
    }
}
