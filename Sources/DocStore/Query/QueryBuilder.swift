/// A field of the documents, for writing Mango conditions in Swift:
/// `QueryField("total") > 100 && QueryField("status") == "open"`.
///
/// Comparisons take JSON values (any literal), and the operators whose argument has one shape take
/// only that shape, so `QueryField("tags").size("two")` does not compile. A malformed path (`"a..b"`) is a
/// ``DocStoreError/Code/invalidFieldName`` when the query is built.
public struct QueryField: Sendable, Hashable, ExpressibleByStringLiteral {
    /// The dotted path, as Mango writes it: `"address.city"`, with `\.` for a dot inside a member name.
    public let path: String

    /// The field at the dotted `path`.
    public init(_ path: String) { self.path = path }
    /// The field at the dotted path a string literal gives.
    public init(stringLiteral path: String) { self.path = path }

    private func condition(_ name: String, _ argument: JSON) -> QueryCondition {
        // On `QueryField.element` the operator applies to the element itself: `{"$gt": 5}`.
        QueryCondition(json: path.isEmpty ? .object([name: argument]) : .object([path: .object([name: argument])]))
    }

    /// The field equals `value` (`$eq`).
    public static func == (field: QueryField, value: JSON) -> QueryCondition { field.condition("$eq", value) }
    /// The field exists and does not equal `value` (`$ne`).
    public static func != (field: QueryField, value: JSON) -> QueryCondition { field.condition("$ne", value) }
    /// The field collates after `value` (`$gt`).
    public static func > (field: QueryField, value: JSON) -> QueryCondition { field.condition("$gt", value) }
    /// The field collates after or equal to `value` (`$gte`).
    public static func >= (field: QueryField, value: JSON) -> QueryCondition { field.condition("$gte", value) }
    /// The field collates before `value` (`$lt`).
    public static func < (field: QueryField, value: JSON) -> QueryCondition { field.condition("$lt", value) }
    /// The field collates before or equal to `value` (`$lte`).
    public static func <= (field: QueryField, value: JSON) -> QueryCondition { field.condition("$lte", value) }

    /// The field equals one of `values` (for an array field: one of its elements does).
    public func isIn(_ values: [JSON]) -> QueryCondition { condition("$in", .array(values)) }
    /// The field exists and equals none of `values`.
    public func isNotIn(_ values: [JSON]) -> QueryCondition { condition("$nin", .array(values)) }
    /// The field exists (any value, `null` included).
    public var exists: QueryCondition { condition("$exists", true) }
    /// The field is absent.
    public var isMissing: QueryCondition { condition("$exists", false) }
    /// The field's value is of this JSON type.
    public func isOfType(_ type: JSONType) -> QueryCondition { condition("$type", .string(type.rawValue)) }
    /// The field is an array of `count` elements.
    public func size(_ count: Int) -> QueryCondition { condition("$size", .integer(count)) }
    /// The field is an integer whose remainder by `divisor` is `remainder`.
    public func modulo(_ divisor: Int, is remainder: Int) -> QueryCondition { condition("$mod", [.integer(divisor), .integer(remainder)]) }
    /// The field is a string in which `pattern` (a regular expression) is found.
    public func matches(_ pattern: String) -> QueryCondition { condition("$regex", .string(pattern)) }
    /// The field is an array holding every one of `values`.
    public func containsAll(_ values: [JSON]) -> QueryCondition { condition("$all", .array(values)) }
    /// The field is an array with an element that satisfies `element` (whose fields are the element's;
    /// `QueryField.element` is the element itself).
    public func anyElement(_ element: QueryCondition) -> QueryCondition { condition("$elemMatch", element.json) }
    /// The field is a non-empty array whose every element satisfies `element`.
    public func everyElement(_ element: QueryCondition) -> QueryCondition { condition("$allMatch", element.json) }
    /// The field is an object with a member name that satisfies `key` (written on `QueryField.element`).
    public func anyKey(_ key: QueryCondition) -> QueryCondition { condition("$keyMapMatch", key.json) }

    /// The value an element-wise condition is about: the array element (or the member name) itself.
    public static let element = QueryField("")

    /// The JSON types `$type` names.
    public enum JSONType: String, Sendable {
        /// `null`.
        case null
        /// `true` or `false`.
        case boolean
        /// Any number.
        case number
        /// A string.
        case string
        /// An array.
        case array
        /// An object.
        case object
    }
}

/// A Mango condition built in Swift; combine with `&&`, `||` and `!`, and make a ``FindQuery`` of it.
public struct QueryCondition: Sendable, Hashable {
    /// The selector JSON it stands for.
    public let json: JSON

    init(json: JSON) { self.json = json }

    /// The documents of one collection: those whose `type` field is `name` (OTFCloudantStore's `collection`).
    public static func collection(_ name: String) -> QueryCondition { QueryField("type") == .string(name) }

    /// Both conditions hold (`$and`; nested `&&`s make one `$and`).
    public static func && (lhs: QueryCondition, rhs: QueryCondition) -> QueryCondition {
        QueryCondition(json: ["$and": .array(lhs.operands("$and") + rhs.operands("$and"))])
    }

    /// Either condition holds (`$or`; nested `||`s make one `$or`).
    public static func || (lhs: QueryCondition, rhs: QueryCondition) -> QueryCondition {
        QueryCondition(json: ["$or": .array(lhs.operands("$or") + rhs.operands("$or"))])
    }

    /// The condition does not hold (`$not`).
    public static prefix func ! (condition: QueryCondition) -> QueryCondition {
        QueryCondition(json: ["$not": condition.json])
    }

    /// The conditions `a op b op c` joins: a chain of one operator stays one flat list.
    private func operands(_ combinator: String) -> [JSON] {
        if case .object(let object) = json, object.count == 1, case .array(let list)? = object[combinator] { return list }
        return [json]
    }

    /// The ``MangoSelector`` it stands for.
    /// - Throws: the selector errors, e.g. ``DocStoreError/Code/invalidFieldName`` for a malformed path.
    public func selector() throws -> MangoSelector { try MangoSelector(json) }
}

extension FindQuery {
    /// A query for the documents that satisfy `condition`:
    /// `try FindQuery(where: .collection("invoice") && QueryField("total") > 100).sorted(by: .descending("total"))`.
    public init(where condition: QueryCondition) throws {
        self.init(selector: try condition.selector())
    }

    /// This query, sorted (all fields ascending or all descending; an index must give the order).
    public func sorted(by fields: SortField...) -> FindQuery {
        var query = self
        query.sort = fields
        return query
    }

    /// This query, returning only `fields` of each document.
    public func selecting(_ fields: String...) -> FindQuery {
        var query = self
        query.fields = fields
        return query
    }

    /// This query, returning at most `count` documents after passing over `skip`.
    public func limited(to count: Int, skipping skip: Int = 0) -> FindQuery {
        var query = self
        query.limit = count
        query.skip = skip
        return query
    }
}
