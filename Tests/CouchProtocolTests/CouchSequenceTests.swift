import CouchProtocol
import Foundation
import XCTest

/// DocServer's sequences in CouchDB 3's form. The expected terms are what Erlang/OTP 25 (CouchDB
/// 3.3.3's) writes with `term_to_binary([{nonode@nohost, [0, 4294967295], {N, <<"docstor">>,
/// nonode@nohost}}])`, recorded with `erl` and base64url-encoded without padding, so CouchDB's own
/// tests, which decode the opaque part, read DocServer's sequences.
final class CouchSequenceTests: XCTestCase {
    func testSequencesAreCouchDBsTerms() {
        let erlang: [(Int64, String)] = [
            (0, "g2wAAAABaANkAA1ub25vZGVAbm9ob3N0bAAAAAJhAG4EAP////9qaANhAG0AAAAHZG9jc3RvcmQADW5vbm9kZUBub2hvc3Rq"),
            (4, "g2wAAAABaANkAA1ub25vZGVAbm9ob3N0bAAAAAJhAG4EAP////9qaANhBG0AAAAHZG9jc3RvcmQADW5vbm9kZUBub2hvc3Rq"),
            (300, "g2wAAAABaANkAA1ub25vZGVAbm9ob3N0bAAAAAJhAG4EAP////9qaANiAAABLG0AAAAHZG9jc3RvcmQADW5vbm9kZUBub2hvc3Rq"),
            (2_147_483_648, "g2wAAAABaANkAA1ub25vZGVAbm9ob3N0bAAAAAJhAG4EAP////9qaANuBAAAAACAbQAAAAdkb2NzdG9yZAANbm9ub2RlQG5vaG9zdGo="),
            (1_099_511_627_776, "g2wAAAABaANkAA1ub25vZGVAbm9ob3N0bAAAAAJhAG4EAP////9qaANuBgAAAAAAAAFtAAAAB2RvY3N0b3JkAA1ub25vZGVAbm9ob3N0ag=="),
        ]
        for (sequence, base64) in erlang {
            let urlSafe = base64.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                .replacingOccurrences(of: "=", with: "")
            XCTAssertEqual(CouchSequence.string(sequence), "\(sequence)-\(urlSafe)")
            XCTAssertEqual(CouchSequence.parse(CouchSequence.string(sequence)), sequence)
        }
    }

    /// The opaque part is built in one buffer; Foundation's base64 of the same term, made url-safe,
    /// is the reference, over sequences of every integer encoding the term uses.
    func testOpaquePartIsTheTermsBase64URL() throws {
        var random = SystemRandomNumberGenerator()
        let samples: [Int64] = [0, 1, 255, 256, Int64(Int32.max), Int64(Int32.max) + 1, Int64.max]
            + (0..<300).map { _ in Int64.random(in: 0...Int64.max, using: &random) >> Int64.random(in: 0...62, using: &random) }
        for sequence in samples {
            let text = CouchSequence.string(sequence)
            let opaque = try XCTUnwrap(text.split(separator: "-", maxSplits: 1).last.map(String.init))
            var base64 = opaque.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
            while base64.count % 4 != 0 { base64 += "=" }
            let term = try XCTUnwrap(Data(base64Encoded: base64), text)
            XCTAssertEqual(Array(term.prefix(2)), [131, 108], "an external term holding a list: \(text)")
            XCTAssertEqual(Data(base64Encoded: base64)?.base64EncodedString(), base64, "canonical base64: \(text)")
            XCTAssertTrue(text.hasPrefix("\(sequence)-"))
            XCTAssertEqual(CouchSequence.parse(text), sequence)
        }
    }

    /// `since` as CouchDB 3.3.3 and older clients send it; anything else is malformed (CouchDB:
    /// 400 "Malformed sequence supplied in 'since' parameter.").
    func testSinceValues() {
        XCTAssertEqual(CouchSequence.parse("0"), 0)
        XCTAssertEqual(CouchSequence.parse("17"), 17, "a plain number, as DocServer gave them before")
        XCTAssertEqual(CouchSequence.parse("12-g1AAAACbeJzLYWBgYMpgTmEQ"), 12)
        for malformed in ["", "abc", "-1", "5-", "5-a b", "x-g1AA", "[1]", "1.5"] {
            XCTAssertNil(CouchSequence.parse(malformed), malformed)
        }
    }
}
