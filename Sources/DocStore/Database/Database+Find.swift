import Foundation

/// A Mango query (CouchDB `_find`).
///
/// ```swift
/// var query = FindQuery(selector: try MangoSelector(["type": "invoice", "total": ["$gt": 100]]))
/// query.sort = [.descending("total")]
/// query.limit = 10
/// let page = try await db.find(query)
/// ```
public struct FindQuery: Sendable {
    /// Which documents.
    public var selector: MangoSelector
    /// The fields of each document to return (dotted paths; `nil`: the whole document).
    public var fields: [String]?
    /// The order, all ascending or all descending; needs an index that gives it.
    public var sort: [SortField] = []
    /// At most this many documents (`nil`: all; CouchDB's HTTP default is 25).
    public var limit: Int?
    /// Documents to pass over first.
    public var skip = 0
    /// Where the previous page ended (``FindResult/bookmark``).
    public var bookmark: String?
    /// The index to use: `[design document]` or `[design document, name]`.
    public var useIndex: [String] = []
    /// Include `_conflicts` in the documents.
    public var conflicts = false
    /// Report ``FindResult/executionStatistics``.
    public var executionStatistics = false
    /// Bring the index up to date first (CouchDB `update`; `false` reads it as it is).
    public var update = true
    /// Which documents the asker may see at all (a server's access rules); applied before `skip` and
    /// `limit`, as if the others did not exist.
    package var visible: (@Sendable (Document) -> Bool)?
    /// Which json indexes the planner may choose (a server's partitioned or global ones).
    package var usableIndexes: (@Sendable (MangoIndex) -> Bool)?

    public init(selector: MangoSelector) {
        self.selector = selector
    }
}

/// The answer to a ``FindQuery``.
public struct FindResult: Sendable {
    /// The matching documents (only the asked fields when ``FindQuery/fields`` is set).
    public let documents: [Document]
    /// With ``FindQuery/fields``, the documents as CouchDB writes them: the asked fields in the order
    /// asked.
    package let projected: [JSON]?
    /// Where this page ended: pass it as ``FindQuery/bookmark`` for the next one. `nil` when no document
    /// was returned.
    public let bookmark: String?
    /// CouchDB's warnings: no index used, a `use_index` not followed, many documents examined per result.
    public let warning: String?
    /// What the query read, when asked for.
    public let executionStatistics: ExecutionStatistics?

    /// The documents decoded as `T` (see ``Document/decode(as:dateFormat:)``).
    ///
    /// ```swift
    /// let invoices = try await db.find(query).decode(as: Invoice.self)
    /// ```
    public func decode<T: Decodable>(as type: T.Type, dateFormat: DateFormat = .iso8601) throws -> [T] {
        try documents.map { try $0.decode(as: type, dateFormat: dateFormat) }
    }

    /// CouchDB's `execution_stats`.
    public struct ExecutionStatistics: Sendable, Hashable {
        public var totalKeysExamined = 0
        public var totalDocumentsExamined = 0
        public var resultsReturned = 0
        public var executionTime: Duration = .zero
    }
}

extension Database {
    /// Rows read at a time by ``find(_:)``.
    static let findPageSize = 200

