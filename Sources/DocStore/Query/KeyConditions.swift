import Foundation

/// A selector whose every condition is on a field of a json index, to be judged on that index's keys:
/// a row's key holds, at each field's position, the value the document had at that field when the
/// index mapped it. So for a document whose revision the index mapped, the conditions on the key's
/// values are the selector on the document, without finding those fields in its body.
struct KeyConditions {
    /// Each condition with the position of its field in the key, and whether it compares as `_id`
    /// (by code point) does.
    private let conditions: [(position: Int, condition: Condition, raw: Bool)]
    private let fieldCount: Int

    /// `nil` when the selector has a condition that is not on one of the index's fields (or the plan
    /// reads no json index).
    init?(_ selector: MangoSelector, choice: QueryPlanner.Choice) {
        guard case .json(let index) = choice, selector.texts.isEmpty else { return nil }
        let paths = index.fields.map { try? FieldPath($0.path) }
        var conditions: [(position: Int, condition: Condition, raw: Bool)] = []
        func add(_ condition: Condition) -> Bool {
            switch condition {
            case .anything:
                return true
            case .all(let parts):
                return parts.allSatisfy(add)
            case .field(let path, let inner):
                guard !path.components.isEmpty, let position = paths.firstIndex(where: { $0?.components == path.components }) else {
                    return false
                }
                conditions.append((position, inner, path.components == ["_id"]))
                return true
            default:
                return false
            }
        }
        guard add(selector.condition) else { return nil }
        self.conditions = conditions
        fieldCount = paths.count
    }

    /// Whether the conditions hold on `key` (`[value of each field]`); `nil` for a key of another shape.
    func hold(onKey key: JSON) -> Bool? {
        guard case .array(let values) = key, values.count == fieldCount else { return nil }
        // As `Condition.matches` on a `.field` whose value was found.
        return conditions.allSatisfy { $0.condition.matches(values[$0.position], raw: $0.raw) }
    }
}
