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
            purged[id] = .array(revisions.map { .string($0.description) })
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
            guard principal.isAdmin else { throw CouchError.adminRequired }
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

/// A database's `_security` object as the server enforces it: `members` (names and roles) may read and
/// write the database, within their channels; `admins` too. With no member names or roles, every
/// signed-in user may (CouchDB's `{}`). DocStore users have channels, not roles: a role in `_security`
/// is matched against a user's read channels.
struct SecurityObject: Sendable {
    struct Group: Sendable {
        var names: [String] = []
        var roles: [String] = []

        init() {}

        /// Reads `{"names": [...], "roles": [...]}` (either may be absent).
        init(json: JSON?, member: String) throws {
            guard let json else { return }
            guard case .object(let object) = json else { throw CouchError.badRequest("\(member) must be an object") }
            func strings(_ key: String) throws -> [String] {
                guard let value = object[key] else { return [] }
                let texts = value.arrayValue?.compactMap(\.stringValue)
                guard let texts, texts.count == value.arrayValue?.count else {
                    throw CouchError.badRequest("\(member).\(key) must be an array of strings")
                }
                return texts
            }
            names = try strings("names")
            roles = try strings("roles")
        }

        func includes(_ user: ServerUser) -> Bool {
            names.contains(user.name) || roles.contains { user.readChannels.contains($0) }
        }

        var isEmpty: Bool { names.isEmpty && roles.isEmpty }
    }

    var admins = Group()
    var members = Group()

    init() {}

    /// The object as stored: validation functions see it as `secObj`.
    var json: JSONObject = [:]

    init(json object: JSONObject) throws {
        json = object
        admins = try Group(json: object["admins"], member: "admins")
        members = try Group(json: object["members"], member: "members")
    }

    /// Throws CouchDB's 403 for a user who is neither a member nor an admin of a database that has members.
    func authorize(_ principal: Principal) throws {
        guard case .user(let user) = principal, !members.isEmpty else { return }
        guard members.includes(user) || admins.includes(user) else {
            throw CouchError.forbidden("You are not allowed to access this db.")
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
            guard principal.isAdmin else { throw CouchError.adminRequired }
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
