import Crypto
import DocStore
import Foundation

/// A design document as CouchDB reads it: its language, views (map, reduce, the CommonJS modules of
/// `views.lib`), view `options`, `filters`, `validate_doc_update`, `updates`, `shows` and `lists`.
///
/// ```swift
/// guard let stored = try await db.document(withID: "_design/app") else { return }
/// let design = try DesignDocument(stored)
/// print(design.views.keys.sorted())       // ["by_type", …]
/// ```
public struct DesignDocument: Sendable {
    /// A view: the source of its map function and of its reduce (a JavaScript function or one of
    /// CouchDB's built-ins, `_count`, `_sum`, `_stats`, `_approx_count_distinct`).
    public struct View: Sendable, Hashable {
        public let map: String
        public let reduce: String?
        /// The view's own `options` (`collation: "raw"`), over the design document's.
        public var options: JSONObject = [:]
    }

    /// The document id, `_design/…`.
    public let id: String
    /// The name after `_design/`.
    public var name: String { String(id.dropFirst(DesignDocument.prefix.count)) }
    /// The revision the document was read at.
    public let revision: RevisionID?
    /// `"javascript"` (the default when absent) or `"query"` (Mango indexes, not run here).
    public let language: String
    /// The design document's body as stored (every member, also those of other languages).
    public let body: JSONObject
    /// The views by name (`views.lib` excluded: it holds modules).
    public let views: [String: View]
    /// `views.lib`, the CommonJS modules map functions may `require`.
    public let viewLibrary: JSON?
    /// View options: `collation` (`"raw"`), `include_design`, `local_seq`.
    public let options: JSONObject
    /// Filter function sources by name.
    public let filters: [String: String]
    /// The `validate_doc_update` function source.
    public let validateDocUpdate: String?
    /// Update handler sources by name.
    public let updates: [String: String]
    /// Show function sources by name.
    public let shows: [String: String]
    /// List function sources by name.
    public let lists: [String: String]
    /// The whole document as JSON text: `this` in functions, and the root of `require`.
    let json: String
    /// What identifies this revision of the document in a context's cache.
    let cacheKey: String

    static let prefix = "_design/"

    /// Reads a design document.
    /// - Throws: ``DocStoreError/Code/invalidDesignDocument`` when it is not a design document, a
    ///   function is not a string, or a view has no `map`.
    public init(_ document: Document) throws {
        guard document.id.hasPrefix(DesignDocument.prefix) else {
            throw DocStoreError(.invalidDesignDocument, "\(document.id) is not a design document")
        }
        id = document.id
        revision = document.revision
        let body = document.body
        self.body = body
        switch body["language"] {
        case nil, .null?: language = "javascript"
        case .string(let name)?: language = name
        case let other?: throw DocStoreError(.invalidDesignDocument, "`language` must be a string, not \(other)")
        }
        // Another language's functions (a Mango index's `{"fields": …}` maps, Erlang) are not ours to read.
        let javaScript = language == "javascript"
        func functions(_ member: String) throws -> [String: String] {
            guard javaScript, let value = body[member], !value.isNull else { return [:] }
            guard case .object(let object) = value else {
                throw DocStoreError(.invalidDesignDocument, "`\(member)` is not an object")
            }
            var result: [String: String] = [:]
            for (name, source) in object {
                guard case .string(let text) = source else {
                    throw DocStoreError(.invalidDesignDocument, "`\(member).\(name)` is not a string")
                }
                result[name] = text
            }
            return result
        }
        var views: [String: View] = [:]
        var library: JSON? = nil
        if javaScript, let value = body["views"], !value.isNull {
            guard case .object(let object) = value else { throw DocStoreError(.invalidDesignDocument, "`views` is not an object") }
            for (name, view) in object {
                if name == "lib" { library = view; continue }
                guard case .object(let members) = view else {
                    throw DocStoreError(.invalidDesignDocument, "View \(name) must be an object")
                }
                guard case .string(let map)? = members["map"] else {
                    throw DocStoreError(.invalidDesignDocument, "View \(name) must have a map function")
                }
                var reduce: String? = nil
                switch members["reduce"] {
                case nil, .null?: break
                case .string(let text)?: reduce = text
                default: throw DocStoreError(.invalidDesignDocument, "Reduce function of view \(name) must be a string")
                }
                var parsed = View(map: map, reduce: reduce)
                if case .object(let options)? = members["options"] { parsed.options = options }
                views[name] = parsed
            }
        }
        self.views = views
        viewLibrary = library
        if case .object(let options)? = body["options"] { self.options = options } else { options = [:] }
        filters = try functions("filters")
        updates = try functions("updates")
        shows = try functions("shows")
        lists = try functions("lists")
        switch body["validate_doc_update"] {
        case _ where !javaScript, nil, .null?: validateDocUpdate = nil
        case .string(let text)?: validateDocUpdate = text
        default: throw DocStoreError(.invalidDesignDocument, "`validate_doc_update` must be a string")
        }
        json = (try? document.json().serializedString()) ?? "{}"
        cacheKey = "\(document.id)@\(document.revision?.description ?? Insecure.MD5.hex(json))"
    }

    /// Whether the design document is run as JavaScript.
    public var isJavaScript: Bool { language == "javascript" }

    /// Whether `include_design` asks views to map design documents too.
    var includesDesignDocuments: Bool { options["include_design"]?.boolValue ?? false }
    /// Whether `local_seq` adds `_local_seq` to the documents views map.
    var includesLocalSequence: Bool { options["local_seq"]?.boolValue ?? false }
    /// The collation of view `name`: its own options', else the design document's.
    func collation(of name: String) -> Collation {
        let asked = views[name]?.options["collation"]?.stringValue ?? options["collation"]?.stringValue
        return asked == "raw" ? .raw : .unicode
    }

    /// CouchDB's view-group signature: a digest of everything that decides the views' rows (the
    /// language, views, `views.lib` and options), as hex.
    public var signature: String {
        var members = JSONObject()
        members["language"] = .string(language)
        var viewMembers = JSONObject()
        for name in views.keys.sorted() {
            let view = views[name]!
            viewMembers[name] = ["map": .string(view.map), "reduce": view.reduce.map(JSON.string) ?? .null, "options": .object(view.options)]
        }
        members["views"] = .object(viewMembers)
        members["lib"] = viewLibrary ?? .null
        members["options"] = .object(options)
        return Insecure.MD5.hex((try? JSON.object(members).serializedString()) ?? "")
    }

    /// The version of one view's index: a digest of what decides its rows.
    func version(of viewName: String) -> String? {
        guard let view = views[viewName] else { return nil }
        let parts: [JSON] = [.string(view.map), view.reduce.map(JSON.string) ?? .null, viewLibrary ?? .null,
                             .bool(includesDesignDocuments), .bool(includesLocalSequence),
                             .string(collation(of: viewName) == .raw ? "raw" : "unicode")]
        return "js:" + Insecure.MD5.hex((try? JSON.array(parts).serializedString()) ?? "")
    }
}

extension Insecure.MD5 {
    /// The MD5 digest of `text`'s UTF-8 bytes, as lowercase hex.
    static func hex(_ text: String) -> String {
        Insecure.MD5.hash(data: Array(text.utf8)).map { String(format: "%02x", $0) }.joined()
    }
}
