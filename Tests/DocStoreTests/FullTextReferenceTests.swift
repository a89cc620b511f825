@testable import DocStore
import Foundation
import XCTest

/// Hundreds of seeded random queries over a random corpus, answered by the index and by a reference
/// evaluator of Docs/Search.md's rules written here from their text, token by token: both must find
/// the same documents. One index has up to three fields per document (terms matched field by field,
/// combined by document), the other one field each (the whole query as one FTS5 expression). After
/// 400 queries a fifth of the documents change or go, and 100 more queries check the updated index.
final class FullTextReferenceTests: XCTestCase {
    private static let vocabulary = ["apple", "apricot", "banana", "band", "bandit", "cherry", "date", "fig"]

    private static let allFields = IndexDefinition(name: "all", version: "1") { doc, emit in
        guard case .array(let fields)? = doc["fields"] else { return }
        for field in fields { if let text = field.stringValue { emit(FullTextSearch.createKey(text), nil) } }
    }
    private static let firstField = IndexDefinition(name: "first", version: "1") { doc, emit in
        if case .array(let fields)? = doc["fields"], let text = fields.first?.stringValue { emit(FullTextSearch.createKey(text), nil) }
    }

    func testRandomQueriesFindWhatTheSpecSays() async throws {
        var random = SplitMix64(seed: 16)
        let db = try await makeDatabase(self) { $0.indexes = [Self.allFields, Self.firstField] }
        var corpus: [String: [[String]]] = [:]
        var documents: [Document] = []
        for number in 0..<120 {
            let fields = (0..<Int.random(in: 1...3, using: &random)).map { _ in
                (0..<Int.random(in: 0...12, using: &random)).map { _ in Self.vocabulary.randomElement(using: &random)! }
            }
            let id = String(format: "d%03d", number)
            corpus[id] = fields
            // Case, punctuation and spacing vary; the tokens do not.
            let texts = fields.map { tokens in
                tokens.map { Bool.random(using: &random) ? $0.uppercased() : $0 }
                    .joined(separator: [" ", ", ", " - ", "  "].randomElement(using: &random)!)
            }
            documents.append(Document(id: id, body: ["fields": .array(texts.map { .string($0) })]))
        }
        _ = try await db.save(documents)

        var compared = 0, nonEmpty = 0
        for round in 0..<500 {
            // After 400 queries, a fifth of the documents get new fields and a few go: the index is
            // updated in one go (old fields out in row order, then the new ones) and must match again.
            if round == 400 {
                var changed: [Document] = []
                for id in corpus.keys.sorted() where Int.random(in: 0..<5, using: &random) == 0 {
                    var document = try await db.document(withID: id)!
                    if Int.random(in: 0..<4, using: &random) == 0 {
                        document.isDeleted = true
                        corpus[id] = nil
                    } else {
                        let fields = (0..<Int.random(in: 1...3, using: &random)).map { _ in
                            (0..<Int.random(in: 1...10, using: &random)).map { _ in Self.vocabulary.randomElement(using: &random)! }
                        }
                        corpus[id] = fields
                        document["fields"] = .array(fields.map { .string($0.joined(separator: " ")) })
                    }
                    changed.append(document)
                }
                XCTAssertGreaterThan(changed.count, 10)
                _ = try await db.save(changed)
            }
            let tree = Self.randomNode(depth: 3, using: &random)
            let text = Self.render(tree, using: &random)
            let parsed = try TextQuery(text)
            XCTAssertEqual(parsed.root, tree, "the parser reads \(text) as generated")
            for (index, fieldsOf) in [("all", { (fields: [[String]]) in fields }), ("first", { (fields: [[String]]) in Array(fields.prefix(1)) })] {
                let expected = corpus.filter { Self.matches(tree, fieldsOf($0.value)) }.keys.sorted()
                let result = try await db.search(index: index, query: text)
                XCTAssertEqual(result.rows.map(\.documentID).sorted(), expected, "\(index): \(text)")
                XCTAssertEqual(result.totalRows, expected.count, "\(index): \(text)")
                XCTAssertEqual(result.rows.map(\.score), result.rows.map(\.score).sorted(by: >), "ordered by score")
                compared += 1
                if !expected.isEmpty { nonEmpty += 1 }
            }
        }
        XCTAssertGreaterThan(nonEmpty, compared / 4, "the corpus and queries are tuned so that many queries find something")
    }

    // MARK: Random queries

