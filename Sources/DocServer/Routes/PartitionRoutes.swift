import CouchProtocol
import DocStore
import Foundation
import HTTPTypes
import Hummingbird

/// CouchDB 3's partitioned databases (`PUT /db?partitioned=true`): every document id but design and
/// `_local` ones is `partition:id`, and `/db/_partition/{p}/…` answers `_all_docs`, `_find`, `_explain`
/// and views for one partition. DocServer keeps the flag in the database file and serves a partition
/// from the id range `p:` … `p;` (`;` follows `:`), as CouchDB's keys are.
enum Partition {
    /// Whether the request's database is partitioned, for the routes below it.
    @TaskLocal static var current = false

    /// The ids of partition `name`: from `name:` (included) to `name;` (excluded).
    static func range(_ name: String) -> (low: String, high: String) { (name + ":", name + ";") }

    /// The partition of `id`, or `nil` for design, local and unpartitioned ids.
    static func of(_ id: String) -> String? {
        guard !id.hasPrefix("_"), let colon = id.firstIndex(of: ":") else { return nil }
        return String(id[..<colon])
    }

    /// Checks a partition name as CouchDB does, in its order.
    static func validate(partition name: String) throws {
        if name.isEmpty { throw CouchError(.badRequest, "illegal_partition", "Partition must not be empty") }
        if name.hasPrefix("_") { throw CouchError(.badRequest, "illegal_partition", "Partition must not start with an underscore") }
        if name.contains(":") { throw CouchError(.badRequest, "illegal_partition", "Partition must not contain a colon") }
    }

    /// Checks a document id of a partitioned database (design and `_local` ids are exempt): the usual
    /// rules, then `partition:id` with a valid partition and a non-empty id.
    static func validate(documentID id: String) throws {
        if id.hasPrefix("_design/") || id.hasPrefix("_local/") { return }
        do {
            try DocumentValidation.validateID(id, allowDesign: false)
        } catch let error as DocStoreError {
            throw CouchError(error)
        }
        guard let colon = id.firstIndex(of: ":") else { throw missingPartition }
        try validate(partition: String(id[..<colon]))
        if id[id.index(after: colon)...].isEmpty { throw CouchError(.badRequest, "illegal_docid", "Document id must not be empty") }
    }

    /// CouchDB's answer to an id without a partition.
    static let missingPartition = CouchError(.badRequest, "illegal_docid", "Doc id must be of form partition:id")

    /// For reads and attachments, which take any other id as it is: an id of a partitioned database
    /// must name a partition (design documents excepted).
    static func checkHasPartition(_ id: String) throws {
        if current, !id.hasPrefix("_design/"), !id.contains(":") { throw missingPartition }
    }

    /// The error `validate(documentID:)` throws for `id`, if any.
    static func error(of id: String) -> CouchError? {
        do {
            try validate(documentID: id)
            return nil
        } catch let error as CouchError {
            return error
        } catch {
            return CouchError.badRequest("\(error)")
        }
    }

    /// `validate(documentID:)` when the request's database is partitioned.
    static func check(_ id: String) throws {
        if current { try validate(documentID: id) }
    }

    /// CouchDB's system databases, which cannot be partitioned.
    static func isSystemDatabase(_ name: String) -> Bool {
        name.hasPrefix("_") || name.hasSuffix("/_replicator") || name.hasSuffix("/_users")
    }
}

