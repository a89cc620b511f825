import Foundation

/// A Mango selector, as CouchDB's `_find` and `_changes?filter=_selector` use it, parsed once into a
/// normalised condition and matched with CouchDB 3.3's semantics.
///
/// ```swift
/// let adults = try MangoSelector(["type": "person", "age": ["$gte": 18]])
/// adults.matches(document)
/// ```
///
/// Operators: `$eq $ne $gt $gte $lt $lte $exists $type $in $nin $size $mod $regex $all $elemMatch
/// $allMatch $keyMapMatch $and $or $nor $not`; a bare value is `$eq`, several members are an implicit
/// `$and`, and an object that is not an operator is a sub-selector of that field (`{"a": {"b": 1}}` is
/// `{"a.b": 1}`). What CouchDB does, this does:
/// - comparisons use view collation across types (null < false < true < numbers < strings < arrays <
///   objects; strings by ICU), so `{"$gt": 5}` matches any string; `_id` compares in code-point order;
/// - a missing field matches nothing but `$exists: false`, also under `$ne`, `$nin`, `$not` and `$nor`
///   (negations are pushed down to the fields first: `$not {"a": {"$gt": 1}}` is `{"a": {"$lte": 1}}`);
/// - equality with a scalar does not look inside an array (`$in`, `$all` and `$elemMatch` do);
/// - `$mod` matches integers only, the remainder taking the dividend's sign;
/// - `$regex` finds its pattern anywhere in a string (not anchored).
///
/// Malformed selectors throw the error CouchDB answers: ``DocStoreError/Code/invalidOperator``,
/// ``DocStoreError/Code/badArgument``, ``DocStoreError/Code/invalidSelector``,
/// ``DocStoreError/Code/badField``, ``DocStoreError/Code/invalidFieldName`` or
/// ``DocStoreError/Code/unsupportedOperator`` (where CouchDB fails with a 500 — a `$mod` divisor of 0, a
/// path such as `"a..b"` — the error is a 400 of the same kind).
public struct MangoSelector: Sendable, Hashable {
    /// The selector JSON, as given.
    public let root: JSON
    /// The normalised condition (without ``textQuery``).
    let condition: Condition
    /// The queries of the `{"$text": "query"}` at the top level of the selector or in a top-level
    /// `$and`: a full-text search, which only a text index answers (``Database/find(_:)``, which
    /// parses them with ``textQuery()`` then). `matches` checks the rest of the selector.
    public let texts: [String]

    /// Parses and normalises a selector.
    /// - Throws: ``DocStoreError`` with CouchDB's error for a malformed selector, `$text` included:
    ///   ``DocStoreError/Code/badArgument`` for one that is not a string (number, boolean) or is
    ///   negated, ``DocStoreError/Code/badField`` for one applied to a field;
    ///   ``DocStoreError/Code/invalidQuery`` for a malformed full-text query.
    public init(_ json: JSON) throws {
        guard case .object = json else {
            throw DocStoreError(.invalidSelectorJSON, "Selector must be a JSON object, not: \(json)")
        }
        root = json
        var texts: [String] = []
        let rest = try Self.extractingText(json, into: &texts)
        self.texts = texts
        let parsed = rest == .object([:]) ? Condition.anything : try Condition.parse(rest, at: .root)
        if let misplaced = parsed.textOnAField {
            throw DocStoreError(.badField, "Invalid field normalization on selector: \(Condition.text(misplaced).json)")
        }
        condition = Condition.negationsPushedDown(parsed)
        // CouchDB cannot negate `$text` (its `$default` field) and says so.
        if let negated = condition.negatedText {
            throw DocStoreError(.badArgument, "Bad argument for operator $not: \(Condition.text(negated).json)")
        }
        // An operator on the whole document (`{"$gt": 5}`) names no field, as CouchDB refuses.
        if case .field(let path, _) = condition, path.components.isEmpty {
            throw DocStoreError(.invalidSelector, "One or more conditions is missing a field name.")
        }
    }

    /// `selector` without the `$text` members of its top level and of its top-level `$and`s (an
    /// `$and` left empty goes too), whose queries go to `texts`.
    private static func extractingText(_ selector: JSON, into texts: inout [String]) throws -> JSON {
        guard case .object(let object) = selector else { return selector }
        var rest = JSONObject()
        for (key, value) in object {
            switch key {
            case "$text":
                texts.append(try textArgument(value))
            case "$and":
                guard case .array(let parts) = value else {
                    rest[key] = value
                    continue
                }
                var kept: [JSON] = []
                for part in parts {
                    let remaining = try extractingText(part, into: &texts)
                    if remaining != .object([:]) || part == .object([:]) { kept.append(remaining) }
                }
                // An `$and` that held only `$text` goes; one written empty stays, as CouchDB reads it.
                if !kept.isEmpty || parts.isEmpty { rest[key] = .array(kept) }
            default:
                rest[key] = value
            }
        }
        return .object(rest)
    }