    /// Runs a Mango query: CouchDB's planner chooses the index (see ``explain(_:)``), its rows in the
    /// planned range are read in order, each document is matched against the whole selector, and
    /// `skip`, `limit` and `fields` apply to the matches.
    /// - Throws: ``DocStoreError`` — ``DocStoreError/Code/noUsableIndex`` for a sort no index gives,
    ///   ``DocStoreError/Code/unsupportedMixedSort`` for a sort in both directions,
    ///   ``DocStoreError/Code/invalidBookmark`` for a bookmark this database did not hand out,
    ///   ``DocStoreError/Code/invalidFieldName`` for a malformed field.
    public func find(_ query: FindQuery) async throws -> FindResult {
        try ensureOpen()
        let started = ContinuousClock.now
        if query.selector.usesText, let (index, warning) = try await textSearch(for: query) {
            return try await findText(query, index: index, warning: warning, started: started)
        }
        let plan = try await plan(query)
        let fields = try query.fields.map { try $0.map(FieldPath.init) }
        let after = try query.bookmark.map(FindBookmark.init(encoded:))
        var statistics = FindResult.ExecutionStatistics()
        var documents: [Document] = []
        var projected: [JSON] = []
        var last: FindBookmark?
        var toSkip = max(0, query.skip)
        let limit = query.limit ?? Int.max

        /// Takes one candidate (`holds`: whether the selector holds on it); returns false once the limit
        /// is reached.
        func consider(_ document: Document, key: JSON, holds: Bool) throws -> Bool {
            statistics.totalDocumentsExamined += 1
            if let visible = query.visible, !visible(document) { return true }
            guard holds else { return true }
            if toSkip > 0 {
                toSkip -= 1
                return true
            }
            try FindProjection.append(document, fields: fields, to: &documents, projected: &projected)
            last = FindBookmark(key: key, documentID: document.id)
            return documents.count < limit
        }

        // The sequence the chosen json index had mapped when its last page was read.
        var indexSequence: Int64 = -1
        let keyConditions = query.conflicts ? nil : KeyConditions(query.selector, choice: plan.choice)
        if let keys = plan.keys, limit > 0 {
            /// The next page of candidates in reading order (key, id, document), `nil` at the end.
            let nextPage: () async throws -> [(key: JSON, id: String, document: Document?)]?
            switch plan.choice {
            case .allDocuments:
                var range = AllDocumentsQuery(descending: plan.descending)
                let start = FindBookmark.documentID(keys.start?.first, isLower: !plan.descending)
                let end = FindBookmark.documentID(keys.end?.first, isLower: plan.descending)
                range.startKey = after?.documentID ?? start ?? nil
                range.endKey = end ?? nil
                range.limit = Self.findPageSize
                range.includeDocuments = !query.conflicts
                // A range ending at "" (`{"_id": {"$lte": ""}}`) reads nothing, as in CouchDB.
                var done = start == nil || end == nil
                nextPage = {
                    guard !done else { return nil }
                    let page = try await self.allDocuments(range, counting: false).rows
                    done = page.count < Self.findPageSize
                    if let last = page.last {
                        range.startKey = last.id
                        range.skip = 1
                    }
                    return page.filter { $0.error == nil && !$0.isDeleted }
                        .map { (.string($0.id), $0.id, $0.document) }
                }
            case .json(let index):
                var range = IndexQuery()
                range.descending = plan.descending
                range.startKey = after?.key ?? keys.start.map { .array($0.map(FindBookmark.keyValue)) }
                range.startKeyDocID = after?.documentID
                range.endKey = keys.end.map { .array($0.map(FindBookmark.keyValue)) }
                range.limit = Self.findPageSize
                range.reduce = false
                // Each row's document is read in the same statement (a join on the index file's
                // connection); with conflicts it is read below with them instead.
                range.includeDocuments = !query.conflicts
                if !query.update { range.stale = .ok }
                range.updateSeq = keyConditions != nil
                var done = false
                nextPage = {
                    guard !done else { return nil }
                    let result = try await self.query(index.indexName, range)
                    indexSequence = result.updateSequence ?? -1
                    let page = result.rows
                    done = page.count < Self.findPageSize
                    if let last = page.last {
                        range.startKey = last.key
                        range.startKeyDocID = last.documentID
                        range.skip = 1
                        range.stale = .ok
                    }
                    return page.compactMap { row in row.documentID.map { (row.key, $0, row.document) } }
                }
            }
            var skipFirst = after != nil
            reading: while true {
                guard let page = try await nextPage() else { break }
                for (key, id, read) in page {
                    if case .json = plan.choice { statistics.totalKeysExamined += 1 }
                    // A bookmark starts after the row it names, if that row is still there.
                    if skipFirst, let after, id == after.documentID, JSONCollator.compare(key, after.key) == 0 {
                        skipFirst = false
                        continue
                    }
                    skipFirst = false
                    // Design documents are examined but never answers, as in CouchDB.
                    if id.hasPrefix("_design/") {
                        statistics.totalDocumentsExamined += 1
                        continue
                    }
                    // Conflicts are read with each document (a page's read has only the winners).
                    let found = query.conflicts ? try await document(withID: id, includeConflicts: true) : read
                    guard let document = found else { continue }
                    // A document the index had mapped in this revision has the key's values at the
                    // index's fields: the selector is judged on them, not read out of the body again.
                    let holds = if let keyConditions, let sequence = document.sequence, sequence <= indexSequence,
                        let judged = keyConditions.hold(onKey: key) { judged } else { query.selector.matches(document) }
                    if try !consider(document, key: key, holds: holds) { break reading }
                }
            }
        }
        statistics.resultsReturned = documents.count
        statistics.executionTime = ContinuousClock.now - started
        var warnings: [String] = []
        // A query that reads nothing (a contradictory range) answers without warnings, as CouchDB.
        if let warning = plan.warning, plan.keys != nil { warnings.append(warning) }
        if plan.choice == .allDocuments, plan.keys != nil { warnings.append("No matching index found, create an index to optimize query time.") }
        let examined = statistics.totalDocumentsExamined
        if examined > 10 * max(1, documents.count) {
            warnings.append("The number of documents examined is high in proportion to the number of results returned. Consider adding a more specific index to improve this.")
        }
        return FindResult(documents: documents, projected: fields == nil ? nil : projected, bookmark: last?.encoded ?? query.bookmark, warning: warnings.isEmpty ? nil : warnings.joined(separator: "\n"),
                          executionStatistics: query.executionStatistics ? statistics : nil)
    }

