import Foundation

/// A JSON value, as stored in documents, emitted by indexes and exchanged with CouchDB peers.
///
/// Numbers keep the form they were written in: integers that fit in 64 bits are ``integer(_:)``,
/// larger integers keep their exact decimal text in ``bigInteger(_:)``, and anything with a fraction
/// or an exponent is a ``double(_:)``, so `1.0` stays `1.0` through a round trip, as in CouchDB.
/// Objects keep their member order (see ``JSONObject``).
///
/// ```swift
/// let value: JSON = ["name": "Ada", "tags": ["math", "engines"], "born": 1815]
/// print(value["tags"]?[0]?.stringValue ?? "")   // math
/// let parsed = try JSON(parsing: #"{"a":[1,2.5,null]}"#)
/// print(parsed.serializedString())              // {"a":[1,2.5,null]}
/// ```
public enum JSON: Sendable, Hashable {
    /// `null`.
    case null
    /// `true` or `false`.
    case bool(Bool)
    /// An integer that fits in 64 bits.
    case integer(Int)
    /// An integer beyond 64 bits, kept exactly as its canonical decimal text (e.g. `"-18446744073709551621"`).
    case bigInteger(String)
    /// A finite floating-point number.
    case double(Double)
    /// A string.
    case string(String)
    /// An array.
    case array([JSON])
    /// An object whose members keep their order.
    case object(JSONObject)
}

// MARK: - Parsing and serializing

extension JSON {
    /// Parses JSON text given as UTF-8 bytes.
    ///
    /// An object that gives a key more than once keeps its last member, where that stands
    /// (`{"a":1,"b":2,"a":3}` reads as `{"b":2,"a":3}`), as JavaScript's `JSON.parse` and CouchDB read it.
    ///
    /// - Throws: ``DocStoreError`` with code ``DocStoreError/Code/invalidJSON`` and the byte offset of the
    ///   first problem (malformed syntax, invalid UTF-8, lone surrogates, numbers that overflow a double,
    ///   nesting deeper than 512 levels).
    /// - Complexity: O(n) in the length of the input.
    public init<Bytes: Collection>(parsing bytes: Bytes) throws where Bytes.Element == UInt8 {
        try self.init(parsing: bytes, documentDepth: 0)
    }

    /// Parses JSON text.
    public init(parsing text: String) throws {
        var text = text
        self = try text.withUTF8 { try JSONParser.parse($0) }
    }

    /// Parses JSON text held in `Data`.
    public init(parsing data: Data) throws {
        self = try data.withUnsafeBytes { raw in
            try JSONParser.parse(raw.bindMemory(to: UInt8.self))
        }
    }

    /// Parses JSON text in which the objects at nesting level `documentDepth` (1 for the outermost
    /// value; 0 for none) are CouchDB documents, such as the documents of a `_bulk_get` answer or a
    /// `_bulk_docs` request: their bodies are kept as the bytes they arrived as when those are exactly
    /// what DocStore would store, so that ``Document/init(json:)`` and saving never build them into a
    /// tree. The value is equal to what ``init(parsing:)-(Bytes)`` gives, but for the order of such a
    /// document's members: its metadata (`_id`, `_rev`…) comes first.
    package init<Bytes: Collection>(parsing bytes: Bytes, documentDepth: Int) throws where Bytes.Element == UInt8 {
        if let value = try bytes.withContiguousStorageIfAvailable({ try JSONParser.parse($0, documentDepth: documentDepth) }) {
            self = value
        } else {
            let copy = Array(bytes)
            self = try copy.withUnsafeBufferPointer { try JSONParser.parse($0, documentDepth: documentDepth) }
        }
    }

    /// Serializes the value as compact JSON text in UTF-8.
    ///
    /// - Throws: ``DocStoreError`` (``DocStoreError/Code/invalidJSON``) if the value holds a NaN or an
    ///   infinite double, which JSON cannot represent.
    public func serialized() throws -> [UInt8] {
        var writer = JSONWriter()
        try writer.write(self)
        return writer.bytes
    }

    /// Serializes the value as compact JSON text.
    public func serializedString() throws -> String {
        String(decoding: try serialized(), as: UTF8.self)
    }

    /// Serializes the value as compact JSON text in `Data`.
    public func serializedData() throws -> Data {
        Data(try serialized())
    }
}

extension JSON: CustomStringConvertible, CustomDebugStringConvertible {
    /// The compact JSON text of the value (non-finite doubles print as `null`).
    public var description: String {
        var writer = JSONWriter(nonFiniteAsNull: true)
        try? writer.write(self)
        return String(decoding: writer.bytes, as: UTF8.self)
    }

