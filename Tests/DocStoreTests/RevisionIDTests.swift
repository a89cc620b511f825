import DocStore
import Foundation
import Testing

/// Revision id parsing and ordering, written with Swift Testing's parameterized tests.
@Suite struct RevisionIDTests {
    @Test(arguments: [
        ("1-abc", 1, "abc"),
        ("12-967a00dff5e02add41819138abb3284d", 12, "967a00dff5e02add41819138abb3284d"),
        ("3-x-y", 3, "x-y"),
        ("99999999-z", 99_999_999, "z"),
        ("1-", 1, ""),
    ])
    func parsesValidRevisions(text: String, generation: Int, digest: String) throws {
        let revision = try #require(RevisionID(text))
        #expect(revision.generation == generation)
        #expect(revision.digest == digest)
        #expect(revision.description == text)
    }

    @Test(arguments: ["", "1", "-abc", "0-abc", "a-abc", "1- a", "-1-abc", "1.5-abc", "999999999999-a", "1-\u{e9}"])
    func rejectsMalformedRevisions(text: String) {
        #expect(RevisionID(text) == nil)
        #expect(throws: DocStoreError.self) { try RevisionID.parse(text) }
    }

    /// What CouchDB 3.3.3's `couch_doc:parse_rev` reads (checked against one): an Erlang integer before
    /// the first `-`, then any hash, 32 characters only if hex. Some of it names no revision DocStore holds.
    @Test(arguments: [
        ("1-abc", "1-abc"), ("+2-abc", "2-abc"), ("02-abc", "2-abc"), ("0-abc", nil), ("1-", "1-"), ("+0-a", nil),
        ("1-" + String(repeating: "A", count: 32), "1-" + String(repeating: "A", count: 32)), ("1-a b", nil),
    ] as [(String, String?)])
    func readsWhatCouchDBReads(text: String, held: String?) {
        #expect(RevisionID.isReadableByCouchDB(text))
        #expect(RevisionID.readAsCouchDB(text)?.description == held)
    }

    @Test(arguments: ["", "abc", "-1-abc", "a-abc", "1.5-a", "1-" + String(repeating: "z", count: 32), " 1-a"])
    func refusesWhatCouchDBRefuses(text: String) {
        #expect(!RevisionID.isReadableByCouchDB(text))
        #expect(RevisionID.readAsCouchDB(text) == nil)
    }

    /// CouchDB's `open_revs` list of missing revisions: each once as it writes it back, in its order.
    @Test func ordersTextsAsCouchDBWritesThemBack() {
        let hex = "8b2bc181373a348640d43d7830d6abbc"
        #expect(RevisionID.couchDBOrdered(["3-a", "1-zzz", "+1-b", "0-x", "1-\(hex.uppercased())", "1-b", "bad", "10-a", "1-"])
                == ["0-x", "1-", "1-b", "1-zzz", "1-\(hex)", "3-a", "10-a"])
    }

    @Test func ordersByGenerationThenBytes() throws {
        #expect(RevisionID("2-zzz")! < RevisionID("10-aaa")!)
        #expect(RevisionID("2-abc")! < RevisionID("2-abd")!)
        #expect(RevisionID("2-B")! < RevisionID("2-a")!, "byte order, not case-insensitive")
        #expect(RevisionID("2-a")! == RevisionID(generation: 2, digest: "a"))
    }

    /// CouchDB 3.3.3 holds a 32-hex-digit hash as its 16 bytes and any other as text, and orders by
    /// those bytes: of `1-b8f9…` and `1-bb` the first wins (`b8` > `62`), though its text sorts first.
    @Test func mixedHashesOrderAsInCouchDB() throws {
        let hex = try #require(RevisionID("1-b8f97323e7f26909d5e0c8d2764a765f"))
        let text = try #require(RevisionID("1-bb"))
        #expect(text < hex)
        #expect(!(hex < text))
        // The bytes 00 00 … sort before the text "0" (30), though the hex text "000…" sorts after it.
        #expect(try #require(RevisionID("1-00000000000000000000000000000000")) < #require(RevisionID("1-0")))
    }

    /// A 32-lowercase-hex hash is held as a number, anything else as text; the two forms must agree on
    /// text, equality and hashing, and order by CouchDB's bytes (a hex hash's 16 bytes, a text's UTF-8).
    @Test func hexAndTextHashesBehaveAsTheirText() throws {
        let hex = "0123456789abcdef0123456789abcdef"
        let texts = [
            "7-\(hex)", "7-ffffffffffffffffffffffffffffffff", "7-00000000000000000000000000000000",
            "7-0123456789ABCDEF0123456789ABCDEF", "7-0123456789abcdef0123456789abcde", "7-0123456789abcdef0123456789abcdef0",
            "7-0123456789abcdef0123456789abcdeg", "7-a", "7-g", "7-8", "7-0", "7-fffffffffffffffffffffffffffffffg",
            "123456789-\(hex)", "1-\(hex)",
        ]
        let revisions = try texts.map { try #require(RevisionID($0)) }
        for (text, revision) in zip(texts, revisions) {
            #expect(revision.description == text)
            #expect(RevisionID(generation: revision.generation, digest: revision.digest) == revision)
            #expect(try JSONDecoder().decode(RevisionID.self, from: JSONEncoder().encode(revision)) == revision)
        }
        for (a, ra) in zip(texts, revisions) {
            for (b, rb) in zip(texts, revisions) {
                #expect((ra == rb) == (a == b), "\(a) == \(b)")
                if ra == rb { #expect(ra.hashValue == rb.hashValue) }
                let byBytes = ra.generation != rb.generation
                    ? ra.generation < rb.generation
                    : Self.couchBytes(ra.digest).lexicographicallyPrecedes(Self.couchBytes(rb.digest))
                #expect((ra < rb) == byBytes, "\(a) < \(b)")
            }
        }
        #expect(Set(revisions + revisions).count == texts.count)
    }

    /// The bytes CouchDB compares a hash by.
    static func couchBytes(_ digest: String) -> [UInt8] {
        let digits = Array(digest.utf8)
        guard digits.count == 32, digits.allSatisfy({ (48...57).contains($0) || (97...102).contains($0) }) else { return digits }
        func value(_ digit: UInt8) -> UInt8 { digit <= 57 ? digit - 48 : digit - 87 }
        return stride(from: 0, to: 32, by: 2).map { value(digits[$0]) << 4 | value(digits[$0 + 1]) }
    }
}
