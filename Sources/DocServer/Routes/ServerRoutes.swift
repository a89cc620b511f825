import CouchProtocol
import DocStore
import Foundation
import HTTPTypes
import Hummingbird

extension DocServer {
    /// `/_session`: cookie sessions, as CouchDB.
    func session(_ request: CouchRequest) async throws -> Response {
        switch request.method {
        case .get, .head:
            let authenticated = try await authenticator.authenticate(request)
            if authenticated == nil, request.query["basic"] == "true" {
                throw CouchError(.unauthorized, "unauthorized", "Please login.")
            }
            // With anonymous access allowed, a request without credentials is an administrator's, and
            // says so (CouchDB's "admin party"): a client such as the `/_utils` page then needs no sign-in.
            let principal = authenticator.principal(authenticated: authenticated?.principal)
            let context: JSON = principal?.userContext ?? ["name": .null, "roles": []]
            // As CouchDB 3.3.3: which handler authenticated the request (Basic is `default`), nothing
            // for an anonymous one; and the database users are looked up in.
            var info: JSONObject = ["authentication_handlers": ["cookie", "default"],
                                    "authentication_db": .string(UsersDatabase.authenticationDatabase(nodeConfiguration))]
            if let handler = authenticated?.handler { info["authenticated"] = .string(handler) }
            return Response.json(["ok": true, "userCtx": context, "info": .object(info)])
        case .post:
            let (name, password) = try sessionCredentials(request)
            guard let principal = try await authenticator.check(name: name, password: password) else {
                // A failed sign-in ends the session the client had, as in CouchDB; `?fail=` sends a
                // form's browser on with the error.
                var headers: HTTPFields = [.setCookie: DocServer.endedSessionCookie]
                if let fail = request.query["fail"].flatMap(DocServer.localPath) {
                    headers[.location] = request.absoluteURL(fail)
                    return Response.json(CouchError.unauthorized.body.json, status: .found, headers: headers)
                }
                return Response.json(CouchError.unauthorized.body.json, status: .unauthorized, headers: headers)
            }
            var headers: HTTPFields = [.setCookie: authenticator.sessionCookie(try await authenticator.makeSessionToken(for: principal))]
            let next = request.query["next"].flatMap(DocServer.localPath)
            if let next { headers[.location] = request.absoluteURL(next) }
            return Response.json(["ok": true, "name": .string(name), "roles": JSON(principal.roles)],
                                 status: next == nil ? .ok : .found, headers: headers)
        case .delete:
            return Response.json(["ok": true], headers: [.setCookie: DocServer.endedSessionCookie])
        default:
            throw CouchError.only("GET,HEAD,POST,DELETE")
        }
    }

    /// The cookie that ends a session.
    static let endedSessionCookie = "AuthSession=; Version=1; Path=/; Max-Age=0; HttpOnly"

    /// A `next`/`fail` target of `_session` if it is a path of this server (`/…`, not `//host`): a
    /// sign-in form is never sent on to another site.
    static func localPath(_ target: String) -> String? {
        target.hasPrefix("/") && !target.hasPrefix("//") ? target : nil
    }

    /// Name and password from a JSON or form-encoded body, read as CouchDB 3.3.3 reads them: `name` or
    /// `username` (both only if equal), a missing password empty (so the sign-in fails with 401).
    private func sessionCredentials(_ request: CouchRequest) throws -> (String, String) {
        let type = request.header(.contentType)?.lowercased() ?? ""
        var fields: [String: String] = [:]
        if type.hasPrefix("application/x-www-form-urlencoded") {
            fields = try CouchRequest(method: .post, path: "/", rawQuery: String(decoding: request.body, as: UTF8.self),
                                      headers: [:], body: []).query
        } else if type.hasPrefix("application/json") {
            for (key, value) in try request.jsonObjectBody() {
                guard let text = value.stringValue else { throw CouchError.badRequest("\(key) must be a string") }
                fields[key] = text
            }
        } else {
            throw CouchError(.unsupportedMediaType, "bad_content_type",
                             "Content-Type must be 'application/x-www-form-urlencoded' or 'application/json'")
        }
        let name: String
        switch (fields["name"], fields["username"]) {
        case (nil, nil): throw CouchError.badRequest("request body must contain a username")
        case (let given?, nil), (nil, let given?): name = given
        case (let one?, let other?):
            guard one == other else { throw CouchError.badRequest("request body contains different usernames") }
            name = one
        }
        return (name, fields["password"] ?? "")
    }

