import DocStore
import DocStoreJavaScript
import HTTPTypes
import Hummingbird
import NIOCore

/// `/{db}/_design/{d}/_rewrite[/…]`: CouchDB's URL rewriting (deprecated in CouchDB 3, served by 3.3).
/// The design document's `rewrites` — an array of rules (``RewriteRules``) or a JavaScript function of
/// the request — turns the request into another one, relative to the design document, which the server
/// then answers as if it had been sent: through the request middleware and the router again, with the
/// same headers (and so the same user) and body unless a function's answer changes them. A path may
/// climb out of the design document (`../../_changes`, `../../../_uuids`: the server's root); rules
/// may not climb above the database unless `chttpd/secure_rewrites` is `false`. A request rewritten
/// more than `chttpd/rewrite_limit` times (100; at most 1 000 here) is CouchDB's 400.
extension DocServer {
    /// How many times the request being answered was rewritten so far.
    @TaskLocal static var rewriteDepth = 0

    func rewrite(_ db: Database, design name: String, _ path: [String], _ request: CouchRequest,
                 context: DocServerRequestContext, principal: Principal) async throws -> Response {
        let depth = DocServer.rewriteDepth
        // Each rewrite nests the next request's answer in this one's: bounded whatever the setting says.
        guard depth < min(nodeConfiguration.integer("chttpd", "rewrite_limit", default: 100), 1000) else {
            throw CouchError.badRequest("Exceeded rewrite recursion limit")
        }
        guard let document = try await db.document(withID: "_design/" + name), !document.isDeleted else {
            throw CouchError.notFound("missing")
        }
        // Relative paths start at the design document.
        let base = "/" + CouchRequest.percentEncoded(db.name) + "/_design/" + CouchRequest.percentEncoded(name) + "/"
        var method = request.method
        var headers = request.headers
        var body = request.body
        let target: String
        switch document.body["rewrites"] {
        case .array(let rules)?:
            let rules = try RewriteRules(rules, secure: nodeConfiguration.bool("chttpd", "secure_rewrites", default: true))
            let query = try RewriteRules.bindings(ofQuery: request.queryParameters)
            guard let rewritten = rules.rewrite(method: request.method.rawValue, path: path, query: query) else {
                throw CouchError.notFound("missing")
            }
            target = RewriteRules.normalize(base + rewritten)
        case .string?:
            guard let javaScript else { throw CouchError.notFound("JavaScript design documents are turned off on this server") }
            let design = try DesignDocument(document)
            guard design.isJavaScript else { throw CouchError(DocStoreError(.unknownQueryLanguage, design.language)) }
            var req = try await scriptRequest(db, request, principal: principal, id: nil)
            // As CouchDB: a rewrite function's request has no `info`, `form`, `uuid` or `id`.
            if case .object(var members) = req {
                for member in ["info", "form", "uuid", "id"] { members.removeValue(forKey: member) }
                req = .object(members)
            }
            let answer = try await javaScript.rewrite(of: design, request: req)
            guard case .object(let rewrite) = answer else {
                if answer.isNull { throw CouchError(.notFound, "rewrite_error", "Invalid path.") }
                throw CouchError(.internalServerError, "rewrite_error", "bad rewrite")
            }
            let fields = try Self.rewriteFields(rewrite)
            if let code = fields.code {
                // An answer of the function's own.
                return Response(status: HTTPResponse.Status(code: code), headers: fields.headers,
                                body: .init(byteBuffer: ByteBuffer(string: fields.body ?? "")))
            }
            guard let path = fields.path else {
                throw CouchError(.internalServerError, "rewrite_error", "Rewrite result must produce a new path.")
            }
            if let name = fields.method {
                guard let rewritten = HTTPRequest.Method(name) else { throw CouchError(.internalServerError, "rewrite_error", "bad method") }
                method = rewritten
            }
            for field in fields.headers { headers[field.name] = field.value }
            if let replaced = fields.body {
                body = Array(replaced.utf8)
                headers[.contentLength] = String(body.count)
                headers[.transferEncoding] = nil
            }
            let query = fields.query.map { $0.map { RewriteRules.quotePlus($0.name) + "=" + RewriteRules.quotePlus($0.value) } }
                .map { $0.joined(separator: "&") } ?? (request.rawQuery ?? "")
            target = RewriteRules.normalize(base + path + (query.isEmpty ? "" : "?" + query))
        default:
            throw CouchError(.notFound, "rewrite_error", "Invalid path.")
        }
        let rewritten = Request(head: HTTPRequest(method: method, scheme: nil, authority: request.authority, path: target,
                                                  headerFields: headers),
                                body: RequestBody(buffer: ByteBuffer(bytes: body)))
        var innerContext = context
        innerContext.couch = nil
        innerContext.principal = nil
        innerContext.coreContext.parameters = .init()
        return try await DocServer.$rewriteDepth.withValue(depth + 1) {
            try await rewriteResponder().respond(to: rewritten, context: innerContext)
        }
    }

    /// A rewrite function's answer, checked as CouchDB checks it.
    private struct RewriteFields {
        var path: String?
        var method: String?
        var query: [(name: String, value: String)]?
        var headers = HTTPFields()
        var body: String?
        var code: Int?
    }

    private static func rewriteFields(_ rewrite: JSONObject) throws -> RewriteFields {
        func refuse(_ reason: String) -> CouchError { CouchError(.internalServerError, "rewrite_error", reason) }
        func strings(_ value: JSON, _ what: String) throws -> [(name: String, value: String)] {
            guard case .object(let object) = value else { throw refuse("bad \(what)") }
            return try object.map { name, value in
                guard case .string(let text) = value else {
                    // In CouchDB's words, which print a string as Erlang does.
                    throw refuse("object key/value must be strings <<\((try? JSON.string(name).serializedString()) ?? name)>>=\(RewriteRules.text(value))")
                }
                return (name, text)
            }
        }
        var fields = RewriteFields()
        for (name, value) in rewrite {
            switch name {
            case "path":
                guard case .string(let path) = value else { throw refuse("bad path") }
                fields.path = path
            case "method":
                guard case .string(let method) = value else { throw refuse("bad method") }
                fields.method = method
            case "body":
                guard case .string(let body) = value else { throw refuse("bad body") }
                fields.body = body
            case "query":
                fields.query = try strings(value, "query")
            case "headers":
                for (header, text) in try strings(value, "headers") {
                    guard let field = HTTPField.Name(header) else { throw refuse("bad headers") }
                    fields.headers[field] = text
                }
            case "code":
                guard case .integer(let code) = value, (200..<600).contains(code) else { throw refuse("bad code") }
                fields.code = code
            default:
                continue
            }
        }
        return fields
    }

    /// The responder a rewritten request goes through: the request middleware and the router (not the
    /// request log, metrics and CORS, which the original request already passed), made once.
    private func rewriteResponder() -> MiddlewareChain<DocServerRequestContext> {
        rewriteChain.withLock { chain in
            if let chain { return chain }
            let made = MiddlewareChain(middleware: [CouchRequestMiddleware(configuration: configuration, node: nodeConfiguration, logger: logger)],
                                       responder: makeRouter().buildResponder())
            chain = made
            return made
        }
    }
}