    private static func randomPhrase(using random: inout SplitMix64) -> TextQuery.Expression {
        switch Int.random(in: 0..<5, using: &random) {
        case 0:
            let word = vocabulary.randomElement(using: &random)!
            return .phrase([String(word.prefix(Int.random(in: 2...4, using: &random)))], prefix: true)
        case 1:
            return .phrase((0..<2).map { _ in vocabulary.randomElement(using: &random)! }, prefix: false)
        default:
            return .phrase([vocabulary.randomElement(using: &random)!], prefix: false)
        }
    }

    private static func randomNode(depth: Int, using random: inout SplitMix64) -> TextQuery.Expression {
        let choice = depth == 0 ? 0 : Int.random(in: 0..<7, using: &random)
        switch choice {
        case 0, 1: return randomPhrase(using: &random)
        case 2:
            var node = TextQuery.Expression.near(randomPhrase(using: &random), randomPhrase(using: &random), distance: randomDistance(using: &random))
            if Bool.random(using: &random) { node = .near(node, randomPhrase(using: &random), distance: randomDistance(using: &random)) }
            return node
        case 3: return .and(randomNode(depth: depth - 1, using: &random), randomNode(depth: depth - 1, using: &random))
        case 4: return .or(randomNode(depth: depth - 1, using: &random), randomNode(depth: depth - 1, using: &random))
        default: return .not(randomNode(depth: depth - 1, using: &random), randomNode(depth: depth - 1, using: &random))
        }
    }

    private static func randomDistance(using random: inout SplitMix64) -> Int {
        Bool.random(using: &random) ? TextQuery.defaultNearDistance : Int.random(in: 0...4, using: &random)
    }

    /// The query text, in random case where it does not matter, every group in parentheses.
    private static func render(_ node: TextQuery.Expression, using random: inout SplitMix64) -> String {
        switch node {
        case .phrase(let tokens, let prefix):
            let words = tokens.map { Bool.random(using: &random) ? $0.capitalized : $0 }
            return (tokens.count == 1 ? words[0] : "\"" + words.joined(separator: " ") + "\"") + (prefix ? "*" : "")
        case .near(let a, let b, let distance):
            let near = distance == TextQuery.defaultNearDistance && Bool.random(using: &random) ? "NEAR" : "NEAR/\(distance)"
            return render(a, using: &random) + " \(near) " + render(b, using: &random)
        case .and(let a, let b):
            let and = Bool.random(using: &random) ? " AND " : " "
            return "(" + render(a, using: &random) + and + render(b, using: &random) + ")"
        case .or(let a, let b): return "(" + render(a, using: &random) + " OR " + render(b, using: &random) + ")"
        case .not(let a, let b): return "(" + render(a, using: &random) + " NOT " + render(b, using: &random) + ")"
        }
    }

    // MARK: The reference evaluator

    /// Whether a document with these fields (each a list of tokens) matches, by §8's words: phrases
    /// and NEAR within one field, AND/OR/NOT across the document.
    private static func matches(_ node: TextQuery.Expression, _ fields: [[String]]) -> Bool {
        switch node {
        case .phrase, .near: return fields.contains { fieldMatches(node, $0) }
        case .and(let a, let b): return matches(a, fields) && matches(b, fields)
        case .or(let a, let b): return matches(a, fields) || matches(b, fields)
        case .not(let a, let b): return matches(a, fields) && !matches(b, fields)
        }
    }

    /// Where a phrase starts in a field.
    private static func starts(of phrase: TextQuery.Expression, in field: [String]) -> [Int] {
        guard case .phrase(let tokens, let prefix) = phrase, field.count >= tokens.count else { return [] }
        // Plain loops: the suite runs this model a few million times in a debug build.
        var result: [Int] = []
        candidates: for start in 0...(field.count - tokens.count) {
            for offset in tokens.indices {
                let token = field[start + offset]
                let matches = prefix && offset == tokens.count - 1 ? token.hasPrefix(tokens[offset]) : token == tokens[offset]
                if !matches { continue candidates }
            }
            result.append(start)
        }
        return result
    }

    private static func fieldMatches(_ node: TextQuery.Expression, _ field: [String]) -> Bool {
        if case .phrase = node { return !starts(of: node, in: field).isEmpty }
        // A NEAR chain: each neighbouring pair has instances with at most `distance` tokens between
        // them, in either order.
        let (phrases, distances) = TextQuery.nearChain(node)
        return distances.indices.allSatisfy { index in
            let (a, b) = (phrases[index], phrases[index + 1])
            guard case .phrase(let aTokens, _) = a, case .phrase(let bTokens, _) = b else { return false }
            let bStarts = starts(of: b, in: field)
            return starts(of: a, in: field).contains { aStart in
                bStarts.contains { bStart in
                    let between = aStart <= bStart ? bStart - (aStart + aTokens.count) : aStart - (bStart + bTokens.count)
                    return between <= distances[index]
                }
            }
        }
    }
}
