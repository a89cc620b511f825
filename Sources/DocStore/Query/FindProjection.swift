import Foundation

/// `fields`: the asked paths of a document, nested as in it; an array position becomes a member name
/// (`"items.0.name"` gives `{"items": {"0": {"name": …}}}`), as CouchDB does.
enum FindProjection {
    /// Adds an answer: `document`, or with `fields` only those (also as CouchDB writes them, to
    /// `projected`).
    static func append(_ document: Document, fields: [FieldPath]?, to documents: inout [Document], projected: inout [JSON]) throws {
        guard let fields else {
            documents.append(document)
            return
        }
        let answer = project(document.json(), fields)
        projected.append(answer)
        documents.append(try Document(json: answer))
    }

    static func project(_ document: JSON, _ fields: [FieldPath]) -> JSON {
        var result = JSONObject()
        for field in fields {
            guard case .found(let value) = field.lookup(in: document), !field.components.isEmpty else { continue }
            insert(value, at: field.components[...], into: &result)
        }
        return .object(result)
    }

    private static func insert(_ value: JSON, at path: ArraySlice<String>, into object: inout JSONObject) {
        let name = path.first!
        if path.count == 1 {
            object[name] = value
            return
        }
        var child = object[name]?.objectValue ?? [:]
        insert(value, at: path.dropFirst(), into: &child)
        object[name] = .object(child)
    }
}
