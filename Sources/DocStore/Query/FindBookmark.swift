import Foundation

/// Where a page of a find ended: the index key and document id of its last document, encoded as
/// URL-safe base64 of `{"startkey": …, "startkey_docid": …}`.
struct FindBookmark: Sendable {
    let key: JSON
    let documentID: String

    init(key: JSON, documentID: String) {
        self.key = key
        self.documentID = documentID
    }

    init(encoded text: String) throws {
        guard let data = Base64URL.decode(text), let json = try? JSON(parsing: data),
            let key = json["startkey"], let id = json["startkey_docid"]?.stringValue else {
            throw DocStoreError(.invalidBookmark, "Invalid bookmark value: \(text)")
        }
        self.init(key: key, documentID: id)
    }

    var encoded: String {
        let json: JSON = ["startkey": key, "startkey_docid": .string(documentID)]
        return Base64URL.encode(json.description.utf8)
    }

    /// A key bound as a value of the index: `max` is an object above every value of the prefix.
    static func keyValue(_ bound: QueryPlanner.Bound) -> JSON {
        switch bound {
        case .min: .null
        case .max: .object(["\u{FFF0}": .null])
        case .value(let value): value
        }
    }

    /// A bound of `_all_docs` as a document id: `.some(nil)` for an open edge, `nil` when no id lies on
    /// its side of it. As in CouchDB, only a string bounds `_all_docs` (any other bound leaves that edge
    /// open, and the selector decides); ids are non-empty, so `""` as the upper edge leaves nothing.
    /// - Parameter isLower: whether the bound is the lower edge of the id range (the start of an
    ///   ascending read, the end of a descending one).
    static func documentID(_ bound: QueryPlanner.Bound?, isLower: Bool) -> String?? {
        guard case .value(.string(let id))? = bound else { return .some(nil) }
        if id.isEmpty { return isLower ? .some(nil) : nil }
        return .some(id)
    }
}
