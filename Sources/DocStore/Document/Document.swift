import Foundation
import OrderedCollections

/// A JSON document: an id, the revision it was read at, body fields, attachments and metadata.
///
/// A `Document` is a value: edit a copy and save it; the database answers with the saved document,
/// which carries the new ``revision``. Saving a document whose revision is no longer current is a
/// ``DocStoreError/Code/conflict``.
///
/// ```swift
/// var invoice: Document = ["customer": "ACME", "total": 120.5]   // id generated now
/// invoice.type = "invoice"
/// invoice = try await db.save(invoice)          // revision "1-…"
/// invoice["total"] = 99.0
/// invoice = try await db.save(invoice)          // revision "2-…"
/// ```
///
/// Body keys beginning with `_` are reserved, as in CouchDB; saving a body that has one fails with
/// ``DocStoreError/Code/invalidDocument`` — but for the state members CouchDB's replicator writes
/// (`_replication_state`, `_replication_state_time`, `_replication_state_reason`, `_replication_id`,
/// `_replication_stats`), which CouchDB accepts in any database. Ids are compared as exact UTF-8 bytes: two spellings of "é"
/// (precomposed, or e + combining accent) name two different documents.
public struct Document: Sendable, Hashable {
    /// The document id. A document created without one gets one at once from ``idFactory``.
    public var id: String {
        didSet { hasID = true }
    }
    /// Whether the document has an id: always, but for one read from CouchDB's JSON on the way to a
    /// database, whose absent `_id` the receiver assigns as CouchDB's `POST` does.
    package internal(set) var hasID: Bool
    /// The revision this document was read at or saved as; `nil` for a document never saved.
    public internal(set) var revision: RevisionID?
    /// The body fields (everything but CouchDB's `_`-prefixed metadata).
    public var body: JSONObject
    /// The attachments by name, in the order they were given (CouchDB's order).
    public var attachments: Attachments
    /// Whether this revision is a deletion (only seen when asking for a specific revision or in the
    /// changes feed).
    public internal(set) var isDeleted: Bool
    /// The other live leaf revisions when fetched with `includeConflicts: true` (CouchDB `_conflicts`).
    public internal(set) var conflicts: [RevisionID]
    /// The revision's ancestry, newest first, excluding ``revision`` itself — CouchDB's `_revisions`.
    /// Set when parsed from JSON that has `_revisions` or fetched with history; used by replication.
    public var revisionHistory: [RevisionID]?
    /// The sequence of the document's latest change, once stored.
    public internal(set) var sequence: Int64?
    /// When this database first stored the document.
    public internal(set) var createDate: Date?
    /// When this database last stored a revision of the document.
    public internal(set) var lastChange: Date?

    /// A new empty document, its id from ``idFactory``.
    public init() {
        self.init(id: nil, generatingID: true, body: [:])
    }

    /// A new document with the given id (or one from ``idFactory``) and body.
    public init(id: String? = nil, body: JSONObject = [:], attachments: Attachments = [:]) {
        self.init(id: id, generatingID: true, body: body, attachments: attachments)
    }

    /// A new document; without an id, one from ``idFactory`` when `generatingID`, else none
    /// (``hasID`` false).
    init(id: String?, generatingID: Bool, body: JSONObject, attachments: Attachments = [:]) {
        self.id = id ?? (generatingID ? Document.idFactory() : "")
        self.hasID = id != nil || generatingID
        self.revision = nil
        self.body = body
        self.attachments = attachments
        self.isDeleted = false
        self.conflicts = []
        self.revisionHistory = nil
        self.sequence = nil
        self.createDate = nil
        self.lastChange = nil
    }

    /// A document with a known revision, e.g. to update or delete without fetching first.
    public init(id: String, revision: RevisionID?, body: JSONObject = [:]) {
        self.init(id: id, body: body)
        self.revision = revision
    }

