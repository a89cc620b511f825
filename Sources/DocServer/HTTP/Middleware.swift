import DocStore
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1

// DocServer's middleware, outermost first: request log and metrics → CORS → the CouchDB request
// (guards, errors) → routing; the routes outside the public group add authentication. Each is ours
// rather than Hummingbird's where CouchDB behaves differently: Hummingbird's CORS middleware cannot
// limit origins to a list or answer a preflight only when it names a method; its log and metrics
// middleware use their own labels, not the `docstore_http_*` figures `_prometheus` shows.

/// Logs each request with its status and time, counts it in ``ServerMetrics``, and gives every answer
/// CouchDB's `Server`, `X-Couch-Request-ID` and `X-CouchDB-Body-Time` headers.
struct RequestLogMiddleware: RouterMiddleware {
    typealias Context = DocServerRequestContext
    let logger: Logger
    let metrics: ServerMetrics

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let started = ContinuousClock.now
        var response = try await next(request, context)
        let elapsed = ContinuousClock.now - started
        let milliseconds = Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15
        logger.info("\(request.method) \(request.uri.path) \(response.status.code) \(String(format: "%.1f", milliseconds)) ms")
        // As CouchDB's welcome answer, the Server header names the CouchDB version spoken first (CouchDB's
        // own suite checks it starts with "CouchDB"), then DocStore.
        response.headers[.server] = DocServer.serverHeader
        // As CouchDB: an id for each request, ten hex digits, for the client to quote.
        response.headers[DocServer.requestIDHeader] = DocServer.requestID()
        response.headers[DocServer.bodyTimeHeader] = "0"
        // The segments as sent, unless one is percent-encoded (`_design%2Fapp`, `%5Fall_docs`).
        var segments = PathSegments(path: request.uri.path)
        if segments.needsDecoding { segments = PathSegments(decoded: CouchRequest.segments(ofPath: request.uri.path)) }
        let route = ServerMetrics.route(of: segments)
        metrics.answered(method: request.method.rawValue, route: route, status: response.status.code, after: elapsed)
        if route == "/{db}/{docid}" && request.method == .get && response.status.code == 200 { metrics.documentsRead(1) }
        return response
    }
}

/// CORS as CouchDB does it (`[cors]` in its configuration, ``ServerConfiguration/cors``): a preflight
/// from an allowed origin that names a method gets 204 with what it may send; every other answer to an
/// allowed origin says so, with the headers a page may read.
struct CouchCORSMiddleware: RouterMiddleware {
    typealias Context = DocServerRequestContext
    let cors: CORSConfiguration

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let origin = request.headers[.origin], cors.allows(origin) else { return try await next(request, context) }
        if request.method == .options, request.headers[.accessControlRequestMethod] != nil {
            return preflight(origin: origin, request)
        }
        var response = try await next(request, context)
        response.headers[.accessControlAllowOrigin] = origin
        if cors.credentials { response.headers[.accessControlAllowCredentials] = "true" }
        response.headers[.accessControlExposeHeaders] = CORSConfiguration.exposedHeaders
        return response
    }

    private func preflight(origin: String, _ request: Request) -> Response {
        var headers: HTTPFields = [.accessControlAllowOrigin: origin,
                                   .accessControlAllowMethods: cors.methods.joined(separator: ", "),
                                   .accessControlMaxAge: String(cors.maxAge)]
        if cors.credentials { headers[.accessControlAllowCredentials] = "true" }
        let asked = (request.headers[.accessControlRequestHeaders] ?? "").split(separator: ",")
            .map { $0.trimmingCharacters(in: .whitespaces).lowercased() }.filter { cors.headers.contains($0) }
        headers[.accessControlAllowHeaders] = asked.joined(separator: ",")
        return Response(status: .noContent, headers: headers)
    }
}

