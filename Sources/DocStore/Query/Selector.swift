import Foundation

/// A Mango selector, as CouchDB's `_find` and `_changes?filter=_selector` use.
///
/// Supported: implicit equality (`{"type": "invoice"}`, nested objects as sub-fields, dotted paths),
/// `$eq $ne $gt $gte $lt $lte $in $nin $exists $type $size $mod $regex $all $elemMatch $allMatch`, and the
/// combinators `$and $or $nor $not`. Comparisons use CouchDB collation.
public struct Selector: Sendable, Hashable {
    /// The selector JSON.
    public let root: JSON

    /// Validates a selector.
    /// - Throws: ``DocStoreError/Code/badRequest`` for unknown operators or malformed arguments.
    public init(_ json: JSON) throws {
        guard case .object = json else { throw DocStoreError(.badRequest, "The selector must be a JSON object") }
        try Selector.validate(json)
        root = json
    }

    private static let fieldOperators: Set<String> = ["$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$exists",
                                                      "$type", "$size", "$mod", "$regex", "$all", "$elemMatch", "$allMatch", "$not"]

    private static func validate(_ json: JSON) throws {
        guard case .object(let object) = json else { return }
        for (key, value) in object {
            switch key {
            case "$and", "$or", "$nor":
                guard let list = value.arrayValue else { throw DocStoreError(.badRequest, "\(key) takes an array of selectors") }
                for item in list { try validate(item) }
            case "$not":
                try validate(value)
            case "$in", "$nin", "$all":
                guard value.arrayValue != nil else { throw DocStoreError(.badRequest, "\(key) takes an array") }
            case "$exists":
                guard value.boolValue != nil else { throw DocStoreError(.badRequest, "$exists takes a boolean") }
            case "$size":
                guard value.intValue != nil else { throw DocStoreError(.badRequest, "$size takes an integer") }
            case "$mod":
                guard let pair = value.arrayValue, pair.count == 2, let divisor = pair[0].intValue, divisor != 0, pair[1].intValue != nil else {
                    throw DocStoreError(.badRequest, "$mod takes [divisor, remainder] with a non-zero divisor")
                }
            case "$regex":
                guard let pattern = value.stringValue, (try? NSRegularExpression(pattern: pattern)) != nil else {
                    throw DocStoreError(.badRequest, "$regex takes a valid regular expression")
                }
            case "$type":
                guard value.stringValue != nil else { throw DocStoreError(.badRequest, "$type takes a type name") }
            case "$elemMatch", "$allMatch":
                try validate(value)
            default:
                if key.hasPrefix("$"), !fieldOperators.contains(key) { throw DocStoreError(.badRequest, "Unknown operator \(key)") }
                try validate(value)
            }
        }
    }

    /// Whether `document` matches.
    public func matches(_ document: Document) -> Bool { matches(document.json()) }

    /// Whether `document` (its CouchDB JSON) matches.
    public func matches(_ document: JSON) -> Bool { Selector.match(root, value: document) }

    /// Whether `value` satisfies `condition` (an object of fields and operators).
    private static func match(_ condition: JSON, value: JSON?) -> Bool {
        guard case .object(let object) = condition else { return equal(value, condition) }
        for (key, argument) in object {
            let ok: Bool
            switch key {
            case "$and": ok = argument.arrayValue?.allSatisfy { match($0, value: value) } ?? false
            case "$or": ok = argument.arrayValue?.contains { match($0, value: value) } ?? false
            case "$nor": ok = !(argument.arrayValue?.contains { match($0, value: value) } ?? false)
            case "$not": ok = !match(argument, value: value)
            case let op where op.hasPrefix("$"): ok = apply(op, argument, to: value)
            default: ok = matchField(key, argument, in: value)
            }
            if !ok { return false }
        }
        return true
    }

    /// `field: argument` where argument is a value (equality), an operator object, or a sub-selector.
    private static func matchField(_ path: String, _ argument: JSON, in value: JSON?) -> Bool {
        let field = value.flatMap { $0.value(atPath: path) }
        if case .object(let object) = argument {
            if object.keys.contains(where: { $0.hasPrefix("$") }) { return match(argument, value: field) }
            return object.allSatisfy { matchField($0.key, $0.value, in: field) }
        }
        return equal(field, argument)
    }

    private static func equal(_ a: JSON?, _ b: JSON) -> Bool {
        guard let a else { return false }
        return JSONCollator.compare(a, b) == 0 && sameKind(a, b)
    }

    private static func sameKind(_ a: JSON, _ b: JSON) -> Bool { typeName(a) == typeName(b) }

    private static func typeName(_ value: JSON) -> String {
        switch value {
        case .null: return "null"
        case .bool: return "boolean"
        case .integer, .double, .bigInteger: return "number"
        case .string: return "string"
        case .array: return "array"
        case .object: return "object"
        }
    }

    private static func apply(_ op: String, _ argument: JSON, to value: JSON?) -> Bool {
        switch op {
        case "$eq": return equal(value, argument)
        case "$ne": return !equal(value, argument)
        case "$gt", "$gte", "$lt", "$lte":
            guard let value, sameKind(value, argument) else { return false }
            let order = JSONCollator.compare(value, argument)
            switch op {
            case "$gt": return order > 0
            case "$gte": return order >= 0
            case "$lt": return order < 0
            default: return order <= 0
            }
        case "$in": return argument.arrayValue?.contains { equal(value, $0) } ?? false
        case "$nin": return value != nil && !(argument.arrayValue?.contains { equal(value, $0) } ?? false)
        case "$exists": return (value != nil) == (argument.boolValue ?? true)
        case "$type": return value.map(typeName) == argument.stringValue
        case "$size": return value?.arrayValue?.count == argument.intValue
        case "$mod":
            guard let number = value?.intValue, let pair = argument.arrayValue, let divisor = pair[0].intValue,
                let remainder = pair[1].intValue, divisor != 0 else { return false }
            return number % divisor == remainder
        case "$regex":
            guard let text = value?.stringValue, let pattern = argument.stringValue,
                let regex = try? NSRegularExpression(pattern: pattern) else { return false }
            return regex.firstMatch(in: text, range: NSRange(text.startIndex..., in: text)) != nil
        case "$all":
            guard let elements = value?.arrayValue, let wanted = argument.arrayValue else { return false }
            return wanted.allSatisfy { item in elements.contains { equal($0, item) } }
        case "$elemMatch":
            guard let elements = value?.arrayValue else { return false }
            return elements.contains { match(argument, value: $0) }
        case "$allMatch":
            guard let elements = value?.arrayValue, !elements.isEmpty else { return false }
            return elements.allSatisfy { match(argument, value: $0) }
        case "$not":
            return !match(argument, value: value)
        default:
            return false
        }
    }
}
