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
