/// Runs one full-text search over an index's full-text tables (``IndexSchema/createTextTables(_:tokenizer:)``)
/// on a reader of the index file, with the database file attached as ``documentsSchema``.
///
/// Matching follows Docs/Search.md: phrases and `NEAR` within one field, `AND`, `OR` and `NOT` across
/// a document's fields.
/// - When no document has more than one field and the query has no `NOT`, the whole query is one FTS5
///   expression and FTS5 ranks it: one statement for the page, one for the count.
/// - Otherwise each term (a phrase or a `NEAR` chain) is matched field by field, the documents it
///   finds combined as sets by the query's `AND`, `OR` and `NOT`; documents are then scored by the
///   query's positive terms alone, so that no word after a `NOT` counts or is marked in a snippet.
struct FullTextEngine {
    let connection: SQLiteConnection
    let state: IndexState
    /// The schema the database file is attached as, for ``SearchQuery/includeDocuments``.
    let documentsSchema: String

    struct Row {
        let documentID: String
        let score: Double
        let snippet: String?
        let value: JSON
        let document: Document?
    }

    /// At most this many tokens in a snippet (FTS5 allows 64).
    static let snippetTokens = 32

    private var fts: String { state.fullTextTable }

    private var snippetColumn: String { "snippet(\(fts), 0, '[', ']', '…', \(Self.snippetTokens))" }

    func run(_ search: SearchQuery) throws -> (rows: [Row], total: Int) {
        guard state.hasText else { return ([], 0) }
        let limit = max(0, search.limit ?? Int.max)
        let skip = max(0, search.skip)
        let fieldByField = try connection.scalarInt("SELECT EXISTS (SELECT 1 FROM \(state.textTable) WHERE field > 0)") == 1
        if !fieldByField && !search.query.hasNegation {
            return try rankedByFTS5(search, limit: limit, skip: skip)
        }

        // The matching documents (by their row in the database file).
        let matching: Set<Int64>
        if fieldByField {
            var found: [String: Set<Int64>] = [:]
            matching = try documents(matching: search.query.root, found: &found)
        } else {
            matching = try documentRows(matching: TextQuery.fts5(search.query.root))
        }
        guard !matching.isEmpty else { return ([], 0) }

        // Each document's score is the sum over its fields that hold a positive term; its snippet and
        // value come from the best of them.
        let positive = search.query.positiveFTS5
        var scores: [Int64: (total: Double, bestRow: Int64, best: Double)] = [:]
        let statement = try connection.prepare(
            "SELECT \(fts).rowid, t.doc_row, -bm25(\(fts)) FROM \(fts) JOIN \(state.textTable) AS t ON t.row = \(fts).rowid WHERE \(fts) MATCH ?")
        defer { statement.reset() }
        try statement.bind(positive, at: 1)
        while try statement.step() {
            let documentRow = statement.int64(1)
            guard matching.contains(documentRow) else { continue }
            let row = statement.int64(0), score = statement.double(2)
            if let known = scores[documentRow] {
                scores[documentRow] = (known.total + score, score > known.best ? row : known.bestRow, max(score, known.best))
            } else {
                scores[documentRow] = (score, row, score)
            }
        }
        let ranked = scores.sorted { $0.value.total != $1.value.total ? $0.value.total > $1.value.total : $0.key < $1.key }
        let page = ranked.dropFirst(skip).prefix(limit)
        var rows: [Row] = []
        rows.reserveCapacity(page.count)
        let snippet = search.snippets
            ? try connection.prepare("SELECT \(snippetColumn) FROM \(fts) WHERE \(fts) MATCH ? AND rowid = ?") : nil
        defer { snippet?.reset() }
        for (_, score) in page {
            var text: String?
            if let snippet {
                snippet.reset()
                try snippet.bind(positive, at: 1)
                try snippet.bind(score.bestRow, at: 2)
                if try snippet.step() { text = snippet.text(0) }
            }
            if let row = try row(score.bestRow, score: score.total, snippet: text, includeDocument: search.includeDocuments) {
                rows.append(row)
            }
        }
        return (rows, ranked.count)
    }

