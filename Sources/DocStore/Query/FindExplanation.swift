import Foundation

/// How a Mango query would be answered (CouchDB `_explain`).
public struct FindExplanation: Sendable {
    /// The index read: a json index, or `nil` for `_all_docs`.
    public let index: MangoIndex?
    /// The selector after normalisation (``MangoSelector/normalized``).
    public let selector: JSON
    /// Where reading starts and ends, as `_explain` shows them (`"<MAX>"` above every key of the prefix;
    /// `null` when nothing is read, or for the start of `_all_docs` read from its first id).
    public let startKey: JSON
    /// Where reading ends (see ``startKey``).
    public let endKey: JSON
    /// Whether the index is read backwards.
    public let descending: Bool
    /// Whether the index's key range expresses the whole selector, so that no document it yields is
    /// filtered out after it is read.
    public let coversSelector: Bool
    /// A `use_index` that was not followed.
    public let warning: String?
}
