/// Chooses the index that answers a Mango query, as CouchDB 3.3's planner does, and the key range to
/// read in it. Pure: the selector, the sort, the indexes and `use_index` in; the plan out.
///
/// The rules, CouchDB's:
/// - **Usable.** `_all_docs` always, unless there is a sort: then only for a sort on `_id` with `_id`
///   constrained by the selector. A json index when the selector requires every one of its fields to
///   exist (a field a sort names, `_id` and `_rev` need not be), and a sort, if any, is a prefix of its
///   fields once fields the selector fixes with `$eq` are dropped from the front. An index with a partial
///   filter only when `use_index` names it. None usable is `no_usable_index`.
/// - **`use_index`** picks among the usable ones; if it names none of them, the planner chooses as if it
///   were absent, and says so in a warning.
/// - **Best.** `_all_docs` only when no json index is usable (CouchDB tries its cursor kinds in turn,
///   view indexes first). Among json indexes, the one whose leading fields cover most of the fields the
///   selector constrains with `$eq $gt $gte $lt $lte`, then the one with fewer fields, then by design
///   document and name.
struct QueryPlanner {
    /// An index a query can read.
    enum Choice: Hashable, Sendable {
        case allDocuments
        case json(MangoIndex)

        var fields: [String] {
            switch self {
            case .allDocuments: ["_id"]
            case .json(let index): index.fields.map(\.path)
            }
        }

        /// CouchDB's tie-break order: design document, then name; `_all_docs` after every json index
        /// (as CouchDB 3.3.3 chooses, recorded in `Tests/Fixtures/mango/plans.json`).
        var order: (Int, String, String) {
            switch self {
            case .allDocuments: (1, "", "")
            case .json(let index): (0, index.designDocument, index.name)
            }
        }
    }

    /// One end of a range: below or above every value, or a value.
    enum Bound: Hashable, Sendable {
        case min, max, value(JSON)

        static func compare(_ a: Bound, _ b: Bound) -> Int {
            switch (a, b) {
            case (.min, .min), (.max, .max): 0
            case (.min, _), (_, .max): -1
            case (_, .min), (.max, _): 1
            case (.value(let x), .value(let y)): JSONCollator.compare(x, y)
            }
        }
    }

    /// The values a field may take: `low` (`$gt`, `$gte` or `$eq`) to `high` (`$lt`, `$lte` or `$eq`).
    struct Range: Hashable, Sendable {
        enum Low: Hashable, Sendable { case gt, gte, eq }
        enum High: Hashable, Sendable { case lt, lte, eq }
        var lowOperator: Low = .gt
        var low: Bound = .min
        var highOperator: High = .lt
        var high: Bound = .max
    }

    struct Plan: Sendable {
        let choice: Choice
        /// The ranges of the chosen index's leading fields, or `nil` when the selector can match nothing
        /// (a contradictory range, or `{"$and": []}`-like selectors, as CouchDB).
        let ranges: [Range]?
        /// Whether the index is read backwards (a descending sort).
        let descending: Bool
        /// A `use_index` that was not followed.
        let warning: String?

        /// Where reading starts and ends, in reading order, as CouchDB's `_explain` shows them: for a
        /// json index arrays of field values, the end closed by a `max` above every key of that
        /// prefix; for `_all_docs` a document id (`nil` start: from the first). `nil` when nothing is
        /// read.
        var keys: (start: [Bound]?, end: [Bound]?)? {
            guard let ranges else { return nil }
            var start: [Bound]?, end: [Bound]?
            switch choice {
            case .allDocuments:
                if let range = ranges.first {
                    start = [range.lowOperator == .gt && range.low == .min ? .value("") : range.low]
                    end = [range.high]
                } else {
                    start = nil
                    end = [.max]
                }
            case .json:
                var low: [Bound] = []
                for range in ranges {
                    if range.low == .min { break }
                    low.append(range.low)
                }
                var high: [Bound] = []
                for range in ranges {
                    if range.high == .max { break }
                    high.append(range.high)
                }
                start = low
                end = high + [.max]
            }
            return descending ? (end, start) : (start, end)
        }

        /// ``keys`` as CouchDB's `_explain` prints them: `"<MAX>"` for the top, `null` for no key, a
        /// document id (not an array) for `_all_docs`.
        var shownKeys: (start: JSON, end: JSON) {
            func shown(_ bounds: [Bound]?) -> JSON {
                guard let bounds else { return .null }
                let values = bounds.map { bound -> JSON in
                    switch bound {
                    case .max: "<MAX>"
                    case .min: ""
                    case .value(let value): value
                    }
                }
                return choice == .allDocuments ? (values.first ?? .null) : .array(values)
            }
            return (shown(keys?.start), shown(keys?.end))
        }
    }

