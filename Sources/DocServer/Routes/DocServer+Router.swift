import DocStore
import Foundation
import HTTPTypes
import Hummingbird

/// DocServer's routes on Hummingbird's router, by area. Each route is registered for every method the
/// server knows and checks the method itself, so that a wrong one gets CouchDB's 405 with the methods
/// the endpoint takes. A route reads the request as ``CouchRequest`` (decoded segments, query, body)
/// from the context the request middleware made.
extension DocServer: HTTPResponderBuilder {
    /// The responder that answers the CouchDB API: DocServer's middleware (request log and metrics, CORS,
    /// request guards and errors) in front of its router. Use it to embed the server in your own
    /// Hummingbird application — `Application(router: docServer, server: .docServer(configuration))` —
    /// where ``makeRouter()`` is not enough.
    public func buildResponder() -> DocServerResponder {
        var middleware: [any MiddlewareProtocol<Request, Response, DocServerRequestContext>] = [RequestLogMiddleware(logger: logger, metrics: metrics)]
        if let cors = configuration.cors { middleware.append(CouchCORSMiddleware(cors: cors)) }
        middleware.append(CouchRequestMiddleware(configuration: configuration, node: nodeConfiguration, logger: logger))
        return DocServerResponder(chain: MiddlewareChain(middleware: middleware, responder: makeRouter().buildResponder()))
    }

    /// The router of the CouchDB API, in groups per area; all but the public routes (`/`, `/_up`,
    /// `/_session`, `/_uuids`) behind the authentication middleware. Its routes expect the request
    /// middleware in front of them, as ``buildResponder()`` puts it.
    func makeRouter() -> Router<DocServerRequestContext> {
        let router = Router(context: DocServerRequestContext.self)
        router.add(middleware: UnroutedMiddleware(server: self))
        addServerRoutes(to: router)
        addUtilsRoutes(to: router)
        let authenticated = router.group().add(middleware: AuthenticationMiddleware(authenticator: authenticator))
        addNodeRoutes(to: authenticated)
        addDatabaseRoutes(to: authenticated)
        addDocumentRoutes(to: authenticated)
        addDesignRoutes(to: authenticated)
        addReplicationRoutes(to: authenticated)
        addMangoRoutes(to: authenticated)
        addMaintenanceRoutes(to: authenticated)
        return router
    }

    /// The methods routes answer (each then refuses those its endpoint does not take); any other is
    /// CouchDB's 405.
    static let routedMethods: Set<HTTPRequest.Method> = [.get, .head, .post, .put, .delete, .options, .patch, .connect, .trace, HTTPRequest.Method("COPY")!]

    // MARK: Areas

    /// The server: welcome, health, sessions, ids; then, for users, the list of databases and the tasks.
    private func addServerRoutes(to router: Router<DocServerRequestContext>) {
        router.route("/") { request, _ in try self.welcome(request) }
        router.route("/_up") { request, _ in
            guard request.method == .get || request.method == .head else { throw CouchError.only("GET,HEAD") }
            return Response.json(["status": "ok", "seeds": [:]])
        }
        router.route("/_session") { request, _ in try await self.session(request) }
        router.route("/_uuids") { request, _ in try self.uuids(request) }
    }

    /// The node (`/_node/{node}/…`, `/_membership`, `/_reshard`): what anonymous requests may see there
    /// is the node routes' to say.
    private func addNodeRoutes(to group: RouterGroup<DocServerRequestContext>) {
        for path in ["_membership", "_node", "_reshard"] {
            group.route(RouterPath(path)) { request, context in try await self.nodeRoute(request, principal: context.principal) }
            group.route(RouterPath("\(path)/**")) { request, context in try await self.nodeRoute(request, principal: context.principal) }
        }
        group.route("/_all_dbs") { request, context in
            _ = try self.requireUser(request, context)
            guard request.method == .get || request.method == .head else { throw CouchError.only("GET,HEAD") }
            return Response.json(JSON(try self.allDatabaseNames(request)))
        }
        group.route("/_db_updates") { request, context in try await self.databaseUpdates(request, principal: context.principal) }
        group.route("/_dbs_info") { request, context in try await self.databasesInfo(request, principal: context.principal) }
        group.route("/_active_tasks") { request, context in try self.activeTasks(request, principal: try self.requireUser(request, context)) }
    }

