@testable import DocStore
import XCTest

/// Every combination of what is stored, which revision an edit names and the write policy.
final class EditDecisionTests: XCTestCase {
    private enum Outcome: Equatable {
        case parent(RevisionID?)
        case conflict(String)
        case notFound(String)
    }

    private func rev(_ text: String) -> RevisionID { RevisionID(text)! }

    private func outcome(_ stored: EditDecision.Stored?, _ revision: RevisionID?, _ policy: WritePolicy) -> Outcome {
        do {
            return .parent(try EditDecision.parent(stored: stored, named: revision, policy: policy))
        } catch let error as DocStoreError {
            switch error.code {
            case .conflict: return .conflict(error.reason)
            case .notFound: return .notFound(error.reason)
            default: XCTFail("unexpected \(error)"); return .notFound("?")
            }
        } catch {
            XCTFail("unexpected \(error)")
            return .notFound("?")
        }
    }

    func testEveryCombination() {
        let root = rev("1-aaaa"), left = rev("2-bbbb"), right = rev("2-cccc"), unknown = rev("3-ffff")
        var live = RevisionTree()
        live.addRevision(root, parent: nil, isDeleted: false)
        live.addRevision(left, parent: root, isDeleted: false)
        live.addRevision(right, parent: root, isDeleted: false)
        let liveStored = EditDecision.Stored(tree: live, winner: right, isDeleted: false)
        XCTAssertEqual(live.winner?.revision, right)
        let tombstone = rev("2-dddd")
        var gone = RevisionTree()
        gone.addRevision(root, parent: nil, isDeleted: false)
        gone.addRevision(tombstone, parent: root, isDeleted: true)
        let goneStored = EditDecision.Stored(tree: gone, winner: tombstone, isDeleted: true)

        let conflict = Outcome.conflict("Document update conflict.")
        let exists = Outcome.conflict("Document already exists")
        // (stored, named revision) → outcome under .put, .upsert, .add, .update
        let table: [(String, EditDecision.Stored?, RevisionID?, [Outcome])] = [
            ("nothing, no revision", nil, nil, [.parent(nil), .parent(nil), .parent(nil), .notFound("missing")]),
            ("nothing, a revision", nil, left, [.parent(left), .parent(left), conflict, .notFound("missing")]),
            ("live, no revision", liveStored, nil, [conflict, .parent(right), exists, .parent(right)]),
            ("live, the winning leaf", liveStored, right, [.parent(right), .parent(right), exists, .parent(right)]),
            ("live, the other leaf", liveStored, left, [.parent(left), .parent(left), exists, .parent(left)]),
            ("live, an ancestor", liveStored, root, [conflict, conflict, conflict, conflict]),
            ("live, an unknown revision", liveStored, unknown, [conflict, conflict, conflict, conflict]),
            ("deleted, no revision", goneStored, nil, [.parent(tombstone), .parent(tombstone), .parent(tombstone), .notFound("deleted")]),
            ("deleted, its leaf", goneStored, tombstone, [conflict, conflict, conflict, .notFound("deleted")]),
            ("deleted, an ancestor", goneStored, root, [conflict, conflict, conflict, .notFound("deleted")]),
            ("deleted, an unknown revision", goneStored, unknown, [conflict, conflict, conflict, .notFound("deleted")]),
        ]
        for (label, stored, revision, expected) in table {
            for (policy, outcome) in zip([WritePolicy.put, .upsert, .add, .update], expected) {
                XCTAssertEqual(self.outcome(stored, revision, policy), outcome, "\(label), \(policy)")
            }
        }
        // A deletion: of a deleted document, a conflict even without a revision (CouchDB 3.3.3);
        // otherwise as an edit.
        for policy in [WritePolicy.put, .upsert, .add] {
            XCTAssertThrowsError(try EditDecision.parent(stored: goneStored, named: nil, policy: policy, isDeletion: true), "\(policy)")
        }
        XCTAssertEqual(try EditDecision.parent(stored: liveStored, named: left, policy: .put, isDeletion: true), left)
    }

    /// The new revision's name depends on the parent, the deletion flag, the body and the attachments
    /// only (its CouchDB ids are in ``RevisionHashTests``).
    func testRevisionHash() {
        let body: JSONObject = ["a": 1]
        let first = RevisionHash.revision(parent: nil, isDeleted: false, body: body)
        XCTAssertEqual(first.generation, 1)
        XCTAssertEqual(first, RevisionHash.revision(parent: nil, isDeleted: false, body: body), "deterministic")
        XCTAssertNotEqual(first, RevisionHash.revision(parent: nil, isDeleted: true, body: body))
        XCTAssertNotEqual(first, RevisionHash.revision(parent: nil, isDeleted: false, body: ["a": 2]))
        XCTAssertNotEqual(first, RevisionHash.revision(parent: nil, isDeleted: false, body: ["a": 1.0]), "1 and 1.0 differ, as in CouchDB")
        let second = RevisionHash.revision(parent: first, isDeleted: false, body: body)
        XCTAssertEqual(second.generation, 2)
        XCTAssertNotEqual(second.digest, first.digest)
    }
}