    /// A `$text` argument: a string, or a number or boolean as CouchDB also takes (its JSON).
    static func textArgument(_ argument: JSON) throws -> String {
        switch argument {
        case .string(let query): return query
        case .integer, .double, .bigInteger, .bool: return argument.description
        default: throw DocStoreError(.badArgument, "Bad argument for operator $text: \(argument)")
        }
    }

    /// Whether it has a `$text` anywhere.
    public var usesText: Bool { !texts.isEmpty || condition.containsText }

    /// The top-level `$text` queries parsed — several are one query of their conjunction — or `nil`
    /// when there is none. A query is parsed only when a text index is to answer it: where there is
    /// none, CouchDB 3.3.3 never reads it, and neither does DocStore.
    /// - Throws: ``DocStoreError/Code/invalidQuery`` naming the position of a malformed query.
    public func textQuery() throws -> TextQuery? {
        try texts.map(TextQuery.init).reduce(nil) { all, next in
            all.map { TextQuery(text: $0.text + " " + next.text, root: .and($0.root, next.root)) } ?? next
        }
    }

    /// This selector, if it has no `$text`: a full-text search cannot filter `use` (a changes feed, a
    /// replication, a partial index), which reads documents one by one.
    /// - Throws: ``DocStoreError/Code/unsupportedOperator`` otherwise.
    public func withoutText(for use: String) throws -> MangoSelector {
        guard !usesText else {
            throw DocStoreError(.unsupportedOperator, "$text needs a text index: it cannot select \(use)")
        }
        return self
    }

    /// Whether `document` matches (all but the top-level ``texts``, which need a text index).
    public func matches(_ document: Document) -> Bool { condition.matches(document, raw: false) }

    /// Whether `document` (its CouchDB JSON, `_id` included) matches.
    public func matches(_ document: JSON) -> Bool { condition.matches(document, raw: false) }

    /// The selector after CouchDB's normalisation, as `_explain` shows it: implicit `$and`s and `$eq`s
    /// explicit, fields carried down to their operators (`{"a": {"b": 1}}` is `{"a.b": {"$eq": 1}}`),
    /// negations pushed down.
    public var normalized: JSON {
        guard !texts.isEmpty else { return condition.json }
        var parts = texts.map { Condition.text($0).json }
        if case .anything = condition {} else { parts.append(condition.json) }
        return parts.count == 1 ? parts[0] : ["$and": .array(parts)]
    }

    /// Selectors are equal when they normalise alike (`{"a": 1}` and `{"a": {"$eq": 1}}`).
    public static func == (lhs: MangoSelector, rhs: MangoSelector) -> Bool { lhs.root == rhs.root || lhs.normalized == rhs.normalized }
    public func hash(into hasher: inout Hasher) { hasher.combine(normalized) }
}