    /// Databases: create, delete, information, and `POST` of a new document.
    private func addDatabaseRoutes(to group: RouterGroup<DocServerRequestContext>) {
        group.route("/{db}") { request, context in
            let principal = try self.requireUser(request, context)
            // Creating and deleting a database are the server admins'; the rest is its members'.
            if [.put, .delete].contains(request.method) {
                // As CouchDB: creating `_x` is an illegal name, deleting it an unknown endpoint.
                if request.method == .delete { try self.refuseUnknownEndpoint(request) }
                return try await self.databaseRoute(name: request.segments[0], request, principal: principal)
            }
            return try await self.inDatabase(request, context) { _, scope in
                try await self.databaseRoute(name: scope.name, request, principal: scope.member)
            }
        }
        routeInDatabase(group, "/{db}/_security") { request, db, scope in try await self.security(db, name: scope.name, request, principal: scope.member) }
        routeInDatabase(group, "/{db}/_partition", "/{db}/_partition/**") { request, db, scope in try await self.partitionRoute(db, scope.rest, request, principal: scope.member) }
    }

    /// Documents, local documents and attachments. An id that starts with `_` and names no endpoint is
    /// CouchDB's `illegal_docid` to a PUT, and missing to the other methods.
    private func addDocumentRoutes(to group: RouterGroup<DocServerRequestContext>) {
        routeInDatabase(group, "/{db}/{docid}", "/{db}/{docid}/**") { request, db, scope in
            let rest = scope.rest
            if rest[0].hasPrefix("_") { try self.refuseReservedID(request) }
            if rest.count == 1 { return try await self.documentRoute(db, id: rest[0], request, principal: scope.member) }
            return try await self.attachmentRoute(db, id: rest[0], name: rest[1...].joined(separator: "/"), request, principal: scope.member)
        }
        routeInDatabase(group, "/{db}/_local", "/{db}/_local/{docid}", "/{db}/_local/{docid}/**") { request, db, scope in
            // As CouchDB: `_local`, `_local/` name no document, and a local document has no attachments.
            let rest = scope.rest
            guard rest.count >= 2, !rest[1].isEmpty else { throw CouchError.badRequest("Invalid _local document id.") }
            guard rest.count == 2 else { throw CouchError.badRequest("_local documents do not accept attachments.") }
            return try await self.localDocument(db, id: rest[1], request, principal: scope.member)
        }
        routeInDatabase(group, "/{db}/_local_docs", "/{db}/_local_docs/queries") { request, db, scope in
            guard scope.member.readsEverything else { throw CouchError.forbidden("You are not allowed to list local documents.") }
            if request.segments.count == 3 { return try await self.multiQuery(request) { try await self.localDocumentList(db, $0).serialized() } }
            guard [.get, .post].contains(request.method) else { throw CouchError.only("GET,HEAD,POST") }
            return Response.json(try await self.localDocumentList(db, request))
        }
        routeInDatabase(group, "/{db}/_all_docs", "/{db}/_all_docs/**", readsMany: { _ in true }) { request, db, scope in
            try await self.allDocuments(db, request, principal: scope.member)
        }
        routeInDatabase(group, "/{db}/_bulk_docs", "/{db}/_bulk_docs/**") { request, db, scope in try await self.bulkDocuments(db, request, principal: scope.member) }
    }

