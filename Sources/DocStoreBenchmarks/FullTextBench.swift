import CSQLite
import DocStore
import Foundation

/// `fts_build` and `fts_query`: a full-text index over documents of about 60 words, built and then
/// searched with 1 000 mixed queries, through DocStore and through a raw SQLite FTS5 table doing the
/// same work — the raw side with FTS5's own `unicode61 remove_diacritics 2` tokenizer.
///
/// - Build: DocStore registers an index whose map function emits `FullTextSearch.createKey(text)`
///   and brings it up to date (reading, parsing and mapping each document); the raw side fills an
///   FTS5 table from the same texts stored in a table of JSON bodies (`json_extract`).
/// - Update (`fts_update`): every tenth document gets a new text; DocStore updates the index from the
///   changes feed (old fields out, new ones in), the raw side `UPDATE`s the same FTS5 rows.
/// - Query: each query asks for the ten best matches with their document ids, scores, snippets and
///   the number of matches; the raw side runs the same FTS5 expression (`ORDER BY rank LIMIT 10`,
///   `snippet()`, `count(*)`) and reads each match's document id.
struct FullTextBench {
    let count: Int
    /// Each query in the PredixSDK's full-text syntax and as the raw FTS5 expression.
    let queries: [(ours: String, raw: String)]
    private let seed: UInt64
    /// 4 000 pseudo-words, and their cumulative Zipf weights (the k-th most common has weight 1/k).
    private let vocabulary: [String]
    private let cumulative: [Double]

