/// Where a local edit attaches in a document's revision tree: the revision the new one is a child
/// of, decided from what the database holds for the id, the revision the edit names and the write
/// policy — CouchDB's rules for `PUT`, plus DocStore's `add` and `update`. Pure: no storage, no clock.
///
/// | stored          | edit names         | `.put`            | `.upsert`           | `.add`              | `.update`          |
/// |-----------------|--------------------|-------------------|---------------------|---------------------|--------------------|
/// | nothing         | no revision        | new root          | new root            | new root            | not found          |
/// | nothing         | a revision         | child of it ¹     | child of it ¹       | conflict            | not found          |
/// | live document   | no revision        | conflict          | child of winner     | conflict (exists)   | child of winner    |
/// | live document   | a leaf             | child of the leaf | child of the leaf   | conflict (exists)   | child of the leaf  |
/// | live document   | not a leaf         | conflict          | conflict            | conflict            | conflict           |
/// | deleted         | no revision        | child of winner   | child of winner     | child of winner     | not found          |
/// | deleted         | any revision       | conflict          | conflict            | conflict            | not found          |
///
/// A deleted document is made again only from the root, as CouchDB 3.3 allows it: an edit that names
/// a revision (even the tombstone) is a conflict, and so is a deletion that names none.
///
/// ¹ As CouchDB 3.3: a new document may name a revision it descends from; the database records it as
/// an ancestor it does not have (`_revs_info` status `missing`).
enum EditDecision {
    /// What the database holds for the id.
    struct Stored {
        let tree: RevisionTree
        let winner: RevisionID
        let isDeleted: Bool
    }

    /// The parent of the new revision (`nil` for a new root).
    /// - Throws: ``DocStoreError/Code/conflict`` or ``DocStoreError/Code/notFound`` as the table says.
    static func parent(stored: Stored?, named revision: RevisionID?, policy: WritePolicy, isDeletion: Bool = false) throws -> RevisionID? {
        guard let stored else {
            if policy == .update { throw DocStoreError.notFound("missing") }
            if revision != nil && policy == .add { throw DocStoreError.conflict() }
            return revision
        }
        if policy == .update && stored.isDeleted { throw DocStoreError.notFound("deleted") }
        if stored.isDeleted && (revision != nil || isDeletion) { throw DocStoreError.conflict() }
        guard let revision else {
            guard stored.isDeleted || policy == .upsert || policy == .update else {
                throw DocStoreError.conflict(policy == .add ? "Document already exists" : "Document update conflict.")
            }
            return stored.winner
        }
        guard stored.tree.isLeaf(revision) else { throw DocStoreError.conflict() }
        if policy == .add && !stored.isDeleted { throw DocStoreError.conflict("Document already exists") }
        return revision
    }
}