    /// Design documents: the documents themselves, their views, shows, lists, updates and attachments.
    private func addDesignRoutes(to group: RouterGroup<DocServerRequestContext>) {
        // A view may read and answer many rows.
        let isView: @Sendable (CouchRequest) -> Bool = { $0.segments.count >= 5 && $0.segments[3] == "_view" }
        routeInDatabase(group, "/{db}/_design", "/{db}/_design/{ddoc}", "/{db}/_design/{ddoc}/**", readsMany: isView) { request, db, scope in
            let rest = scope.rest
            guard rest.count >= 2 else { try self.refuseReservedID(request) }
            if rest.count == 2 { return try await self.documentRoute(db, id: "_design/\(rest[1])", request, principal: scope.member) }
            return try await self.designRoute(db, design: rest[1], Array(rest.dropFirst(2)), request, principal: scope.member)
        }
        // `_rewrite` answers the request it becomes, and so needs the request's context.
        for path in ["/{db}/_design/{ddoc}/_rewrite", "/{db}/_design/{ddoc}/_rewrite/**"] {
            group.route(RouterPath(path)) { request, context in
                try await self.inDatabase(request, context) { db, scope in
                    guard scope.rest.count >= 3, scope.rest[0] == "_design", scope.rest[2] == "_rewrite" else { throw CouchError.notFound() }
                    return try await self.rewrite(db, design: scope.rest[1], Array(scope.rest.dropFirst(3)), request, context: context,
                                                  principal: scope.member)
                }
            }
        }
        routeInDatabase(group, "/{db}/_design_docs", "/{db}/_design_docs/queries") { request, db, scope in
            let answer: (CouchRequest) async throws -> [UInt8] = { request in
                try await self.allDocumentsAnswer(db, request, principal: scope.member, idRange: ("_design/", "_design0"), designOnly: true)
                    .serialized(nonFiniteAsNull: true)
            }
            if request.segments.count == 3 { return try await self.multiQuery(request, answer) }
            guard [.get, .post].contains(request.method) else { throw CouchError.only("GET,HEAD,POST") }
            return Response.json(serialized: try await answer(request))
        }
        routeInDatabase(group, "/{db}/_temp_view") { request, _, _ in throw CouchError(.gone, "gone", "Temporary views are not supported in CouchDB") }
    }

    /// What replication uses: the changes feed, revision differences, bulk reads and replication jobs.
    private func addReplicationRoutes(to group: RouterGroup<DocServerRequestContext>) {
        group.route("/_replicate") { request, context in try await self.replicate(request, principal: try self.requireUser(request, context)) }
        for path in ["/_scheduler", "/_scheduler/**"] {
            group.route(RouterPath(path)) { request, context in try self.schedulerRoute(request, principal: try self.requireUser(request, context)) }
        }
        routeInDatabase(group, "/{db}/_changes", "/{db}/_changes/**", readsMany: { _ in true }) { request, db, scope in
            try await self.changes(db, request, principal: scope.member)
        }
        routeInDatabase(group, "/{db}/_revs_diff", "/{db}/_revs_diff/**") { request, db, scope in try await self.revisionsDiff(db, request, principal: scope.member) }
        routeInDatabase(group, "/{db}/_missing_revs", "/{db}/_missing_revs/**") { request, db, _ in try await self.missingRevisions(db, request) }
        routeInDatabase(group, "/{db}/_bulk_get", "/{db}/_bulk_get/**") { request, db, scope in try await self.bulkGet(db, request, principal: scope.member) }
        routeInDatabase(group, "/{db}/_ensure_full_commit", "/{db}/_ensure_full_commit/**") { request, _, _ in
            guard request.method == .post else { throw CouchError.methodNotAllowed }
            try request.requireJSONContentType()
            return Response.json(["ok": true, "instance_start_time": "0"], status: .created)
        }
    }

