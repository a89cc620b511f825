import Synchronization

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
/// - Complexity: the members are one array, searched linearly up to a few members; larger
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

    /// The members in memory, or a stored object's JSON bytes (with members before and after them)
    /// that are parsed only when a member is asked for: a document read from the database and written
    /// out again (an HTTP answer, a replication) is copied as bytes, never turned into a tree.
    @usableFromInline enum Storage: Sendable {
        /// The members in order, and key → position for objects larger than ``indexThreshold``.
        case members([Member], positions: [ExactString: Int]?)
        case stored(StoredMembers)
    }

    /// One allocation for the members of most objects, which parsing and freeing documents feel.
    @usableFromInline private(set) var storage: Storage

    /// An empty object.
    public init() {
        storage = .members([], positions: nil)
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

    private init(storage: Storage) {
        self.storage = storage
    }

    /// An object of members whose keys are known to be unique (the parser checks them).
    init(uniqueMembers: [Member]) {
        storage = .members(uniqueMembers, positions: uniqueMembers.count > JSONObject.indexThreshold
                           ? JSONObject.positions(of: uniqueMembers) : nil)
    }

    /// The object whose JSON text is `bytes`, as DocStore wrote it (a stored body): parsed when first
    /// read, written out as these bytes until then.
    /// - Precondition: `bytes` is a JSON object as ``JSONWriter`` writes it, keys unique.
    package init(storedJSON bytes: [UInt8]) {
        storage = .stored(StoredMembers(head: [], bytes: bytes, tail: []))
    }

    /// A document as ``JSONReader/readDocumentObject()`` reads it: its metadata members, then the
    /// members of `body`, JSON text in ``JSONWriter``'s form without `_` members.
    init(metadata: [Member], storedBody body: [UInt8]) {
        storage = .stored(StoredMembers(head: metadata, bytes: body, tail: []))
    }

    /// The members before the stored bytes and those bytes, for an object in the stored form whose
    /// members all come before them (``init(metadata:storedBody:)``, ``init(storedJSON:)``).
    var storedDocument: (metadata: [Member], body: [UInt8])? {
        if case .stored(let stored) = storage, stored.tail.isEmpty { return (stored.head, stored.bytes) }
        return nil
    }

    /// `head`'s members, then `middle`'s, then `tail`'s — keeping `middle`'s stored bytes as they are.
    /// - Precondition: the keys of the three are distinct.
    package init(head: [(String, JSON)], middle: JSONObject, tail: [(String, JSON)]) {
        let head = head.map { JSONObject.Member(key: $0.0, value: $0.1) }
        let tail = tail.map { JSONObject.Member(key: $0.0, value: $0.1) }
        if case .stored(let stored) = middle.storage, stored.head.isEmpty, stored.tail.isEmpty {
            self.init(storage: .stored(StoredMembers(head: head, bytes: stored.bytes, tail: tail, parsedBytes: stored)))
        } else {
            self.init(uniqueMembers: head + middle.members + tail)
        }
    }

    /// Whether the object is in the stored form and no member of it was read yet (for tests).
    var isUnparsedStoredForm: Bool {
        if case .stored(let stored) = storage { return !stored.isParsed }
        return false
    }

    /// The stored JSON text of an object made by ``init(storedJSON:)`` and not changed since.
    package var storedJSON: [UInt8]? {
        if case .stored(let stored) = storage, stored.head.isEmpty, stored.tail.isEmpty { return stored.bytes }
        return nil
    }

    static func positions(of members: [Member]) -> [ExactString: Int] {
        var table = [ExactString: Int](minimumCapacity: members.count)
        for (position, member) in members.enumerated() { table[ExactString(member.key)] = position }
        return table
    }

    /// The members in order (parsing stored ones).
    @usableFromInline var members: [Member] {
        switch storage {
        case .members(let members, _): return members
        case .stored(let stored): return stored.resolved.members
        }
    }

    /// Turns stored members into members in memory, for a change.
    private mutating func materialize() {
        if case .stored(let stored) = storage {
            let resolved = stored.resolved
            storage = .members(resolved.members, positions: resolved.positions)
        }
    }

    /// Runs `body` on the members in memory, without a copy of them.
    private mutating func mutateMembers<R>(_ body: (inout [Member], inout [ExactString: Int]?) -> R) -> R {
        materialize()
        guard case .members(var members, var positions) = storage else { preconditionFailure("materialized") }
        storage = .members([], positions: nil)
        defer { storage = .members(members, positions: positions) }
        return body(&members, &positions)
    }

    @usableFromInline func index(forKey key: String) -> Int? {
        switch storage {
        case .members(let members, let positions):
            return JSONObject.index(of: key, in: members, positions: positions)
        case .stored(let stored):
            let resolved = stored.resolved
            return JSONObject.index(of: key, in: resolved.members, positions: resolved.positions)
        }
    }

    private static func index(of key: String, in members: [Member], positions: [ExactString: Int]?) -> Int? {
        if let positions { return positions[ExactString(key)] }
        return members.firstIndex { $0.key.isIdentical(to: key) }
    }

    private mutating func append(_ key: String, _ value: JSON) {
        mutateMembers { members, positions in
            members.append(Member(key: key, value: value))
            if positions != nil {
                positions![ExactString(key)] = members.count - 1
            } else if members.count > JSONObject.indexThreshold {
                positions = JSONObject.positions(of: members)
            }
        }
    }

    /// The number of members.
    public var count: Int {
        switch storage {
        case .members(let members, _): return members.count
        case .stored(let stored): return stored.resolved.members.count
        }
    }

    /// Whether the object has no members.
    public var isEmpty: Bool { count == 0 }

    /// The member keys, in order.
    public var keys: [String] { members.map(\.key) }

    /// The member values, in key order.
    public var values: [JSON] { members.map(\.value) }

    /// The value of member `key`; assigning `nil` removes the member, assigning a new key appends it.
    public subscript(key: String) -> JSON? {
        get {
            switch storage {
            case .members(let members, let positions):
                return JSONObject.index(of: key, in: members, positions: positions).map { members[$0].value }
            case .stored(let stored):
                // The members around a stored object (a document's `_id`, `_rev`…) need no parse.
                if let member = stored.head.first(where: { $0.key.isIdentical(to: key) }) ?? stored.tail.first(where: { $0.key.isIdentical(to: key) }) {
                    return member.value
                }
                // One member of bytes not parsed yet: found by a scan, only its value parsed.
                if let scanned = stored.lookUpWithoutParsing(key) { return scanned }
                let resolved = stored.resolved
                return JSONObject.index(of: key, in: resolved.members, positions: resolved.positions).map { resolved.members[$0].value }
            }
        }
        set {
            guard let newValue else {
                removeValue(forKey: key)
                return
            }
            // One member of bytes not parsed yet: changed in the bytes (``StoredMembers/setting(_:to:)``).
            if case .stored(let stored) = storage, let changed = stored.setting(key, to: newValue) {
                storage = .stored(changed)
                return
            }
            if let position = index(forKey: key) {
                mutateMembers { members, _ in members[position].value = newValue }
            } else {
                append(key, newValue)
            }
        }
    }

    /// Removes a member and returns its value.
    @discardableResult
    public mutating func removeValue(forKey key: String) -> JSON? {
        guard let position = index(forKey: key) else { return nil }
        return mutateMembers { members, positions in
            let removed = members.remove(at: position)
            if positions != nil {
                positions = members.count > JSONObject.indexThreshold ? JSONObject.positions(of: members) : nil
            }
            return removed.value
        }
    }

    /// Whether the object has a member named `key`.
    public func contains(key: String) -> Bool { self[key] != nil }

    /// Reserves room for `n` members.
    public mutating func reserveCapacity(_ n: Int) { mutateMembers { members, _ in members.reserveCapacity(n) } }

    /// Order-sensitive: the same keys (by their bytes) with the same values in the same order.
    public static func == (lhs: JSONObject, rhs: JSONObject) -> Bool {
        if let left = lhs.storedJSON, let right = rhs.storedJSON, left == right { return true }
        let (left, right) = (lhs.members, rhs.members)
        return left.count == right.count
            && zip(left, right).allSatisfy { $0.key.isIdentical(to: $1.key) && $0.value == $1.value }
    }

    public func hash(into hasher: inout Hasher) {
        let members = self.members
        hasher.combine(members.count)
        for member in members {
            hasher.combine(ExactString(member.key))
            hasher.combine(member.value)
        }
    }
}