    /// A document from Swift values (`String`, `Bool`, integers, `Double`, `Date`, `[Any]`,
    /// `[String: Any]`, `NSNull`, ``JSON``); other values are rejected.
    ///
    /// As in a dictionary literal, a string member `"id"` or `"_id"` is the document's id (unless
    /// `id` is given) and not a body field, and a string `"_rev"` its revision.
    /// - Throws: ``DocStoreError/Code/invalidDocument`` for a value with no JSON form,
    ///   ``DocStoreError/Code/invalidRevision`` for a `"_rev"` that is not a revision id.
    public init(id: String? = nil, _ dictionary: [String: Any], dateFormat: DateFormat = .iso8601) throws {
        var body = JSONObject()
        for key in dictionary.keys.sorted() {
            body[key] = try JSON(any: dictionary[key]!, dateFormat: dateFormat)
        }
        let metadata = Document.takeLiteralMetadata(from: &body)
        self.init(id: id ?? metadata.id, body: body)
        if let text = metadata.revision {
            guard let revision = RevisionID(text) else { throw DocStoreError(.invalidRevision, "_rev \(text) is not a revision id") }
            self.revision = revision
        }
    }

    /// A document from a dictionary whose keys are all strings (as `NSDictionary` and `userInfo`
    /// dictionaries are typed), read as ``init(id:_:dateFormat:)`` reads a `[String: Any]`.
    /// - Throws: ``DocStoreError/Code/invalidDocument`` for a key that is not a string or a value
    ///   with no JSON form.
    public init(id: String? = nil, _ dictionary: [AnyHashable: Any], dateFormat: DateFormat = .iso8601) throws {
        var strings: [String: Any] = [:]
        for (key, value) in dictionary {
            guard let name = key.base as? String else {
                throw DocStoreError(.invalidDocument, "Document keys must be strings, not \(Swift.type(of: key.base))")
            }
            strings[name] = value
        }
        try self.init(id: id, strings, dateFormat: dateFormat)
    }

    /// Takes the metadata a literal or dictionary may name out of `body`: the id from a string
    /// `"_id"` or `"id"`, the revision text from a string `"_rev"`. Other values stay in the body.
    static func takeLiteralMetadata(from body: inout JSONObject) -> (id: String?, revision: String?) {
        var id: String?
        for key in ["_id", "id"] where id == nil {
            if case .string(let text)? = body[key] {
                id = text
                body.removeValue(forKey: key)
            }
        }
        var revision: String?
        if case .string(let text)? = body["_rev"] {
            revision = text
            body.removeValue(forKey: "_rev")
        }
        return (id, revision)
    }

