import Crypto
import Foundation

/// A property's reference to another document: stored as `{"~ref": "<id>", "~type": "<collection>"}`
/// (the type is optional), which the database finds anywhere in a document and keeps in an index of
/// references, so that related documents can be looked up in both directions.
///
/// ```swift
/// struct Order: Model { var id: String; var revision: RevisionID?; var customer: Reference<Customer> }
/// let orders = try await db.referencing(Order.self, to: customer.id)
/// ```
public struct DocumentReference: Codable, Hashable, Sendable {
    /// The referenced document's id.
    public var id: String
    /// The referenced document's collection (its `type`), when known.
    public var type: String?

    /// A reference to the document `id`, of collection `type` when known.
    public init(id: String, type: String? = nil) {
        self.id = id
        self.type = type
    }

    static let idMember = "~ref"
    static let typeMember = "~type"

    private struct Key: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: Key.self)
        id = try container.decode(String.self, forKey: Key(stringValue: Self.idMember))
        type = try container.decodeIfPresent(String.self, forKey: Key(stringValue: Self.typeMember))
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Key.self)
        try container.encode(id, forKey: Key(stringValue: Self.idMember))
        try container.encodeIfPresent(type, forKey: Key(stringValue: Self.typeMember))
    }

    /// The reference an object of a document is, if it is one.
    init?(json: JSON) {
        guard case .object(let object) = json, case .string(let id)? = object[Self.idMember] else { return nil }
        self.init(id: id, type: object[Self.typeMember]?.stringValue)
    }

    /// The references anywhere in `value`, with the path of each (`customer`, `lines.2.product`).
    static func all(in value: JSON, path: String = "") -> [(path: String, reference: DocumentReference)] {
        if let reference = DocumentReference(json: value) { return [(path, reference)] }
        switch value {
        case .object(let object):
            return object.flatMap { key, member in all(in: member, path: path.isEmpty ? key : path + "." + key) }
        case .array(let elements):
            return elements.enumerated().flatMap { index, element in all(in: element, path: path + "." + String(index)) }
        default:
            return []
        }
    }
}

/// A typed reference to a model of type `Target` (stored as a ``DocumentReference`` with its type).
public struct Reference<Target: Model>: Codable, Hashable, Sendable {
    /// The referenced document's id.
    public var id: String

    /// A reference to the model with id `id`.
    public init(id: String) { self.id = id }
    /// A reference to `target`.
    public init(_ target: Target) { self.id = target.id }

    public init(from decoder: any Decoder) throws {
        id = try DocumentReference(from: decoder).id
    }

    public func encode(to encoder: any Encoder) throws {
        try DocumentReference(id: id, type: Target.collection).encode(to: encoder)
    }
}

/// How a reference names the document it wants: by id, or by the value of one of its properties.
public enum ReferenceKey: Sendable, Hashable {
    /// The document with this id.
    case id(String)
    /// The document of the model's collection whose `property` equals `value` (the one with the
    /// smallest id, if several do).
    case match(property: String, value: JSON)

    /// The id a document created for this key gets: the id itself, or for a match a digest of the
    /// collection, property and value — so replicas that create "the same" entity create the same
    /// document.
    func creationID(collection: String) -> String {
        switch self {
        case .id(let id):
            return id
        case .match(let property, let value):
            let text = collection + "\u{0}" + property + "\u{0}" + ((try? value.serializedString()) ?? "")
            let digest = SHA256.hash(data: Data(text.utf8)).prefix(16).map { String(format: "%02x", $0) }.joined()
            return collection + "-" + digest
        }
    }
}

/// A model with the documents related to it, as ``Database/fetchRelated(_:ids:)`` returns it.
public struct Related<M: Model>: Sendable {
    /// The model.
    public let model: M
    /// The documents its properties reference, by id (a reference to a missing document is absent).
    /// Swift's `String` keys are compared by canonical equivalence: of two referenced ids that differ
    /// only in their Unicode normalization, one document is kept.
    public let references: [String: Document]
    /// The live documents that reference it, in id order.
    public let referencedBy: [Document]
}

extension Database {
    /// The index of references: `[referenced id, path]` → the referencing document's `type`.
    static let referenceIndexName = "docstore/references"

    static let referenceIndex = IndexDefinition(name: referenceIndexName, version: "1") { document, emit in
        for (path, reference) in DocumentReference.all(in: .object(document.body)) {
            emit([.string(reference.id), .string(path)], document.type.map { .string($0) } ?? .null)
        }
    }

    private func referenceRows(to id: String) async throws -> [QueryRow] {
        if try await indexDefinition(named: Self.referenceIndexName) == nil {
            try await register(Self.referenceIndex)
        }
        var query = IndexQuery()
        query.startKey = [.string(id)]
        query.endKey = [.string(id), .object([:])]
        return try await self.query(Self.referenceIndexName, query).rows
    }

    /// The ids of the live documents that reference `id`, in id order, each once.
    public func referencingIDs(to id: String) async throws -> [String] {
        let ids = Set(try await referenceRows(to: id).compactMap(\.documentID))
        return ids.sorted()
    }

