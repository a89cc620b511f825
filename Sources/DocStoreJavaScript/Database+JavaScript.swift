import DocStore
import Foundation

extension Database {
    /// Makes the database's JavaScript design documents live for writes: every write, local or
    /// replicated, is checked by the `validate_doc_update` function of each design document that has
    /// one (in id order, as CouchDB), and a design document is refused if its view functions do not
    /// compile. Views (``query(designDocument:view:_:engine:)``), filters
    /// (``changesFilter(designDocument:filter:request:engine:)``) and the rendering functions run
    /// whether or not this was called.
    ///
    /// Writes made without a ``WriteContext`` are validated as the database's owner would write them:
    /// `userCtx` is `{"db": name, "name": null, "roles": ["_admin"]}`, `secObj` the database's
    /// `_security` object.
    ///
    /// ```swift
    /// let db = try await Database.open(name: "orders", directory: folder)
    /// db.enableJavaScript()
    /// _ = try await db.save(order)    // throws DocStoreError(.forbidden, …) if a validator refuses it
    /// ```
    public func enableJavaScript(engine: JavaScriptEngine = .shared) {
        writeValidator = JavaScriptValidation.validator(database: name, engine: engine)
        namedFilterResolver = { [weak self] name, parameters in
            guard let self else { throw DocStoreError(.databaseClosed, "The database is closed") }
            return try await self.javaScriptFilter(named: name, parameters: parameters, request: nil, engine: engine)
        }
    }

    /// The filter a name stands for, as CouchDB's `_changes?filter=`: `design/name` (a filter
    /// function, called with `request`, or a request whose `query` holds `parameters`), or `_view`
    /// with the view in `parameters["view"]` (`design/view`).
    /// - Throws: ``DocStoreError/Code/badRequest`` for a name that is neither.
    public func javaScriptFilter(named name: String, parameters: [String: String], request: JSON?,
                                 engine: JavaScriptEngine = .shared) async throws -> ChangesFilter {
        if name == "_view" {
            let parts = (parameters["view"] ?? "").split(separator: "/", maxSplits: 1).map(String.init)
            guard parts.count == 2 else {
                throw DocStoreError(.badRequest, "`view` filter parameter is not provided.")
            }
            return try await changesFilter(designDocument: parts[0], view: parts[1], engine: engine)
        }
        let parts = name.split(separator: "/", maxSplits: 1).map(String.init)
        guard parts.count == 2 else {
            throw DocStoreError(.badRequest, "`filter` parameter is not correct: \(name)")
        }
        return try await changesFilter(designDocument: parts[0], filter: parts[1],
                                       request: request ?? JavaScriptRequest.make(database: self.name, query: parameters),
                                       engine: engine)
    }

    /// A filter for ``changes(since:limit:filter:includeDocuments:descending:)`` (and a replication
    /// from this database) that runs filter function `filter` of `_design/<designDocument>`, as
    /// CouchDB's `_changes?filter=designDocument/filter`. The function is called as
    /// `filter(doc, req)`; `request` is the `req` it sees (``JavaScriptRequest``). A function that
    /// throws fails the read that runs it, as CouchDB fails the `_changes` request (a thrown value that
    /// is no error object is CouchDB's `unnamed_error`).
    /// - Throws: ``DocStoreError/Code/notFound`` for a missing design document or filter,
    ///   ``DocStoreError/Code/unknownQueryLanguage`` for a filter in another language,
    ///   ``DocStoreError/Code/compilationError`` when it does not compile.
    public func changesFilter(designDocument: String, filter: String, request: JSON? = nil,
                              engine: JavaScriptEngine = .shared) async throws -> ChangesFilter {
        let design = try await self.designDocument(named: designDocument)
        if !design.isJavaScript, case .object(let filters)? = design.body["filters"], filters[filter] != nil {
            throw DocStoreError(.unknownQueryLanguage, design.language)
        }
        guard let source = design.filters[filter] else {
            // CouchDB names the member that is missing: `filters`, or the function.
            throw DocStoreError(.notFound, "missing json key: \(design.body["filters"] == nil ? "filters" : filter)")
        }
        let reference = JavaScriptContext.FunctionReference(design: design, path: "filters.\(filter)", source: source)
        try await engine.run { context in _ = try context.function(reference) }
        let requestJSON = try (request ?? JavaScriptRequest.make(database: name)).serializedString()
        let logger = configuration.logger
        return ChangesFilter(predicate: { document in
            do {
                let text = try document.json().serializedString()
                return try engine.withContext { context in
                    try context.filter(reference, documentJSON: text, request: try context.value(json: requestJSON))
                }
            } catch var error as DocStoreError {
                logger.warning("filter \(design.id)/\(filter) failed for \(document.id): \(error)")
                // A thrown value that is no error object: CouchDB's `unnamed_error`, with the value as
                // its JavaScript engine writes its source.
                if error.code == .unknownError {
                    error = DocStoreError(.scriptFailure, "(new String(\((try? JSON.string(error.reason).serializedString()) ?? error.reason)))")
                    error.errorName = "unnamed_error"
                }
                throw error
            }
        })
    }

    /// A filter that passes the documents for which view `view` of `_design/<designDocument>` emits
    /// at least one row (CouchDB's `_changes?filter=_view&view=designDocument/view`). Deletions never
    /// pass, as in CouchDB.
    public func changesFilter(designDocument: String, view: String, engine: JavaScriptEngine = .shared) async throws -> ChangesFilter {
        let design = try await self.designDocument(named: designDocument)
        guard let source = design.views[view]?.map else { throw DocStoreError(.notFound, "missing_named_view") }
        let reference = JavaScriptContext.FunctionReference(design: design, path: "views.\(view).map", source: source, forMap: true)
        try await engine.run { context in _ = try context.function(reference) }
        return ChangesFilter(predicate: { document in
            guard !document.isDeleted, let text = try? document.json().serializedString() else { return false }
            return (try? engine.withContext { try $0.filterByView(reference, documentJSON: text) }) ?? false
        })
    }
}