extension DocServer {
    /// `/{db}/_partition/{p}[/…]`: the partition's figures, `_all_docs`, `_find`, `_explain` and views.
    func partitionRoute(_ db: Database, _ rest: [String], _ request: CouchRequest, principal: Principal) async throws -> Response {
        guard rest.count >= 2, !rest[1].isEmpty else { throw CouchError.badRequest("invalid_partition_req") }
        let partition = rest[1]
        try Partition.validate(partition: partition)
        guard Partition.current else { throw CouchError.badRequest("database is not partitioned") }
        if let given = request.query["partition"], given != partition {
            throw CouchError.badRequest("Conflicting value for `partition` in query string")
        }
        let (low, high) = Partition.range(partition)
        guard rest.count > 2 else {
            guard request.method == .get || request.method == .head else { throw CouchError.only("GET") }
            let figures = try await db.figures(ofIDsFrom: low, below: high)
            return Response.json(["db_name": .string(db.name),
                                  "sizes": ["active": .integer(figures.bodyBytes), "external": .integer(figures.bodyBytes)],
                                  "partition": .string(partition), "doc_count": .integer(figures.live),
                                  "doc_del_count": .integer(figures.deleted)])
        }
        var scoped = request
        scoped.query["partition"] = partition
        switch rest[2] {
        case "_all_docs" where rest.count == 3:
            guard [.get, .head, .post].contains(request.method) else { throw CouchError.only("GET,HEAD,POST") }
            return Response.json(serialized: try await allDocumentsAnswer(db, scoped, principal: principal, idRange: (low, high),
                                                                          limit: partitionQueryLimit).serialized(nonFiniteAsNull: true))
        case "_find" where rest.count == 3:
            return try await mangoQueryRoute(db, explain: false, scoped, principal: principal, partition: partition)
        case "_explain" where rest.count == 3:
            return try await mangoQueryRoute(db, explain: true, scoped, principal: principal, partition: partition)
        case "_design" where rest.count >= 5:
            return try await designRoute(db, design: rest[3], Array(rest.dropFirst(4)), scoped, principal: principal)
        default:
            throw CouchError.notFound()
        }
    }

    /// `query_server_config/partition_query_limit`: the most rows a partition query answers.
    var partitionQueryLimit: Int {
        nodeConfiguration.integer("query_server_config", "partition_query_limit", default: 268_435_456)
    }

    /// Whether `design` answers partitioned queries: in a partitioned database unless its
    /// `options.partitioned` is false.
    func isPartitioned(design: JSON?) -> Bool {
        Partition.current && design?["options"]?["partitioned"] != false
    }
}

extension DocServer {
    /// A view query in a partitioned database: `nil` when the view is global (the usual answer
    /// follows). A partitioned design document's views need a partition (400 without one); a global
    /// one refuses it. The partition's rows are the view's rows of its documents, then reduced with
    /// a built-in reduce (`_count`, `_sum`, `_stats`), skipped and limited, at most
    /// `partition_query_limit` of them.
    func partitionedView(_ db: Database, name: String, _ request: CouchRequest, _ query: IndexQuery,
                         principal: Principal) async throws -> ViewResponse? {
        let partition = request.query["partition"]
        guard Partition.current else {
            if partition != nil { throw CouchError.badRequest("partition specified on non-partitioned db") }
            return nil
        }
        let parts = name.split(separator: "/", maxSplits: 1).map(String.init)
        guard parts.count == 2, let design = try await db.document(withID: "_design/" + parts[0]) else { return nil }
        let json = design.json()
        guard isPartitioned(design: json) else {
            if partition != nil {
                throw CouchError(.badRequest, "query_parse_error", "`partition` parameter is not supported in this design doc")
            }
            return nil
        }
        guard let partition else {
            throw CouchError(.badRequest, "query_parse_error", "`partition` parameter is mandatory for queries to this view.")
        }
        try Partition.validate(partition: partition)
        let maximum = partitionQueryLimit
        if let limit = query.limit, limit > maximum {
            throw CouchError(.badRequest, "query_parse_error", "Limit is too large, must not exceed \(maximum)")
        }
        let reduceFunction = json["views"]?[parts[1]]?["reduce"]?.stringValue
        let reducing = reduceFunction != nil && query.reduce != false
        var rowsQuery = query
        rowsQuery.reduce = false
        rowsQuery.group = false
        rowsQuery.groupLevel = nil
        rowsQuery.limit = nil
        rowsQuery.skip = 0
        var answer = try await viewAnswer(db, name: name, rowsQuery, principal: principal)
        let prefix = partition + ":"
        answer.rows = answer.rows.filter { $0.id?.hasPrefix(prefix) == true }
        if reducing, let reduceFunction {
            answer.rows = try Self.reduce(answer.rows, with: reduceFunction, group: query.group, level: query.groupLevel)
            answer.totalRows = nil
            answer.offset = nil
        }
        answer.rows = Array(answer.rows.dropFirst(query.skip).prefix(query.limit ?? maximum))
        return answer
    }

