import Foundation

/// The answer to a ``FindQuery``.
public struct FindResult: Sendable {
    /// The matching documents (only the asked fields when ``FindQuery/fields`` is set).
    public let documents: [Document]
    /// With ``FindQuery/fields``, the documents as CouchDB writes them: the asked fields in the order
    /// asked.
    package let projected: [JSON]?
    /// Where this page ended: pass it as ``FindQuery/bookmark`` for the next one. `nil` when no document
    /// was returned.
    public let bookmark: String?
    /// CouchDB's warnings: no index used, a `use_index` not followed, many documents examined per result.
    public let warning: String?
    /// What the query read, when asked for.
    public let executionStatistics: ExecutionStatistics?

    /// The documents decoded as `T` (see ``Document/decode(as:dateFormat:)``).
    ///
    /// ```swift
    /// let invoices = try await db.find(query).decode(as: Invoice.self)
    /// ```
    public func decode<T: Decodable>(as type: T.Type, dateFormat: DateFormat = .iso8601) throws -> [T] {
        try documents.map { try $0.decode(as: type, dateFormat: dateFormat) }
    }

    /// CouchDB's `execution_stats`.
    public struct ExecutionStatistics: Sendable, Hashable {
        /// Index rows read.
        public var totalKeysExamined = 0
        /// Documents read to be matched against the selector.
        public var totalDocumentsExamined = 0
        /// Documents returned.
        public var resultsReturned = 0
        /// How long the query took.
        public var executionTime: Duration = .zero
    }
}
