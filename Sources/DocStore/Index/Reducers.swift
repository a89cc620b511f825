import Foundation

/// Running totals for the built-in reduces.
struct BuiltinAccumulator {
    var count = 0
    var numericCount = 0
    var sum = 0.0
    var minimum = Double.infinity
    var maximum = -Double.infinity
    var sumOfSquares = 0.0
    var allIntegers = true

    /// The encoded key of the last row added, for counting distinct keys of rows that come in key order.
    private var lastKey: [UInt8]?

    /// Counts a row's key for ``ReduceFunction/approximateCountDistinct``: rows come in key order, so
    /// a key unlike the previous one is a new distinct key.
    mutating func add(key: UnsafeRawBufferPointer) {
        count += 1
        if let lastKey, lastKey.elementsEqual(key) { return }
        lastKey = Array(key)
        numericCount += 1
    }

    /// For `_sum`: CouchDB's sum of every value so far once one was not a number (arrays add up element
    /// by element, objects member by member); `nil` while all are numbers.
    private var jsonSum: JSON?
    /// The first value that `_sum` or `_stats` cannot reduce.
    private(set) var unreducible: JSON?

    /// Adds a value that is not a number (a `_sum` of arrays or objects, or a value neither can reduce).
    mutating func add(value: JSON) {
        count += 1
        guard unreducible == nil else { return }
        let numbers: JSON = allIntegers && abs(sum) <= 9_007_199_254_740_992 ? .integer(Int(sum)) : .double(sum)
        if let total = BuiltinAccumulator.couchSum(value, jsonSum ?? (numericCount > 0 ? numbers : .integer(0))) {
            jsonSum = total
        } else {
            unreducible = value
        }
    }

    /// CouchDB's `_sum` of `value` into `total`: numbers add, arrays add element by element (numbers
    /// only; the longer keeps its tail), a number and an array add to the array's first element,
    /// objects add member by member (recursively, members in name order); `nil` for anything else.
    static func couchSum(_ value: JSON, _ total: JSON) -> JSON? {
        func number(_ json: JSON) -> Double? {
            switch json {
            case .integer(let n): return Double(n)
            case .double(let d): return d
            default: return nil
            }
        }
        func add(_ a: JSON, _ b: JSON) -> JSON? {
            if case .integer(let x) = a, case .integer(let y) = b {
                let (sum, overflow) = x.addingReportingOverflow(y)
                return overflow ? .double(Double(x) + Double(y)) : .integer(sum)
            }
            guard let x = number(a), let y = number(b) else { return nil }
            return .double(x + y)
        }
        func arrays(_ a: [JSON], _ b: [JSON]) -> JSON? {
            var result: [JSON] = []
            for index in 0..<max(a.count, b.count) {
                if index >= a.count { guard number(b[index]) != nil else { return nil }; result.append(b[index]); continue }
                if index >= b.count { guard number(a[index]) != nil else { return nil }; result.append(a[index]); continue }
                guard let sum = add(a[index], b[index]) else { return nil }
                result.append(sum)
            }
            return .array(result)
        }
        switch (value, total) {
        case (.object(let members), .integer(0)):
            return .object(members)
        case (.object(let members), .object(let totals)):
            var merged: [String: JSON] = [:]
            for (key, item) in totals { merged[key] = item }
            for (key, item) in members {
                if let existing = merged[key] {
                    guard let sum = couchSum(item, existing) else { return nil }
                    merged[key] = sum
                } else {
                    merged[key] = item
                }
            }
            return .object(JSONObject(merged.keys.sorted().map { ($0, merged[$0]!) }))
        case (.array(let a), .array(let b)): return arrays(b, a)
        case (.array(let a), _) where number(total) != nil: return arrays([total], a)
        case (_, .array(let b)) where number(value) != nil: return arrays(b, [value])
        default:
            if number(value) != nil, number(total) != nil { return add(total, value) }
            if case .object = total, number(value) != nil { return nil }
            return nil
        }
    }

    mutating func add(number: Double?, isInteger: Bool) {
        if let jsonSum, let number {
            // Numbers after an array or object: added to it, as CouchDB adds them.
            count += 1
            let value: JSON = isInteger && abs(number) <= 9_007_199_254_740_992 ? .integer(Int(number)) : .double(number)
            if let total = BuiltinAccumulator.couchSum(value, jsonSum) { self.jsonSum = total } else if unreducible == nil { unreducible = value }
            return
        }
        count += 1
        guard let number else { return }
        numericCount += 1
        sum += number
        minimum = Swift.min(minimum, number)
        maximum = Swift.max(maximum, number)
        sumOfSquares += number * number
        allIntegers = allIntegers && isInteger
    }

