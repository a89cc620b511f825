/// The options of a query on a map/reduce index, as CouchDB's view query parameters.
///
/// ```swift
/// var query = IndexQuery()
/// query.startKey = ["2026", "01"]
/// query.endKey = ["2026", "12", [:]]     // {} sorts after every string: the whole year
/// query.limit = 20
/// let page = try await db.query("sales/by-month", query)
/// ```
public struct IndexQuery: Sendable, Hashable {
    /// Only rows with exactly this key (CouchDB `key`).
    public var key: JSON?
    /// Only rows with these keys, in the order given (CouchDB `keys`).
    public var keys: [JSON]?
    /// The first key of the range (the last one when ``descending``); `nil` for an open start.
    public var startKey: JSON?
    /// The last key of the range (the first one when ``descending``); `nil` for an open end.
    public var endKey: JSON?
    /// Among rows with key ``startKey``, start at this document id.
    public var startKeyDocID: String?
    /// Among rows with key ``endKey``, end at this document id.
    public var endKeyDocID: String?
    /// Whether rows with key ``endKey`` are included.
    public var inclusiveEnd = true
    /// Rows in reverse order; ``startKey`` must then be the higher key, as in CouchDB.
    public var descending = false
    /// The most rows (or groups) to return.
    public var limit: Int?
    /// Rows (or groups) to skip first.
    public var skip = 0
    /// Include each row's document; a value `{"_id": …}` links to that document instead.
    public var includeDocuments = false
    /// Whether to reduce; `nil` reduces when the index has a reduce function.
    public var reduce: Bool?
    /// Reduce per distinct key.
    public var group = false
    /// Reduce per prefix of this many elements of array keys (implies grouping).
    public var groupLevel: Int?
    /// Report the index's sequence in ``QueryResult/updateSequence``.
    public var updateSeq = false
    /// Compute ``QueryResult/offset`` (CouchDB's `offset`). It counts the rows before the range, which
    /// costs O(offset), so it is off unless asked for; the CouchDB HTTP API turns it on.
    public var includeOffset = false
    /// A group whose built-in reduce fails (a `_sum` of strings) gets CouchDB 3.3's error object
    /// `{"error": "builtin_reduce_error", "reason", "caused_by"}` as its value, and one whose reduce
    /// function throws gets `null`, instead of failing the whole query (with
    /// ``DocStoreError/Code/reduceFailure`` or the function's error). CouchDB's HTTP API answers so; a
    /// function that runs out of time still fails the query.
    public var reduceFailuresAsValues = false
    /// Whether the index is brought up to date first.
    public var stale: Staleness = .updateBefore

    /// When the index is updated relative to the query.
    public enum Staleness: String, Sendable, Hashable {
        /// Update, then answer (CouchDB's default).
        case updateBefore
        /// Answer from the index as it is (`stale=ok`, `update=false`).
        case ok
        /// Answer as it is, then update in the background (`stale=update_after`).
        case updateAfter
    }

    /// A query for every row.
    public init() {}

    /// A query for the rows of these keys, in their order.
    public init(keys: [JSON]) {
        self.keys = keys
    }

    /// A query for the rows from `startKey` to `endKey`, both included; `nil` is the start or end of
    /// the index.
    public init(startKey: JSON?, endKey: JSON?) {
        self.startKey = startKey
        self.endKey = endKey
    }
}

/// One row of a query result.
public struct QueryRow: Sendable, Hashable {
    /// The emitted key, or for a reduce row the group key (`null` when not grouped).
    public let key: JSON
    /// The emitted value, or the reduced value.
    public let value: JSON
    /// The id of the document that emitted the row (`nil` for reduce rows).
    public let documentID: String?
    /// The document, with ``IndexQuery/includeDocuments`` (`nil` if it no longer exists).
    public let document: Document?
}

/// The answer to a query: the rows, which a `for` loop iterates, and CouchDB's figures.
public struct QueryResult: Sendable, RandomAccessCollection {
    /// The rows.
    public let rows: [QueryRow]
    /// The number of rows in the whole index (`nil` for reduce queries, as CouchDB omits it).
    public let totalRows: Int?
    /// The position of the first returned row in the whole index (with ``IndexQuery/includeOffset``;
    /// `nil` for reduce queries).
    public let offset: Int?
    /// The sequence the index is up to date with, when ``IndexQuery/updateSeq`` was asked for.
    public let updateSequence: Int64?
    /// Documents whose map function failed, with the reason; they have no rows in the index.
    public let mapErrors: [MapError]

    /// A document whose map function threw or emitted a value JSON cannot represent.
    public struct MapError: Sendable, Hashable {
        /// The document id.
        public let documentID: String
        /// What went wrong.
        public let reason: String
    }

    /// The position of the first row (the result is a collection of its ``rows``).
    public var startIndex: Int { rows.startIndex }
    /// The position after the last row.
    public var endIndex: Int { rows.endIndex }
    /// The row at `position`.
    public subscript(position: Int) -> QueryRow { rows[position] }
}