    /// A document whose body is the JSON encoding of `value`, members in sorted order (so the same
    /// value always gives the same body, and the same revision id); an encoded `_id` becomes the id
    /// (unless `id` is given) and an encoded `_rev` the revision, so a type that
    /// ``decode(as:dateFormat:)`` filled saves again as an update.
    /// - Throws: ``DocStoreError/Code/invalidDocument`` if `value` does not encode to a JSON object,
    ///   ``DocStoreError/Code/invalidRevision`` if its `_rev` is not a revision id.
    public init<T: Encodable>(id: String? = nil, from value: T, dateFormat: DateFormat = .iso8601) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(dateFormat.string(from: date))
        }
        let json = try JSON(parsing: try encoder.encode(value))
        guard case .object(var object) = json else {
            throw DocStoreError(.invalidDocument, "\(T.self) does not encode to a JSON object")
        }
        var givenID = id
        if givenID == nil, case .string(let embedded)? = object["_id"] { givenID = embedded }
        object.removeValue(forKey: "_id")
        // A type that carries its revision (as `decode(as:)` fills it) saves on top of that revision.
        var revision: RevisionID?
        switch object.removeValue(forKey: "_rev") {
        case .string(let text)?:
            guard let parsed = RevisionID(text) else {
                throw DocStoreError(.invalidRevision, "_rev \(text) is not a revision id")
            }
            revision = parsed
        case nil, .null?:
            break
        default:
            throw DocStoreError(.invalidRevision, "_rev must be a string")
        }
        self.init(id: givenID, body: object)
        self.revision = revision
    }

    /// Decodes the body (with `_id` and `_rev` added) as `T`.
    public func decode<T: Decodable>(as type: T.Type, dateFormat: DateFormat = .iso8601) throws -> T {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let container = try decoder.singleValueContainer()
            let text = try container.decode(String.self)
            guard let date = dateFormat.date(from: text) else {
                throw DecodingError.dataCorruptedError(in: container, debugDescription: "Not a date: \(text)")
            }
            return date
        }
        var object = body
        object["_id"] = .string(id)
        if let revision { object["_rev"] = .string(revision.description) }
        return try decoder.decode(T.self, from: try JSON.object(object).serializedData())
    }

    // MARK: Body access

    /// The member `key` of the document as CouchDB's JSON shows it: a body field, or for the
    /// metadata members `_id`, `_rev`, `_deleted` (`true` for a deletion, else absent), `_conflicts`
    /// (when fetched with conflicts, or in a map function of an index that ``IndexDefinition/includesConflicts``)
    /// and `_attachments` (stubs), the metadata. So a map function reads `document["_id"]` as a CouchDB
    /// map reads `doc._id`.
    ///
    /// Assigning sets a body field (`nil` removes it) — but `_id` (a string) sets ``id`` and `_rev`
    /// (a revision id) ``revision``. Other `_` members are reserved: a body holding one is refused
    /// when saved.
    public subscript(key: String) -> JSON? {
        get {
            guard key.utf8.first == UInt8(ascii: "_") else { return body[key] }
            switch key {
            case "_id": return hasID ? .string(id) : nil
            case "_rev": return revision.map { .string($0.description) }
            case "_deleted": return isDeleted ? true : nil
            case "_conflicts": return conflicts.isEmpty ? nil : JSON(conflicts.map(\.description))
            case "_attachments": return attachments.isEmpty ? nil : attachmentsJSON(includeData: false)
            default: return body[key]
            }
        }
        set {
            switch (key, newValue) {
            case ("_id", .string(let text)?): id = text
            case ("_rev", .string(let text)?) where RevisionID(text) != nil: revision = RevisionID(text)
            default: body[key] = newValue
            }
        }
    }

    /// The body field `key` as a string.
    public func string(forKey key: String) -> String? { body[key]?.stringValue }
    /// The body field `key` as an integer.
    public func int(forKey key: String) -> Int? { body[key]?.intValue }
    /// The body field `key` as a double.
    public func double(forKey key: String) -> Double? { body[key]?.doubleValue }
    /// The body field `key` as a Boolean.
    public func bool(forKey key: String) -> Bool? { body[key]?.boolValue }

    /// The body field `key` read as a date written in `format`.
    public func date(forKey key: String, format: DateFormat = .iso8601) -> Date? {
        body[key]?.stringValue.flatMap(format.date(from:))
    }

    /// Stores `date` in body field `key` as a string in `format`.
    public mutating func setDate(_ date: Date?, forKey key: String, format: DateFormat = .iso8601) {
        body[key] = date.map { .string(format.string(from: $0)) }
    }

    /// Makes the id of every document created without one (literals, ``init(id:body:attachments:)``,
    /// ``init(json:)-(String)`` without `_id`, …), process-wide. Default: 32 random lowercase hex digits
    /// (a UUID's 128 bits written as CouchDB writes the ids it makes). Assign another to use your own
    /// scheme, e.g. `Document.idFactory = { UUID().uuidString }`.
    public static var idFactory: @Sendable () -> String {
        get { idFactoryStorage.withLock { $0 } }
        set { idFactoryStorage.withLock { $0 = newValue } }
    }
    private static let idFactoryStorage = Locked<@Sendable () -> String>({ RandomHex.make() })

    /// The `type` body field, as Sync Gateway and Couchbase Lite use it.
    public var type: String? {
        get { body["type"]?.stringValue }
        set { body["type"] = newValue.map(JSON.string) }
    }

    /// The document's metadata in one value: what is not its body (see ``Metadata``).
    public var metaData: Metadata {
        Metadata(id: id, revision: revision, isDeleted: isDeleted, createDate: createDate,
                 lastChange: lastChange, channels: channels, type: type)
    }

    /// Metadata of a document, read from it (``Document/metaData``).
    public struct Metadata: Sendable, Hashable {
        /// ``Document/id``.
        public let id: String
        /// ``Document/revision``: changes with every edit; `nil` until saved.
        public let revision: RevisionID?
        /// ``Document/isDeleted``.
        public let isDeleted: Bool
        /// ``Document/createDate``: when this database first stored it.
        public let createDate: Date?
        /// ``Document/lastChange``: when this database last stored a revision of it.
        public let lastChange: Date?
        /// ``Document/channels`` (the `channels` body field).
        public let channels: [String]
        /// ``Document/type`` (the `type` body field).
        public let type: String?
    }

    /// The `channels` body field: the channels a document belongs to, for channel-limited replication
    /// and access. A single string is read as one channel.
    public var channels: [String] {
        get { channels(inField: "channels") }
        set { body["channels"] = newValue.isEmpty ? JSON?.none : JSON(newValue) }
    }

    /// The channels named by body field `field`: a string is one channel, an array of strings several.
    /// For data whose channel field has another name (a PredixSync app's `channel`), as
    /// `ServerConfiguration.channelsField` and ``ChangesFilter/channelsField`` read it.
    public func channels(inField field: String) -> [String] {
        switch body[field] {
        case .string(let one)?: return [one]
        case .array(let many)?: return many.compactMap(\.stringValue)
        default: return []
        }
    }
}

