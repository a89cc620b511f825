import Crypto
import Foundation

/// A field of a Mango index or sort, with its direction.
public struct SortField: Sendable, Hashable, CustomStringConvertible {
    /// The dotted path, as Mango writes it: `"address.city"`, with `\.` for a dot inside a member name.
    public let path: String
    /// Whether it sorts descending.
    public let descending: Bool

    /// A field `path` sorted ascending, or descending.
    public init(_ path: String, descending: Bool = false) {
        self.path = path
        self.descending = descending
    }

    /// An ascending field.
    public static func ascending(_ path: String) -> SortField { SortField(path) }
    /// A descending field.
    public static func descending(_ path: String) -> SortField { SortField(path, descending: true) }

    public var description: String { descending ? "\(path) desc" : path }

    /// `{"path": "asc"}`, as CouchDB lists an index's fields.
    public var json: JSON { .object([path: .string(descending ? "desc" : "asc")]) }

    /// Reads a Mango sort or index field list: an array of `"path"` or `{"path": "asc"|"desc"}`.
    /// - Throws: ``DocStoreError/Code/invalidSortJSON`` when it is not an array,
    ///   ``DocStoreError/Code/invalidSortField`` for an entry of another form,
    ///   ``DocStoreError/Code/invalidFieldName`` for a malformed path.
    public static func list(from json: JSON) throws -> [SortField] {
        guard case .array(let entries) = json else {
            throw DocStoreError(.invalidSortJSON, "Sort must be an array of sort specs, not: \(json)")
        }
        return try entries.map { entry in
            let field: SortField
            switch entry {
            case .string(let path):
                field = SortField(path)
            case .object(let object) where object.count == 1:
                let (path, direction) = (object.keys.first!, object.values.first!)
                guard direction == "asc" || direction == "desc" else {
                    throw DocStoreError(.invalidSortField, "Invalid sort field: \(entry)")
                }
                field = SortField(path, descending: direction == "desc")
            default:
                throw DocStoreError(.invalidSortField, "Invalid sort field: \(entry)")
            }
            _ = try FieldPath(field.path)
            return field
        }
    }
}

/// A Mango `json` index (CouchDB's `_index` of type `json`): the documents that have every one of its
/// fields (and match its partial filter), ordered by those fields' values in view collation.
///
/// It lives in a design document with `"language": "query"`, in exactly the form CouchDB writes, so
/// it replicates to and from CouchDB; one that arrives by replication is recognised and built like one
/// created here. Its rows are a map/reduce index of this database's index file, keyed by the array of
/// the field values and kept up to date incrementally like every index.
///
/// A Mango `text` index (Cloudant Query's, which CouchDB stores when a search service is installed)
/// is the same kind of value with ``type`` `.text`: a full-text index of the string values at its
/// fields (every string of the document when it has none), searched by `$text` in a selector
/// (``Database/find(_:)``) or with ``Database/search(index:_:)`` under its ``indexName``.
public struct MangoIndex: Sendable, Hashable {
    /// What kind of index it is.
    public enum Kind: String, Sendable, Hashable {
        /// Ordered by its fields' values, for selectors and sorts.
        case json
        /// A full-text index of its string fields, for `$text`.
        case text
    }

    /// The design document holding it (`_design/…`).
    public let designDocument: String
    /// Its name, a view (json) or an entry of `indexes` (text) of that design document.
    public let name: String
    /// Its fields, in order. For a text index, the string fields indexed (ascending); empty for
    /// every string of the document.
    public let fields: [SortField]
    /// Only documents that match this selector are indexed (CouchDB `partial_filter_selector`).
    public let partialFilter: MangoSelector?
    /// json or text.
    public let type: Kind

    /// An index definition as a design document holds it.
    public init(designDocument: String, name: String, fields: [SortField], partialFilter: MangoSelector? = nil, type: Kind = .json) {
        self.designDocument = designDocument
        self.name = name
        self.fields = fields
        self.partialFilter = partialFilter
        self.type = type
    }

    /// The name of its rows among the database's map/reduce indexes: ``Database/query(_:_:)`` reads
    /// a json index as a view (keys are the arrays of field values, values null, reduce `_count`, so
    /// set ``IndexQuery/reduce`` to false for the rows), as CouchDB lets a json index be read as a
    /// view; ``Database/search(index:_:)`` searches a text index.
    public var indexName: String {
        switch type {
        case .json: "mango:\(designDocument)/\(name)"
        case .text: "mango-text:\(designDocument)/\(name)"
        }
    }

    /// Whether `use_index` names it: `[ddoc]` or `[ddoc, name]`, the design document with or without
    /// `_design/`.
    func isNamed(by useIndex: [String]) -> Bool {
        guard let wanted = useIndex.first else { return false }
        let ddoc = wanted.hasPrefix("_design/") ? wanted : "_design/" + wanted
        return designDocument == ddoc && (useIndex.count < 2 || name == useIndex[1])
    }

    /// The prefixes of ``indexName``: the registered indexes that Mango design documents define.
    static let indexNamePrefixes = ["mango:", "mango-text:"]

