/// Runs one query against an index's rows table on a reader connection of the index file.
///
/// Ranges become conditions on the primary key `(key, doc_key, emit)` — the collation-encoded key, the
/// encoded document id and the emit counter — so every range, key and key-list lookup is a search of
/// that key, never a scan. Built-in reduces without grouping or grouped by exact key run as SQL
/// aggregates; group levels and custom reduces stream the rows in order and reduce in chunks.
struct QueryEngine {
    let connection: SQLiteConnection
    let state: IndexState
    let query: IndexQuery

    private var collation: Collation { state.definition.collation }
    private var table: String { state.table }
    private var order: String {
        query.descending ? "ORDER BY key DESC, doc_key DESC, emit DESC" : "ORDER BY key, doc_key, emit"
    }

    /// The schema name under which the database's own file is attached to ``connection``; when set,
    /// a map query with ``IndexQuery/includeDocuments`` reads each row's emitting document in the same
    /// statement, as a join, instead of leaving it to the caller.
    var documentsSchema: String?

    /// Rows, plus the figures.
    struct Output {
        var rows: [(key: JSON, value: JSON, documentID: String?)] = []
        /// With ``documentsSchema`` and ``IndexQuery/includeDocuments``: for each row, the current
        /// revision of the document that emitted it (`nil` if it has been deleted since). Empty
        /// otherwise: then the caller reads the documents.
        var documents: [Document?] = []
        var totalRows: Int?
        var offset: Int?
    }

    private enum Grouping: Equatable {
        case all
        case exact
        case level(Int)
    }

    func run() throws -> Output {
        try validate()
        if reduces {
            var output = Output()
            output.rows = try reduceRows()
            return output
        }
        return try mapRows()
    }

    // MARK: Validation

    private var reduces: Bool {
        query.reduce ?? (state.definition.reduce != nil)
    }

    private func validate() throws {
        func invalid(_ reason: String) -> DocStoreError { DocStoreError(.invalidQuery, reason) }
        if let limit = query.limit, limit < 0 { throw invalid("limit must not be negative") }
        if query.skip < 0 { throw invalid("skip must not be negative") }
        if let level = query.groupLevel, level < 0 { throw invalid("group_level must not be negative") }
        if query.keys != nil && (query.key != nil || query.startKey != nil || query.endKey != nil) {
            throw invalid("`keys` is incompatible with `key`, `start_key` and `end_key`")
        }
        if query.reduce == true && state.definition.reduce == nil {
            throw invalid("Reduce is invalid for map-only views.")
        }
        if reduces {
            if query.includeDocuments { throw invalid("`include_docs` is invalid for reduce") }
            if query.keys != nil && grouping != .exact {
                // CouchDB 3.3's words, spelling included.
                throw invalid("Multi-key fetchs for reduce views must use `group=true`")
            }
        } else if query.group || query.groupLevel != nil {
            throw invalid("Invalid use of grouping on a map view.")
        }
        if query.key == nil, let start = query.startKey, let end = query.endKey {
            let order = compareBytes(CollationKey.encode(start, collation: collation), CollationKey.encode(end, collation: collation))
            if !query.descending && order > 0 {
                throw invalid("No rows can match your key range, reverse your start_key and end_key or set descending=true")
            }
            if query.descending && order < 0 {
                throw invalid("No rows can match your key range, reverse your start_key and end_key or set descending=false")
            }
        }
    }

    private var grouping: Grouping {
        if let level = query.groupLevel { return level == 0 ? .all : .level(level) }
        return query.group ? .exact : .all
    }

    // MARK: Ranges

    private struct Bound {
        let key: [UInt8]
        let documentKey: [UInt8]?
        let inclusive: Bool
    }

