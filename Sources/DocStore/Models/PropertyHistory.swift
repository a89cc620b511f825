import Foundation

/// How much property history a ``Model`` type keeps: every value, or the newest few, or those of a
/// recent period, per property. Stored in each document, so that every replica trims (and merges) the
/// same way.
///
/// ```swift
/// static let history: HistoryPolicy? = .keeping(last: 50, for: 90 * 86_400, properties: ["notes": .init(count: 5)])
/// ```
public struct HistoryPolicy: Sendable, Hashable {
    /// A bound on one property's values. The newest value is always kept.
    public struct Limit: Sendable, Hashable {
        /// At most this many values.
        public var count: Int?
        /// Only values at most this many seconds older than the property's newest value.
        public var age: TimeInterval?

        /// A bound by count, by age, both (a value must satisfy both), or neither.
        public init(count: Int? = nil, age: TimeInterval? = nil) {
            self.count = count
            self.age = age
        }
    }

    /// The bound of every property without one of its own.
    public var limit: Limit
    /// Bounds of particular properties.
    public var properties: [String: Limit]

    /// A policy: `limit` for every property, `properties` for those bounded otherwise.
    public init(limit: Limit = Limit(), properties: [String: Limit] = [:]) {
        self.limit = limit
        self.properties = properties
    }

    /// Every value of every property, forever.
    public static let unlimited = HistoryPolicy()

    /// At most `count` values per property, none older than `age` seconds before the newest, and
    /// bounds of their own for `properties`.
    public static func keeping(last count: Int? = nil, for age: TimeInterval? = nil,
                               properties: [String: Limit] = [:]) -> HistoryPolicy {
        HistoryPolicy(limit: Limit(count: count, age: age), properties: properties)
    }

    func limit(of property: String) -> Limit { properties[property] ?? limit }

    var json: JSON {
        var object = Self.json(limit)
        if !properties.isEmpty {
            var members = JSONObject()
            for name in properties.keys.sorted() { members[name] = .object(Self.json(properties[name]!)) }
            object["properties"] = .object(members)
        }
        return .object(object)
    }

    private static func json(_ limit: Limit) -> JSONObject {
        var object = JSONObject()
        if let count = limit.count { object["count"] = .integer(count) }
        if let age = limit.age { object["seconds"] = .double(age) }
        return object
    }

    init(json: JSON?) {
        func limit(_ value: JSON?) -> Limit {
            Limit(count: value?["count"]?.intValue, age: value?["seconds"]?.doubleValue)
        }
        var properties: [String: Limit] = [:]
        if case .object(let members)? = json?["properties"] {
            for (name, value) in members { properties[name] = limit(value) }
        }
        self.init(limit: limit(json), properties: properties)
    }
}

/// One value a property had: when it was set and by which replica (a database's ``DatabaseInfo/uuid``).
public struct PropertyValue: Sendable, Hashable {
    /// The value (`null` when the property was removed).
    public let value: JSON
    /// When it was set, in milliseconds since 1970 (UTC). A replica never gives a property a date
    /// earlier than its newest one, so an edit is newer than every value the editing replica had seen.
    public let milliseconds: Int64
    /// The database that set it.
    public let replica: String

    /// A value as a history holds it.
    public init(value: JSON, milliseconds: Int64, replica: String) {
        self.value = value
        self.milliseconds = milliseconds
        self.replica = replica
    }

    /// When it was set.
    public var date: Date { Date(timeIntervalSince1970: Double(milliseconds) / 1000) }

    /// The value decoded as `T` (dates in ISO 8601).
    public func decode<T: Decodable>(as type: T.Type, dateFormat: DateFormat = .iso8601) throws -> T {
        try Document(id: "-", body: ["value": value]).decode(as: Box<T>.self, dateFormat: dateFormat).value
    }

    private struct Box<T: Decodable>: Decodable { let value: T }

    var json: JSON {
        ["at": .string(Timestamp.format(milliseconds)), "by": .string(replica), "value": value]
    }

    init?(json: JSON) {
        guard let at = json["at"]?.stringValue, let milliseconds = Timestamp.parse(at),
            let replica = json["by"]?.stringValue
        else { return nil }
        self.init(value: json["value"] ?? .null, milliseconds: milliseconds, replica: replica)
    }