// MARK: - CouchDB JSON

extension Document {
    /// Reads a document in CouchDB's JSON form: body fields plus `_id`, `_rev`, `_deleted`,
    /// `_attachments`, `_revisions` (other `_` members are left in the body, where saving rejects them;
    /// `_conflicts`, `_deleted_conflicts`, `_revs_info` and `_local_seq` are ignored as CouchDB does).
    ///
    /// The body is kept as the JSON text it arrived as, when that text is already in DocStore's own
    /// form (no whitespace, minimal escapes): saving then copies it and hashes it as text, and the tree
    /// of members is built only if a member is read.
    /// - Throws: ``DocStoreError`` for invalid JSON, a non-object, or malformed metadata.
    public init(json text: String) throws {
        try self.init(json: JSON(parsing: text.utf8, documentDepth: 1))
    }

    /// Reads a document in CouchDB's JSON form from UTF-8 data (the body kept as text, as
    /// ``init(json:)-(String)`` says).
    public init(json data: Data) throws {
        try self.init(json: JSON(parsing: data, documentDepth: 1))
    }

    /// Reads a document from a parsed CouchDB JSON object; without `_id`, it gets one from ``idFactory``.
    public init(json: JSON) throws {
        try self.init(couchJSON: json)
        if !hasID { id = Document.idFactory() }
    }

    /// Reads a document from a parsed CouchDB JSON object on its way to a database: an absent `_id`
    /// stays absent (``hasID`` false), for the receiver to assign or refuse as CouchDB does.
    package init(couchJSON json: JSON) throws {
        guard case .object(var object) = json else {
            throw DocStoreError(.invalidDocument, "Document must be a JSON object")
        }
        // A document read with its body kept as bytes (`JSON(parsing:documentDepth:)`): the metadata
        // is read from the members before them, and the body stays bytes.
        if let (metadata, body) = object.storedDocument,
            metadata.allSatisfy({ JSONReader.documentMetadataKeys.contains($0.key) }) {
            try self.init(metadata: metadata, body: JSONObject(storedJSON: body))
            return
        }
        var metadata: [JSONObject.Member] = []
        for key in Document.metadataKeys {
            if let value = object.removeValue(forKey: key) { metadata.append(JSONObject.Member(key: key, value: value)) }
        }
        try self.init(metadata: metadata, body: object)
    }

    /// The `_` members ``init(metadata:body:)`` reads (`_id`, `_rev`, `_deleted`, `_attachments`,
    /// `_revisions`) or leaves out as CouchDB does (`_conflicts`, `_deleted_conflicts`, `_revs_info`,
    /// `_local_seq`).
    static let metadataKeys = ["_id", "_revisions", "_rev", "_deleted", "_attachments",
                               "_conflicts", "_deleted_conflicts", "_revs_info", "_local_seq"]

