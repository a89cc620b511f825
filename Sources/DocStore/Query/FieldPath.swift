/// A dotted path into a document, as Mango writes it: `"address.city"`, `"items.0.name"`, with `\.`
/// for a dot inside a member name (`"a\.b"` is the one member `a.b`).
package struct FieldPath: Sendable, Hashable, CustomStringConvertible {
    /// The member names (or array positions) from the document's root.
    package let components: [String]
    /// The path as it was written.
    package let description: String

    /// Parses a dotted path.
    /// - Throws: ``DocStoreError/Code/invalidFieldName`` for an empty component (`"a..b"`, `"a."`).
    package init(_ text: String) throws {
        description = text
        guard !text.isEmpty else {
            components = []
            return
        }
        var parts: [String] = []
        var current = ""
        var escaped = false
        for character in text {
            if escaped {
                // `\.` is a literal dot; a backslash before anything else is dropped, as CouchDB does.
                current.append(character)
                escaped = false
            } else if character == "\\" {
                escaped = true
            } else if character == "." {
                parts.append(current)
                current = ""
            } else {
                current.append(character)
            }
        }
        parts.append(current)
        guard !parts.contains(where: \.isEmpty) else {
            throw DocStoreError(.invalidFieldName, "Invalid field name: \(text)")
        }
        components = parts
    }

    /// The path of the document itself (an empty path, as inside `$elemMatch`).
    static let root = FieldPath(components: [], description: "")

    private init(components: [String], description: String) {
        self.components = components
        self.description = description
    }

    /// This path followed by `other`.
    func appending(_ other: FieldPath) -> FieldPath {
        if components.isEmpty { return other }
        if other.components.isEmpty { return self }
        return FieldPath(components: components + other.components, description: description + "." + other.description)
    }

    /// What a lookup finds.
    enum Lookup {
        case found(JSON)
        /// A member of an object on the way is absent (only this matches `$exists: false`).
        case missing
        /// The path goes through a scalar, or through an array by a position out of range or not a
        /// number.
        case badPath
    }

    /// The value at this path in `document`'s CouchDB JSON (`_id`, `_rev`, the body), without building
    /// that JSON.
    func lookup(in document: Document) -> Lookup {
        guard let first = components.first else { return .found(document.json()) }
        let start: JSON
        switch first {
        case "_id": start = .string(document.id)
        case "_rev":
            guard let revision = document.revision else { return .missing }
            start = .string(revision.description)
        case "_deleted", "_attachments", "_conflicts", "_revisions":
            // Rarely asked: read from the whole JSON.
            return lookup(in: document.json())
        default:
            guard let value = document.body[first] else { return .missing }
            start = value
        }
        return lookup(in: start, from: 1)
    }

    /// The value at this path (from its component `start` on) in `value`; an array is entered by a
    /// position (`"items.0"`).
    func lookup(in value: JSON, from start: Int = 0) -> Lookup {
        var current = value
        for component in components[start...] {
            switch current {
            case .object(let object):
                guard let next = object[component] else { return .missing }
                current = next
            case .array(let elements):
                guard let position = Int(component), position >= 0, position < elements.count else { return .badPath }
                current = elements[position]
            default:
                return .badPath
            }
        }
        return .found(current)
    }
}
