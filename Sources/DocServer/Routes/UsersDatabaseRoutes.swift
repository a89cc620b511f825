import DocStore
import Foundation
import Hummingbird

extension DocServer {
    /// CouchDB's read rules of a `_users` database for those who do not administer it: a user reads
    /// their own user document; of others' only the fields `[chttpd_auth] public_fields` names (404
    /// without any); design documents, their views and lists, `_all_docs` and `_changes` are refused,
    /// as is every endpoint that reads many documents at once. Returns an answer to give instead of
    /// the route's (a document's public fields), or `nil` to go on.
    func usersDatabaseAnswer(_ db: Database, _ rest: [String], _ request: CouchRequest,
                             principal: Principal) async throws -> Response? {
        let own = principal.name.map { UsersDatabase.prefix + $0 }
        guard let first = rest.first else { return nil }
        switch first {
        case "_all_docs", "_changes":
            // As CouchDB: the server's admins only, not even the database's.
            throw CouchError.adminRequired
        case "_design":
            // Writing one is refused as anywhere (not a database admin); reading one is refused here.
            if rest.count == 2, ![.get, .head].contains(request.method) { return nil }
            let isFunction = rest.count >= 4 && ["_show", "_update"].contains(rest[2])
            if isFunction {
                // Shown or updated: the user's own document only.
                if rest.count >= 5, rest[4...].joined(separator: "/") != own {
                    throw CouchError.notFound("document not found")
                }
                return nil
            }
            throw CouchError.forbidden("Only administrators can view design docs in the users database.")
        case "_design_docs":
            guard try !request.bool("include_docs") else {
                throw CouchError.forbidden("Only administrators can view design docs in the users database.")
            }
            return nil
        case "_bulk_get", "_find", "_explain", "_partition", "_local_docs", "_purge":
            throw CouchError.forbidden("Only administrators can read many documents of the users database.")
        case "_local", "_security", "_bulk_docs", "_revs_diff", "_missing_revs", "_index", "_ensure_full_commit", "_revs_limit",
             "_purged_infos_limit":
            return nil
        default:
            break
        }
        // A document, or one of its attachments: another user's is missing but for its public fields
        // (and a PUT, which the users database's write rules refuse as CouchDB does).
        let id = rest[0]
        guard id != own, !(rest.count == 1 && request.method == .put) else { return nil }
        guard rest.count == 1, [.get, .head].contains(request.method) else { throw CouchError.notFound("missing") }
        let fields = (UsersDatabase.setting("public_fields", nodeConfiguration) ?? "")
            .split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        guard !fields.isEmpty, let document = try await db.document(withID: id) else { throw CouchError.notFound("missing") }
        var shown: JSONObject = [:]
        for field in fields where !field.hasPrefix("_") {
            if let value = document[field] { shown[field] = value }
        }
        guard !shown.isEmpty else { throw CouchError.notFound("missing") }
        shown["_id"] = .string(id)
        shown["_rev"] = document.revision.map { .string($0.description) }
        return Response.json(.object(shown))
    }
}
