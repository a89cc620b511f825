/// A full-text query in the PredixSDK's full-text syntax (Docs/Search.md), parsed and checked.
///
/// - Words match tokens; a word that folds to several tokens (`rock-n-roll`) is a phrase of them.
/// - `"double quoted"` is a phrase: consecutive tokens, everything inside is words (`"rock AND roll"`).
/// - `term*` matches tokens that begin with `term`.
/// - Terms side by side are ANDed; `AND`, `OR`, `NOT` and `NEAR` are operators only in upper case.
/// - `a NOT b`: matches a and not b. `a NEAR b`: both within 10 tokens of each other (at most 10 others
///   between them), in either order, in one field; `a NEAR/n b`: at most n between. `NEAR` joins words
///   and phrases, not groups in parentheses.
/// - Parentheses group. Precedence from highest: `NEAR`, `NOT`, `AND` (explicit or implicit), `OR`;
///   operators of equal precedence group to the left.
///
/// Query words are folded as document text is: `Rés*` means `res*`.
public struct TextQuery: Sendable, Hashable, CustomStringConvertible {
    /// A parsed query.
    public indirect enum Expression: Sendable, Hashable {
        /// Consecutive tokens (one for a word); with `prefix`, the last matches as a prefix.
        case phrase([String], prefix: Bool)
        /// Matches both.
        case and(Expression, Expression)
        /// Matches either.
        case or(Expression, Expression)
        /// Matches the first and not the second.
        case not(Expression, Expression)
        /// Both sides within `distance` tokens of each other (that many others at most between them).
        case near(Expression, Expression, distance: Int)
    }

    /// `NEAR` without a distance: at most this many tokens between.
    public static let defaultNearDistance = 10

    /// The query as written.
    public let text: String
    /// The parsed query.
    public let root: Expression

    /// Parses `text`.
    /// - Throws: ``DocStoreError/Code/invalidQuery`` naming the position (1-based, in characters) of the
    ///   problem — an unbalanced quote or parenthesis, an operator without an operand on each side
    ///   (`apple AND`, `NOT x`, `x AND OR y`), `NEAR/` without digits, an empty query — with
    ///   ``DocStoreError/byteOffset`` its offset in the UTF-8 of `text`.
    public init(_ text: String) throws {
        self.text = text
        var parser = TextQueryParser(text: text)
        root = try parser.parse()
    }

    /// A query already parsed (the conjunction of several, for instance).
    init(text: String, root: Expression) {
        self.text = text
        self.root = root
    }

    public var description: String { Self.describe(root) }

    /// A fully parenthesised form, to see the grouping: `(a AND (b NEAR/10 c))`.
    static func describe(_ node: Expression) -> String {
        switch node {
        case .phrase(let tokens, let prefix):
            let words = tokens.joined(separator: " ") + (prefix ? "*" : "")
            return tokens.count == 1 ? words : "\"\(words)\""
        case .and(let a, let b): return "(\(describe(a)) AND \(describe(b)))"
        case .or(let a, let b): return "(\(describe(a)) OR \(describe(b)))"
        case .not(let a, let b): return "(\(describe(a)) NOT \(describe(b)))"
        case .near(let a, let b, let distance): return "(\(describe(a)) NEAR/\(distance) \(describe(b)))"
        }
    }
}

/// The recursive-descent parser behind ``TextQuery``: one token of look-ahead over the query's
/// characters.
struct TextQueryParser {
    private enum Token: Equatable {
        case word(String, prefix: Bool)
        case quoted(String)
        case and, or, not
        case near(Int)
        case open, close
        case end
    }

    private let characters: [Character]
    private let text: String
    private var index = 0
    /// The most terms (words and phrases) a query may hold, as Lucene's `maxClauseCount`, and the
    /// deepest its parentheses may nest: the parser, and everything that walks the expression it
    /// builds, recurse once per level, so that a long or deep query must not run out of stack.
    static let maximumTerms = 1024
    static let maximumDepth = 64
    private var terms = 0
    private var depth = 0
    /// The token after ``current``'s, read ahead, and where each starts.
    private var current: Token = .end
    private var currentStart = 0

    init(text: String) {
        self.text = text
        characters = Array(text)
    }

    mutating func parse() throws -> TextQuery.Expression {
        try advance()
        if current == .end { throw error("The query is empty", at: currentStart) }
        let node = try parseOr()
        switch current {
        case .end: return node
        case .close: throw error("Unbalanced ')'", at: currentStart)
        default: throw error("Unexpected \(describe(current))", at: currentStart)
        }
    }

    // MARK: Grammar: or := and (OR and)* ; and := not ((AND)? not)* ; not := near (NOT near)* ;
    // near := primary (NEAR primary)* ; primary := word | "phrase" | ( or )

