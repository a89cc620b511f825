import Foundation

/// A Mango query (CouchDB `_find`).
///
/// ```swift
/// var query = FindQuery(selector: try MangoSelector(["type": "invoice", "total": ["$gt": 100]]))
/// query.sort = [.descending("total")]
/// query.limit = 10
/// let page = try await db.find(query)
/// ```
public struct FindQuery: Sendable {
    /// Which documents.
    public var selector: MangoSelector
    /// The fields of each document to return (dotted paths; `nil`: the whole document).
    public var fields: [String]?
    /// The order, all ascending or all descending; needs an index that gives it.
    public var sort: [SortField] = []
    /// At most this many documents (`nil`: all; CouchDB's HTTP default is 25).
    public var limit: Int?
    /// Documents to pass over first.
    public var skip = 0
    /// Where the previous page ended (``FindResult/bookmark``).
    public var bookmark: String?
    /// The index to use: `[design document]` or `[design document, name]`.
    public var useIndex: [String] = []
    /// Include `_conflicts` in the documents.
    public var conflicts = false
    /// Report ``FindResult/executionStatistics``.
    public var executionStatistics = false
    /// Bring the index up to date first (CouchDB `update`; `false` reads it as it is).
    public var update = true
    /// Which documents the asker may see at all (a server's access rules); applied before `skip` and
    /// `limit`, as if the others did not exist.
    package var visible: (@Sendable (Document) -> Bool)?
    /// Which json indexes the planner may choose (a server's partitioned or global ones).
    package var usableIndexes: (@Sendable (MangoIndex) -> Bool)?

    /// A query for the documents `selector` matches, with CouchDB's defaults for everything else.
    public init(selector: MangoSelector) {
        self.selector = selector
    }
}
