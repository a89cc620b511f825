/// Emits one index row from a map function: a key and an optional value.
public typealias Emit = (_ key: JSON, _ value: JSON?) -> Void

/// A map function: called with each live document, it emits zero or more rows. It may throw; the
/// document then has no rows and the failure is reported in ``QueryResult/mapErrors``.
public typealias MapFunction = @Sendable (_ document: Document, _ emit: Emit) throws -> Void

/// A map function over many documents at once (one call into a script engine for a window of
/// documents, where a call costs more than the mapping), given their stored JSON unparsed: for each
/// document, in order, the rows it emitted, or the error it failed with (that document then has no
/// rows, as with ``MapFunction``).
package typealias BatchMapFunction = @Sendable (_ documents: [RawDocument]) -> [Result<[(key: JSON, value: JSON?)], any Error>]

/// A live document as its database stores it, not parsed: what a ``BatchMapFunction`` is given.
package struct RawDocument: Sendable {
    /// The document id.
    package let id: String
    /// Its current (winning) revision.
    package let revision: RevisionID
    /// The sequence of its latest change.
    package let sequence: Int64
    /// Its other live leaves (only when the index asks for them: ``IndexDefinition/includesConflicts``).
    package var conflicts: [RevisionID] = []
    /// Its deleted leaves other than the winner (CouchDB's `_deleted_conflicts`), as ``conflicts``.
    package var deletedConflicts: [RevisionID] = []
    /// The body as stored: a JSON object of its members, then `_attachments` stubs (with their
    /// `encoding` and `encoded_length` when they are stored compressed).
    package let body: [UInt8]
    let created: Double
    let updated: Double

    /// Whether ``body`` may hold attachment stubs (false only when it certainly does not).
    package var mayHaveAttachments: Bool { StoredBody.mayHaveAttachmentStubs(body) }

    /// The document, parsed.
    package func document() throws -> Document {
        var document = try Database.makeDocument(id: id, revision: revision, isDeleted: false, body: body, sequence: sequence,
                                                 created: created, updated: updated)
        document.conflicts = conflicts
        return document
    }
}

/// How an index's rows are reduced to one value (per group).
public enum ReduceFunction: Sendable {
    /// The number of rows (CouchDB `_count`).
    case count
    /// The sum of the numeric values (CouchDB `_sum`).
    case sum
    /// `{"sum","count","min","max","sumsqr"}` of the numeric values (CouchDB `_stats`).
    case stats
    /// The number of distinct keys among the rows (CouchDB `_approx_count_distinct`, which estimates
    /// it with HyperLogLog; here it is counted exactly, which is what CouchDB's estimate gives for all
    /// but very large counts).
    case approximateCountDistinct
    /// A reduce written in Swift: called with the emitted `keys` and `values` of a chunk of rows
    /// (`rereduce == false`), then with the chunk results as `values` and `keys` empty
    /// (`rereduce == true`). It must give the same answer however the rows are chunked.
    ///
    /// ```swift
    /// .custom { keys, values, rereduce in
    ///     rereduce ? .integer(values.compactMap(\.intValue).reduce(0, +)) : .integer(keys.count)
    /// }
    /// ```
    case custom(@Sendable (_ keys: [JSON], _ values: [JSON], _ rereduce: Bool) throws -> JSON)
    /// A reduce called exactly as CouchDB calls a JavaScript one: `keys` are `[key, documentID]` pairs,
    /// and `nil` when rereducing. The JavaScript design documents use it.
    case couchDB(@Sendable (_ keys: [JSON]?, _ values: [JSON], _ rereduce: Bool) throws -> JSON)
}

/// A map/reduce index (CouchDB's view): rows emitted by a Swift map function, ordered by key in
/// CouchDB collation, optionally reduced.
///
/// Register indexes in ``DatabaseConfiguration/indexes`` (or with ``Database/register(_:)``). The index
/// is persisted; when its ``version`` changes it is rebuilt, otherwise it is brought up to date
/// incrementally from the changes feed when queried.
///
/// ```swift
/// let byType = IndexDefinition(name: "by-type", version: "1", reduce: .count) { doc, emit in
///     if let type = doc.type { emit(.string(type), nil) }
/// }
/// ```
public struct IndexDefinition: Sendable {
    /// The index name, unique in its database (e.g. `"app/by-date"`).
    public let name: String
    /// Change it whenever the map or reduce function changes: the index is then rebuilt.
    public let version: String
    /// How keys are ordered.
    public let collation: Collation
    /// The map function.
    public let map: MapFunction
    /// The reduce function, if any.
    public let reduce: ReduceFunction?
    /// How many rows a custom reduce is given at once before results are rereduced.
    public var reduceChunkSize: Int = 1000
    /// For a full-text index (one whose map function emits ``FullTextSearch/createKey(_:)``): whether
    /// words are reduced to their English stem ("searching" matches "search"). Changing it rebuilds
    /// the index.
    public var fullTextStemming: FullTextSearch.Stemming = .none
    /// When set, documents are mapped by this function, a window at a time, instead of one by one by
    /// ``map`` (which must give the same rows: it serves the rest).
    package var batchMap: BatchMapFunction?
    /// Whether the map function sees each document's ``Document/conflicts`` (CouchDB gives map functions
    /// `_conflicts`). Reading them decodes every document's revision tree, so it is off by default.
    public var includesConflicts = false

    /// Defines an index.
    public init(name: String, version: String, collation: Collation = .unicode, reduce: ReduceFunction? = nil,
                map: @escaping MapFunction) {
        self.name = name
        self.version = version
        self.collation = collation
        self.map = map
        self.reduce = reduce
    }

    /// An index whose key is the value at a dotted field path (`"address.city"`) of each document that has
    /// it, and whose value is the value at `valuePath` (or `null`). Its version is derived from the paths.
    public static func field(_ path: String, value valuePath: String? = nil, reduce: ReduceFunction? = nil,
                             name: String? = nil) -> IndexDefinition {
        let reduceName: String
        switch reduce {
        case nil: reduceName = "none"
        case .count?: reduceName = "count"
        case .sum?: reduceName = "sum"
        case .stats?: reduceName = "stats"
        case .approximateCountDistinct?: reduceName = "approx_count_distinct"
        case .custom?, .couchDB?: reduceName = "custom"
        }
        let version = "field:\(path)|value:\(valuePath ?? "")|reduce:\(reduceName)"
        return IndexDefinition(name: name ?? "by:\(path)" + (valuePath.map { "->\($0)" } ?? "") + (reduce == nil ? "" : "|\(reduceName)"),
                               version: version, reduce: reduce) { document, emit in
            let root = JSON.object(document.body)
            guard let key = root.value(atPath: path) else { return }
            emit(key, valuePath.flatMap { root.value(atPath: $0) } ?? .null)
        }
    }
}
