import XCTest
@testable import DocStore

/// The full-text query syntax as Docs/Search.md states it: each element, the precedence and
/// grouping, folding, and the position of each kind of malformed query.
final class TextQueryTests: XCTestCase {
    private func parsed(_ text: String) throws -> String { try TextQuery(text).description }

    func testTokensAreRunsOfLettersAndDigitsFoldedForCaseAndDiacritics() {
        XCTAssertEqual(TextTokenizer.tokens("Café crème, 42 fois! L'été"), ["cafe", "creme", "42", "fois", "l", "ete"])
        XCTAssertEqual(TextTokenizer.tokens("ÉCOLE école Ecole"), ["ecole", "ecole", "ecole"])
        XCTAssertEqual(TextTokenizer.tokens("Ἀθῆναι Москва́"), ["αθηναι", "москва"])
        XCTAssertEqual(TextTokenizer.tokens("rock-n-roll  x_y"), ["rock", "n", "roll", "x", "y"])
        XCTAssertEqual(TextTokenizer.tokens("東京タワー"), ["東京タワー"], "a run of letters is one token")
        XCTAssertEqual(TextTokenizer.tokens("  ,.;  "), [])
        XCTAssertEqual(TextTokenizer.tokens("\u{301}abc \u{301}"), ["abc"], "a mark with no letter before it is no token")
        XCTAssertEqual(TextTokenizer.tokens("हिन्दी"), ["हिन्दी"], "marks inside a word stay in it")
    }

    func testWordsPhrasesAndPrefixes() throws {
        XCTAssertEqual(try TextQuery("apple").root, .phrase(["apple"], prefix: false))
        XCTAssertEqual(try TextQuery("Rés*").root, .phrase(["res"], prefix: true), "query words fold like document text")
        XCTAssertEqual(try TextQuery("\"rock AND roll\"").root, .phrase(["rock", "and", "roll"], prefix: false),
                       "inside quotes everything is words")
        XCTAssertEqual(try TextQuery("rock-n-roll").root, .phrase(["rock", "n", "roll"], prefix: false),
                       "a word of several tokens is a phrase of them")
        XCTAssertEqual(try parsed("apple and pie"), "((apple AND and) AND pie)", "lower-case operators are words")
    }

    func testOperatorsAndTheirPrecedence() throws {
        XCTAssertEqual(try parsed("a b"), "(a AND b)")
        XCTAssertEqual(try parsed("a AND b"), "(a AND b)")
        XCTAssertEqual(try parsed("a OR b c"), "(a OR (b AND c))", "AND binds tighter than OR")
        XCTAssertEqual(try parsed("a b NOT c"), "(a AND (b NOT c))", "NOT binds tighter than AND")
        XCTAssertEqual(try parsed("a NOT b NEAR c"), "(a NOT (b NEAR/10 c))", "NEAR binds tightest")
        XCTAssertEqual(try parsed("a NEAR/3 \"b c\""), "(a NEAR/3 \"b c\")")
        XCTAssertEqual(try parsed("a NEAR/0 b"), "(a NEAR/0 b)")
        XCTAssertEqual(try parsed("a OR b OR c"), "((a OR b) OR c)", "equal precedence groups to the left")
        XCTAssertEqual(try parsed("a NOT b NOT c"), "((a NOT b) NOT c)")
        XCTAssertEqual(try parsed("a NEAR b NEAR/2 c"), "((a NEAR/10 b) NEAR/2 c)")
        XCTAssertEqual(try parsed("(a OR b) c"), "((a OR b) AND c)", "parentheses group")
        XCTAssertEqual(try parsed("a (b OR (c NOT d))"), "(a AND (b OR (c NOT d)))")
    }

    func testMalformedQueriesNameThePosition() {
        let cases: [(String, Int, String)] = [
            ("", 1, "empty"), ("   ", 4, "empty"),
            ("\"rock roll", 1, "Unbalanced '\"'"), ("apple \"pie", 7, "Unbalanced '\"'"),
            ("(apple pie", 1, "Unbalanced '('"), ("apple) pie", 6, "Unbalanced ')'"), ("((a)", 1, "Unbalanced '('"),
            ("apple AND", 7, "AND has nothing after it"), ("apple OR", 7, "OR has nothing after it"),
            ("NOT x", 1, "NOT"), ("AND x", 1, "AND"), ("OR x", 1, "OR"), ("NEAR x", 1, "NEAR"),
            ("x AND OR y", 7, "AND is followed by OR"), ("x OR NOT y", 6, "OR is followed by NOT"),
            ("a NEAR/x b", 3, "NEAR/ must be followed by a number"), ("a NEAR/ b", 3, "NEAR/ must be followed by a number"),
            ("()", 1, "Empty parentheses"), ("a () b", 3, "Empty parentheses"), (")(", 1, "')'"),
            ("a NEAR (b OR c)", 8, "not a group"), ("(a OR b) NEAR c", 1, "not a group"), ("*", 1, "'*' must follow a word"), ("a*b", 1, "'*' may only end a word"),
            ("x ,,, y", 3, "no letters or digits"),
            // Found by the full-text fuzz target: 1 190 nested parentheses ran the parser out of stack.
            (String(repeating: "(", count: 5000) + "a", 65, "Parentheses nest deeper than 64 levels"),
            (Array(repeating: "a", count: 1025).joined(separator: " OR "), 1 + 1024 * 5, "more than 1024 terms"),
        ]
        for (query, position, reason) in cases {
            XCTAssertThrowsError(try TextQuery(query), query) { error in
                guard let error = error as? DocStoreError else { return XCTFail("\(query): \(error)") }
                XCTAssertEqual(error.code, .invalidQuery, query)
                XCTAssertTrue(error.reason.hasPrefix("Malformed full-text query at character \(position):"), "\(query): \(error.reason)")
                XCTAssertTrue(error.reason.contains(reason), "\(query): \(error.reason)")
                XCTAssertEqual(error.byteOffset, position - 1, query)
            }
        }
    }

    func testTheDeepestAndLongestQueriesAllowedParse() throws {
        _ = try TextQuery(String(repeating: "(", count: 64) + "a" + String(repeating: ")", count: 64))
        _ = try TextQuery(Array(repeating: "a", count: 1024).joined(separator: " "))
    }

    func testThePositionCountsCharactersAndTheOffsetBytes() {
        XCTAssertThrowsError(try TextQuery("été AND")) { error in
            XCTAssertEqual((error as? DocStoreError)?.reason, "Malformed full-text query at character 5: AND has nothing after it")
            XCTAssertEqual((error as? DocStoreError)?.byteOffset, 6, "é is two bytes of UTF-8")
        }
    }
}