    /// The plan of a Mango query: the index CouchDB's planner would choose and the range it reads.
    func plan(_ query: FindQuery) async throws -> QueryPlanner.Plan {
        if Set(query.sort.map(\.descending)).count > 1 {
            throw DocStoreError(.unsupportedMixedSort, "Sorts currently only support a single direction for all fields.")
        }
        let indexes = try await synchronizeMangoIndexes().filter { $0.type == .json && query.usableIndexes?($0) != false }
        return try QueryPlanner.plan(query.selector, sort: query.sort, indexes: indexes, useIndex: query.useIndex)
    }
}

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

/// Where a page of a find ended: the index key and document id of its last document, encoded as
/// URL-safe base64 of `{"startkey": …, "startkey_docid": …}`.
struct FindBookmark: Sendable {
    let key: JSON
    let documentID: String

    init(key: JSON, documentID: String) {
        self.key = key
        self.documentID = documentID
    }

    init(encoded text: String) throws {
        guard let data = Base64URL.decode(text), let json = try? JSON(parsing: data),
            let key = json["startkey"], let id = json["startkey_docid"]?.stringValue else {
            throw DocStoreError(.invalidBookmark, "Invalid bookmark value: \(text)")
        }
        self.init(key: key, documentID: id)
    }

    var encoded: String {
        let json: JSON = ["startkey": key, "startkey_docid": .string(documentID)]
        return Base64URL.encode(json.description.utf8)
    }

    /// A key bound as a value of the index: `max` is an object above every value of the prefix.
    static func keyValue(_ bound: QueryPlanner.Bound) -> JSON {
        switch bound {
        case .min: .null
        case .max: .object(["\u{FFF0}": .null])
        case .value(let value): value
        }
    }

    /// A bound of `_all_docs` as a document id: `.some(nil)` for an open edge, `nil` when no id lies on
    /// its side of it. As in CouchDB, only a string bounds `_all_docs` (any other bound leaves that edge
    /// open, and the selector decides); ids are non-empty, so `""` as the upper edge leaves nothing.
    /// - Parameter isLower: whether the bound is the lower edge of the id range (the start of an
    ///   ascending read, the end of a descending one).
    static func documentID(_ bound: QueryPlanner.Bound?, isLower: Bool) -> String?? {
        guard case .value(.string(let id))? = bound else { return .some(nil) }
        if id.isEmpty { return isLower ? .some(nil) : nil }
        return .some(id)
    }
}