    /// The lower and upper bounds in index order, whatever the direction of the query.
    private var bounds: (lower: Bound?, upper: Bound?) {
        let start = (query.key ?? query.startKey).map { CollationKey.encode($0, collation: collation) }
        let end = (query.key ?? query.endKey).map { CollationKey.encode($0, collation: collation) }
        let startDocument = query.startKeyDocID.map { CollationKey.encodeDocumentID($0, collation: collation) }
        let endDocument = query.endKeyDocID.map { CollationKey.encodeDocumentID($0, collation: collation) }
        // As CouchDB: `key` is a range from the key to itself, so `inclusive_end=false` leaves nothing.
        let inclusiveEnd = query.inclusiveEnd
        let first = start.map { Bound(key: $0, documentKey: startDocument, inclusive: true) }
        let last = end.map { Bound(key: $0, documentKey: endDocument, inclusive: inclusiveEnd) }
        return query.descending ? (last, first) : (first, last)
    }

    /// The SQL condition for `bound` as a lower (`isLower`) or upper bound, or its complement.
    private func condition(_ bound: Bound, isLower: Bool, complement: Bool = false) -> (String, [SQLiteValue]) {
        var op: String
        switch (isLower, bound.inclusive) {
        case (true, true): op = ">="
        case (true, false): op = ">"
        case (false, true): op = "<="
        case (false, false): op = "<"
        }
        if complement {
            op = ["<": ">=", "<=": ">", ">": "<=", ">=": "<"][op]!
        }
        if let documentKey = bound.documentKey {
            return ("(key, doc_key) \(op) (?, ?)", [.blob(bound.key), .blob(documentKey)])
        }
        return ("key \(op) ?", [.blob(bound.key)])
    }

    private func rangeCondition() -> (String, [SQLiteValue]) {
        var parts: [String] = []
        var bindings: [SQLiteValue] = []
        let (lower, upper) = bounds
        if let lower {
            let (sql, values) = condition(lower, isLower: true)
            parts.append(sql)
            bindings += values
        }
        if let upper {
            let (sql, values) = condition(upper, isLower: false)
            parts.append(sql)
            bindings += values
        }
        return (parts.isEmpty ? "1" : parts.joined(separator: " AND "), bindings)
    }

    /// How many rows come before the range in the query's direction (CouchDB's `offset`).
    private func rowsBeforeRange() throws -> Int {
        let (lower, upper) = bounds
        guard let bound = query.descending ? upper : lower else { return 0 }
        let (sql, bindings) = condition(bound, isLower: !query.descending, complement: true)
        return Int(try connection.scalarInt("SELECT count(*) FROM \(table) WHERE \(sql)", bindings) ?? 0)
    }

    // MARK: Map rows

    private func mapRows() throws -> Output {
        var output = Output(totalRows: Int(state.rowCount))
        let limit = query.limit ?? Int.max
        let joined = query.includeDocuments ? documentsSchema : nil
        // The emitting document's current revision, joined by its row (a rowid lookup); the id check
        // leaves out a row whose document was purged and its row number reused since the index was read.
        let columns = joined == nil ? "key_json, value_json, doc_id"
            : "key_json, value_json, doc_id, " + DocumentRecords.currentColumns(of: "d.")
        let source = joined.map { "\(table) LEFT JOIN \($0).docs AS d ON d.doc = doc_row AND d.id = doc_id AND d.deleted = 0" } ?? table
        func append(_ statement: SQLiteStatement) throws {
            let row = try row(statement)
            output.rows.append(row)
            if joined != nil {
                // No joined row (NULL columns) when the document was deleted after the index was read.
                output.documents.append(try row.documentID.flatMap { id in
                    statement.isNull(3) ? nil : try DocumentRecords.currentDocument(statement, id: id, from: 3)
                })
            }
        }
        if let keys = query.keys {
            var skipped = 0
            // Each key is a range from itself to itself — narrowed by `startkey_docid` and
            // `endkey_docid` as CouchDB narrows it — so `inclusive_end=false` leaves nothing without an
            // end document id.
            let keys = query.inclusiveEnd || query.endKeyDocID != nil ? keys : []
            var conditions = ["key = ?"]
            var documentBounds: [[UInt8]] = []
            let (lowerID, upperID) = query.descending ? (query.endKeyDocID, query.startKeyDocID) : (query.startKeyDocID, query.endKeyDocID)
            if let lowerID {
                conditions.append(query.descending && !query.inclusiveEnd ? "doc_key > ?" : "doc_key >= ?")
                documentBounds.append(CollationKey.encodeDocumentID(lowerID, collation: collation))
            }
            if let upperID {
                conditions.append(!query.descending && !query.inclusiveEnd ? "doc_key < ?" : "doc_key <= ?")
                documentBounds.append(CollationKey.encodeDocumentID(upperID, collation: collation))
            }
            let statement = try connection.prepare("SELECT \(columns) FROM \(source) WHERE \(conditions.joined(separator: " AND ")) \(order)")
            // CouchDB reads the keys from the last one when descending.
            outer: for key in query.descending ? keys.reversed() : keys {
                statement.reset()
                try statement.bind(blob: CollationKey.encode(key, collation: collation), at: 1)
                for (position, bound) in documentBounds.enumerated() { try statement.bind(blob: bound, at: Int32(position + 2)) }
                while try statement.step() {
                    if skipped < query.skip {
                        skipped += 1
                        continue
                    }
                    if output.rows.count >= limit { break outer }
                    try append(statement)
                }
            }
            statement.reset()
            if query.includeOffset { output.offset = 0 }
            return output
        }
        let (sql, bindings) = rangeCondition()
        let statement = try connection.prepare("SELECT \(columns) FROM \(source) WHERE \(sql) \(order) LIMIT ? OFFSET ?")
        try statement.bind(bindings + [.integer(Int64(query.limit ?? -1)), .integer(Int64(query.skip))])
        while try statement.step() { try append(statement) }
        statement.reset()
        if query.includeOffset {
            output.offset = min(Int(state.rowCount), try rowsBeforeRange() + query.skip)
        }
        return output
    }

