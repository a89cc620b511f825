/// Full-text keys for map functions, and what a full-text search answers (Docs/Search.md).
///
/// A map function that emits ``createKey(_:)`` makes its index a full-text index: each key emitted
/// is one field of the document, searched with ``Database/search(index:query:snippets:limit:skip:)``.
///
/// ```swift
/// let notes = IndexDefinition(name: "notes-text", version: "1") { doc, emit in
///     if let title = doc["title"]?.stringValue { emit(FullTextSearch.createKey(title), "title") }
///     if let body = doc["body"]?.stringValue { emit(FullTextSearch.createKey(body), "body") }
/// }
/// ```
public enum FullTextSearch {
    /// Whether a full-text index reduces English words to their stem (FTS5's Porter stemmer over
    /// the index's tokens): with `.english`, "searching" and "searched" match "search".
    public enum Stemming: String, Sendable, Hashable {
        /// Words match as they are (folded for case and diacritics).
        case none
        /// English words match by their stem.
        case english
    }

    /// The key that indexes `text` for full-text search (the PredixSDK's `FullTextSearch.createKey(text)`).
    /// Each one a map function emits is a field of its document: phrases and `NEAR` match within one
    /// field, `AND`, `OR` and `NOT` combine the fields of a document. Such keys are searched, never
    /// listed by ``Database/query(_:_:)``, which reads the index's other rows.
    public static func createKey(_ text: String) -> JSON {
        .object([keyMember: .string(text)])
    }

    /// The one member of a full-text key: a name no document field is likely to have.
    static let keyMember = "\u{0}docstore.fullText"

    /// The text of a full-text key, or `nil` for any other key.
    static func text(of key: JSON) -> String? {
        guard case .object(let object) = key, object.count == 1, case .string(let text)? = object[keyMember] else { return nil }
        return text
    }
}

/// A full-text search of an index (``Database/search(index:_:)``).
public struct SearchQuery: Sendable, Hashable {
    /// The query, in the PredixSDK's full-text syntax (``TextQuery``).
    public var query: TextQuery
    /// Return a snippet of the best matching field of each document, matched tokens in `[` and `]`.
    public var snippets = false
    /// At most this many rows, the best first (`nil`: all).
    public var limit: Int?
    /// Rows to pass over first.
    public var skip = 0
    /// Include each row's document.
    public var includeDocuments = false
    /// Whether the index is brought up to date first (as ``IndexQuery/stale``).
    public var stale: IndexQuery.Staleness = .updateBefore

    /// A search for `query`.
    public init(_ query: TextQuery) {
        self.query = query
    }

    /// A search for `text`, parsed as a ``TextQuery``.
    /// - Throws: ``DocStoreError/Code/invalidQuery`` naming the position of a malformed query.
    public init(_ text: String) throws {
        self.query = try TextQuery(text)
    }
}

/// A document that matches a full-text search.
public struct SearchRow: Sendable, Hashable {
    /// The document's id.
    public let documentID: String
    /// Its relevance: SQLite FTS5's BM25, negated so that higher is better. Summed over the document's
    /// matching fields.
    public let score: Double
    /// With ``SearchQuery/snippets``: an excerpt of the best matching field with the matched tokens
    /// wrapped in `[` and `]` (a matched phrase shares one pair); `…` marks text left out.
    public let snippet: String?
    /// The value emitted with the best matching field's key.
    public let value: JSON
    /// With ``SearchQuery/includeDocuments``: the document's current revision.
    public let document: Document?
}

/// What a full-text search answers.
public struct SearchResult: Sendable, Hashable {
    /// The matching documents, the most relevant first, after `skip` and `limit`.
    public let rows: [SearchRow]
    /// How many documents match in all.
    public let totalRows: Int
}
