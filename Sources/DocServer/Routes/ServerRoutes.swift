import CouchProtocol
import DocStore
import Foundation
import HTTPTypes
import Hummingbird

extension DocServer {
    /// `/_session`: cookie sessions, as CouchDB.
    func session(_ request: CouchRequest) async throws -> Response {
        switch request.method {
        case .get:
            let principal = try await authenticator.principal(for: request)
            let context: JSON = principal?.userContext ?? ["name": .null, "roles": []]
            return Response.json(["ok": true, "userCtx": context,
                                  "info": ["authentication_handlers": ["cookie", "default"],
                                           "authenticated": principal == nil ? .null : "cookie"]])
        case .post:
            let (name, password) = try sessionCredentials(request)
            guard let principal = try await authenticator.check(name: name, password: password) else {
                throw CouchError.unauthorized
            }
            let token = try await authenticator.makeSessionToken(for: principal)
            let seconds = Int(configuration.sessionLifetime.components.seconds)
            let roles: JSON = principal.isAdmin ? ["_admin"] : []
            return Response.json(["ok": true, "name": .string(name), "roles": roles],
                                 headers: [.setCookie: "AuthSession=\(token); Version=1; Path=/; Max-Age=\(seconds); HttpOnly; SameSite=Strict"])
        case .delete:
            return Response.json(["ok": true], headers: [.setCookie: "AuthSession=; Version=1; Path=/; Max-Age=0; HttpOnly"])
        default:
            throw CouchError.methodNotAllowed
        }
    }

    /// Name and password from a JSON or form-encoded body.
    private func sessionCredentials(_ request: CouchRequest) throws -> (String, String) {
        let type = request.header(.contentType)?.lowercased() ?? ""
        if type.hasPrefix("application/x-www-form-urlencoded") {
            let form = try CouchRequest(method: .post, path: "/", rawQuery: String(decoding: request.body, as: UTF8.self),
                                        headers: [:], body: [])
            guard let name = form.query["name"], let password = form.query["password"] else {
                throw CouchError.badRequest("name and password are required")
            }
            return (name, password)
        }
        let body = try request.jsonObjectBody()
        guard let name = body["name"]?.stringValue, let password = body["password"]?.stringValue else {
            throw CouchError.badRequest("name and password are required")
        }
        return (name, password)
    }

    /// `/_users/org.couchdb.user:NAME` (admins only): create or replace (PUT), read (GET), delete, list.
    func userRoutes(_ request: CouchRequest, principal: Principal) async throws -> Response {
        guard principal.isAdmin else { throw CouchError.adminRequired }
        let segments = request.segments
        if segments.count == 1 || (segments.count == 2 && segments[1] == "_all_docs") {
            let all = try await users.users()
            let rows = all.map { ViewRow(id: "org.couchdb.user:\($0.name)", revision: "1-0") }
            return Response.json(ViewResponse(totalRows: all.count, offset: 0, rows: rows).json)
        }
        guard segments.count == 2, segments[1].hasPrefix("org.couchdb.user:") else { throw CouchError.notFound() }
        let name = String(segments[1].dropFirst("org.couchdb.user:".count))
        switch request.method {
        case .get:
            guard let user = try await users.user(named: name) else { throw CouchError.notFound() }
            var json = user.json
            json["_id"] = .string(segments[1])
            return Response.json(json)
        case .put:
            let body = try request.jsonObjectBody()
            guard let password = body["password"]?.stringValue else { throw CouchError.badRequest("password is required") }
            func channels(_ key: String) -> [String] { body[key]?.arrayValue?.compactMap(\.stringValue) ?? [] }
            let both = channels("channels")
            try await users.setUser(name: name, password: password, readChannels: both + channels("read_channels"),
                                    writeChannels: both + channels("write_channels"))
            return Response.json(WriteResult(id: segments[1], revision: "1-0").json, status: .created)
        case .delete:
            guard try await users.removeUser(name: name) else { throw CouchError.notFound() }
            return Response.json(WriteResult(id: segments[1], revision: nil).json)
        default:
            throw CouchError.methodNotAllowed
        }
    }

    /// `/{db}`: create (PUT, admins), info (GET/HEAD), delete (DELETE, admins), new document (POST).
    func databaseRoute(name: String, _ request: CouchRequest, principal: Principal) async throws -> Response {
        switch request.method {
        case .put:
            guard principal.isAdmin else { throw CouchError.adminRequired }
            try DatabaseRegistry.validate(name)
            guard !registry.exists(name) else {
                throw CouchError(.preconditionFailed, "file_exists", "The database could not be created, the file already exists.")
            }
            _ = try await registry.open(name)
            return Response.json(["ok": true], status: .created, headers: [.location: request.location(name)])
        case .delete:
            guard principal.isAdmin else { throw CouchError.adminRequired }
            // A `?rev=` says a document was meant: CouchDB refuses rather than delete the database.
            if request.query["rev"] != nil {
                throw CouchError.badRequest("You tried to DELETE a database with a ?=rev parameter. Did you mean to DELETE a document instead?")
            }
            try DatabaseRegistry.validate(name)
            guard registry.exists(name) else { throw CouchError.notFound("Database does not exist.") }
            try await registry.delete(name)
            return Response.json(["ok": true])
        case .get, .head:
            let db = try await registry.database(named: name)
            try await registry.security(of: name, db).authorize(principal)
            return Response.json(try await db.info().serverJSON)
        case .post:
            let db = try await registry.database(named: name)
            try await registry.security(of: name, db).authorize(principal)
            return try await createDocument(db, request, principal: principal)
        default:
            throw CouchError.methodNotAllowed
        }
    }
}