    private mutating func parseOr() throws -> TextQuery.Expression {
        var node = try parseAnd()
        while current == .or {
            let at = currentStart
            try advance()
            node = .or(node, try operand(after: "OR", at: at) { try $0.parseAnd() })
        }
        return node
    }

    private mutating func parseAnd() throws -> TextQuery.Expression {
        var node = try parseNot()
        while true {
            if current == .and {
                let at = currentStart
                try advance()
                node = .and(node, try operand(after: "AND", at: at) { try $0.parseNot() })
            } else if startsOperand {
                node = .and(node, try parseNot())
            } else {
                return node
            }
        }
    }

    private mutating func parseNot() throws -> TextQuery.Expression {
        var node = try parseNear()
        while current == .not {
            let at = currentStart
            try advance()
            node = .not(node, try operand(after: "NOT", at: at) { try $0.parseNear() })
        }
        return node
    }

    /// `NEAR` joins words and phrases (and chains of them), never a group in parentheses, whose
    /// meaning as one side of a distance would be a guess.
    private mutating func parseNear() throws -> TextQuery.Expression {
        let firstIsGroup = current == .open, firstStart = currentStart
        var node = try parsePrimary()
        while case .near(let distance) = current {
            if firstIsGroup { throw error("NEAR joins words and phrases, not a group in parentheses", at: firstStart) }
            let at = currentStart
            try advance()
            if current == .open { throw error("NEAR joins words and phrases, not a group in parentheses", at: currentStart) }
            node = .near(node, try operand(after: "NEAR", at: at) { try $0.parsePrimary() }, distance: distance)
        }
        return node
    }

    private mutating func parsePrimary() throws -> TextQuery.Expression {
        let start = currentStart
        switch current {
        case .word(let word, let prefix):
            try countTerm(at: start)
            try advance()
            let tokens = TextTokenizer.tokens(word)
            guard !tokens.isEmpty else { throw error("\"\(word)\" has no letters or digits to search for", at: start) }
            return .phrase(tokens, prefix: prefix)
        case .quoted(let phrase):
            try countTerm(at: start)
            try advance()
            let tokens = TextTokenizer.tokens(phrase)
            guard !tokens.isEmpty else { throw error("The phrase has no letters or digits to search for", at: start) }
            return .phrase(tokens, prefix: false)
        case .open:
            if depth == TextQueryParser.maximumDepth {
                throw error("Parentheses nest deeper than \(TextQueryParser.maximumDepth) levels", at: start)
            }
            try advance()
            if current == .close { throw error("Empty parentheses", at: start) }
            depth += 1
            defer { depth -= 1 }
            let node = try parseOr()
            guard current == .close else {
                throw current == .end ? error("Unbalanced '('", at: start) : error("Unexpected \(describe(current))", at: currentStart)
            }
            try advance()
            return node
        case .end:
            throw error("A term is missing at the end of the query", at: start)
        default:
            throw error("Unexpected \(describe(current)): a term is expected here", at: start)
        }
    }

    /// Counts a word or phrase written at `at` against ``maximumTerms``.
    private mutating func countTerm(at start: Int) throws {
        terms += 1
        if terms > TextQueryParser.maximumTerms { throw error("The query has more than \(TextQueryParser.maximumTerms) terms", at: start) }
    }

    /// The operand after a binary operator written at `at`.
    private mutating func operand(after name: String, at: Int, _ parse: (inout TextQueryParser) throws -> TextQuery.Expression) throws -> TextQuery.Expression {
        guard startsOperand else {
            if current == .end { throw error("\(name) has nothing after it", at: at) }
            throw error("\(name) is followed by \(describe(current)) instead of a term", at: currentStart)
        }
        return try parse(&self)
    }

    private var startsOperand: Bool {
        switch current {
        case .word, .quoted, .open: return true
        default: return false
        }
    }

    // MARK: Lexer