    /// Rows reduced with a built-in reduce, grouped by the whole key (`group`), its first `level`
    /// members, or not at all.
    private static func reduce(_ rows: [ViewRow], with function: String, group: Bool, level: Int?) throws -> [ViewRow] {
        func groupKey(_ key: JSON) -> JSON {
            if let level, case .array(let members) = key { return .array(Array(members.prefix(level))) }
            if level != nil || group { return key }
            return .null
        }
        var groups: [(key: JSON, values: [JSON])] = []
        for row in rows {
            let key = groupKey(row.key)
            if let last = groups.last, last.key == key {
                groups[groups.count - 1].values.append(row.value)
            } else {
                groups.append((key, [row.value]))
            }
        }
        return try groups.map { key, values in
            ViewRow(id: nil, key: key, value: try builtInReduce(function.trimmingCharacters(in: .whitespacesAndNewlines), values))
        }
    }

    private static func builtInReduce(_ function: String, _ values: [JSON]) throws -> JSON {
        func number(_ value: JSON) -> Double? {
            switch value {
            case .integer(let n): Double(n)
            case .double(let d): d
            default: nil
            }
        }
        func json(_ value: Double) -> JSON { value.rounded() == value && abs(value) < 9e15 ? .integer(Int(value)) : .double(value) }
        switch function {
        case "_count":
            return .integer(values.count)
        case "_sum":
            return json(values.compactMap(number).reduce(0, +))
        case "_stats":
            let numbers = values.compactMap(number)
            return ["sum": json(numbers.reduce(0, +)), "count": .integer(numbers.count), "min": json(numbers.min() ?? 0),
                    "max": json(numbers.max() ?? 0), "sumsqr": json(numbers.reduce(0) { $0 + $1 * $1 })]
        default:
            throw CouchError.badRequest("Partitioned queries of this view's reduce are not supported: DocServer reduces partitions with _count, _sum and _stats")
        }
    }
}

extension DocServer {
    /// CouchDB's `couchdb/max_partition_size`: new edits of the documents of a partition whose bodies
    /// already weigh that many bytes are refused (403 `partition_overflow`) when they would make it
    /// heavier — a new document, or a larger body; deletions and smaller bodies pass, as do design
    /// and `_local` documents and other partitions. Checked when the setting is given (CouchDB's 10 GiB
    /// default is not enforced, to spare every write a sum over its partition). Returns the refusal of
    /// each refused document, by position.
    func partitionOverflows(_ documents: [Document], in db: Database) async throws -> [Int: CouchError] {
        guard Partition.current, let limit = nodeConfiguration.value("couchdb", "max_partition_size").flatMap(Int.init), limit > 0 else {
            return [:]
        }
        var full: [String: Bool] = [:]
        var refused: [Int: CouchError] = [:]
        for (position, document) in documents.enumerated() where !document.isDeleted {
            guard let partition = Partition.of(document.id) else { continue }
            if full[partition] == nil {
                let (low, high) = Partition.range(partition)
                full[partition] = try await db.figures(ofIDsFrom: low, below: high).bodyBytes >= limit
            }
            guard full[partition] == true else { continue }
            if let current = try await db.document(withID: document.id),
                let before = try? JSON.object(current.body).serialized().count,
                let after = try? JSON.object(document.body).serialized().count, after <= before {
                continue
            }
            refused[position] = CouchError(.forbidden, "partition_overflow", "Partition limit exceeded due to update on '\(document.id)'")
        }
        return refused
    }
}
