import Foundation

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