    /// Plans a query.
    /// - Throws: ``DocStoreError/Code/noUsableIndex`` when no index can give the sort.
    static func plan(_ selector: MangoSelector, sort: [SortField], indexes: [MangoIndex], useIndex: [String]) throws -> Plan {
        let condition = selector.condition
        let sortFields = sort.map(\.path)
        let named = useIndex.isEmpty ? [] : filter(indexes.map(Choice.json), by: useIndex)
        let global: [Choice] = [.allDocuments] + indexes.filter { $0.partialFilter == nil }.map(Choice.json)
        var candidates: [Choice] = global
        for choice in named where !candidates.contains(choice) { candidates.append(choice) }
        // A top-level `$text` is taken as met first in CouchDB's operand walk, which stops at it. (Its
        // place among the other members is not kept, so a crash-prone operand that CouchDB would
        // meet before it is not refused here.)
        if selector.texts.isEmpty {
            try checkOperandsCouchDBCanPlan(condition, candidates: candidates, sortFields: sortFields)
        }
        // A selector with `$text` is a text search to CouchDB's view indexes
        // (`mango_idx_view:is_text_search`): none of them is usable, only `_all_docs`.
        let usable = candidates.filter { isUsable($0, condition, sortFields) && ($0 == .allDocuments || !selector.usesText) }
        guard !usable.isEmpty else {
            throw DocStoreError(.noUsableIndex, "No index exists for this sort, try indexing by the sort fields.")
        }
        let chosenAmong = useIndex.isEmpty ? usable : filter(usable, by: useIndex)
        var warning: String?
        if !useIndex.isEmpty && chosenAmong.isEmpty {
            let ddoc = useIndex[0].hasPrefix("_design/") ? String(useIndex[0].dropFirst(8)) : useIndex[0]
            warning = useIndex.count == 1
                ? "_design/\(ddoc) was not used because it does not contain a valid index for this query."
                : "_design/\(ddoc), \(useIndex[1]) was not used because it is not a valid index for this query."
        }
        let fieldRanges = ranges(of: condition)
        var finalists = chosenAmong.isEmpty ? usable : chosenAmong
        // A usable json index always beats `_all_docs`, whatever their scores.
        if finalists.contains(where: { $0 != .allDocuments }) { finalists.removeAll { $0 == .allDocuments } }
        let scored = finalists.map { choice -> (Choice, [Range?], Int) in
            let prefix = compositePrefix(choice.fields, fieldRanges)
            return (choice, prefix, fieldRanges.count - prefix.count)
        }
        let best = scored.min { a, b in
            if a.2 != b.2 { return a.2 < b.2 }
            if a.0.fields.count != b.0.fields.count { return a.0.fields.count < b.0.fields.count }
            return a.0.order <= b.0.order
        }!
        let empty = best.1.contains(nil) || isNoop(condition)
        if !empty, let (field, range) = zip(best.0.fields, best.1).first(where: { $0.1?.lowOperator == .gt && $0.1?.highOperator == .eq }),
            case .value(let value)? = range?.low {
            // CouchDB narrows `$eq v` (or `$gte v` and `$lte v`) then `$gt v` to "above v, up to and
            // including v", which its end key has no case for (function_clause, a 500 in 3.3.3).
            throw DocStoreError(.unsupportedOperator, "The conditions on \(field) (equal to \(value), then above it) cannot be planned, as in "
                                + "CouchDB, which fails on them; they match nothing: leave them out")
        }
        return Plan(choice: best.0, ranges: empty ? nil : best.1.compactMap { $0 }, descending: sort.first?.descending ?? false,
                    warning: warning)
    }

    // MARK: The rules