    public var debugDescription: String { "JSON(\(description))" }
}

// MARK: - Literals

extension JSON: ExpressibleByNilLiteral, ExpressibleByBooleanLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByFloatLiteral, ExpressibleByStringLiteral, ExpressibleByArrayLiteral,
    ExpressibleByDictionaryLiteral
{
    public init(nilLiteral: ()) { self = .null }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(integerLiteral value: Int) { self = .integer(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(stringLiteral value: String) { self = .string(value) }
    public init(arrayLiteral elements: JSON...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSON)...) {
        self = .object(JSONObject(elements))
    }
}

// MARK: - Conversions from Swift values

extension JSON {
    /// Wraps a string.
    public init(_ value: String) { self = .string(value) }
    /// Wraps a Boolean.
    public init(_ value: Bool) { self = .bool(value) }
    /// Wraps an integer.
    public init(_ value: Int) { self = .integer(value) }
    /// Wraps a double; integral values stay doubles (`2.0` serializes as `2.0`).
    public init(_ value: Double) { self = .double(value) }
    /// Wraps an array.
    public init(_ value: [JSON]) { self = .array(value) }
    /// Wraps an object.
    public init(_ value: JSONObject) { self = .object(value) }
    /// Wraps a list of strings.
    public init(_ value: [String]) { self = .array(value.map(JSON.string)) }
    /// Converts an optional value, mapping `nil` to `null`.
    public init(_ value: JSON?) { self = value ?? .null }
}

// MARK: - Accessors

extension JSON {
    /// Whether the value is `null`.
    public var isNull: Bool { if case .null = self { return true } else { return false } }

    /// The Boolean, if the value is one.
    public var boolValue: Bool? { if case .bool(let b) = self { return b } else { return nil } }

    /// The string, if the value is one.
    public var stringValue: String? { if case .string(let s) = self { return s } else { return nil } }

    /// The value as an `Int`: integers, and doubles with no fractional part that fit.
    public var intValue: Int? {
        switch self {
        case .integer(let i): return i
        case .double(let d): return d.rounded() == d ? Int(exactly: d) : nil
        default: return nil
        }
    }

    /// The value as a `Double`, for any number (big integers are rounded to the nearest double).
    public var doubleValue: Double? {
        switch self {
        case .integer(let i): return Double(i)
        case .double(let d): return d
        case .bigInteger(let text): return Double(text)
        default: return nil
        }
    }

    /// Whether the value is a number of any of the three kinds.
    public var isNumber: Bool {
        switch self {
        case .integer, .double, .bigInteger: return true
        default: return false
        }
    }

    /// The elements, if the value is an array.
    public var arrayValue: [JSON]? { if case .array(let a) = self { return a } else { return nil } }

    /// The members, if the value is an object.
    public var objectValue: JSONObject? { if case .object(let o) = self { return o } else { return nil } }

    /// The member named `key`, if the value is an object that has it.
    public subscript(key: String) -> JSON? {
        get { if case .object(let o) = self { return o[key] } else { return nil } }
        set {
            guard case .object(var o) = self else { return }
            self = .null  // drop the reference so `o` is uniquely referenced
            o[key] = newValue
            self = .object(o)
        }
    }

    /// The element at `index`, if the value is an array and the index is in range.
    public subscript(index: Int) -> JSON? {
        if case .array(let a) = self, a.indices.contains(index) { return a[index] }
        return nil
    }

    /// Follows a dotted path of object members, e.g. `"address.city"`.
    ///
    /// - Complexity: O(d · m) for a path of d components over objects of m members.
    public func value(atPath path: String) -> JSON? {
        var current: JSON? = self
        for component in path.split(separator: ".", omittingEmptySubsequences: false) {
            current = current?[String(component)]
        }
        return current
    }
}

// MARK: - Codable

extension JSON: Codable {
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let b = try? container.decode(Bool.self) {
            self = .bool(b)
        } else if let i = try? container.decode(Int.self) {
            self = .integer(i)
        } else if let d = try? container.decode(Double.self) {
            self = .double(d)
        } else if let s = try? container.decode(String.self) {
            self = .string(s)
        } else if let a = try? container.decode([JSON].self) {
            self = .array(a)
        } else if let o = try? container.decode(JSONObject.self) {
            self = .object(o)
        } else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "Not a JSON value")
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let b): try container.encode(b)
        case .integer(let i): try container.encode(i)
        case .bigInteger(let text): try container.encode(Decimal(string: text) ?? 0)
        case .double(let d): try container.encode(d)
        case .string(let s): try container.encode(s)
        case .array(let a): try container.encode(a)
        case .object(let o): try container.encode(o)
        }
    }
}