/// The `req` object CouchDB gives filter, show, list and update functions.
public enum JavaScriptRequest {
    /// The parameters CouchDB gives functions parsed (`req.query.key` is the key, not its JSON text).
    public static let jsonQueryKeys: Set<String> = ["startkey", "endkey", "key", "descending"]

    /// A request object with CouchDB's members: `query` (the URL's parameters; `startkey`, `endkey`, `key`
    /// and `descending` parsed as JSON), `userCtx`, `method`,
    /// `path`, `headers`, `body` and the rest, as far as they are known.
    public static func make(database: String, method: String = "GET", path: [String] = [], query: [String: String] = [:],
                            headers: [String: String] = [:], body: String? = nil, id: String? = nil,
                            userContext: JSON? = nil, securityObject: JSON = [:], peer: String = "127.0.0.1",
                            info: JSON = [:], rawPath: String? = nil) -> JSON {
        var queryObject = JSONObject()
        for name in query.keys.sorted() {
            let value = query[name]!
            // As CouchDB: `startkey`, `endkey`, `key` and `descending` arrive parsed, as JSON (one that
            // is not JSON stays text, where CouchDB fails the request).
            if jsonQueryKeys.contains(name), let parsed = try? JSON(parsing: value) {
                queryObject[name] = parsed
            } else {
                queryObject[name] = .string(value)
            }
        }
        var headerObject = JSONObject()
        for name in headers.keys.sorted() { headerObject[name] = .string(headers[name]!) }
        var form = JSONObject()
        if let body, headers.first(where: { $0.key.lowercased() == "content-type" })?.value.hasPrefix("application/x-www-form-urlencoded") == true {
            for pair in body.split(separator: "&") {
                let parts = pair.split(separator: "=", maxSplits: 1).map { String($0).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String($0) }
                form[parts[0]] = .string(parts.count > 1 ? parts[1] : "")
            }
        }
        let request: JSONObject = [
            "info": info,
            "id": id.map(JSON.string) ?? .null,
            "uuid": .string(RandomHex.make()),
            "method": .string(method),
            "requested_path": .array(path.map(JSON.string)),
            "path": .array(path.map(JSON.string)),
            "raw_path": .string(rawPath ?? "/" + path.joined(separator: "/")),
            "query": .object(queryObject),
            "headers": .object(headerObject),
            "body": body.map(JSON.string) ?? .string("undefined"),
            "peer": .string(peer),
            "form": .object(form),
            "cookie": [:],
            "userCtx": userContext ?? ["db": .string(database), "name": .null, "roles": ["_admin"]],
            "secObj": securityObject,
        ]
        return .object(request)
    }
}

/// `validate_doc_update` and design-document checks as a DocStore ``WriteValidator``.
enum JavaScriptValidation {
    static func validator(database: String, engine: JavaScriptEngine) -> WriteValidator {
        { write in
            if write.newDocument.id.hasPrefix(DesignDocument.prefix) {
                try checkDesignDocument(write.newDocument, engine: engine)
                return
            }
            let newJSON = try write.newDocument.json(revisions: true).serializedString()
            let oldJSON = try write.oldDocument.map { try $0.json().serializedString() }
            let context = write.context ?? WriteContext(userContext: ["db": .string(database), "name": .null, "roles": ["_admin"]])
            for stored in write.validatingDesignDocuments {
                let design = try DesignDocument(stored)
                guard design.isJavaScript, let source = design.validateDocUpdate else { continue }
                let reference = JavaScriptContext.FunctionReference(design: design, path: "validate_doc_update", source: source)
                try engine.withContext { js in
                    try js.validate(reference, newDocument: newJSON, oldDocument: oldJSON, userContext: context.userContext,
                                    securityObject: context.securityObject)
                }
            }
        }
    }

    /// CouchDB's checks of a design document being saved: well-formed members, a supported reduce
    /// built-in, and view functions that compile (in JavaScript; other languages are stored as they are).
    static func checkDesignDocument(_ document: Document, engine: JavaScriptEngine) throws {
        guard !document.isDeleted else { return }
        let design = try DesignDocument(document)
        // As CouchDB, whatever the language: rules or a function (`_rewrite`).
        switch design.body["rewrites"] {
        case nil, .array?, .string?: break
        default: throw DocStoreError(.invalidDesignDocument, "`rewrites` field must have array or string type")
        }
        guard design.isJavaScript else { return }
        try engine.withContext { context in
            for name in design.views.keys.sorted() {
                let view = design.views[name]!
                do {
                    _ = try context.function(.init(design: design, path: "views.\(name).map", source: view.map, forMap: true))
                } catch let error as DocStoreError where error.code == .compilationError {
                    throw DocStoreError(.compilationError, "Compilation of the map function in the '\(name)' view failed: \(error.reason)")
                }
                guard let reduce = view.reduce else { continue }
                if reduce.hasPrefix("_") {
                    guard JavaScriptViews.builtinReduce(reduce) != nil else {
                        throw DocStoreError(.invalidDesignDocument, "`\(reduce)` is not a supported reduce function.")
                    }
                    continue
                }
                do {
                    _ = try context.function(.init(design: design, path: "views.\(name).reduce", source: reduce))
                } catch let error as DocStoreError where error.code == .compilationError {
                    throw DocStoreError(.compilationError, "Compilation of the reduce function in the '\(name)' view failed: \(error.reason)")
                }
            }
        }
    }
}