    private func row(_ statement: SQLiteStatement) throws -> (key: JSON, value: JSON, documentID: String?) {
        let key = try statement.withBlob(0) { try JSON(parsing: $0.bindMemory(to: UInt8.self)) }
        let value = try statement.withBlob(1) { try JSON(parsing: $0.bindMemory(to: UInt8.self)) }
        return (key, value, statement.text(2))
    }

    // MARK: Reduce

    private func reduceRows() throws -> [(key: JSON, value: JSON, documentID: String?)] {
        guard let reduce = state.definition.reduce, query.limit != 0 else { return [] }
        // Each key is a range from itself to itself: `inclusive_end=false` leaves nothing, as in CouchDB.
        if query.keys != nil && !query.inclusiveEnd { return [] }
        let builtin: Bool
        switch reduce {
        case .custom, .couchDB: builtin = false
        default: builtin = true
        }
        if builtin && (grouping == .all || grouping == .exact) {
            do {
                return try sqlReduce(reduce)
            } catch is NonNumericValues {
                // Arrays, objects or other values among a _sum's or _stats' values: reduced from their JSON.
            }
        }
        return try streamingReduce(reduce)
    }

    /// The reduce of the whole index from the aggregates the index writer keeps, when they answer it.
    private func maintainedTotal(_ reduce: ReduceFunction) -> JSON? {
        switch reduce {
        case .count: return .integer(Int(state.rowCount))
        case .sum:
            guard state.otherValues == 0, let sum = state.integerSum else { return nil }
            return .integer(Int(sum))
        default: return nil
        }
    }