    /// One FTS5 expression for the whole query, ranked by FTS5 (``run(_:)``'s first case).
    private func rankedByFTS5(_ search: SearchQuery, limit: Int, skip: Int) throws -> (rows: [Row], total: Int) {
        let expression = TextQuery.fts5(search.query.root)
        var found: [(row: Int64, score: Double, snippet: String?)] = []
        if limit > 0 {
            let statement = try connection.prepare(
                "SELECT rowid, -rank\(search.snippets ? ", " + snippetColumn : "") FROM \(fts) WHERE \(fts) MATCH ? ORDER BY rank LIMIT ? OFFSET ?")
            defer { statement.reset() }
            try statement.bind(expression, at: 1)
            try statement.bind(limit == Int.max ? -1 : limit, at: 2)
            try statement.bind(skip, at: 3)
            while try statement.step() {
                found.append((statement.int64(0), statement.double(1), search.snippets ? statement.text(2) : nil))
            }
        }
        // A page that ends before the limit, read from the first match, holds every match.
        let total = skip == 0 && found.count < limit
            ? found.count
            : Int(try connection.scalarInt("SELECT count(*) FROM \(fts) WHERE \(fts) MATCH ?", [.text(expression)]) ?? 0)
        var rows: [Row] = []
        rows.reserveCapacity(found.count)
        for match in found {
            if let row = try row(match.row, score: match.score, snippet: match.snippet, includeDocument: search.includeDocuments) {
                rows.append(row)
            }
        }
        return (rows, total)
    }

    /// The documents a query matches, combining per-field matches of its terms by document.
    /// `found` keeps each term's documents, should it appear twice.
    private func documents(matching node: TextQuery.Expression, found: inout [String: Set<Int64>]) throws -> Set<Int64> {
        switch node {
        case .phrase, .near:
            let expression = TextQuery.fts5(node)
            if let known = found[expression] { return known }
            let documents = try documentRows(matching: expression)
            found[expression] = documents
            return documents
        case .and(let a, let b):
            let left = try documents(matching: a, found: &found)
            return left.isEmpty ? left : left.intersection(try documents(matching: b, found: &found))
        case .or(let a, let b):
            return try documents(matching: a, found: &found).union(try documents(matching: b, found: &found))
        case .not(let a, let b):
            let left = try documents(matching: a, found: &found)
            return left.isEmpty ? left : left.subtracting(try documents(matching: b, found: &found))
        }
    }

    /// The documents with a field that matches the FTS5 `expression`.
    private func documentRows(matching expression: String) throws -> Set<Int64> {
        let statement = try connection.prepare(
            "SELECT t.doc_row FROM \(fts) JOIN \(state.textTable) AS t ON t.row = \(fts).rowid WHERE \(fts) MATCH ?")
        defer { statement.reset() }
        try statement.bind(expression, at: 1)
        var rows = Set<Int64>()
        while try statement.step() { rows.insert(statement.int64(0)) }
        return rows
    }

    /// The answer row for the field `row` of the text table: its document's id, the emitted value and,
    /// when asked, the document (`nil` if it went since the index was updated, as with `stale`).
    private func row(_ row: Int64, score: Double, snippet: String?, includeDocument: Bool) throws -> Row? {
        let statement = try connection.prepare(includeDocument
            ? "SELECT t.doc_id, t.value_json, \(DocumentRecords.currentColumns(of: "d.")) FROM \(state.textTable) AS t LEFT JOIN \(documentsSchema).docs AS d ON d.doc = t.doc_row AND d.id = t.doc_id AND d.deleted = 0 WHERE t.row = ?"
            : "SELECT t.doc_id, t.value_json FROM \(state.textTable) AS t WHERE t.row = ?")
        defer { statement.reset() }
        try statement.bind(row, at: 1)
        guard try statement.step() else { return nil }
        let id = statement.text(0)
        let value = try statement.withBlob(1) { try JSON(parsing: $0.bindMemory(to: UInt8.self)) }
        let document = includeDocument && !statement.isNull(2) ? try DocumentRecords.currentDocument(statement, id: id, from: 2) : nil
        return Row(documentID: id, score: score, snippet: snippet, value: value, document: document)
    }
}