/// `fields`: the asked paths of a document, nested as in it; an array position becomes a member name
/// (`"items.0.name"` gives `{"items": {"0": {"name": …}}}`), as CouchDB does.
enum FindProjection {
    /// Adds an answer: `document`, or with `fields` only those (also as CouchDB writes them, to
    /// `projected`).
    static func append(_ document: Document, fields: [FieldPath]?, to documents: inout [Document], projected: inout [JSON]) throws {
        guard let fields else {
            documents.append(document)
            return
        }
        let answer = project(document.json(), fields)
        projected.append(answer)
        documents.append(try Document(json: answer))
    }

    static func project(_ document: JSON, _ fields: [FieldPath]) -> JSON {
        var result = JSONObject()
        for field in fields {
            guard case .found(let value) = field.lookup(in: document), !field.components.isEmpty else { continue }
            insert(value, at: field.components[...], into: &result)
        }
        return .object(result)
    }

    private static func insert(_ value: JSON, at path: ArraySlice<String>, into object: inout JSONObject) {
        let name = path.first!
        if path.count == 1 {
            object[name] = value
            return
        }
        var child = object[name]?.objectValue ?? [:]
        insert(value, at: path.dropFirst(), into: &child)
        object[name] = .object(child)
    }
}

/// How a Mango query would be answered (CouchDB `_explain`).
public struct FindExplanation: Sendable {
    /// The index read: a json index, or `nil` for `_all_docs`.
    public let index: MangoIndex?
    /// The selector after normalisation (``MangoSelector/normalized``).
    public let selector: JSON
    /// Where reading starts and ends, as `_explain` shows them (`"<MAX>"` above every key of the prefix;
    /// `null` when nothing is read, or for the start of `_all_docs` read from its first id).
    public let startKey: JSON
    public let endKey: JSON
    /// Whether the index is read backwards.
    public let descending: Bool
    /// Whether the index's key range expresses the whole selector, so that no document it yields is
    /// filtered out after it is read.
    public let coversSelector: Bool
    /// A `use_index` that was not followed.
    public let warning: String?
}

extension Database {
    /// How ``find(_:)`` would answer `query`: the index CouchDB's planner chooses and the key range
    /// (for a `$text` query, the text index searched).
    public func explain(_ query: FindQuery) async throws -> FindExplanation {
        try ensureOpen()
        if query.selector.usesText, let (index, warning) = try await textSearch(for: query) {
            _ = try query.selector.textQuery()
            return FindExplanation(index: index, selector: query.selector.normalized, startKey: .null, endKey: .null,
                                   descending: false, coversSelector: query.selector.condition.isAnything, warning: warning)
        }
        let plan = try await plan(query)
        let shown = plan.shownKeys
        let index: MangoIndex? = if case .json(let chosen) = plan.choice { chosen } else { nil }
        let ranged = Set(plan.choice.fields.prefix(plan.ranges?.count ?? 0))
        let covers = query.selector.condition.conjunctsAreRanges(on: ranged)
        return FindExplanation(index: index, selector: query.selector.normalized, startKey: shown.start,
                               endKey: shown.end, descending: plan.descending, coversSelector: covers, warning: plan.warning)
    }
}

extension Condition {
    /// Whether it is `{}`, which anything matches.
    var isAnything: Bool {
        if case .anything = self { return true }
        return false
    }

    /// Whether every top-level conjunct is a `$eq $gt $gte $lt $lte` comparison of one of `fields`.
    func conjunctsAreRanges(on fields: Set<String>) -> Bool {
        switch self {
        case .anything: return true
        case .all(let parts): return parts.allSatisfy { $0.conjunctsAreRanges(on: fields) }
        case .field(let path, .compare(let comparison, _)): return comparison != .ne && fields.contains(path.description)
        default: return false
        }
    }
}