    /// A document of CouchDB's JSON form from its metadata members (among ``metadataKeys``; others are
    /// ignored) and its body (``init(json:)-(JSON)``'s checks, in its order).
    init(metadata: [JSONObject.Member], body: JSONObject) throws {
        var idValue: JSON?, revisions: JSON?, revisionValue: JSON?, deletedValue: JSON?, attachmentsValue: JSON?
        for member in metadata {
            switch member.key {
            case "_id": idValue = member.value
            case "_revisions": revisions = member.value
            case "_rev": revisionValue = member.value
            case "_deleted": deletedValue = member.value
            case "_attachments": attachmentsValue = member.value
            default: break
            }
        }
        var id: String? = nil
        if let idValue {
            guard case .string(let text) = idValue else {
                throw DocStoreError(.invalidDocumentID, "Document id must be a string")
            }
            id = text
        }
        // As CouchDB, `_revisions` names the revision where both are given, whatever `_rev` says.
        var revision: RevisionID? = nil
        if let revisionValue, revisions == nil {
            guard case .string(let text) = revisionValue else {
                throw DocStoreError(.invalidRevision, "_rev must be a string")
            }
            revision = try RevisionID.parse(text)
        }
        var isDeleted = false
        if let deletedValue {
            guard case .bool(let flag) = deletedValue else {
                throw DocStoreError(.invalidDocument, "_deleted must be a boolean")
            }
            isDeleted = flag
        }
        var attachments: Attachments = [:]
        if let attachmentsValue {
            guard case .object(let members) = attachmentsValue else {
                throw DocStoreError(.invalidAttachment, "_attachments must be a JSON object")
            }
            for (name, member) in members {
                try Attachment.checkName(name)
                attachments[name] = try Attachment(name: name, json: member)
            }
        }
        var history: [RevisionID]? = nil
        if let revisions {
            let ancestry = try Document.parseRevisions(revisions)
            revision = ancestry[0]
            history = Array(ancestry.dropFirst())
        }
        self.init(id: id, generatingID: false, body: body, attachments: attachments)
        self.revision = revision
        self.isDeleted = isDeleted
        self.revisionHistory = history
    }

    /// Reads `_revisions` (`{"start": N, "ids": [newest hash, …]}`): the revision and its ancestry,
    /// newest first.
    static func parseRevisions(_ value: JSON) throws -> [RevisionID] {
        guard case .object(let object) = value, let start = object["start"]?.intValue,
            let ids = object["ids"]?.arrayValue, !ids.isEmpty, start >= ids.count
        else {
            throw DocStoreError(.invalidRevision, "_revisions must be {\"start\": N, \"ids\": [...]}")
        }
        return try ids.enumerated().map { offset, id in
            guard let digest = id.stringValue else { throw DocStoreError(.invalidRevision, "_revisions ids must be strings") }
            return RevisionID(generation: start - offset, digest: digest)
        }
    }

    /// The document in CouchDB's JSON form, members in CouchDB's order: `_id`, `_rev`, the body fields,
    /// `_deleted` (when deleted), `_revisions` (when `revisions` is set and the history is known),
    /// `_conflicts` (when fetched with conflicts) and `_attachments` (stubs, or inline data with
    /// `attachmentData` for attachments whose content is in memory).
    public func json(attachmentData: Bool = false, revisions: Bool = false) -> JSON {
        var head: [(String, JSON)] = [("_id", .string(id))]
        if let revision { head.append(("_rev", .string(revision.description))) }
        var tail: [(String, JSON)] = []
        if isDeleted { tail.append(("_deleted", true)) }
        if revisions, let revision {
            let ids = ([revision] + (revisionHistory ?? [])).map { JSON.string($0.digest) }
            tail.append(("_revisions", ["start": .integer(revision.generation), "ids": .array(ids)]))
        }
        if !conflicts.isEmpty { tail.append(("_conflicts", JSON(conflicts.map(\.description)))) }
        if !attachments.isEmpty { tail.append(("_attachments", attachmentsJSON(includeData: attachmentData))) }
        // A body read from the database (no `_` member of these) keeps its stored bytes: written out
        // as they are, parsed only if a member is read.
        if body.storedJSON != nil { return .object(JSONObject(head: head, middle: body, tail: tail)) }
        var object = JSONObject()
        object.reserveCapacity(body.count + head.count + tail.count)
        for (key, value) in head { object[key] = value }
        for (key, value) in body { object[key] = value }
        for (key, value) in tail { object[key] = value }
        return .object(object)
    }

    /// The `_attachments` member: each attachment's stub, or with `includeData` its inline data where
    /// its content is in memory.
    private func attachmentsJSON(includeData: Bool) -> JSON {
        var members = JSONObject()
        for (name, attachment) in attachments { members[name] = attachment.json(includeData: includeData) }
        return .object(members)
    }

    /// ``json(attachmentData:revisions:)`` as compact text.
    public var jsonString: String { json().description }
}

// MARK: - Sequence and literals