    /// Newest first; equal dates by replica, then by the value's JSON text, both descending — an
    /// order every replica computes alike.
    static func newerFirst(_ a: PropertyValue, _ b: PropertyValue) -> Bool {
        if a.milliseconds != b.milliseconds { return a.milliseconds > b.milliseconds }
        if a.replica != b.replica { return a.replica > b.replica }
        return a.valueText > b.valueText
    }

    private var valueText: String { (try? value.serializedString()) ?? "" }
}

/// Dates as text, always UTC, computed from integers so that every platform writes and reads the same
/// instant: history dates (`2026-11-24T10:00:00.125Z`, with milliseconds) and CouchDB's HTTP-style
/// timestamps (`Mon, 23 Nov 2026 21:30:38 GMT`, in replication checkpoints).
package enum Timestamp {
    static func milliseconds(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded(.down)) }

    static func format(_ milliseconds: Int64) -> String {
        var seconds = milliseconds.quotientAndRemainder(dividingBy: 1000).quotient
        var millis = Int(milliseconds % 1000)
        if millis < 0 { millis += 1000; seconds -= 1 }
        let parts = utcFields(seconds)
        return "\(pad(parts.tm_year + 1900, 4))-\(pad(parts.tm_mon + 1, 2))-\(pad(parts.tm_mday, 2))T"
            + "\(pad(parts.tm_hour, 2)):\(pad(parts.tm_min, 2)):\(pad(parts.tm_sec, 2)).\(pad(Int32(millis), 3))Z"
    }

    /// `date` as CouchDB writes times in checkpoints and `_replicate` histories:
    /// `Mon, 23 Nov 2026 21:30:38 GMT` (seconds rounded down; clamped to years 1–9999, a NaN read as 1970).
    package static func httpDate(_ date: Date) -> String {
        let interval = date.timeIntervalSince1970.isNaN ? 0 : date.timeIntervalSince1970.rounded(.down)
        let parts = utcFields(Int64(min(max(interval, -62_135_596_800), 253_402_300_799)))
        return "\(weekdayNames[Int(parts.tm_wday)]), \(pad(parts.tm_mday, 2)) \(monthNames[Int(parts.tm_mon)]) "
            + "\(pad(parts.tm_year + 1900, 4)) \(pad(parts.tm_hour, 2)):\(pad(parts.tm_min, 2)):\(pad(parts.tm_sec, 2)) GMT"
    }

    private static let weekdayNames = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
    private static let monthNames = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// The calendar fields of `seconds` since 1970 in UTC.
    private static func utcFields(_ seconds: Int64) -> tm {
        var time = time_t(seconds)
        var parts = tm()
        gmtime_r(&time, &parts)
        return parts
    }

    private static func pad(_ value: Int32, _ width: Int) -> String {
        let text = String(value)
        return String(repeating: "0", count: max(0, width - text.count)) + text
    }

    static func parse(_ text: String) -> Int64? {
        let bytes = Array(text.utf8)
        guard bytes.count == 24, bytes[4] == 0x2D, bytes[7] == 0x2D, bytes[10] == 0x54, bytes[13] == 0x3A,
            bytes[16] == 0x3A, bytes[19] == 0x2E, bytes[23] == 0x5A
        else { return nil }
        func number(_ range: Range<Int>) -> Int? {
            var value = 0
            for index in range {
                guard bytes[index] >= 0x30 && bytes[index] <= 0x39 else { return nil }
                value = value * 10 + Int(bytes[index] - 0x30)
            }
            return value
        }
        guard let year = number(0..<4), let month = number(5..<7), let day = number(8..<10), let hour = number(11..<13),
            let minute = number(14..<16), let second = number(17..<19), let millis = number(20..<23),
            (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 61
        else { return nil }
        var parts = tm()
        parts.tm_year = Int32(year - 1900)
        parts.tm_mon = Int32(month - 1)
        parts.tm_mday = Int32(day)
        parts.tm_hour = Int32(hour)
        parts.tm_min = Int32(minute)
        parts.tm_sec = Int32(second)
        return Int64(timegm(&parts)) * 1000 + Int64(millis)
    }
}

