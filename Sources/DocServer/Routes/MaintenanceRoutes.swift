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