/// The members of an object stored as JSON bytes, between members in memory: parsed once, on first
/// use, by whichever thread asks first.
@usableFromInline final class StoredMembers: Sendable {
    let head: [JSONObject.Member]
    /// A JSON object as ``JSONWriter`` writes it.
    let bytes: [UInt8]
    let tail: [JSONObject.Member]
    /// The object of `bytes` alone, shared with the stored object it was spliced from.
    let middle: StoredMembers?
    /// How many member changes made `bytes` from those the object was read with (``setting(_:to:)``).
    let splices: Int
    private let parsed = Locked<(members: [JSONObject.Member], positions: [ExactString: Int]?)?>(nil)

    init(head: [JSONObject.Member], bytes: [UInt8], tail: [JSONObject.Member], parsedBytes: StoredMembers? = nil,
         splices: Int = 0) {
        self.head = head
        self.bytes = bytes
        self.tail = tail
        self.middle = parsedBytes
        self.splices = splices
    }

    /// How many members were read by ``lookUpWithoutParsing(_:)``.
    private let scannedLookups = Atomic<Int>(0)

    /// Whether the members were parsed (for tests: what reads a stored object without a tree).
    var isParsed: Bool { parsed.withLock { $0 != nil } }

    /// Member `key` of `bytes` found by ``scannedValue(forKey:)`` while the object is not parsed and
    /// has been scanned fewer than ``scannedLookupsBeforeParsing`` times (nor the object its bytes were
    /// spliced from parsed): `.some(value)` or
    /// `.some(nil)` for no such member; `nil` when the members are (to be) parsed instead.
    func lookUpWithoutParsing(_ key: String) -> JSON?? {
        guard !isParsed, middle?.isParsed != true,
            scannedLookups.wrappingAdd(1, ordering: .relaxed).oldValue < Self.scannedLookupsBeforeParsing
        else { return nil }
        return scannedValue(forKey: key)
    }

    /// Every member in order, parsing `bytes` the first time.
    var resolved: (members: [JSONObject.Member], positions: [ExactString: Int]?) {
        parsed.withLock { parsed in
            if let parsed { return parsed }
            let inner: [JSONObject.Member]
            if let middle {
                inner = middle.resolved.members
            } else if case .object(let object)? = try? bytes.withUnsafeBufferPointer({ try JSONParser.parse($0) }) {
                inner = object.members
            } else {
                // Stored bytes are DocStore's own writing; a file damaged under SQLite is the only way
                // here, and its body reads as empty rather than failing every later read.
                inner = []
            }
            let members = head.isEmpty && tail.isEmpty ? inner : head + inner + tail
            let result = (members, members.count > JSONObject.indexThreshold ? JSONObject.positions(of: members) : nil)
            parsed = result
            return result
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
