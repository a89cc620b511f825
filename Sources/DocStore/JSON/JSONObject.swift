import OrderedCollections

/// The members of a JSON object, in the order they were written or inserted.
///
/// Order matters in DocStore: CouchDB's collation compares objects member by member in order, and a
/// document read back from a CouchDB peer keeps its member order. Equality is therefore order-sensitive:
/// `{"a":1,"b":2}` and `{"b":2,"a":1}` are different objects.
///
/// - Complexity: lookup, insertion and removal by key are O(1) on average (small objects use a linear scan).
public struct JSONObject: Sendable, Hashable {
    @usableFromInline var storage: OrderedDictionary<String, JSON>

    /// An empty object.
    public init() { storage = [:] }

    /// An object with the given members in order.
    /// - Precondition: the keys are unique.
    public init<S: Sequence>(_ members: S) where S.Element == (String, JSON) {
        storage = OrderedDictionary(uniqueKeysWithValues: members)
    }

    init(storage: OrderedDictionary<String, JSON>) { self.storage = storage }

    /// The number of members.
    public var count: Int { storage.count }

    /// Whether the object has no members.
    public var isEmpty: Bool { storage.isEmpty }

    /// The member keys, in order.
    public var keys: [String] { Array(storage.keys) }

    /// The member values, in key order.
    public var values: [JSON] { Array(storage.values) }

    /// The value of member `key`; assigning `nil` removes the member, assigning a new key appends it.
    public subscript(key: String) -> JSON? {
        get { storage[key] }
        set { storage[key] = newValue }
    }

    /// Removes a member and returns its value.
    @discardableResult
    public mutating func removeValue(forKey key: String) -> JSON? {
        storage.removeValue(forKey: key)
    }

    /// Whether the object has a member named `key`.
    public func contains(key: String) -> Bool { storage.index(forKey: key) != nil }

    /// Reserves room for `n` members.
    public mutating func reserveCapacity(_ n: Int) { storage.reserveCapacity(n) }
}

extension JSONObject: Sequence {
    /// Iterates the members in order as `(key, value)` pairs.
    public struct Iterator: IteratorProtocol {
        var base: OrderedDictionary<String, JSON>.Iterator
        public mutating func next() -> (key: String, value: JSON)? { base.next() }
    }

    public func makeIterator() -> Iterator { Iterator(base: storage.makeIterator()) }
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
        for (key, value) in storage {
            try container.encode(value, forKey: CodingName(stringValue: key))
        }
    }
}