/// The property history of a document, kept in its member `~history`:
///
/// ```json
/// "~history": {"keep": {"count": 50},
///              "values": {"name": [{"at": "2026-11-24T10:00:00.125Z", "by": "<replica>", "value": "Ann"}, …]}}
/// ```
///
/// Values are newest first; the document's top-level members are the newest values (a removed
/// property, whose newest value is `null`, is absent). Because the history is an ordinary member, it
/// replicates through any CouchDB. A conflict between revisions that all carry a history is merged
/// by ``merged(_:)``, a pure function of the conflicting revisions, which the database applies itself
/// when replication stores a conflict (see ``DatabaseConfiguration/mergesPropertyHistory``).
public struct PropertyHistory: Sendable, Hashable {
    /// The member that holds the history.
    public static let member = "~history"
    static let dateFormat = DateFormat.iso8601

    /// The values of each property, newest first.
    public var values: [String: [PropertyValue]]
    /// How much is kept.
    public var policy: HistoryPolicy

    init(values: [String: [PropertyValue]] = [:], policy: HistoryPolicy) {
        self.values = values
        self.policy = policy
    }

    /// The history a document body carries, or `nil` if it has none.
    public init?(body: JSONObject) {
        guard case .object(let object)? = body[Self.member] else { return nil }
        var values: [String: [PropertyValue]] = [:]
        if case .object(let properties)? = object["values"] {
            for (name, list) in properties {
                values[name] = (list.arrayValue ?? []).compactMap(PropertyValue.init(json:)).sorted(by: PropertyValue.newerFirst)
            }
        }
        self.init(values: values, policy: HistoryPolicy(json: object["keep"]))
    }

    var json: JSON {
        var properties = JSONObject()
        for name in values.keys.sorted() { properties[name] = .array(values[name]!.map(\.json)) }
        return ["keep": policy.json, "values": .object(properties)]
    }

    /// Records the new values of a local edit: each property of `properties` whose value differs from
    /// its newest gets a value dated `now` (or one millisecond after its newest, if that is later), and
    /// each property with history that `properties` lacks gets `null`. Then trims.
    mutating func record(_ properties: JSONObject, at now: Date, replica: String) {
        var names = Set(values.keys)
        names.formUnion(properties.keys)
        for name in names {
            let value = properties[name] ?? .null
            let list = values[name] ?? []
            if let newest = list.first, newest.value == value { continue }
            if list.isEmpty && value == .null { continue }
            let milliseconds = max(Timestamp.milliseconds(now), (list.first?.milliseconds ?? .min) + 1)
            values[name] = [PropertyValue(value: value, milliseconds: milliseconds, replica: replica)] + list
        }
        trim()
    }

    /// Drops the values the policy does not keep.
    mutating func trim() {
        for (name, list) in values {
            let limit = policy.limit(of: name)
            var kept = list
            if let age = limit.age, let newest = kept.first {
                let oldest = newest.milliseconds - Int64((age * 1000).rounded())
                kept = [newest] + kept.dropFirst().filter { $0.milliseconds >= oldest }
            }
            if let count = limit.count { kept = Array(kept.prefix(max(count, 1))) }
            if kept.count != list.count { values[name] = kept }
        }
    }

    /// The top-level members the history gives: `base` (without its history) with each property set
    /// to its newest value — removed when that is `null` — and the history last.
    func body(over base: JSONObject) -> JSONObject {
        var body = base
        body.removeValue(forKey: Self.member)
        for name in values.keys.sorted() {
            guard let newest = values[name]?.first else { continue }
            if newest.value == .null { body.removeValue(forKey: name) } else { body[name] = newest.value }
        }
        body[Self.member] = json
        return body
    }

    /// The merge of conflicting revisions' bodies, given winner first: the union of their histories,
    /// each property's newest value on top, trimmed by the winner's policy, over the winner's other
    /// members. `nil` unless every body carries a history. The result depends only on the bodies.
    public static func merged(_ bodies: [JSONObject]) -> JSONObject? {
        guard let winner = bodies.first, var history = PropertyHistory(body: winner) else { return nil }
        for body in bodies.dropFirst() {
            guard let other = PropertyHistory(body: body) else { return nil }
            for (name, list) in other.values {
                var union = history.values[name] ?? []
                for value in list where !union.contains(value) { union.append(value) }
                history.values[name] = union
            }
        }
        for name in history.values.keys { history.values[name]!.sort(by: PropertyValue.newerFirst) }
        history.trim()
        return history.body(over: winner)
    }
}
