@testable import DocStore
import Foundation
import TestSupport
import XCTest

/// New revisions get the ids Apache CouchDB 3.3.3 gives the same edits (each recorded with curl from
/// the real one): JSON of every kind, edits of edits, deletions, parents with other digests, and an
/// attachment.
final class RevisionHashTests: XCTestCase {
    func testRevisionsAreCouchDBs() async throws {
        let db = try await makeDatabase(self)
        await XCTAssertEqualAsync(try await db.save(Document(id: "empty", body: [:])).revision?.description,
                                  "1-967a00dff5e02add41819138abb3284d")
        // CouchDB's own suite writes {val: r0}, then r1 and r2 on top (conflicts_test).
        var chain = try await db.save(Document(json: #"{"_id":"doc","val":"r0"}"#))
        XCTAssertEqual(chain.revision?.description, "1-47f3268e7546965196b57572099f4372")
        chain["val"] = "r1"
        chain = try await db.save(chain)
        XCTAssertEqual(chain.revision?.description, "2-1d8171ab3a91475cfece749291e6f897")
        chain["val"] = "r2"
        chain = try await db.save(chain)
        XCTAssertEqual(chain.revision?.description, "3-3fb0a342d2ce092fdcc77856dbe8a2ef")

        let everything = #"{"_id":"n","i":1,"neg":-5,"big":12345678901,"huge":123456789012345678901234567890,"f":1.5,"e":1e2,"t":true,"nil":null,"arr":[1,"two",[],{}],"obj":{"nested":{"x":"é✓😀"}},"s":""}"#
        await XCTAssertEqualAsync(try await db.save(Document(json: everything)).revision?.description, "1-6f5c2175cad5d4d7c25ea871d6bcc809")

        let live = try await db.save(Document(json: #"{"_id":"d","v":1}"#))
        XCTAssertEqual(live.revision?.description, "1-7a7e4b29f3af401e69b6f86e4c26b727")
        await XCTAssertEqualAsync(try await db.delete(id: "d", revision: live.revision!).description,
                                  "2-d9b15b235a7d0afdfe6058d5fb8afbd1")

        // Parents written elsewhere: a hex digest in capitals is the same bytes; other text is as it is.
        _ = try await db.insertRevisions([try Document(json: #"{"_id":"x","_rev":"1-ABCDEF0123456789ABCDEF0123456789"}"#),
                                          try Document(json: #"{"_id":"y","_rev":"1-abc"}"#)])
        await XCTAssertEqualAsync(try await db.save(Document(json: #"{"_id":"x","_rev":"1-ABCDEF0123456789ABCDEF0123456789","v":1}"#)).revision?.description,
                                  "2-9384013dcea5079d95e5be8e7a3e06b6")
        await XCTAssertEqualAsync(try await db.save(Document(json: #"{"_id":"y","_rev":"1-abc","v":1}"#)).revision?.description,
                                  "2-faee4c0d7be6f35f158e17bb137f693c")

        let attached = #"{"_id":"a1","v":1,"_attachments":{"a.bin":{"content_type":"application/octet-stream","data":"aGk="}}}"#
        await XCTAssertEqualAsync(try await db.save(Document(json: attached)).revision?.description, "1-1149934b9b20d7dc15ba8eae16e1b9bf")
    }

    /// A body in the stored form is hashed from its text, reading strings eight bytes at a time: the
    /// digest must be the parsed tree's, whatever the strings' lengths and wherever an escape, a
    /// control character or a non-ASCII character falls in them.
    func testTextAndTreeGiveOneDigest() throws {
        var generator = SplitMix64(seed: 0x7E47)
        let specials = ["\"", "\\", "\n", "\u{01}", "é", "日", "🎉", "/"]
        let parent = RevisionID(generation: 3, digest: "0123456789abcdef0123456789abcdef")
        for _ in 0..<3000 {
            var body = JSONObject()
            for member in 0..<Int(1 + generator.next() % 4) {
                var text = String(repeating: "a", count: Int(generator.next() % 40))
                if generator.next() % 3 != 0 {
                    let offset = text.index(text.startIndex, offsetBy: Int(generator.next() % UInt64(text.count + 1)))
                    text.insert(contentsOf: specials[Int(generator.next() % UInt64(specials.count))], at: offset)
                }
                body["k\(member)\(generator.next() % 2 == 0 ? text : "")"] = generator.next() % 4 == 0 ? .array([.string(text), .integer(member)]) : .string(text)
            }
            let stored = JSONObject(storedJSON: try JSON.object(body).serialized())
            XCTAssertEqual(RevisionHash.digest(parent: parent, isDeleted: false, body: stored, attachments: [:]),
                           RevisionHash.digest(parent: parent, isDeleted: false, body: body, attachments: [:]), "\(body)")
            XCTAssertTrue(stored.isUnparsedStoredForm, "hashed from the text")
        }
    }
}
