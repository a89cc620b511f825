import CJavaScriptCore
import DocStore

/// The functions of design documents, compiled once per context and called with documents as JSON.
extension JavaScriptContext {
    /// Where a function lives in its design document, for compiling it (`forMap`: `require` sees only
    /// `views.lib`) and for its place in the cache.
    struct FunctionReference {
        let design: DesignDocument
        /// e.g. `views.by_type.map`, `filters.mine`, `validate_doc_update`.
        let path: String
        let source: String
        var forMap = false
    }

    /// The design document as a JavaScript object (`this` in its functions), cached.
    func designObject(_ design: DesignDocument) throws -> JSObjectRef {
        try cached("ddoc|\(design.cacheKey)") { try value(json: design.json) }
    }

    /// The compiled function; a source that does not compile throws ``DocStoreError/Code/compilationError``.
    func function(_ reference: FunctionReference) throws -> JSObjectRef {
        let key = "fn|\(reference.forMap ? "map" : "ddoc")|\(reference.design.cacheKey)|\(reference.path)|\(reference.source)"
        return try cached(key) {
            try call("__compile", [string(reference.source), try designObject(reference.design),
                                   JSValueMakeBoolean(context, reference.forMap)])
        }
    }

    /// Runs a map function over a document (as CouchDB JSON); the rows it emitted as `[key, value]`.
    func map(_ reference: FunctionReference, documentJSON: String) throws -> [(JSON, JSON)] {
        let function = try function(reference)
        let emitted = try call("__map", [function, try value(json: documentJSON)])
        guard case .array(let rows) = try json(of: emitted) else { return [] }
        return rows.map { row in
            guard case .array(let pair) = row, pair.count == 2 else { return (.null, .null) }
            return (pair[0], pair[1])
        }
    }

    /// Runs a map function over many documents (a JSON array of them) in one call: for each, its rows
    /// or the error it threw.
    func mapBatch(_ reference: FunctionReference, documentsJSON: [UInt8]) throws -> [Result<[(key: JSON, value: JSON?)], any Error>] {
        let function = try function(reference)
        let emitted = try call("__mapBatch", [function, try value(jsonBytes: documentsJSON)])
        guard case .array(let documents) = try json(of: emitted) else {
            throw DocStoreError(.scriptFailure, "the map batch answered no array")
        }
        return documents.map { outcome in
            switch outcome {
            case .array(let rows):
                return .success(rows.map { row in
                    guard case .array(let pair) = row, pair.count == 2 else { return (.null, .null) }
                    return (pair[0], pair[1])
                })
            case .object(let members):
                return .failure(DocStoreError(.scriptFailure, members["error"]?.stringValue ?? "map function failed"))
            default:
                return .failure(DocStoreError(.scriptFailure, "map function failed"))
            }
        }
    }

    /// Runs a reduce function (CouchDB's `reduce(keys, values, rereduce)`).
    func reduce(_ reference: FunctionReference, keys: [JSON]?, values: [JSON], rereduce: Bool) throws -> JSON {
        let function = try function(reference)
        let keysValue = try keys.map { try value(.array($0)) } ?? JSValueMakeNull(context)
        let result = try call("__reduce", [function, keysValue, try value(.array(values)), JSValueMakeBoolean(context, rereduce)])
        return try json(of: result)
    }

    /// Whether a filter function passes a document, given the request object.
    func filter(_ reference: FunctionReference, documentJSON: String, request: JSValueRef) throws -> Bool {
        let function = try function(reference)
        let result = try call("__filter", [function, try designObject(reference.design), try value(json: documentJSON), request])
        return JSValueToBoolean(context, result)
    }

    /// Whether a view's map function emits anything for a document (`filter=_view`).
    func filterByView(_ reference: FunctionReference, documentJSON: String) throws -> Bool {
        let function = try function(reference)
        return JSValueToBoolean(context, try call("__filterView", [function, try value(json: documentJSON)]))
    }

    /// Runs `validate_doc_update(newDoc, oldDoc, userCtx, secObj)`; throws what it throws.
    func validate(_ reference: FunctionReference, newDocument: String, oldDocument: String?, userContext: JSON,
                  securityObject: JSON) throws {
        let function = try function(reference)
        _ = try call("__validate", [function, try designObject(reference.design), try value(json: newDocument),
                                    oldDocument.map { try value(json: $0) } ?? JSValueMakeNull(context),
                                    try value(userContext), try value(securityObject)])
    }

    /// Runs a show function: its response object (`code`, `headers`, `body` | `json` | `base64`).
    func show(_ reference: FunctionReference, documentJSON: String?, request: JSON, documentPath: Bool) throws -> JSON {
        let function = try function(reference)
        let result = try call("__show", [function, try designObject(reference.design),
                                         documentJSON.map { try value(json: $0) } ?? JSValueMakeNull(context),
                                         try value(request), JSValueMakeBoolean(context, documentPath)])
        return try json(of: result)
    }

    /// Runs a list function over view rows: `{"start": response, "body": text}`.
    func list(_ reference: FunctionReference, head: JSON, request: JSON, rows: [JSON]) throws -> JSON {
        let function = try function(reference)
        let result = try call("__list", [function, try designObject(reference.design), try value(head), try value(request),
                                         try value(.array(rows))])
        return try json(of: result)
    }

    /// Runs a rewrite function: what the request becomes, or `null` when it names nothing.
    func rewrite(_ reference: FunctionReference, request: JSON) throws -> JSON {
        let function = try function(reference)
        let result = try call("__rewrite", [function, try designObject(reference.design), try value(request)])
        return try json(of: result)
    }

    /// Runs an update handler: `[doc or null, response]`.
    func update(_ reference: FunctionReference, documentJSON: String?, request: JSON) throws -> JSON {
        let function = try function(reference)
        let result = try call("__update", [function, try designObject(reference.design),
                                           documentJSON.map { try value(json: $0) } ?? JSValueMakeNull(context),
                                           try value(request)])
        return try json(of: result)
    }
}