    /// Built-in reduces as SQL aggregates, over the whole range or per exact key.
    private func sqlReduce(_ reduce: ReduceFunction) throws -> [(key: JSON, value: JSON, documentID: String?)] {
        // Over the whole index, `.count` and an all-integer `.sum` are kept by the index writer.
        if grouping == .all, query.keys == nil, bounds.lower == nil, bounds.upper == nil, let total = maintainedTotal(reduce) {
            let rows: [(key: JSON, value: JSON, documentID: String?)] = state.rowCount > 0 ? [(.null, total, nil)] : []
            return Array(rows.dropFirst(query.skip).prefix(query.limit ?? Int.max))
        }
        let aggregates: String
        switch reduce {
        case .count: aggregates = "count(*), 0, 0, 0, 0, 0, 1"
        case .approximateCountDistinct: aggregates = "count(*), count(DISTINCT key), 0, 0, 0, 0, 1"
        case .sum: aggregates = "count(*), count(value_num), total(value_num), 0, 0, 0, min(value_is_int)"
        default: aggregates = "count(*), count(value_num), total(value_num), min(value_num), max(value_num), total(value_num * value_num), min(value_is_int)"
        }
        var results: [(key: JSON, value: JSON, documentID: String?)] = []
        let direction = query.descending ? "DESC" : ""
        func collect(_ statement: SQLiteStatement, keyColumn: Bool) throws {
            while try statement.step() {
                let offset: Int32 = keyColumn ? 1 : 0
                let count = statement.int(offset)
                guard count > 0 else { continue }
                var accumulator = BuiltinAccumulator()
                accumulator.count = count
                accumulator.numericCount = statement.int(offset + 1)
                accumulator.sum = statement.double(offset + 2)
                accumulator.minimum = statement.double(offset + 3)
                accumulator.maximum = statement.double(offset + 4)
                accumulator.sumOfSquares = statement.double(offset + 5)
                accumulator.allIntegers = statement.int(offset + 6) == 1
                if accumulator.numericCount != count, reduce.needsNumbers {
                    statement.reset()
                    throw NonNumericValues()
                }
                let key = keyColumn ? try statement.withBlob(0) { try JSON(parsing: $0.bindMemory(to: UInt8.self)) } : .null
                results.append((key, try accumulator.result(reduce), nil))
            }
            statement.reset()
        }
        if let keys = query.keys {
            let statement = try connection.prepare("SELECT key_json, \(aggregates) FROM \(table) WHERE key = ?")
            for key in keys {
                statement.reset()
                try statement.bind(blob: CollationKey.encode(key, collation: collation), at: 1)
                try collect(statement, keyColumn: true)
            }
            return Array(results.dropFirst(query.skip).prefix(query.limit ?? Int.max))
        }
        let (sql, bindings) = rangeCondition()
        if grouping == .exact {
            let statement = try connection.prepare(
                "SELECT key_json, \(aggregates) FROM \(table) WHERE \(sql) GROUP BY key ORDER BY key \(direction) LIMIT ? OFFSET ?")
            try statement.bind(bindings + [.integer(Int64(query.limit ?? -1)), .integer(Int64(query.skip))])
            try collect(statement, keyColumn: true)
            return results
        }
        let statement = try connection.prepare("SELECT \(aggregates) FROM \(table) WHERE \(sql)")
        try statement.bind(bindings)
        try collect(statement, keyColumn: false)
        return Array(results.dropFirst(query.skip).prefix(query.limit ?? Int.max))
    }