    /// Mango: queries, their explanation, and the indexes they use.
    private func addMangoRoutes(to group: RouterGroup<DocServerRequestContext>) {
        routeInDatabase(group, "/{db}/_index", "/{db}/_index/**") { request, db, scope in try await self.mangoIndexRoute(db, scope.rest, request, principal: scope.member) }
        for (path, explain) in [("/{db}/_find", false), ("/{db}/_explain", true)] {
            routeInDatabase(group, path) { request, db, scope in try await self.mangoQueryRoute(db, explain: explain, request, principal: scope.member) }
        }
    }

    /// Maintenance: purge, the revision limit, compaction and the cleanup of old view indexes.
    private func addMaintenanceRoutes(to group: RouterGroup<DocServerRequestContext>) {
        routeInDatabase(group, "/{db}/_purge") { request, db, scope in try await self.purge(db, request, principal: scope.member) }
        routeInDatabase(group, "/{db}/_revs_limit") { request, db, scope in try await self.revisionsLimit(db, request, principal: scope.member) }
        routeInDatabase(group, "/{db}/_purged_infos_limit") { request, db, scope in
            switch request.method {
            case .get, .head, .put: return try await self.purgedInfosLimit(db, request, principal: scope.member)
            default:
                // CouchDB's router sends the other methods to its document handler.
                try self.refuseReservedID(request)
            }
        }
        routeInDatabase(group, "/{db}/_view_cleanup") { request, db, scope in try await self.viewCleanup(db, request, principal: scope.member) }
        routeInDatabase(group, "/{db}/_compact", "/{db}/_compact/**") { request, db, scope in
            guard scope.member.isDatabaseAdmin else { throw CouchError.databaseAdminRequired }
            guard request.method == .post else { throw CouchError.methodNotAllowed }
            try request.requireJSONContentType()
            if scope.rest.count > 1 {
                // `_compact/{ddoc}`: the design document's views, which share the index file with the
                // database's other indexes — all of it is compacted.
                let design = "_design/" + scope.rest[1...].joined(separator: "/")
                guard try await db.document(withID: design) != nil else {
                    throw CouchError.notFound("missing")
                }
                self.designCompactions.withLock { $0[db.name] = design }
                defer { self.designCompactions.withLock { $0[db.name] = nil } }
                try await db.compactIndexes()
            } else {
                _ = try await db.compact()
            }
            return Response.json(["ok": true], status: .accepted)
        }
    }

    // MARK: Scopes

    /// Routes `paths` below a database, for every method, to `handler` inside the database scope
    /// (``inDatabase(_:_:_:)``). Where `readsMany` says the request may read and answer many rows, it
    /// runs off the pool unless its `limit` makes it a short read (DocStore's ``reading(upTo:_:)``):
    /// building a long answer then leaves the pool to short requests.
    private func routeInDatabase(_ group: RouterGroup<DocServerRequestContext>, _ paths: String...,
                                 readsMany: @escaping @Sendable (CouchRequest) -> Bool = { _ in false },
                                 _ handler: @escaping @Sendable (CouchRequest, Database, DatabaseScope) async throws -> Response) {
        for path in paths {
            group.route(RouterPath(path)) { request, context in
                let answer = { try await self.inDatabase(request, context) { db, scope in try await handler(request, db, scope) } }
                guard readsMany(request) else { return try await answer() }
                // A `limit` that is not a number counts as none (the route refuses it).
                return try await reading(upTo: request.query["limit"].flatMap(Int.init)) { try await answer() }
            }
        }
    }

    /// A request below `/{db}`: the database's name, the segments after it, and who asks as the
    /// database's `_security` sees them.
    struct DatabaseScope: Sendable {
        let name: String
        let rest: [String]
        let member: Principal
    }

    /// The authenticated user, or CouchDB's refusal: 401 — or 404 first where the database named is not
    /// there (so a replication from a URL without credentials reports the missing database).
    func requireUser(_ request: CouchRequest, _ context: DocServerRequestContext) throws -> Principal {
        if let principal = context.principal { return principal }
        let segments = request.segments
        if let first = segments.first, !(segments.count == 1 && request.method == .put),
            !first.hasPrefix("_") || DatabaseRegistry.systemDatabases.contains(first),
            (try? DatabaseRegistry.validate(first)) != nil, !registry.exists(first) {
            throw CouchError.notFound("Database does not exist.")
        }
        throw CouchError.authenticationRequired
    }

