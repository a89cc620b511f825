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
            // As CouchDB 3.3.3: which handler authenticated the request (Basic is `default`), nothing
            // for an anonymous one.
            var info: JSONObject = ["authentication_handlers": ["cookie", "default"]]
            if principal != nil {
                let scheme = request.header(.authorization)?.lowercased() ?? ""
                info["authenticated"] = scheme.hasPrefix("basic ") ? "default" : scheme.hasPrefix("bearer ") ? "jwt" : "cookie"
            }
            return Response.json(["ok": true, "userCtx": context, "info": .object(info)])
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
            guard let name = form.query["name"] ?? form.query["username"], let password = form.query["password"] else {
                throw CouchError.badRequest("name and password are required")
            }
            return (name, password)
        }
        let body = try request.jsonObjectBody()
        guard let name = (body["name"] ?? body["username"])?.stringValue, let password = body["password"]?.stringValue else {
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
        func key(_ names: String...) throws -> String? {
            guard let value = try names.lazy.compactMap({ try request.json($0) }).first else { return nil }
            guard let text = value.stringValue else { throw CouchError(.badRequest, "query_parse_error", "Invalid key: keys must be strings") }
            return text
        }
        let descending = try request.bool("descending")
        let inclusiveEnd = try request.bool("inclusive_end", default: true)
        let start = try key("startkey", "start_key"), end = try key("endkey", "end_key")
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
            let db = try await registry.database(named: name)
            try await registry.security(of: name, db).authorize(principal)
            var info = try await db.info().serverJSON
            if try await registry.isPartitioned(name, db) {
                // A partitioned database's figures, as its partitions' add up to them.
                let figures = try await db.figures(ofIDsFrom: "", below: "\u{10FFFF}\u{10FFFF}")
                info["sizes"]?["external"] = .integer(figures.bodyBytes)
                info["sizes"]?["active"] = .integer(figures.bodyBytes)
                info["props"] = ["partitioned": true]
            } else {
                info["props"] = [:]
            }
            return Response.json(info)
        case .post:
            let db = try await registry.database(named: name)
            try await registry.security(of: name, db).authorize(principal)
            return try await Partition.$current.withValue(try await registry.isPartitioned(name, db)) {
                try await createDocument(db, request, principal: principal)
            }
        default:
            throw CouchError.methodNotAllowed
        }
    }
}