    /// Streams rows in order, cutting them into groups, and reduces each group (custom reduces in chunks
    /// of ``IndexDefinition/reduceChunkSize``, then rereduced).
    private func streamingReduce(_ reduce: ReduceFunction) throws -> [(key: JSON, value: JSON, documentID: String?)] {
        let chunkSize = state.definition.reduceChunkSize
        var results: [(key: JSON, value: JSON, documentID: String?)] = []
        var skipped = 0
        let limit = query.limit ?? Int.max
        var currentGroup: (key: JSON, encoded: [UInt8])? = nil
        var builtin = BuiltinAccumulator()
        var custom = CustomAccumulator(chunkSize: chunkSize)

        func finishGroup() throws -> Bool {
            guard let group = currentGroup else { return true }
            let value: JSON
            if let function = reduce.customFunction {
                value = try custom.finish(function)
            } else {
                do {
                    value = try builtin.result(reduce)
                } catch let error as DocStoreError where error.code == .reduceFailure && query.reduceFailuresAsValues {
                    value = ["error": "builtin_reduce_error", "reason": .string(error.reason), "caused_by": builtin.unreducible ?? .null]
                }
            }
            builtin = BuiltinAccumulator()
            custom = CustomAccumulator(chunkSize: chunkSize)
            currentGroup = nil
            if skipped < query.skip {
                skipped += 1
                return true
            }
            results.append((group.key, value, nil))
            return results.count < limit
        }

        func consume(_ statement: SQLiteStatement) throws -> Bool {
            while try statement.step() {
                let key = try statement.withBlob(0) { try JSON(parsing: $0.bindMemory(to: UInt8.self)) }
                let groupKey: JSON
                switch grouping {
                case .all: groupKey = .null
                case .exact: groupKey = key
                case .level(let level):
                    if case .array(let elements) = key { groupKey = .array(Array(elements.prefix(level))) } else { groupKey = key }
                }
                let encoded = grouping == .all ? [] : CollationKey.encode(groupKey, collation: collation)
                if let group = currentGroup, group.encoded != encoded {
                    guard try finishGroup() else { return false }
                }
                if currentGroup == nil { currentGroup = (groupKey, encoded) }
                if let function = reduce.customFunction {
                    let value = try statement.withBlob(1) { try JSON(parsing: $0.bindMemory(to: UInt8.self)) }
                    try custom.add(key: reduce.keysHaveDocumentIDs ? [key, .string(statement.text(2))] : key, value: value, function)
                } else {
                    if case .approximateCountDistinct = reduce {
                        statement.withBlob(5) { builtin.add(key: $0) }
                    } else {
                        if statement.isNull(3), reduce.needsNumbers {
                            builtin.add(value: try statement.withBlob(1) { try JSON(parsing: $0.bindMemory(to: UInt8.self)) })
                        } else {
                            builtin.add(number: statement.isNull(3) ? nil : statement.double(3), isInteger: statement.int(4) == 1)
                        }
                    }
                }
            }
            return true
        }

        let columns = "key_json, value_json, doc_id, value_num, value_is_int, key"
        if let keys = query.keys {
            let statement = try connection.prepare("SELECT \(columns) FROM \(table) WHERE key = ? \(order)")
            for key in keys {
                statement.reset()
                try statement.bind(blob: CollationKey.encode(key, collation: collation), at: 1)
                guard try consume(statement) else { break }
                guard try finishGroup() else { break }
            }
            statement.reset()
            return results
        }
        let (sql, bindings) = rangeCondition()
        let statement = try connection.prepare("SELECT \(columns) FROM \(table) WHERE \(sql) \(order)")
        try statement.bind(bindings)
        if try consume(statement) { _ = try finishGroup() }
        statement.reset()
        return results
    }
}

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
    private var keys: [JSON] = []
    private var values: [JSON] = []
    private var partials: [JSON] = []

    init(chunkSize: Int) { self.chunkSize = chunkSize }

    typealias Function = @Sendable ([JSON]?, [JSON], Bool) throws -> JSON

    mutating func add(key: JSON, value: JSON, _ function: Function) throws {
        keys.append(key)
        values.append(value)
        if values.count >= chunkSize { try flush(function) }
    }

    private mutating func flush(_ function: Function) throws {
        guard !values.isEmpty else { return }
        partials.append(try call(function, keys, values, false))
        keys.removeAll(keepingCapacity: true)
        values.removeAll(keepingCapacity: true)
    }

    mutating func finish(_ function: Function) throws -> JSON {
        try flush(function)
        var level = partials
        while level.count > 1 {
            var next: [JSON] = []
            for start in stride(from: 0, to: level.count, by: chunkSize) {
                next.append(try call(function, nil, Array(level[start..<Swift.min(start + chunkSize, level.count)]), true))
            }
            level = next
        }
        return level.first ?? .null
    }

    private func call(_ function: Function, _ keys: [JSON]?, _ values: [JSON], _ rereduce: Bool) throws -> JSON {
        do {
            return try function(keys, values, rereduce)
        } catch let error as DocStoreError {
            throw error
        } catch {
            throw DocStoreError(.reduceFailure, "reduce function threw: \(error)", cause: error)
        }
    }
}

/// memcmp order of two byte strings.
func compareBytes(_ a: [UInt8], _ b: [UInt8]) -> Int {
    if a == b { return 0 }
    return a.lexicographicallyPrecedes(b) ? -1 : 1
}

/// A built-in reduce met values that are not numbers: reduced again from the rows' JSON.
private struct NonNumericValues: Error {}

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