    private func number(_ value: Double) -> JSON {
        if allIntegers, abs(value) <= 9_007_199_254_740_992, let exact = Int(exactly: value) { return .integer(exact) }
        return .double(value)
    }

    func result(_ reduce: ReduceFunction) throws -> JSON {
        switch reduce {
        case .count:
            return .integer(count)
        case .approximateCountDistinct:
            // `numericCount` holds the number of distinct keys (see `add(key:)` and the SQL aggregate).
            return .integer(numericCount)
        case .sum where unreducible == nil && jsonSum != nil:
            return jsonSum!
        case .sum:
            guard numericCount == count else {
                throw DocStoreError(.reduceFailure, "The _sum function requires that map values be numbers, arrays of numbers, or objects. Objects cannot be mixed with other data structures. Objects can be arbitrarily nested, provided that the values for all fields are themselves numbers, arrays of numbers, or objects.")
            }
            return number(sum)
        case .stats:
            guard numericCount == count else {
                throw DocStoreError(.reduceFailure, "The _stats function requires that map values be numbers or arrays of numbers, not '\((unreducible ?? .null).description)'")
            }
            return ["sum": number(sum), "count": .integer(count), "min": number(minimum), "max": number(maximum),
                    "sumsqr": number(sumOfSquares)]
        case .custom, .couchDB:
            preconditionFailure("custom reduces are not accumulated here")
        }
    }
}

/// Collects rows for a custom reduce, reducing every full chunk, and rereduces the chunk results.
struct CustomAccumulator {
    let chunkSize: Int
    /// Whether a function that throws makes the group's value `null`, as CouchDB answers a view whose
    /// JavaScript reduce throws, instead of failing the query. A timeout, a storage error and
    /// CouchDB's `reduce_overflow_error` still fail it.
    var failuresAsNull = false
    private var failed = false
    private var keys: [JSON] = []
    private var values: [JSON] = []
    private var partials: [JSON] = []

    init(chunkSize: Int, failuresAsNull: Bool = false) {
        self.chunkSize = chunkSize
        self.failuresAsNull = failuresAsNull
    }

    typealias Function = @Sendable ([JSON]?, [JSON], Bool) throws -> JSON

    mutating func add(key: JSON, value: JSON, _ function: Function) throws {
        guard !failed else { return }
        keys.append(key)
        values.append(value)
        if values.count >= chunkSize { try flush(function) }
    }

    private mutating func flush(_ function: Function) throws {
        guard !values.isEmpty, !failed else { return }
        if let partial = try call(function, keys, values, false) { partials.append(partial) }
        keys.removeAll(keepingCapacity: true)
        values.removeAll(keepingCapacity: true)
    }

    mutating func finish(_ function: Function) throws -> JSON {
        try flush(function)
        var level = partials
        while level.count > 1, !failed {
            var next: [JSON] = []
            for start in stride(from: 0, to: level.count, by: chunkSize) {
                guard let value = try call(function, nil, Array(level[start..<Swift.min(start + chunkSize, level.count)]), true) else { break }
                next.append(value)
            }
            level = next
        }
        return failed ? .null : level.first ?? .null
    }

    /// The function's answer; `nil` when it failed and ``failuresAsNull`` makes the group `null`.
    private mutating func call(_ function: Function, _ keys: [JSON]?, _ values: [JSON], _ rereduce: Bool) throws -> JSON? {
        do {
            return try function(keys, values, rereduce)
        } catch let error as DocStoreError {
            guard failuresAsNull, error.code != .scriptTimeout, error.code != .storage,
                  error.couchDBError != "reduce_overflow_error" else { throw error }
            failed = true
            return nil
        } catch {
            guard failuresAsNull else { throw DocStoreError(.reduceFailure, "reduce function threw: \(error)", cause: error) }
            failed = true
            return nil
        }
    }
}

/// memcmp order of two byte strings.
func compareBytes(_ a: [UInt8], _ b: [UInt8]) -> Int {
    if a == b { return 0 }
    return a.lexicographicallyPrecedes(b) ? -1 : 1
}

extension ReduceFunction {
    /// A custom reduce in CouchDB's calling form (keys `nil` when rereducing), or `nil` for a built-in.
    var customFunction: CustomAccumulator.Function? {
        switch self {
        case .couchDB(let function): return function
        case .custom(let function): return { keys, values, rereduce in try function(keys ?? [], values, rereduce) }
        default: return nil
        }
    }

    /// Whether a custom reduce's keys are CouchDB's `[key, documentID]` pairs (else the emitted keys).
    var keysHaveDocumentIDs: Bool {
        if case .couchDB = self { return true }
        return false
    }

    /// Whether the built-in reduces numbers (and so must look at values that are not).
    var needsNumbers: Bool {
        switch self {
        case .sum, .stats: return true
        default: return false
        }
    }
}
