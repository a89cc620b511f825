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

    @Test func ordersByGenerationThenBytes() throws {
        #expect(RevisionID("2-zzz")! < RevisionID("10-aaa")!)
        #expect(RevisionID("2-abc")! < RevisionID("2-abd")!)
        #expect(RevisionID("2-B")! < RevisionID("2-a")!, "byte order, not case-insensitive")
        #expect(RevisionID("2-a")! == RevisionID(generation: 2, digest: "a"))
    }

    /// A 32-lowercase-hex hash is held as a number, anything else as text; the two forms must agree on
    /// text, equality, hashing and order with each other and with the plain byte rules.
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
                    : ra.digest.utf8.lexicographicallyPrecedes(rb.digest.utf8)
                #expect((ra < rb) == byBytes, "\(a) < \(b)")
            }
        }
        #expect(Set(revisions + revisions).count == texts.count)
    }
}
