import CouchProtocol
import DocStore
import Foundation
import HTTPTypes
import Hummingbird

extension DocServer {
    /// `POST /{db}/_purge` (admins): `{"id": ["rev", …]}` → 201
    /// `{"purge_seq": null, "purged": {"id": [the revisions purged]}}`, as CouchDB 3.3 answers. Only
    /// leaf revisions are purged (others are left out of the answer); a document that loses every leaf
    /// is gone.
    func purge(_ db: Database, _ request: CouchRequest, principal: Principal) async throws -> Response {
        guard request.method == .post else {
            throw CouchError(.methodNotAllowed, "method_not_allowed", "Only POST allowed")
        }
        guard principal.isAdmin else { throw CouchError.adminRequired }
        try request.requireJSONContentType()
        var requests: [(id: String, revisions: [RevisionID])] = []
        for (id, value) in try request.jsonObjectBody() {
            if Partition.current, !id.hasPrefix("_"), !id.contains(":") {
                throw Partition.missingPartition
            }
            guard case .array(let list) = value else { throw CouchError.badRequest("Invalid list of revisions") }
            var revisions: [RevisionID] = []
            for item in list {
                guard case .string(let text) = item, let revision = RevisionID(text) else {
                    throw CouchError.badRequest("Invalid rev format")
                }
                revisions.append(revision)
            }
            requests.append((id, revisions))
        }
        var purged = JSONObject()
        for (id, revisions) in try await db.purge(revisions: requests) {
            // Each revision once, as CouchDB answers a list that names one twice.
            var seen = Set<RevisionID>()
            purged[id] = .array(revisions.filter { seen.insert($0).inserted }.map { .string($0.description) })
        }
        return Response.json(["purge_seq": .null, "purged": .object(purged)], status: .created)
    }

    /// `GET /{db}/_revs_limit` → the limit as a bare number; `PUT` (admins) with a positive integer →
    /// `{"ok": true}`. CouchDB 3.3 answers a 500 to a limit that is not a positive integer; this is a 400.
    func revisionsLimit(_ db: Database, _ request: CouchRequest, principal: Principal) async throws -> Response {
        switch request.method {
        case .get:
            return Response.json(.integer(await db.revisionsLimit))
        case .put:
            guard principal.isDatabaseAdmin else { throw CouchError.designDocumentsNeedAdmin }
            guard case .integer(let limit) = try request.jsonBody(), limit >= 1 else {
                throw CouchError.badRequest("The revision limit must be a positive integer")
            }
            try await db.setRevisionsLimit(limit)
            return Response.json(["ok": true])
        default:
            throw CouchError(.methodNotAllowed, "method_not_allowed", "Only PUT,GET allowed")
        }
    }
}

extension DocServer {
    /// `GET /{db}/_purged_infos_limit` → the limit as a bare number; `PUT` with a positive integer →
    /// `{"ok": true}`; both for server and database admins only, as CouchDB 3.3.3. Other methods are
    /// CouchDB's document requests for the id `_purged_infos_limit` (its router sends them there).
    /// A limit above `Int.max` (CouchDB keeps any integer) is kept as `Int.max`.
    func purgedInfosLimit(_ db: Database, _ request: CouchRequest, principal: Principal) async throws -> Response {
        guard principal.isDatabaseAdmin else { throw CouchError.adminRequired }
        switch request.method {
        case .get, .head:
            return Response.json(.integer(try await db.purgedInfosLimit))
        default:
            let limit: Int
            switch try request.jsonBody() {
            case .integer(let value) where value >= 1: limit = value
            case .bigInteger(let digits) where !digits.hasPrefix("-"): limit = Int.max
            default: throw CouchError.badRequest("`purge_infos_limit` must be positive integer")
            }
            try await db.setPurgedInfosLimit(limit)
            return Response.json(["ok": true])
        }
    }
}

extension DocServer {
    /// `GET /{db}/_security` → the object (`{}` when none was set); `PUT` (admins) a new one →
    /// `{"ok": true}`. CouchDB 3.3 answers a 500 (`no_majority`) to a malformed object; this is a 400.
    func security(_ db: Database, name: String, _ request: CouchRequest, principal: Principal) async throws -> Response {
        switch request.method {
        case .get:
            return Response.json(.object(try await db.securityObject()))
        case .put:
            guard principal.isDatabaseAdmin else { throw CouchError.designDocumentsNeedAdmin }
            if name == UsersDatabase.authenticationDatabase(nodeConfiguration),
                !nodeConfiguration.bool("couchdb", "users_db_security_editable", default: false) {
                throw CouchError.forbidden("You can't edit the security object of the user database.")
            }
            let object = try request.jsonObjectBody()
            let parsed = try SecurityObject(json: object)
            try await db.setSecurityObject(object)
            registry.setSecurity(parsed, of: name)
            return Response.json(["ok": true])
        default:
            throw CouchError(.methodNotAllowed, "method_not_allowed", "Only GET,PUT allowed")
        }
    }
}