    private mutating func advance() throws {
        while index < characters.count, characters[index].isWhitespace { index += 1 }
        currentStart = index
        guard index < characters.count else {
            current = .end
            return
        }
        let character = characters[index]
        switch character {
        case "(":
            index += 1
            current = .open
        case ")":
            index += 1
            current = .close
        case "\"":
            guard let close = characters[(index + 1)...].firstIndex(of: "\"") else {
                throw error("Unbalanced '\"'", at: index)
            }
            current = .quoted(String(characters[(index + 1)..<close]))
            index = close + 1
        default:
            var end = index
            while end < characters.count, !characters[end].isWhitespace, !"()\"".contains(characters[end]) { end += 1 }
            var word = String(characters[index..<end])
            index = end
            switch word {
            case "AND": current = .and
            case "OR": current = .or
            case "NOT": current = .not
            case "NEAR": current = .near(TextQuery.defaultNearDistance)
            default:
                if word.hasPrefix("NEAR/") {
                    let digits = word.dropFirst(5)
                    guard !digits.isEmpty, digits.allSatisfy(\.isASCII), digits.allSatisfy(\.isNumber), let distance = Int(digits) else {
                        throw error("NEAR/ must be followed by a number of tokens", at: currentStart)
                    }
                    current = .near(distance)
                    return
                }
                let prefix = word.hasSuffix("*")
                if prefix { word.removeLast() }
                if word.contains("*") { throw error("'*' may only end a word", at: currentStart) }
                if word.isEmpty { throw error("'*' must follow a word", at: currentStart) }
                current = .word(word, prefix: prefix)
            }
        }
    }

    private func describe(_ token: Token) -> String {
        switch token {
        case .word(let word, let prefix): return "\"\(word)\(prefix ? "*" : "")\""
        case .quoted(let phrase): return "the phrase \"\(phrase)\""
        case .and: return "AND"
        case .or: return "OR"
        case .not: return "NOT"
        case .near(let distance): return "NEAR/\(distance)"
        case .open: return "'('"
        case .close: return "')'"
        case .end: return "the end of the query"
        }
    }

    /// A malformed-query error at character `offset` (0-based here, 1-based in the message).
    private func error(_ reason: String, at offset: Int) -> DocStoreError {
        let byteOffset = String(characters[..<min(offset, characters.count)]).utf8.count
        return DocStoreError(.invalidQuery, "Malformed full-text query at character \(offset + 1): \(reason)", byteOffset: byteOffset)
    }
}

// MARK: Translation to FTS5

extension TextQuery {
    /// The query as one FTS5 expression, matched against one field. Phrases are quoted (FTS5 runs
    /// their words through ``TextTokenizer`` again, which leaves folded tokens as they are), `NOT`
    /// is FTS5's binary `NOT`, and a `NEAR` chain is a conjunction of FTS5 `NEAR` groups, one per
    /// neighbouring pair, each with its own distance (see ``nearChain(_:)``).
    static func fts5(_ node: Expression) -> String {
        switch node {
        case .phrase(let tokens, let prefix):
            return "\"" + tokens.joined(separator: " ") + "\"" + (prefix ? "*" : "")
        case .and(let a, let b): return "(\(fts5(a)) AND \(fts5(b)))"
        case .or(let a, let b): return "(\(fts5(a)) OR \(fts5(b)))"
        case .not(let a, let b): return "(\(fts5(a)) NOT \(fts5(b)))"
        case .near:
            let (phrases, distances) = nearChain(node)
            let groups = distances.indices.map { index in
                "NEAR(\(fts5(phrases[index])) \(fts5(phrases[index + 1])), \(distances[index]))"
            }
            return groups.count == 1 ? groups[0] : "(" + groups.joined(separator: " AND ") + ")"
        }
    }

    /// The phrases of a `NEAR` chain in order and the distance between each neighbouring pair:
    /// `a NEAR/2 b NEAR/5 c` is `a` within 2 of `b`, and `b` within 5 of `c`.
    static func nearChain(_ node: Expression) -> (phrases: [Expression], distances: [Int]) {
        guard case .near(let left, let right, let distance) = node else { return ([node], []) }
        let (leftPhrases, leftDistances) = nearChain(left)
        let (rightPhrases, rightDistances) = nearChain(right)
        return (leftPhrases + rightPhrases, leftDistances + [distance] + rightDistances)
    }

    /// Whether a `NOT` appears anywhere in the query.
    var hasNegation: Bool { Self.hasNegation(root) }

    private static func hasNegation(_ node: Expression) -> Bool {
        switch node {
        case .phrase, .near: return false
        case .not: return true
        case .and(let a, let b), .or(let a, let b): return hasNegation(a) || hasNegation(b)
        }
    }

    /// The terms that one field matches or not — phrases and `NEAR` chains — that a matching document
    /// may contain: every one but those after a `NOT`. They score documents and are marked in
    /// snippets.
    var positiveTerms: [Expression] {
        var terms: [Expression] = []
        func collect(_ node: Expression) {
            switch node {
            case .phrase, .near: if !terms.contains(node) { terms.append(node) }
            case .and(let a, let b), .or(let a, let b): collect(a); collect(b)
            case .not(let a, _): collect(a)
            }
        }
        collect(root)
        return terms
    }

    /// The positive terms as one FTS5 expression: a field matches it when it holds any of them.
    var positiveFTS5: String {
        positiveTerms.map(Self.fts5).joined(separator: " OR ")
    }
}