    init(count: Int, seed: UInt64 = 0xF75) {
        var g = SplitMix64(seed: seed)
        let syllables = ["ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "pe", "da", "gu", "ri", "zo", "be", "fa", "qui", "tor", "men", "stra", "lin"]
        var vocabulary: [String] = []
        var seen = Set<String>()
        while vocabulary.count < 4000 {
            let word = (0..<(2 + Int(g.next() % 3))).map { _ in syllables[Int(g.next() % UInt64(syllables.count))] }.joined()
            if seen.insert(word).inserted { vocabulary.append(word) }
        }
        var cumulative: [Double] = []
        var total = 0.0
        for rank in 1...vocabulary.count {
            total += 1 / Double(rank)
            cumulative.append(total)
        }
        self.count = count
        self.seed = seed
        self.vocabulary = vocabulary
        self.cumulative = cumulative
        // Queries built from the documents' own words, so that most find something.
        var queries: [(String, String)] = []
        for number in 0..<1000 {
            let words = Self.text(Int(g.next() % UInt64(count)), seed: seed, vocabulary: vocabulary, cumulative: cumulative)
                .lowercased().split { !$0.isLetter }.map(String.init)
            let at = Int(g.next() % UInt64(words.count - 6))
            switch number % 5 {
            case 0:
                queries.append((words[at], words[at]))
            case 1:
                queries.append(("\(words[at]) \(words[at + 3])", "\(words[at]) \(words[at + 3])"))
            case 2:
                queries.append(("\"\(words[at]) \(words[at + 1])\"", "\"\(words[at]) \(words[at + 1])\""))
            case 3:
                let prefix = String(words[at].prefix(4))
                queries.append(("\(prefix)*", "\(prefix)*"))
            default:
                queries.append(("\(words[at]) NEAR/5 \(words[at + 4])", "NEAR(\(words[at]) \(words[at + 4]), 5)"))
            }
        }
        self.queries = queries
    }

    /// Document `index`'s text: 45–75 words in sentences, made again from the seed whenever it is asked
    /// for, so that the harness does not hold 100 000 texts (some 45 MB) beside what it measures.
    func text(_ index: Int) -> String {
        Self.text(index, seed: seed, vocabulary: vocabulary, cumulative: cumulative)
    }

    private static func text(_ index: Int, seed: UInt64, vocabulary: [String], cumulative: [Double]) -> String {
        var g = SplitMix64(seed: seed ^ (UInt64(index) &+ 1) &* 0x9E37_79B9_7F4A_7C15)
        let total = cumulative[cumulative.count - 1]
        func word() -> String {
            let target = Double(g.next() % 1_000_000) / 1_000_000 * total
            var low = 0, high = cumulative.count - 1
            while low < high {
                let middle = (low + high) / 2
                if cumulative[middle] < target { low = middle + 1 } else { high = middle }
            }
            return vocabulary[low]
        }
        let words = (0..<(45 + Int(g.next() % 31))).map { _ in word() }
        // Sentences: a capital after each full stop.
        var sentence = ""
        for (index, word) in words.enumerated() {
            let capital = index == 0 || index % 12 == 0
            sentence += (index == 0 ? "" : index % 12 == 0 ? ". " : index % 5 == 0 ? ", " : " ") + (capital ? word.capitalized : word)
        }
        return sentence + "."
    }

    /// Documents `range`, `{"type": "note", "text": …}`.
    func documents(_ range: Range<Int>) -> [Document] {
        range.map { Document(id: String(format: "note-%07d", $0), body: ["type": "note", "text": .string(text($0))]) }
    }

    static let index = IndexDefinition(name: "fts", version: "1") { doc, emit in
        if let text = doc["text"]?.stringValue { emit(FullTextSearch.createKey(text), nil) }
    }

    /// Builds both indexes (timed), then runs the queries on both (timed); checks that both sides find
    /// the same number of matches for every query.
    /// Runs the operations of `selected` (`fts_build` always runs: the others need the index) and
    /// returns each one's time through DocStore and through raw FTS5.
    func run(folder: URL, selected: Set<String>) async throws -> [String: (ours: Double, baseline: Double)] {
        let raw = RawSQLiteBaseline(path: folder.appendingPathComponent("raw-fts.sqlite").path)
        raw.storeTexts((0..<count).lazy.map { (String(format: "note-%07d", $0), text($0)) })
        let db = try await Database.open(name: "fts", directory: folder)
        // Saved 5 000 at a time, so that the harness never holds every document parsed.
        for start in stride(from: 0, to: count, by: 5000) { _ = try await db.save(documents(start..<min(count, start + 5000))) }
        try await db.flushWriteAheadLog()

        let buildBaseline = time { raw.buildFullTextIndex() }
        let buildOurs = try await timeAsync {
            try await db.register(Self.index)
            _ = try await db.search(index: "fts", query: "x", limit: 0)
        }
        var timings = ["fts_build": (buildOurs, buildBaseline)]
        if selected.contains("fts_update") {
            // Every tenth document gets the text of the next: DocStore brings the index up to date
            // from the changes; the raw side updates the same rows of its FTS5 table in one transaction.
            let changedRows = Array(stride(from: 0, to: count, by: 10))
            var changed: [Document] = []
            for row in changedRows {
                guard var document = try await db.document(withID: String(format: "note-%07d", row)) else { continue }
                document["text"] = .string(text((row + 1) % count))
                changed.append(document)
            }
            _ = try await db.save(changed)
            let ours = try await timeAsync { _ = try await db.search(index: "fts", query: "x", limit: 0) }
            let newTexts = changedRows.map { ($0 + 1, text(($0 + 1) % count)) }
            let baseline = time { raw.updateFullText(rows: newTexts) }
            timings["fts_update"] = (ours, baseline)
        }
        guard selected.contains("fts_query") else {
            await db.close()
            return timings
        }
        var ourTotals: [Int] = []
        let queryOurs = try await timeAsync {
            for (query, _) in queries {
                ourTotals.append(try await db.search(index: "fts", query: query, snippets: true, limit: 10).totalRows)
            }
        }
        var rawTotals: [Int] = []
        let queryBaseline = time { rawTotals = raw.searchFullText(queries.map(\.raw), limit: 10) }
        if ourTotals != rawTotals {
            let differing = zip(queries, zip(ourTotals, rawTotals)).first { $0.1.0 != $0.1.1 }!
            throw BenchError("fts_query: \(differing.0.ours) found \(differing.1.0) documents, raw FTS5 \(differing.1.1)")
        }
        await db.close()
        timings["fts_query"] = (queryOurs, queryBaseline)
        return timings
    }
}

struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// The raw side of ``FullTextBench``: the baseline's table of JSON bodies, and an FTS5 table over
/// their text.
extension RawSQLiteBaseline {
    /// Stores `(id, text)` rows as `{"type": "note", "text": …}` bodies, in one transaction.
    func storeTexts(_ rows: some Sequence<(String, String)>) {
        let statement = prepare("INSERT INTO docs (id, json) VALUES (?, ?)")
        exec("BEGIN IMMEDIATE")
        for (id, text) in rows {
            sqlite3_bind_text(statement, 1, id, -1, transient)
            let json = try! JSON.object(["type": "note", "text": .string(text)]).serialized()
            json.withUnsafeBytes { _ = sqlite3_bind_blob(statement, 2, $0.baseAddress, Int32($0.count), transient) }
            precondition(sqlite3_step(statement) == SQLITE_DONE)
            sqlite3_reset(statement)
        }
        exec("COMMIT")
        sqlite3_finalize(statement)
    }