    /// The models of type `M` that reference the document `id` (from any property), in id order.
    public func referencing<M: Model>(_ type: M.Type, to id: String) async throws -> [M] {
        let ids = Set(try await referenceRows(to: id).filter { $0.value == .string(M.collection) }.compactMap(\.documentID))
        return try await fetch(M.self, ids: ids.sorted())
    }

    /// The models of type `T` that the document `id` references (from any property, or from the
    /// property `property` and what is inside it), in the order of the references; references to
    /// missing documents are left out.
    public func referenced<T: Model>(_ type: T.Type, from id: String, property: String? = nil) async throws -> [T] {
        guard let document = try await document(withID: id) else { throw DocStoreError.notFound("No document \(id)") }
        var ids: [String] = []
        for (path, reference) in DocumentReference.all(in: .object(document.body)) {
            if let property, path != property && !path.hasPrefix(property + ".") { continue }
            if reference.type != nil && reference.type != T.collection { continue }
            if !ids.contains(reference.id) { ids.append(reference.id) }
        }
        return try await documents(withIDs: ids).filter { $0.type == T.collection }.map {
            try ModelCoding.model(T.self, from: $0, dateFormat: configuration.dateFormat)
        }
    }

    /// Models with the documents related to them in both directions: those they reference and those
    /// that reference them.
    public func fetchRelated<M: Model>(_ type: M.Type, ids: [String]) async throws -> [Related<M>] {
        var related: [Related<M>] = []
        for (model, document) in try await fetchWithDocuments(M.self, ids: ids) {
            let targets = DocumentReference.all(in: .object(document.body)).map(\.reference.id)
            var references: [String: Document] = [:]
            for target in try await documents(withIDs: targets) { references[target.id] = target }
            let referencedBy = try await documents(withIDs: try await referencingIDs(to: model.id))
            related.append(Related(model: model, references: references, referencedBy: referencedBy))
        }
        return related
    }

    /// Resolves references to models of type `T`: each key names an existing document, or one is
    /// created from `make(key)` — all the missing ones in one transaction, all or nothing.
    ///
    /// A created document's id is the key's id, or (for a `.match` key, when the made model has an
    /// empty id) a digest of the collection, property and value; two replicas that create the same
    /// entity offline therefore create the same document. If they made it with the same properties
    /// (and the type has no history), its revisions are identical and replication finds nothing to
    /// do; otherwise replication stores a conflict, which for a type with ``Model/history`` is merged
    /// (both replicas' values in the history, the newest current) and for another type is resolved
    /// as CouchDB does: the revision with the greater id wins, the other stays a conflict.
    ///
    /// - Returns: the resolved or created models, one per key, in order (a key given twice gives the
    ///   same model twice).
    /// - Throws: ``DocStoreError`` naming the key (``DocStoreError/itemIndex``) whose document is of
    ///   another collection, or whose creation failed; nothing is created then.
    public func resolve<T: Model>(_ type: T.Type, _ keys: [ReferenceKey],
                                  creating make: (ReferenceKey) throws -> T) async throws -> [T] {
        for attempt in 0..<2 {
            var found: [ReferenceKey: T] = [:]
            var missing: [ReferenceKey] = []
            var looked = Set<ReferenceKey>()
            for (position, key) in keys.enumerated() where looked.insert(key).inserted {
                do {
                    if let model = try await lookUp(T.self, key) { found[key] = model } else { missing.append(key) }
                } catch let error as DocStoreError {
                    throw error.naming(item: position, id: nil)
                }
            }
            if !missing.isEmpty {
                var created: [T] = []
                for key in missing {
                    var model = try make(key)
                    if model.id.isEmpty || { if case .id = key { return true } else { return false } }() {
                        model.id = key.creationID(collection: T.collection)
                    }
                    model.revision = nil
                    created.append(model)
                }
                do {
                    let saved = try await add(created)
                    for (key, model) in zip(missing, saved) { found[key] = model }
                } catch let error as DocStoreError where error.code == .conflict && attempt == 0 {
                    continue   // created meanwhile: look up again
                } catch let error as DocStoreError {
                    let key = error.itemIndex.map { missing[$0] }
                    throw error.naming(item: key.flatMap { keys.firstIndex(of: $0) } ?? 0, id: error.documentID)
                }
            }
            return keys.map { found[$0]! }
        }
        throw DocStoreError.conflict("The references kept changing while they were resolved")
    }

    private func lookUp<T: Model>(_ type: T.Type, _ key: ReferenceKey) async throws -> T? {
        switch key {
        case .id(let id):
            return try await fetch(T.self, id: id)
        case .match(let property, let value):
            var query = FindQuery(selector: try MangoSelector(["$and": [["type": .string(T.collection)], .object([property: ["$eq": value]])]]))
            query.limit = nil
            let documents = try await find(query).documents.sorted { $0.id < $1.id }
            return try documents.first.map { try ModelCoding.model(T.self, from: $0, dateFormat: configuration.dateFormat) }
        }
    }
}
