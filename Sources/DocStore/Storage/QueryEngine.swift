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
            // CouchDB's offset of a `keys` query: the position of its first row (skipped rows count, as
            // in a range), or without a row, the position after the last key's rows.
            var offset = 0
            func rowsBefore(_ encodedKey: [UInt8], including: Bool) throws -> Int {
                let comparison = (query.descending ? ">" : "<") + (including ? "=" : "")
                return Int(try connection.scalarInt("SELECT count(*) FROM \(table) WHERE key \(comparison) ?", [.blob(encodedKey)]) ?? 0)
            }
            // CouchDB reads the keys from the last one when descending.
            outer: for key in query.descending ? keys.reversed() : keys {
                statement.reset()
                let encodedKey = CollationKey.encode(key, collation: collation)
                try statement.bind(blob: encodedKey, at: 1)
                for (position, bound) in documentBounds.enumerated() { try statement.bind(blob: bound, at: Int32(position + 2)) }
                var stepped = 0
                while try statement.step() {
                    stepped += 1
                    if skipped < query.skip {
                        skipped += 1
                        continue
                    }
                    if output.rows.count >= limit { break outer }
                    if output.rows.isEmpty && query.includeOffset { offset = try rowsBefore(encodedKey, including: false) + stepped - 1 }
                    try append(statement)
                }
                if output.rows.isEmpty && query.includeOffset { offset = try rowsBefore(encodedKey, including: true) }
            }
            statement.reset()
            if query.includeOffset { output.offset = offset }
            if query.descending { Self.restoreDuplicateOrder(&output.rows) }
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
        if query.descending { Self.restoreDuplicateOrder(&output.rows) }
        return output
    }

    /// Rows one document emitted under one key keep their ascending order (of their values) in a
    /// descending query, as CouchDB returns them: the runs that descending order reversed are turned
    /// back. (A run cut by `limit` keeps the rows it read.)
    private static func restoreDuplicateOrder(_ rows: inout [(key: JSON, value: JSON, documentID: String?)]) {
        var start = 0
        while start < rows.count {
            var end = start + 1
            while end < rows.count, rows[end].documentID == rows[start].documentID, rows[end].key == rows[start].key { end += 1 }
            if end - start > 1 { rows[start..<end].reverse() }
            start = end
        }
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
        var custom = CustomAccumulator(chunkSize: chunkSize, failuresAsNull: query.reduceFailuresAsValues)

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
            custom = CustomAccumulator(chunkSize: chunkSize, failuresAsNull: query.reduceFailuresAsValues)
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

/// A built-in reduce met values that are not numbers: reduced again from the rows' JSON.
private struct NonNumericValues: Error {}