    func buildFullTextIndex() {
        exec("CREATE VIRTUAL TABLE fts USING fts5 (text, tokenize = 'unicode61 remove_diacritics 2')")
        exec("BEGIN IMMEDIATE")
        exec("INSERT INTO fts (rowid, text) SELECT seq, json_extract(json, '$.text') FROM docs")
        exec("COMMIT")
    }

    /// Gives rows (`seq`) new texts in the FTS5 table, in one transaction.
    func updateFullText(rows: [(Int, String)]) {
        let statement = prepare("UPDATE fts SET text = ? WHERE rowid = ?")
        exec("BEGIN IMMEDIATE")
        for (row, text) in rows {
            sqlite3_bind_text(statement, 1, text, -1, transient)
            sqlite3_bind_int64(statement, 2, Int64(row))
            precondition(sqlite3_step(statement) == SQLITE_DONE)
            sqlite3_reset(statement)
        }
        exec("COMMIT")
        sqlite3_finalize(statement)
    }

    /// Runs each FTS5 expression for its `limit` best matches (rowid, score, snippet, document id) and
    /// the number of matches, which it returns.
    func searchFullText(_ expressions: [String], limit: Int) -> [Int] {
        let page = prepare("SELECT rowid, -rank, snippet(fts, 0, '[', ']', '…', 32) FROM fts WHERE fts MATCH ? ORDER BY rank LIMIT ?")
        let id = prepare("SELECT id FROM docs WHERE seq = ?")
        let count = prepare("SELECT count(*) FROM fts WHERE fts MATCH ?")
        defer { for statement in [page, id, count] { sqlite3_finalize(statement) } }
        return expressions.map { expression in
            defer {
                sqlite3_reset(page)
                sqlite3_reset(count)
            }
            sqlite3_bind_text(page, 1, expression, -1, transient)
            sqlite3_bind_int(page, 2, Int32(limit))
            var found = 0
            while sqlite3_step(page) == SQLITE_ROW {
                _ = sqlite3_column_double(page, 1)
                _ = String(cString: sqlite3_column_text(page, 2))
                sqlite3_bind_int64(id, 1, sqlite3_column_int64(page, 0))
                if sqlite3_step(id) == SQLITE_ROW { _ = String(cString: sqlite3_column_text(id, 0)) }
                sqlite3_reset(id)
                found += 1
            }
            guard found == limit else { return found }
            sqlite3_bind_text(count, 1, expression, -1, transient)
            precondition(sqlite3_step(count) == SQLITE_ROW)
            return Int(sqlite3_column_int64(count, 0))
        }
    }
}