    /// `GET /_all_dbs` with CouchDB's `_all_docs`-like parameters over the sorted names: `startkey`/
    /// `start_key`, `endkey`/`end_key` (JSON strings), `inclusive_end`, `descending`, `skip`, `limit`.
    func allDatabaseNames(_ request: CouchRequest) throws -> [String] {
        func positive(_ name: String) throws -> Int? {
            guard let text = request.query[name] else { return nil }
            guard let value = Int(text), value >= 0 else {
                throw CouchError(.badRequest, "query_parse_error", "Invalid value for positive integer: \"\(text)\"")
            }
            return value
        }
        let descending = try request.bool("descending")
        let inclusiveEnd = try request.bool("inclusive_end", default: true)
        let (start, end) = try request.idBounds()
        var names = try registry.names()
        if descending { names.reverse() }
        let before: (String, String) -> Bool = descending ? { $0 > $1 } : { $0 < $1 }
        names = names.filter { name in
            if let start, before(name, start) { return false }
            if let end, before(end, name) || (!inclusiveEnd && name == end) { return false }
            return true
        }
        let skip = try positive("skip") ?? 0
        let limit = try positive("limit") ?? Int.max
        return Array(names.dropFirst(skip).prefix(limit))
    }

    /// `GET /{db}`'s answer: the database's information.
    func databaseInfo(_ name: String) async throws -> JSON {
        let db = try await registry.database(named: name)
        var info = try await db.info().serverJSON
        info["compact_running"] = .bool(db.activeTasks.contains { $0.kind == .databaseCompaction })
        if try await registry.isPartitioned(name, db) {
            // A partitioned database's figures, as its partitions' add up to them.
            let figures = try await db.figures(ofIDsFrom: "", below: "\u{10FFFF}\u{10FFFF}")
            info["sizes"]?["external"] = .integer(figures.bodyBytes)
            info["sizes"]?["active"] = .integer(figures.bodyBytes)
            info["props"] = ["partitioned": true]
        } else {
            info["props"] = [:]
        }
        return info
    }

    /// `/_dbs_info` (server admins, as CouchDB's default `admin_only_all_dbs`): `GET` takes `_all_dbs`'
    /// parameters and answers `[{"key": name, "info": {…}}]` for the names `_all_dbs` would list; `POST`
    /// `{"keys": [name, …]}` (at most `chttpd/max_db_number_for_dbs_info_req`, 100) answers one entry per
    /// key, `{"key": name, "error": "not_found"}` for a name that is no database.
    func databasesInfo(_ request: CouchRequest, principal: Principal?) async throws -> Response {
        guard let principal, principal.isAdmin else { throw CouchError.adminRequired }
        var keys: [JSON]
        switch request.method {
        case .get:
            keys = try allDatabaseNames(request).map(JSON.string)
        case .post:
            try request.requireJSONContentType()
            guard let given = try request.jsonObjectBody()["keys"] else { throw CouchError.badRequest("`keys` member must exist.") }
            guard let list = given.arrayValue else { throw CouchError.badRequest("`keys` member must be an array.") }
            guard list.count <= nodeConfiguration.integer("chttpd", "max_db_number_for_dbs_info_req", default: 100) else {
                throw CouchError.badRequest("too_many_keys")
            }
            keys = list
        default:
            throw CouchError.only("GET,HEAD,POST")
        }
        var entries: [JSON] = []
        for key in keys {
            if let name = key.stringValue, (try? DatabaseRegistry.validate(name)) != nil, registry.exists(name),
                let info = try? await databaseInfo(name) {
                entries.append(["key": key, "info": info])
            } else if request.method == .post {
                entries.append(["key": key, "error": "not_found"])
            }
        }
        return Response.json(.array(entries))
    }

    /// `/{db}`: create (PUT, admins), info (GET/HEAD), delete (DELETE, admins), new document (POST).
    func databaseRoute(name: String, _ request: CouchRequest, principal: Principal) async throws -> Response {
        switch request.method {
        case .put:
            guard principal.isAdmin else { throw CouchError.adminRequired }
            try DatabaseRegistry.validate(name)
            var partitioned = false
            if let value = request.query["partitioned"] {
                guard value == "true" || value == "false" else { throw CouchError.badRequest("Invalid `partitioned` parameter") }
                partitioned = value == "true"
            }
            if partitioned, Partition.isSystemDatabase(name) { throw CouchError.badRequest("Cannot partition a system database") }
            guard !registry.exists(name) else {
                throw CouchError(.preconditionFailed, "file_exists", "The database could not be created, the file already exists.")
            }
            let created = try await registry.open(name)
            if partitioned { try await registry.setPartitioned(name, created) }
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
            return Response.json(try await databaseInfo(name))
        case .post:
            let db = try await registry.database(named: name)
            return try await Partition.$current.withValue(try await registry.isPartitioned(name, db)) {
                try await createDocument(db, request, principal: principal)
            }
        default:
            throw CouchError.methodNotAllowed
        }
    }
}