    /// CouchDB 3.3.3 fails with a 500 (`function_clause`) on a query when an operand of its selector
    /// is a list holding a null, a list or an object of several members, or is such an object itself
    /// (at any depth of single-member objects) — but only once a json index it could read requires no
    /// field the selector leaves out: checking whether that index is usable walks the operands
    /// (`mango_idx_view:is_text_search`) and meets a value it has no case for. DocStore answers that
    /// query with a 400 saying so (Docs/Queries.md), and reads the same selector through `_all_docs` when
    /// no json index is a candidate, as CouchDB does.
    static func checkOperandsCouchDBCanPlan(_ condition: Condition, candidates: [Choice], sortFields: [String]) throws {
        guard case .crash(let operand)? = operandCouchDBFailsOn(condition) else { return }
        let reaches = candidates.contains { choice in
            guard case .json(let index) = choice else { return false }
            return requiresEveryField(of: index, condition, sortFields)
        }
        guard reaches else { return }
        throw DocStoreError(.unsupportedOperator, "The operand \(operand) cannot be planned against a json index, as in CouchDB: "
                            + "a list may not hold null, a list or an object of several members; "
                            + "write {\"$or\": [{field: value}, …]} or {\"$and\": […]} instead")
    }

    /// What ends CouchDB's walk of the operands (`mango_idx_view:is_text_search`), in its order.
    private enum WalkEnd {
        /// An operand it has no case for: it fails.
        case crash(JSON)
        /// A `$text` (its `$default` field): the selector is a text search, and the walk stops.
        case text
    }

    /// The first operand CouchDB's operand walk has no case for, or the first `$text`, if any.
    private static func operandCouchDBFailsOn(_ condition: Condition) -> WalkEnd? {
        /// An element of a list operand: null and lists have no case; objects are walked.
        func element(_ value: JSON) -> Bool {
            switch value {
            case .null, .array: return true
            case .object: return object(value)
            default: return false
            }
        }
        /// An object: empty is fine, one member is walked into, several have no case.
        func object(_ value: JSON) -> Bool {
            guard case .object(let members) = value else { return false }
            guard members.count == 1, let inner = members.members.first?.value else { return members.count > 1 }
            switch inner {
            case .array(let list): return list.contains(where: element)
            case .object: return object(inner)
            default: return false
            }
        }
        func operand(_ value: JSON) -> Bool {
            switch value {
            case .array(let list): return list.contains(where: element)
            case .object: return object(value)
            default: return false
            }
        }
        return condition.first { node -> WalkEnd? in
            switch node {
            case .compare(_, let value): return operand(value) ? .crash(value) : nil
            case .isIn(let list), .notIn(let list), .containsAll(let list):
                return list.contains(where: element) ? .crash(.array(list)) : nil
            case .text: return .text
            default: return nil
            }
        }
    }

    /// `use_index`: `[ddoc]` or `[ddoc, name]`, the design document with or without `_design/`.
    private static func filter(_ choices: [Choice], by useIndex: [String]) -> [Choice] {
        choices.filter { choice in
            guard case .json(let index) = choice else { return false }
            return index.isNamed(by: useIndex)
        }
    }

    static func isUsable(_ choice: Choice, _ condition: Condition, _ sortFields: [String]) -> Bool {
        switch choice {
        case .allDocuments:
            if sortFields.isEmpty { return true }
            return indexableFields(condition).contains("_id") && sortFields.starts(with: ["_id"]) && sortFields.count <= 1
        case .json(let index):
            return requiresEveryField(of: index, condition, sortFields) && canUseSort(index.fields.map(\.path), sortFields, condition)
        }
    }

    /// Whether the selector requires every field of `index` to exist, but those the sort names and
    /// `_id`/`_rev` (in every document): the first half of CouchDB's `is_usable`.
    private static func requiresEveryField(of index: MangoIndex, _ condition: Condition, _ sortFields: [String]) -> Bool {
        let required = Set(index.fields.map(\.path)).subtracting(sortFields).subtracting(["_id", "_rev"])
        return requiredFieldsLeft(condition, required).isEmpty
    }

    /// The top-level conjuncts, `$and`s seen through.
    private static func conjuncts(_ condition: Condition) -> [Condition] {
        if case .all(let parts) = condition { return parts.flatMap(conjuncts) }
        return [condition]
    }

    /// The fields of `required` the condition does not require to exist: through `$and` any conjunct
    /// may require one; through `$or` every branch must. Any condition on a field requires it, but
    /// `$exists: false`.
    static func requiredFieldsLeft(_ condition: Condition, _ required: Set<String>) -> Set<String> {
        var left = required
        for part in conjuncts(condition) where !left.isEmpty {
            switch part {
            case .any(let branches):
                var union = Set<String>()
                for branch in branches { union.formUnion(requiredFieldsLeft(branch, left)) }
                left = union
            case .field(let path, let inner):
                if case .exists(false) = inner { continue }
                left.remove(path.description)
            default:
                continue
            }
        }
        return left
    }