/// Turns a Hummingbird request into the ``CouchRequest`` the routes read, with the guards every
/// request passes whoever hosts the server: a POST's `X-HTTP-Method-Override`, percent-decoding, the
/// body limit (`chttpd/max_http_request_size`, checked on `Content-Length` before reading and while
/// reading), uploads left streaming; then every error as CouchDB's JSON body with its status, the
/// connection closed after an answer that left a body unread, and JSONP and `WWW-Authenticate` where
/// the node's configuration asks for them.
///
/// The request it hands on has the decoded path in a canonical form for the router: each segment
/// percent-encoded on its own, and `_design%2Fname` split as `_design/name`.
struct CouchRequestMiddleware: RouterMiddleware {
    typealias Context = DocServerRequestContext
    let configuration: ServerConfiguration
    let node: NodeConfiguration
    let logger: Logger

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var response: Response
        var streaming = false
        do {
            // As CouchDB: a POST may say which method it stands for (clients that can only POST).
            var method = request.method
            if method == .post, let override = request.headers[HTTPField.Name("X-HTTP-Method-Override")!],
                let overridden = HTTPRequest.Method(override.trimmingCharacters(in: .whitespaces).uppercased()) {
                method = overridden
            }
            // As CouchDB: HEAD is GET without the body, on every endpoint.
            if method == .head { method = .get }
            var couch = try CouchRequest(method: method, path: request.uri.path, rawQuery: request.uri.query,
                                         headers: request.headers, body: [],
                                         plusIsSpace: node.bool("chttpd", "decode_plus_to_space", default: true))
            couch.isHead = request.method == .head
            couch.forwardedHost = HTTPField.Name(node.value("chttpd", "x_forwarded_host") ?? "X-Forwarded-Host")
            couch.authority = request.head.authority
            var routed = request
            if DocServer.streamsBody(couch) {
                streaming = true
                couch.bodyStream = request.body
            } else {
                let limit = node.integer("chttpd", "max_http_request_size", default: configuration.maximumBodySize)
                if let length = request.headers[.contentLength].flatMap(Int.init), length > limit {
                    throw CouchRequestMiddleware.tooLarge
                }
                couch.body = Array(try await routed.collectBody(upTo: limit).readableBytesView)
            }
            var head = request.head
            head.method = method
            head.path = couch.routingPath
            var context = context
            context.couch = couch
            response = try await next(Request(head: head, body: routed.body), context)
            // An error the router rendered itself (a ``CouchError`` thrown by a route) may leave an upload unread.
            if response.status.code >= 400, closesAfter(response.status, request, streaming: streaming) { closeConnection(&response) }
        } catch {
            let (couch, closes) = errorAnswer(error)
            response = couch.response
            if closes || closesAfter(couch.status, request, streaming: streaming) { closeConnection(&response) }
        }
        if node.bool("chttpd", "allow_jsonp", default: false), let callback = request.uri.queryParameters["callback"].map(String.init) {
            response = JSONP.isValid(callback) ? JSONP.wrap(response, callback: callback)
                : CouchError.badRequest("invalid_callback").response
        }
        if response.status == .unauthorized, let challenge = node.value("chttpd", "WWW-Authenticate") {
            response.headers[.wwwAuthenticate] = challenge
        }
        if request.method == .head {
            // The GET's headers, its length among them; no body is made (a feed is never started).
            let length = response.headers[.contentLength] ?? response.body.contentLength.map(String.init)
            response.body = ResponseBody()
            response.headers[.contentLength] = length
        }
        return response
    }

    /// Whether the connection closes after an error answer: the rest of a refused upload is not read,
    /// and after CONNECT the parser takes the rest of the connection for a tunnel.
    private func closesAfter(_ status: HTTPResponse.Status, _ request: Request, streaming: Bool) -> Bool {
        status == .contentTooLarge || request.method == .connect || (streaming && request.headers[.contentLength] != "0")
    }

    private func closeConnection(_ response: inout Response) {
        response.headers[.connection] = "close"
        ConnectionControl.closeAfterResponse()
    }

    /// The 413 answer for a body over ``ServerConfiguration/maximumBodySize``.
    static let tooLarge = CouchError(.contentTooLarge, "too_large", "the request entity is too large")

    /// CouchDB's answer for an error, and whether the connection must close after it.
    private func errorAnswer(_ error: any Error) -> (CouchError, closes: Bool) {
        switch error {
        case let error as CouchError:
            return (error, error.status == .contentTooLarge)
        case let error as DocStoreError:
            return (CouchError(error), error.code == .attachmentTooLarge)
        case let error as HTTPError where error.status == .contentTooLarge:
            return (CouchRequestMiddleware.tooLarge, true)
        case is NIOTooManyBytesError, is ChunkTooLargeError:
            return (CouchRequestMiddleware.tooLarge, true)
        case let error as HTTPParserError:
            return (CouchError.badRequest("Malformed HTTP request body: \(error)"), true)
        default:
            logger.error("unexpected error: \(error)")
            return (CouchError(.internalServerError, "unknown_error", "\(error)"), true)
        }
    }
}

/// Finds who is asking — a JWT, proxy headers, a session cookie or Basic credentials, in CouchDB's
/// order — and puts them in the context; wrong credentials are a 401. When anonymous access is allowed
/// (``ServerConfiguration/allowAnonymous``), a request without credentials is an administrator's.
struct AuthenticationMiddleware: RouterMiddleware {
    typealias Context = DocServerRequestContext
    let authenticator: Authenticator

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var context = context
        let couch = try context.request()
        let authenticated = try await authenticator.authenticate(couch)
        context.principal = authenticator.principal(authenticated: authenticated?.principal)
        var response = try await next(request, context)
        // A session in use is renewed, as CouchDB renews it (unless the answer sets a cookie itself).
        if let authenticated, authenticated.handler == "cookie", response.headers[.setCookie] == nil,
           let renewed = try? await authenticator.renewedSessionCookie(for: couch, principal: authenticated.principal) {
            response.headers[.setCookie] = renewed
        }
        return response
    }
}

/// What the router answers for a path no route takes, or a method none of them knows: CouchDB's
/// answers — 401 for an anonymous request as for any endpoint that is not public, then 404
/// `not_found` (naming the unknown endpoint) or 405 `method_not_allowed` — instead of Hummingbird's
/// bare 404.
struct UnroutedMiddleware: RouterMiddleware {
    typealias Context = DocServerRequestContext
    let server: DocServer

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as HTTPError where error.status == .notFound {
            if !DocServer.routedMethods.contains(request.method) { throw CouchError.methodNotAllowed }
            let couch = try context.request()
            var context = context
            context.principal = try await server.authenticator.principal(for: couch)
            _ = try server.requireUser(couch, context)
            if let first = couch.segments.first, first.hasPrefix("_") { throw CouchError.notFound("Unknown endpoint \(first)") }
            throw CouchError.notFound()
        }
    }
}

/// A responder made of middleware in front of another responder, outermost first.
struct MiddlewareChain<Context: RequestContext>: HTTPResponder {
    let middleware: [any MiddlewareProtocol<Request, Response, Context>]
    let responder: any HTTPResponder<Context>

    func respond(to request: Request, context: Context) async throws -> Response {
        try await respond(request, context, from: 0)
    }

    private func respond(_ request: Request, _ context: Context, from index: Int) async throws -> Response {
        guard index < middleware.count else { return try await responder.respond(to: request, context: context) }
        return try await middleware[index].handle(request, context: context) { request, context in
            try await respond(request, context, from: index + 1)
        }
    }
}

extension CouchError: HTTPResponseError {
    /// CouchDB's JSON error body with the error's status.
    public func response(from request: Request, context: some RequestContext) throws -> Response { response }
}
