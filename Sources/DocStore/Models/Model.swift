import Foundation

/// A typed document: a `Codable` value that carries its id and revision, stored as a JSON document of
/// its ``collection``.
///
/// ```swift
/// struct Person: Model {
///     var id: String
///     var revision: RevisionID?
///     var name: String
///     var age: Int
/// }
/// let saved = try await db.add([Person(id: "ann", name: "Ann", age: 31)])   // saved[0].revision is 1-…
/// ```
///
/// The document is the model's JSON encoding with `id` as `_id`, `revision` as `_rev` and the
/// collection as the `type` member; any other members are the model's own. A model decodes from any
/// document of its collection, so documents written by CouchDB clients are read as models too.
///
/// - `id` and `revision` must be encoded under the names `id`/`revision` (as synthesized `Codable`
///   does) or `_id`/`_rev`; the model's encoding must not use the member `type` for anything else.
/// - An empty `id` on ``Database/add(_:)-(M)`` asks the database for one.
public protocol Model: Codable, Identifiable, Sendable where ID == String {
    /// The document id (`_id`).
    var id: String { get set }
    /// The revision the value was read at (`_rev`); `nil` before it is first added.
    var revision: RevisionID? { get set }
    /// The value of the documents' `type` member. Default: the type's name.
    static var collection: String { get }
    /// Whether, and how long, every value each property has had is kept (see ``PropertyHistory``).
    /// Default `nil`: no history.
    static var history: HistoryPolicy? { get }
}

extension Model {
    public static var collection: String { String(describing: Self.self) }
    public static var history: HistoryPolicy? { nil }
}

/// The members of a model's document that are not its properties.
enum ModelCoding {
    static let typeMember = "type"

    /// The model's members: its encoding without the id, the revision and the type.
    static func properties<M: Model>(of model: M, dateFormat: DateFormat) throws -> JSONObject {
        let encoded: Document
        do {
            encoded = try Document(id: "-", from: model, dateFormat: dateFormat)
        } catch let error as DocStoreError {
            throw error
        } catch {
            throw DocStoreError(.invalidDocument, "\(M.self) cannot be encoded: \(error)", cause: error)
        }
        var object = encoded.body
        for member in ["id", "revision", typeMember, PropertyHistory.member] { object.removeValue(forKey: member) }
        return object
    }

    /// The document of a model without history: its properties, then `type`.
    static func document<M: Model>(for model: M, dateFormat: DateFormat) throws -> Document {
        var body = try properties(of: model, dateFormat: dateFormat)
        body[typeMember] = .string(M.collection)
        var document = Document(id: model.id, revision: model.revision, body: body)
        if model.id.isEmpty { document = Document(body: body) }
        return document
    }

    /// The model a document holds.
    /// - Throws: ``DocStoreError/Code/invalidModel`` if it is of another collection or does not decode.
    static func model<M: Model>(_ type: M.Type, from document: Document, dateFormat: DateFormat) throws -> M {
        guard document.type == M.collection else {
            let found = document.type.map { "a \($0)" } ?? "a document without a type"
            throw DocStoreError(.invalidModel, "Document \(document.id) is \(found), not a \(M.collection)")
        }
        var body = document.body
        body["id"] = .string(document.id)
        if let revision = document.revision { body["revision"] = .string(revision.description) }
        var copy = Document(id: document.id, revision: document.revision, body: body)
        copy.attachments = document.attachments
        do {
            return try copy.decode(as: M.self, dateFormat: dateFormat)
        } catch {
            throw DocStoreError(.invalidModel, "Document \(document.id) does not decode as \(M.self): \(describe(error))",
                                cause: error)
        }
    }

    /// A decoding error in a sentence: the path and what was wrong.
    static func describe(_ error: any Error) -> String {
        guard let error = error as? DecodingError else { return "\(error)" }
        func path(_ keys: [any CodingKey]) -> String {
            keys.isEmpty ? "the document" : keys.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }.joined(separator: ".")
        }
        switch error {
        case .typeMismatch(let type, let context): return "\(path(context.codingPath)) is not a \(type)"
        case .valueNotFound(let type, let context): return "\(path(context.codingPath)) is null, not a \(type)"
        case .keyNotFound(let key, let context): return "\(path(context.codingPath + [key])) is missing"
        case .dataCorrupted(let context): return "\(path(context.codingPath)): \(context.debugDescription)"
        @unknown default: return "\(error)"
        }
    }
}