    /// Whether the selector fixes `field` with `$eq` in a top-level conjunct.
    private static func isConstant(_ field: String, _ condition: Condition) -> Bool {
        conjuncts(condition).contains { part in
            if case .field(let path, .compare(.eq, _)) = part { return path.description == field }
            return false
        }
    }

    private static func canUseSort(_ columns: [String], _ sortFields: [String], _ condition: Condition) -> Bool {
        var columns = columns[...]
        while true {
            if sortFields.isEmpty { return true }
            guard let first = columns.first else { return false }
            if first == sortFields[0] { return columns.starts(with: sortFields) }
            guard isConstant(first, condition) else { return false }
            columns = columns.dropFirst()
        }
    }

    /// The fields constrained by `$eq $gt $gte $lt $lte` in top-level conjuncts, in code-point order.
    private static func indexableFields(_ condition: Condition) -> [String] {
        var fields = Set<String>()
        for part in conjuncts(condition) {
            if case .field(let path, .compare(let comparison, _)) = part, comparison != .ne { fields.insert(path.description) }
        }
        return fields.sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) }
    }

    /// For each indexable field, its range; CouchDB stops at the first empty one.
    static func ranges(of condition: Condition) -> [(field: String, range: Range?)] {
        var result: [(String, Range?)] = []
        for field in indexableFields(condition) {
            let range = self.range(of: field, in: condition)
            if range == nil { return [(field, nil)] }
            result.append((field, range))
        }
        return result
    }

    /// The range of the leading index fields the selector constrains (`nil` for an empty one).
    private static func compositePrefix(_ columns: [String], _ fieldRanges: [(field: String, range: Range?)]) -> [Range?] {
        var prefix: [Range?] = []
        for column in columns {
            guard let found = fieldRanges.first(where: { $0.field == column }) else { break }
            prefix.append(found.range)
        }
        return prefix
    }

    /// `{"$and": []}`, `{"$or": []}` and the like as the whole selector: CouchDB reads nothing.
    private static func isNoop(_ condition: Condition) -> Bool {
        switch condition {
        case .all(let parts), .any(let parts): parts.isEmpty
        default: false
        }
    }

    /// The values `field` may take under the top-level conjuncts' comparisons, or `nil` if none.
    static func range(of field: String, in condition: Condition) -> Range? {
        var range = Range()
        for part in conjuncts(condition) {
            guard case .field(let path, .compare(let comparison, let argument)) = part, path.description == field else { continue }
            guard let narrowed = narrow(range, comparison, .value(argument)) else { return nil }
            range = narrowed
        }
        return range
    }

    private enum Position { case min, low, mid, high, max }

    private static func position(_ argument: Bound, in range: Range) -> Position {
        let low = Bound.compare(argument, range.low)
        if low < 0 { return .min }
        if low == 0 { return .low }
        let high = Bound.compare(argument, range.high)
        return high < 0 ? .mid : high == 0 ? .high : .max
    }

    /// CouchDB's narrowing of a range by one more comparison.
    private static func narrow(_ range: Range, _ comparison: Condition.Comparison, _ argument: Bound) -> Range? {
        var result = range
        let equal = Range(lowOperator: .eq, low: argument, highOperator: .eq, high: argument)
        let lowInclusive = range.lowOperator == .gte || range.lowOperator == .eq
        let highInclusive = range.highOperator == .lte || range.highOperator == .eq
        switch (comparison, position(argument, in: range)) {
        case (.lt, .min), (.lt, .low): return nil
        case (.lt, .mid), (.lt, .high): (result.highOperator, result.high) = (.lt, argument)
        case (.lte, .min): return nil
        case (.lte, .low): return lowInclusive ? equal : nil
        case (.lte, .mid): (result.highOperator, result.high) = (.lte, argument)
        case (.eq, .min), (.eq, .max): return nil
        case (.eq, .low): return lowInclusive ? equal : nil
        case (.eq, .mid): return equal
        case (.eq, .high): return highInclusive ? equal : nil
        case (.gte, .mid): (result.lowOperator, result.low) = (.gte, argument)
        case (.gte, .high): return highInclusive ? equal : nil
        case (.gte, .max): return nil
        case (.gt, .low), (.gt, .mid): (result.lowOperator, result.low) = (.gt, argument)
        case (.gt, .high), (.gt, .max): return nil
        default: break   // no narrower than it was
        }
        return result
    }
}