/// A selector after normalisation: fields carried down to the operators they apply to, negations
/// pushed down to the fields.
indirect enum Condition: Sendable {
    case all([Condition])
    case any([Condition])
    case not(Condition)
    /// The operator applied to the value at `path` (the value itself for an empty path).
    case field(FieldPath, Condition)
    case compare(Comparison, JSON)
    case isIn([JSON])
    case notIn([JSON])
    case exists(Bool)
    case type(String)
    case size(Int)
    case mod(divisor: Int, remainder: Int)
    case regex(Pattern)
    case containsAll([JSON])
    case elemMatch(Condition)
    case allMatch(Condition)
    case keyMapMatch(Condition)
    /// `{}`: anything.
    case anything
    /// `$text` below the top level (in `$or`, `$nor`, `$not`): as CouchDB's matcher, which believes
    /// the text index that found the document, it holds (its negation does not). ``Database/find(_:)``
    /// answers such a selector only where there is no text index, as CouchDB 3.3.3 does.
    case text(String)

    enum Comparison: String, Sendable {
        case eq = "$eq", ne = "$ne", lt = "$lt", lte = "$lte", gt = "$gt", gte = "$gte"

        var negated: Comparison {
            switch self {
            case .eq: .ne
            case .ne: .eq
            case .lt: .gte
            case .lte: .gt
            case .gt: .lte
            case .gte: .lt
            }
        }

        func holds(_ order: Int) -> Bool {
            switch self {
            case .eq: order == 0
            case .ne: order != 0
            case .lt: order < 0
            case .lte: order <= 0
            case .gt: order > 0
            case .gte: order >= 0
            }
        }
    }

    /// A compiled `$regex`.
    struct Pattern: @unchecked Sendable {
        // NSRegularExpression is immutable once made and documented as safe to use from several
        // threads at once; it is only ever read here.
        let source: String
        let expression: NSRegularExpression
    }

    // MARK: Parsing

    private static let unsupported: Set<String> = ["$where", "$geoWithin", "$geoIntersects", "$near", "$nearSphere"]

    /// Parses the selector object `json`, whose fields are under `path`.
    static func parse(_ json: JSON, at path: FieldPath) throws -> Condition {
        guard case .object(let object) = json else {
            // A bare value is equality.
            return .field(path, .compare(.eq, json))
        }
        // `{}` below a field is a value to equal, as in CouchDB (only the whole selector `{}` matches
        // anything, see `MangoSelector.init`).
        if object.isEmpty { return .field(path, .compare(.eq, json)) }
        var parts: [Condition] = []
        for (key, argument) in object {
            parts.append(try parseMember(key, argument, at: path))
        }
        return parts.count == 1 ? parts[0] : .all(parts)
    }

    private static func parseMember(_ key: String, _ argument: JSON, at path: FieldPath) throws -> Condition {
        guard key.hasPrefix("$") else {
            guard !key.isEmpty else {
                throw DocStoreError(.invalidSelector, "One or more conditions is missing a field name.")
            }
            return try parse(argument, at: path.appending(FieldPath(key)))
        }
        func bad() -> DocStoreError { DocStoreError(.badArgument, "Bad argument for operator \(key): \(argument)") }
        func subSelectors() throws -> [Condition] {
            guard case .array(let list) = argument else { throw bad() }
            return try list.map { try parse($0, at: path) }
        }
        func onField(_ condition: Condition) -> Condition { .field(path, condition) }
        switch key {
        case "$and": return .all(try subSelectors())
        case "$or": return .any(try subSelectors())
        case "$nor": return .not(.any(try subSelectors()))
        case "$not":
            guard case .object = argument else { throw bad() }
            return .not(try parse(argument, at: path))
        case "$eq", "$ne", "$lt", "$lte", "$gt", "$gte":
            return onField(.compare(Comparison(rawValue: key)!, argument))
        case "$in", "$nin":
            guard case .array(let list) = argument else { throw bad() }
            return onField(key == "$in" ? .isIn(list) : .notIn(list))
        case "$all":
            guard case .array(let list) = argument else { throw bad() }
            return onField(.containsAll(list))
        case "$exists":
            guard case .bool(let flag) = argument else { throw bad() }
            return onField(.exists(flag))
        case "$type":
            guard case .string(let name) = argument else { throw bad() }
            return onField(.type(name))
        case "$size":
            guard case .integer(let count) = argument, count >= 0 else { throw bad() }
            return onField(.size(count))
        case "$mod":
            guard case .array(let pair) = argument, pair.count == 2, case .integer(let divisor) = pair[0],
                case .integer(let remainder) = pair[1], divisor != 0 else { throw bad() }
            return onField(.mod(divisor: divisor, remainder: remainder))
        case "$regex":
            // CouchDB takes `$regex` only with a string: any other argument is an unknown operator.
            guard case .string(let source) = argument else { throw DocStoreError(.invalidOperator, "Invalid operator: $regex") }
            guard let expression = try? NSRegularExpression(pattern: source) else { throw bad() }
            return onField(.regex(Pattern(source: source, expression: expression)))
        case "$elemMatch", "$allMatch", "$keyMapMatch":
            guard case .object = argument else { throw bad() }
            // The argument applies to each element (or key): its fields start from there.
            let inner = try parse(argument, at: .root)
            return onField(key == "$elemMatch" ? .elemMatch(inner) : key == "$allMatch" ? .allMatch(inner) : .keyMapMatch(inner))
        case "$default":
            throw DocStoreError(.badField, "Invalid field normalization on selector: {\"$default\": \(argument)}")
        case "$text":
            // As CouchDB: the argument is checked first; then `$text`, which stands for
            // `{"$default": {"$text": …}}`, must be at the root.
            // On a field it is refused (`MangoSelector.init`) once every operator has been read, as
            // CouchDB checks operators before fields.
            let query = try MangoSelector.textArgument(argument)
            return path.components.isEmpty ? .text(query) : onField(.text(query))
        case let name where unsupported.contains(name):
            throw DocStoreError(.unsupportedOperator, "Unsupported operator: \(name)")
        default:
            throw DocStoreError(.invalidOperator, "Invalid operator: \(key)")
        }
    }

    // MARK: Normalising

    /// The condition with every `$not` moved down to the fields (De Morgan for `$and`/`$or`, the
    /// opposite comparison, `$in` ↔ `$nin`, `$exists` flipped), as CouchDB does before matching; only
    /// operators without an opposite keep a `$not`, below their field.
    static func negationsPushedDown(_ condition: Condition) -> Condition {
        switch condition {
        case .not(let inner): return negated(inner)
        case .all(let parts): return .all(parts.map(negationsPushedDown))
        case .any(let parts): return .any(parts.map(negationsPushedDown))
        case .field(let path, let inner): return .field(path, negationsPushedDown(inner))
        case .elemMatch(let inner): return .elemMatch(negationsPushedDown(inner))
        case .allMatch(let inner): return .allMatch(negationsPushedDown(inner))
        case .keyMapMatch(let inner): return .keyMapMatch(negationsPushedDown(inner))
        default: return condition
        }
    }

    private static func negated(_ condition: Condition) -> Condition {
        switch condition {
        case .not(let inner): return negationsPushedDown(inner)
        case .all(let parts): return .any(parts.map(negated))
        case .any(let parts): return .all(parts.map(negated))
        case .field(let path, let inner): return .field(path, negated(inner))
        case .compare(let comparison, let value): return .compare(comparison.negated, value)
        case .isIn(let list): return .notIn(list)
        case .notIn(let list): return .isIn(list)
        case .exists(let flag): return .exists(!flag)
        default: return .not(negationsPushedDown(condition))
        }
    }

    // MARK: As JSON

    /// CouchDB's normalised form of this condition.
    var json: JSON {
        switch self {
        case .anything: return .object([:])
        case .all(let parts): return ["$and": .array(parts.map(\.json))]
        case .any(let parts): return ["$or": .array(parts.map(\.json))]
        case .not(let inner): return ["$not": inner.json]
        case .field(let path, let inner): return .object([path.description: inner.json])
        case .compare(let comparison, let value): return .object([comparison.rawValue: value])
        case .isIn(let list): return ["$in": .array(list)]
        case .notIn(let list): return ["$nin": .array(list)]
        case .exists(let flag): return ["$exists": .bool(flag)]
        case .type(let name): return ["$type": .string(name)]
        case .size(let count): return ["$size": .integer(count)]
        case .mod(let divisor, let remainder): return ["$mod": [.integer(divisor), .integer(remainder)]]
        case .regex(let pattern): return ["$regex": .string(pattern.source)]
        case .containsAll(let list): return ["$all": .array(list)]
        case .elemMatch(let inner): return ["$elemMatch": inner.json]
        case .allMatch(let inner): return ["$allMatch": inner.json]
        case .keyMapMatch(let inner): return ["$keyMapMatch": inner.json]
        case .text(let query): return ["$default": ["$text": .string(query)]]
        }
    }

    /// The first value `pick` gives for this condition or one inside it, depth first, parts in order.
    func first<T>(_ pick: (Condition) -> T?) -> T? {
        if let found = pick(self) { return found }
        switch self {
        case .all(let parts), .any(let parts):
            for part in parts {
                if let found = part.first(pick) { return found }
            }
            return nil
        case .not(let inner), .field(_, let inner), .elemMatch(let inner), .allMatch(let inner), .keyMapMatch(let inner):
            return inner.first(pick)
        default:
            return nil
        }
    }

    /// The query of a `$text` applied to a field, if any.
    var textOnAField: String? {
        first { condition in
            guard case .field(let path, .text(let query)) = condition, !path.components.isEmpty else { return nil }
            return query
        }
    }

    /// The query of a `$text` under a negation (`$not`, `$nor`), if any.
    var negatedText: String? {
        first { condition in
            guard case .not(.text(let query)) = condition else { return nil }
            return query
        }
    }

    /// Whether a `$text` is in it (``text(_:)``).
    var containsText: Bool {
        first { condition in
            guard case .text = condition else { return nil }
            return true
        } ?? false
    }

    // MARK: Matching

    /// Whether `source` (a JSON value, or a document read without building its JSON) satisfies this
    /// condition; `raw` compares strings by code point (under `_id`).
    func matches(_ source: some FieldSource, raw: Bool) -> Bool {
        switch self {
        case .anything, .text:
            return true
        case .all(let parts):
            return parts.allSatisfy { $0.matches(source, raw: raw) }
        case .any(let parts):
            // An empty `$or` holds, as in CouchDB's matcher.
            return parts.isEmpty || parts.contains { $0.matches(source, raw: raw) }
        case .not(let inner):
            return !inner.matches(source, raw: raw)
        case .field(let path, let inner):
            switch source.lookup(path) {
            case .found(let found): return inner.matches(found, raw: raw || path.components == ["_id"])
            case .missing:
                if case .exists(false) = inner { return true }
                return false
            case .badPath: return false
            }
        default:
            return holds(on: source.wholeValue, raw: raw)
        }
    }

    /// Whether this operator holds on `value`.
    private func holds(on value: JSON, raw: Bool) -> Bool {
        switch self {
        case .compare(let comparison, let argument):
            return comparison.holds(Condition.compare(value, argument, raw: raw))
        case .isIn(let list):
            if case .array(let elements) = value {
                return list.contains { argument in elements.contains { Condition.compare($0, argument, raw: raw) == 0 } }
            }
            return list.contains { Condition.compare(value, $0, raw: raw) == 0 }
        case .notIn(let list):
            if case .array = value { return !Condition.isIn(list).matches(value, raw: raw) }
            return list.allSatisfy { Condition.compare(value, $0, raw: raw) != 0 }
        case .exists(let flag):
            return flag
        case .type(let name):
            return Condition.typeName(value) == name
        case .size(let count):
            guard case .array(let elements) = value else { return false }
            return elements.count == count
        case .mod(let divisor, let remainder):
            guard case .integer(let number) = value else { return false }
            // Truncated division, as Erlang's `rem`: the remainder has the dividend's sign.
            return number.remainderReportingOverflow(dividingBy: divisor).partialValue == remainder
        case .regex(let pattern):
            guard case .string(let text) = value else { return false }
            return pattern.expression.firstMatch(in: text, range: NSRange(text.startIndex..., in: text)) != nil
        case .containsAll(let list):
            guard case .array(let elements) = value, !list.isEmpty else { return false }
            // Exact equality, as CouchDB's `lists:member` (1 and 1.0 differ); `[[…]]` also matches the
            // array that is that one list.
            if list.allSatisfy(elements.contains) { return true }
            if list.count == 1, case .array(let only) = list[0] { return only == elements }
            return false
        case .elemMatch(let inner):
            guard case .array(let elements) = value else { return false }
            return elements.contains { inner.matches($0, raw: false) }
        case .allMatch(let inner):
            guard case .array(let elements) = value, !elements.isEmpty else { return false }
            return elements.allSatisfy { inner.matches($0, raw: false) }
        case .keyMapMatch(let inner):
            guard case .object(let object) = value else { return false }
            return object.keys.contains { inner.matches(JSON.string($0), raw: false) }
        case .anything, .all, .any, .not, .field, .text:
            return matches(value, raw: raw)   // combinators: see matches(_:raw:)
        }
    }

    /// CouchDB's view collation, or code-point order for strings when `raw`.
    static func compare(_ a: JSON, _ b: JSON, raw: Bool) -> Int {
        JSONCollator.compare(a, b, collation: raw ? .raw : .unicode)
    }

    /// The `$type` name of a value.
    static func typeName(_ value: JSON) -> String {
        switch value {
        case .null: "null"
        case .bool: "boolean"
        case .integer, .double, .bigInteger: "number"
        case .string: "string"
        case .array: "array"
        case .object: "object"
        }
    }
}

/// What a condition is matched against: a JSON value, or a document whose fields are read from it
/// without building its JSON.
protocol FieldSource {
    /// What `path` finds.
    func lookup(_ path: FieldPath) -> FieldPath.Lookup
    /// The whole value, for an operator applied to it directly.
    var wholeValue: JSON { get }
}

extension JSON: FieldSource {
    func lookup(_ path: FieldPath) -> FieldPath.Lookup { path.lookup(in: self) }
    var wholeValue: JSON { self }
}

extension Document: FieldSource {
    func lookup(_ path: FieldPath) -> FieldPath.Lookup { path.lookup(in: self) }
    var wholeValue: JSON { json() }
}