    /// `/{db}/_x` that names no endpoint, as CouchDB 3.3.3 answers it: there is no such document to
    /// read, copy or delete; writing one is refused (a POST is a form upload, which needs a `Referer`
    /// first); other methods are 405.
    private func refuseReservedID(_ request: CouchRequest) throws -> Never {
        switch request.method {
        case .get, .delete, HTTPRequest.Method("COPY")!: throw CouchError.notFound("missing")
        case .post where request.header(HTTPField.Name("Referer")!) == nil: throw CouchError.badRequest("Referer header required.")
        case .put, .post: throw CouchError(.badRequest, "illegal_docid", "Only reserved document ids may start with underscore.")
        default: throw CouchError.only("DELETE,GET,HEAD,POST,PUT,COPY")
        }
    }

    /// 404 for a first segment that starts with `_` and names neither an endpoint nor a system database.
    private func refuseUnknownEndpoint(_ request: CouchRequest) throws {
        let name = request.segments[0]
        if name.hasPrefix("_"), !DatabaseRegistry.systemDatabases.contains(name) {
            throw CouchError.notFound("Unknown endpoint \(name)")
        }
    }

    /// Runs `body` with the request's database, once the user is known and its `_security` admits them:
    /// with the user's context for validation functions and the database's partitioning as task-local
    /// values. A non-admin's request to a users database may be answered by that database's own rules.
    func inDatabase(_ request: CouchRequest, _ context: DocServerRequestContext,
                    _ body: (Database, DatabaseScope) async throws -> Response) async throws -> Response {
        let principal = try requireUser(request, context)
        try refuseUnknownEndpoint(request)
        let name = request.segments[0]
        let db = try await registry.database(named: name)
        let security = try await registry.security(of: name, db)
        var member = try security.authorize(principal)
        if UsersDatabase.isUsersDatabase(name, nodeConfiguration), case .user(var user) = member {
            // User documents have no channels: the users database's own rules say who reads and writes what.
            user.readChannels = ["*"]
            user.writeChannels = ["*"]
            member = .user(user)
        }
        let rest = Array(request.segments.dropFirst())
        if UsersDatabase.isNamedUsers(name), !member.isDatabaseAdmin,
            let answer = try await usersDatabaseAnswer(db, rest, request, principal: member) {
            return answer
        }
        // Who writes, for the validation functions of the database's design documents.
        let writer = WriteContext(userContext: member.userContext(database: name), securityObject: .object(security.json))
        let partitioned = try await registry.isPartitioned(name, db)
        let scope = DatabaseScope(name: name, rest: rest, member: member)
        return try await WriteContext.$current.withValue(writer) {
            try await Partition.$current.withValue(partitioned) { try await body(db, scope) }
        }
    }
}

/// DocServer's responder: its middleware in front of its router (``DocServer/buildResponder()``).
public struct DocServerResponder: HTTPResponder {
    public typealias Context = DocServerRequestContext
    let chain: MiddlewareChain<DocServerRequestContext>

    public func respond(to request: Request, context: DocServerRequestContext) async throws -> Response {
        try await chain.respond(to: request, context: context)
    }
}

extension RouterMethods where Context == DocServerRequestContext {
    /// Routes `path` for every method in ``DocServer/routedMethods`` to `handler`, which gets the request
    /// as the CouchDB routes read it.
    @discardableResult
    func route(_ path: RouterPath,
               _ handler: @escaping @Sendable (CouchRequest, DocServerRequestContext) async throws -> Response) -> Self {
        for method in DocServer.routedMethods {
            on(path, method: method) { _, context in try await handler(try context.request(), context) }
        }
        return self
    }
}
