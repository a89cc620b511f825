import DocStore
import Testing

/// Revision id parsing and ordering, written with Swift Testing's parameterized tests.
@Suite struct RevisionIDTests {
    @Test(arguments: [
        ("1-abc", 1, "abc"),
        ("12-967a00dff5e02add41819138abb3284d", 12, "967a00dff5e02add41819138abb3284d"),
        ("3-x-y", 3, "x-y"),
        ("99999999-z", 99_999_999, "z"),
    ])
    func parsesValidRevisions(text: String, generation: Int, digest: String) throws {
        let revision = try #require(RevisionID(text))
        #expect(revision.generation == generation)
        #expect(revision.digest == digest)
        #expect(revision.description == text)
    }

    @Test(arguments: ["", "1", "-abc", "0-abc", "a-abc", "1-", "1- a", "-1-abc", "1.5-abc", "999999999999-a", "1-\u{e9}"])
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
}
