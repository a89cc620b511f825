import DocStore

/// Shows, lists and update handlers (CouchDB's `_show`, `_list`, `_update`), run on the engine's own
/// threads. Their answers are CouchDB's "external responses": `{"code", "headers", "body" | "json" |
/// "base64"}` (or a plain string body).
extension JavaScriptEngine {
    /// Runs show function `name` of `design` with the document (its CouchDB JSON, or `nil` when there is
    /// none) and the request object (``JavaScriptRequest``); `documentPath` says the request named a
    /// document, so that a show that fails without one answers `not_found`, as CouchDB.
    /// - Returns: the response object.
    /// - Throws: ``DocStoreError`` — `not_found` for a missing function, `compilation_error`,
    ///   `render_error` for a function that threw, ``DocStoreError/Code/scriptTimeout``.
    public func show(_ name: String, of design: DesignDocument, documentJSON: String?, request: JSON,
                     documentPath: Bool) async throws -> JSON {
        guard let source = design.shows[name] else { throw DocStoreError(.notFound, "missing json key: \(name)") }
        let reference = JavaScriptContext.FunctionReference(design: design, path: "shows.\(name)", source: source)
        return try await run { try $0.show(reference, documentJSON: documentJSON, request: request, documentPath: documentPath) }
    }

    /// Runs list function `name` of `design` over view rows (`{"id","key","value","doc"?}` objects) with
    /// the view's `head` (`total_rows`, `offset`, `update_seq`).
    /// - Returns: `{"start": the response start() gave, "body": every chunk sent, in order}`.
    public func list(_ name: String, of design: DesignDocument, head: JSON, request: JSON, rows: [JSON]) async throws -> JSON {
        guard let source = design.lists[name] else { throw DocStoreError(.notFound, "missing json key: \(name)") }
        let reference = JavaScriptContext.FunctionReference(design: design, path: "lists.\(name)", source: source)
        return try await run { try $0.list(reference, head: head, request: request, rows: rows) }
    }

    /// Runs update handler `name` of `design` on the document (or `nil`).
    /// - Returns: `[document to save or null, response]`.
    public func update(_ name: String, of design: DesignDocument, documentJSON: String?, request: JSON) async throws -> JSON {
        guard let source = design.updates[name] else { throw DocStoreError(.notFound, "missing json key: \(name)") }
        let reference = JavaScriptContext.FunctionReference(design: design, path: "updates.\(name)", source: source)
        return try await run { try $0.update(reference, documentJSON: documentJSON, request: request) }
    }

    /// Runs the rewrite function of `design` (its `rewrites` member, when that is a string — CouchDB's
    /// `_rewrite` with a function) with the request object.
    /// - Returns: `{"path", "query"?, "method"?, "headers"?, "body"?}`, `{"code", "headers"?, "body"?}`
    ///   for an answer of its own, or `null` when the function names no rewrite.
    /// - Throws: ``DocStoreError`` — `not_found` when `rewrites` is not a function, `compilation_error`,
    ///   `rewrite_error` for a function that threw, ``DocStoreError/Code/scriptTimeout``.
    public func rewrite(of design: DesignDocument, request: JSON) async throws -> JSON {
        guard case .string(let source)? = design.body["rewrites"] else { throw DocStoreError(.notFound, "missing json key: rewrites") }
        let reference = JavaScriptContext.FunctionReference(design: design, path: "rewrites", source: source)
        return try await run { try $0.rewrite(reference, request: request) }
    }
}
