/// Options of ``Database/allDocuments(_:)``, as CouchDB's `_all_docs`.
public struct AllDocumentsQuery: Sendable, Hashable {
    /// The first id to include (the last, when ``descending``); `nil` for an open end.
    public var startKey: String?
    /// The last id to include (the first, when ``descending``); `nil` for an open end.
    public var endKey: String?
    /// Whether ``endKey`` itself is included.
    public var inclusiveEnd = true
    /// Newest-id-first order.
    public var descending = false
    /// The most rows to return.
    public var limit: Int?
    /// Rows to skip first.
    public var skip = 0
    /// Exactly these ids, in this order (missing ones give an error row, deleted ones a deleted row).
    public var keys: [String]?
    /// Include each document.
    public var includeDocuments = false

    /// A query for all documents in id order.
    public init(startKey: String? = nil, endKey: String? = nil, inclusiveEnd: Bool = true, descending: Bool = false,
                limit: Int? = nil, skip: Int = 0, keys: [String]? = nil, includeDocuments: Bool = false) {
        self.startKey = startKey
        self.endKey = endKey
        self.inclusiveEnd = inclusiveEnd
        self.descending = descending
        self.limit = limit
        self.skip = skip
        self.keys = keys
        self.includeDocuments = includeDocuments
    }
}

/// One row of ``Database/allDocuments(_:)``.
public struct AllDocumentsRow: Sendable, Hashable {
    /// The document id (the key asked for, for a missing one).
    public let id: String
    /// The winning revision; `nil` for a missing document.
    public let revision: RevisionID?
    /// Whether the document is deleted (only with ``AllDocumentsQuery/keys``).
    public let isDeleted: Bool
    /// The document, when asked for and live.
    public let document: Document?
    /// `"not_found"` for a key with no document.
    public let error: String?
}

/// The answer of ``Database/allDocuments(_:)``.
public struct AllDocumentsResult: Sendable {
    /// The number of live documents in the database.
    public let totalRows: Int
    /// How many rows of the whole id order come before the first row returned; `nil` for a query by
    /// ``AllDocumentsQuery/keys``, whose rows follow the keys, not the id order (CouchDB answers
    /// `"offset": null` there too).
    public let offset: Int?
    /// The rows.
    public let rows: [AllDocumentsRow]
}

extension Database {
    /// Live documents in id order (raw UTF-8 byte order, as CouchDB's `_all_docs`), or the rows for
    /// given ids.
    ///
    /// - Complexity: O(log n + skip + rows) using the id index; `totalRows` counts live documents.
    public func allDocuments(_ query: AllDocumentsQuery = AllDocumentsQuery()) async throws -> AllDocumentsResult {
        try await allDocuments(query, counting: true)
    }

    /// The rows of `query`; `counting: false` leaves `totalRows` and `offset` at 0, sparing the two
    /// counts that cost a pass over the documents (for readers that page through the ids).
    func allDocuments(_ query: AllDocumentsQuery, counting: Bool) async throws -> AllDocumentsResult {
        guard query.skip >= 0, (query.limit ?? 0) >= 0 else {
            throw DocStoreError(.badRequest, "skip and limit must not be negative")
        }
        // A read of more than a page runs off the pool; counting the documents is a pass over them too.
        return try await running(on: .forReading(upTo: counting ? nil : query.limit.map { $0 + query.skip })) {
            try await read(consistent: true) { connection in
                let records = DocumentRecords(connection: connection)
                let total = counting ? try records.counts().live : 0
                if let keys = query.keys {
                    var ordered = query.descending ? Array(keys.reversed()) : keys
                    ordered = Array(ordered.dropFirst(query.skip).prefix(query.limit ?? Int.max))
                    var rows: [AllDocumentsRow] = []
                    for key in ordered {
                        guard let record = try records.fetch(id: key) else {
                            rows.append(AllDocumentsRow(id: key, revision: nil, isDeleted: false, document: nil, error: "not_found"))
                            continue
                        }
                        let document = query.includeDocuments && !record.isDeleted
                            ? try Database.makeDocument(id: key, revision: record.winner, isDeleted: false, body: record.body, record: record)
                            : nil
                        rows.append(AllDocumentsRow(id: key, revision: record.winner, isDeleted: record.isDeleted,
                                                    document: document, error: nil))
                    }
                    return AllDocumentsResult(totalRows: total, offset: nil, rows: rows)
                }

                let (lower, upper) = query.descending ? (query.endKey, query.startKey) : (query.startKey, query.endKey)
                let lowerInclusive = query.descending ? query.inclusiveEnd : true
                let upperInclusive = query.descending ? true : query.inclusiveEnd
                let found = try records.liveDocuments(from: lower.map { ($0, lowerInclusive) }, to: upper.map { ($0, upperInclusive) },
                                                      descending: query.descending, limit: query.limit, skip: query.skip,
                                                      full: query.includeDocuments)
                let rows = try found.map { record in
                    AllDocumentsRow(id: record.id, revision: record.winner, isDeleted: false,
                                    document: query.includeDocuments
                                        ? try Database.makeDocument(id: record.id, revision: record.winner, isDeleted: false,
                                                                    body: record.body, record: record)
                                        : nil,
                                    error: nil)
                }
                let before = counting ? try query.startKey.map { try records.countLive(before: $0, descending: query.descending) } ?? 0 : 0
                return AllDocumentsResult(totalRows: total, offset: min(total, before + query.skip), rows: rows)
            }
        }
    }
}