extension Document: Sequence {
    /// Iterates the body fields in order.
    public func makeIterator() -> JSONObject.Iterator { body.makeIterator() }
}

extension Document: ExpressibleByDictionaryLiteral {
    /// A new document with the given body fields — but for the metadata it names: a string `"id"`
    /// (or `"_id"`) is the document's id, a string `"_rev"` that is a revision id its revision; neither
    /// stays in the body. Without an id, one comes from ``idFactory``.
    ///
    /// ```swift
    /// let lamp: Document = ["id": "lamp", "price": 19.5]     // lamp.id == "lamp", body ["price": 19.5]
    /// ```
    ///
    /// Only literals (and ``init(id:_:dateFormat:)-(_,[String:Any],_)``) read `"id"` so: a body that arrives as JSON, from
    /// a `Codable` value or through ``body`` keeps an `"id"` member as data.
    public init(dictionaryLiteral elements: (String, JSON)...) {
        var body = JSONObject(elements)
        let metadata = Document.takeLiteralMetadata(from: &body)
        self.init(id: metadata.id, body: body)
        if let text = metadata.revision {
            if let revision = RevisionID(text) { self.revision = revision } else { self.body["_rev"] = .string(text) }
        }
    }
}

extension Document: CustomStringConvertible {
    public var description: String { jsonString }
}

// MARK: - Swift values to JSON

extension JSON {
    /// Converts a Swift value of a JSON-compatible type.
    init(any value: Any, dateFormat: DateFormat) throws {
        switch value {
        case let json as JSON: self = json
        case is NSNull: self = .null
        case let b as Bool: self = .bool(b)
        case let i as Int: self = .integer(i)
        case let i as Int64: self = .integer(Int(i))
        case let i as Int32: self = .integer(Int(i))
        case let d as Double: self = .double(d)
        case let f as Float: self = .double(Double(f))
        case let s as String: self = .string(s)
        case let date as Date: self = .string(dateFormat.string(from: date))
        case let array as [Any]: self = .array(try array.map { try JSON(any: $0, dateFormat: dateFormat) })
        case let dictionary as [String: Any]:
            var object = JSONObject()
            for key in dictionary.keys.sorted() {
                object[key] = try JSON(any: dictionary[key]!, dateFormat: dateFormat)
            }
            self = .object(object)
        default:
            throw DocStoreError(.invalidDocument, "A value of type \(Swift.type(of: value)) has no JSON form")
        }
    }
}

extension JSONWriter {
    /// Writes what writing ``Document/json(attachmentData:revisions:)`` (without attachment data)
    /// gives, without building that tree: for a document read from the database (its body in the
    /// stored form) and without attachments, `_id` and `_rev`, the stored bytes, then `_deleted`,
    /// `_revisions` and `_conflicts` are written straight from the document — the answer of each
    /// revision a replicator's `_bulk_get` reads. Any other document is written through its tree.
    package mutating func writeDocument(_ document: Document, revisions: Bool) throws {
        guard let body = document.body.storedJSON, document.attachments.isEmpty else {
            return try write(document.json(revisions: revisions))
        }
        append("{\"_id\":")
        writeString(document.id)
        if let revision = document.revision {
            append(",\"_rev\":")
            writeRevision(revision)
        }
        if body.count > 2 {
            append(",")
            bytes.append(contentsOf: body[1..<(body.count - 1)])
        }
        if document.isDeleted { append(",\"_deleted\":true") }
        if revisions, let revision = document.revision {
            append(",\"_revisions\":{\"start\":")
            writeInteger(revision.generation)
            append(",\"ids\":[")
            writeDigest(of: revision)
            for ancestor in document.revisionHistory ?? [] {
                append(",")
                writeDigest(of: ancestor)
            }
            append("]}")
        }
        if !document.conflicts.isEmpty {
            append(",\"_conflicts\":[")
            for (position, conflict) in document.conflicts.enumerated() {
                if position > 0 { append(",") }
                writeRevision(conflict)
            }
            append("]")
        }
        append("}")
    }

    /// Writes a revision's hash as a JSON string, without making a `String` for a hex hash.
    private mutating func writeDigest(of revision: RevisionID) {
        guard revision.isHex else { return writeString(revision.digest) }
        append("\"")
        revision.withDigestBytes { bytes.append(contentsOf: $0) }
        append("\"")
    }
}