    /// The map/reduce index that holds its rows. For a json index: key `[value of each field]`, for
    /// each document with all of them that matches the partial filter; for a text index: a full-text
    /// key per string (value: the field's path). Its version changes with the definition.
    var definition: IndexDefinition {
        if type == .text { return textDefinition }
        let paths = fields.map { field in (try? FieldPath(field.path)) ?? FieldPath.root }
        let filter = partialFilter
        var version = JSONObject()
        version["fields"] = .array(fields.map(\.json))
        version["partial_filter_selector"] = filter?.root ?? .null
        version["map"] = "json-v1"
        // Its reduce is `_count`, as CouchDB's json index views have (reduces run at query time: the
        // version need not change with it); `find` reads the rows with reduce off.
        return IndexDefinition(name: indexName, version: JSON.object(version).description, reduce: .count) { document, emit in
            // As CouchDB's views, a json index holds no design document.
            if document.id.hasPrefix("_design/") { return }
            // Fields are read from the document itself: no JSON of it is built.
            if let filter, !filter.matches(document) { return }
            var key: [JSON] = []
            key.reserveCapacity(paths.count)
            for path in paths {
                guard case .found(let value) = path.lookup(in: document) else { return }
                key.append(value)
            }
            emit(.array(key), nil)
        }
    }

    // MARK: The design document, as CouchDB writes it

    /// The view member of the design document for this index:
    /// `{"map": {"fields": {…}, "partial_filter_selector"?: …}, "reduce": "_count", "options": {"def": …}}`.
    var viewJSON: JSON {
        var fieldsObject = JSONObject()
        for field in fields { fieldsObject[field.path] = .string(field.descending ? "desc" : "asc") }
        var map = JSONObject()
        map["fields"] = .object(fieldsObject)
        // As CouchDB 3.3.3: the map's filter normalised (`{}` without one), the definition's as given.
        map["partial_filter_selector"] = partialFilter?.normalized ?? .object([:])
        var definition = JSONObject()
        // As given to `_index`: a plain name for an ascending field, `{"name": "desc"}` otherwise.
        definition["fields"] = .array(fields.map { $0.descending ? $0.json : .string($0.path) })
        if let partialFilter { definition["partial_filter_selector"] = partialFilter.root }
        return ["map": .object(map), "reduce": "_count", "options": ["def": .object(definition)]]
    }

    /// The index as CouchDB's `GET /db/_index` lists it.
    public var listingJSON: JSON {
        if type == .text { return textListingJSON }
        var definition = JSONObject()
        definition["fields"] = .array(fields.map(\.json))
        if let partialFilter { definition["partial_filter_selector"] = partialFilter.normalized }
        return ["ddoc": .string(designDocument), "name": .string(name), "type": "json", "partitioned": false,
                "def": .object(definition)]
    }

    /// The indexes a design document holds: none unless its `language` is `query`; json indexes from
    /// each view whose `map` has `fields`, text indexes from `indexes`. One that cannot be read (a
    /// malformed partial filter) is skipped.
    static func indexes(in document: Document) -> [MangoIndex] {
        guard document.id.hasPrefix("_design/"), document["language"]?.stringValue == "query" else { return [] }
        return jsonIndexes(in: document) + textIndexes(in: document)
    }

    private static func jsonIndexes(in document: Document) -> [MangoIndex] {
        guard case .object(let views)? = document["views"] else { return [] }
        var result: [MangoIndex] = []
        for (name, view) in views {
            guard case .object(let map)? = view["map"], case .object(let fieldsObject)? = map["fields"] else { continue }
            let fields = fieldsObject.map { SortField($0.key, descending: $0.value.stringValue == "desc") }
            guard fields.allSatisfy({ (try? FieldPath($0.path)) != nil }) else { continue }
            var filter: MangoSelector?
            if let selector = map["partial_filter_selector"], selector != .object([:]) {
                guard let parsed = try? MangoSelector(selector), !parsed.usesText else { continue }
                filter = parsed
            }
            result.append(MangoIndex(designDocument: document.id, name: name, fields: fields, partialFilter: filter))
        }
        return result
    }

    /// The name CouchDB would leave to a hash: the SHA-1 of the definition (and of the index's `name`
    /// when one is given, so that every named index gets a design document of its own), in hex.
    static func generatedName(fields: [SortField], partialFilter: MangoSelector?, type: Kind = .json, name: String? = nil) -> String {
        var definition = JSONObject()
        if let name { definition["name"] = .string(name) }
        if type == .text { definition["type"] = "text" }
        definition["fields"] = .array(fields.map(\.json))
        if let partialFilter { definition["partial_filter_selector"] = partialFilter.root }
        let digest = Insecure.SHA1.hash(data: Data(JSON.object(definition).description.utf8))
        return digest.map { String(format: "%02x", $0) }.joined()
    }
}

/// What ``Database/createIndex(fields:name:designDocument:partialFilter:)`` did.
public struct IndexCreation: Sendable, Hashable {
    /// The design document holding the index.
    public let designDocument: String
    /// The index name.
    public let name: String
    /// `false` when an index of that name and definition already existed (CouchDB `"result": "exists"`).
    public let created: Bool
}
