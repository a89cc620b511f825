import CouchProtocol
import Foundation
import DocStore
import HTTPTypes
import Hummingbird

/// A `_local` document write as CouchDB 3.3 takes it over HTTP (`PUT /db/_local/id`, `POST /db`,
/// `_bulk_docs`): no conflict check, the last write wins; the new revision counts on from the one the
/// writer gives (`0-N` → `0-(N+1)`, `0-1` without one; `_revisions` with `start` 0 gives it too);
/// `_deleted: true` removes the document (answered `0-0`, also when there was none); `_attachments`
/// and the other metadata members are dropped, unknown `_` members refused.
struct LocalDocumentWrite: Sendable {
    /// The id with its `_local/` prefix.
    let id: String
    let body: JSONObject
    let deleted: Bool
    /// The revision as given, `0-N` when well formed.
    let revision: String?

    /// The members CouchDB reads or drops (`couch_doc:transfer_fields`); any other `_` member is refused.
    private static let metadata: Set<String> = [
        "_id", "_rev", "_revisions", "_attachments", "_deleted", "_revs_info", "_local_seq", "_conflicts", "_deleted_conflicts",
    ]

    init(id: String, json: JSONObject) throws {
        self.id = id.hasPrefix("_local/") ? id : "_local/\(id)"
        var body = JSONObject()
        for (key, value) in json where !LocalDocumentWrite.metadata.contains(key) { body[key] = value }
        do {
            try DocumentValidation.validateBody(body)
        } catch let error as DocStoreError {
            throw CouchError(error)
        }
        switch json["_deleted"] {
        case nil: deleted = false
        case .bool(let flag)?: deleted = flag
        default: throw CouchError(.badRequest, "doc_validation", "_deleted must be a boolean")
        }
        if let revisions = json["_revisions"] {
            guard case .object(let members) = revisions, let start = members["start"]?.intValue else {
                throw CouchError(.badRequest, "doc_validation", "_revisions.start isn't an integer.")
            }
            guard let ids = members["ids"]?.arrayValue, let newest = ids.first?.stringValue else {
                throw CouchError(.badRequest, "doc_validation", "_revisions.ids isn't a array.")
            }
            revision = "\(start)-\(newest)"
        } else if let given = json["_rev"] {
            guard let text = given.stringValue else { throw CouchError.badRequest("Invalid rev format") }
            revision = text
        } else {
            revision = nil
        }
        self.body = body
    }

    /// The `N` of the `0-N` given; CouchDB 3.3.3 answers any other revision "Invalid rev format" (with
    /// 500 for a single write, where DocServer says 400).
    func counter() throws -> Int64? {
        guard let revision else { return nil }
        guard revision.hasPrefix("0-"), let counter = Int64(revision.dropFirst(2)) else {
            throw CouchError.badRequest("Invalid rev format")
        }
        return counter
    }
}

extension DocServer {
    /// Stores `write` for `principal` (see ``Principal/storedLocalID(_:)``) and names the revision it got.
    func write(_ write: LocalDocumentWrite, in db: Database, for principal: Principal) async throws -> WriteResult {
        let stored = principal.storedLocalID(write.id)
        if write.deleted {
            _ = try await db.removeLocalDocument(withID: stored)
            return WriteResult(id: write.id, revision: "0-0")
        }
        return WriteResult(id: write.id, revision: try await db.writeLocalDocument(withID: stored, body: write.body, following: try write.counter()))
    }

    /// `GET|PUT|DELETE /{db}/_local/{id}`, as CouchDB 3.3 (see ``LocalDocumentWrite``): `revs=true`
    /// adds `_revisions`; a revision asked for (`rev` without `latest=true`, `open_revs`) is missing, as
    /// CouchDB 3.3.3 finds none of a local document's; a deletion by PUT is a 200; `DELETE` removes the
    /// document whatever revision it names (404 when there is none).
    func localDocument(_ db: Database, id: String, _ request: CouchRequest, principal: Principal) async throws -> Response {
        switch request.method {
        case .get, .head:
            if let openRevs = request.query["open_revs"] {
                let parsed = openRevs == "all" ? nil : try? JSON(parsing: openRevs)
                guard let list = parsed?.arrayValue else { throw CouchError.notFound() }
                let texts = try list.map { value in
                    guard let text = value.stringValue, RevisionID.isReadableByCouchDB(text) else { throw CouchError.badRequest("Invalid rev format") }
                    return text
                }
                return try await openRevisionsResponse(db, [], missing: RevisionID.couchDBOrdered(texts), DocumentOptions(request), request)
            }
            if let revision = request.query["rev"], try !request.bool("latest") {
                guard RevisionID.isReadableByCouchDB(revision) else { throw CouchError.badRequest("Invalid rev format") }
                throw CouchError.notFound("missing")
            }
            guard let local = try await db.localDocument(withID: principal.storedLocalID(id)) else { throw CouchError.notFound() }
            var json = JSONObject()
            json["_id"] = .string("_local/\(id)")
            json["_rev"] = .string(local.revision.description)
            for (key, value) in local.body { json[key] = value }
            if try request.bool("revs") {
                json["_revisions"] = ["start": 0, "ids": [.string(local.revision.digest)]]
            }
            return Response.json(.object(json))
        case .put:
            guard case .object(var body) = try request.jsonBody() else { throw CouchError.badRequest("Document must be a JSON object") }
            if let query = request.query["rev"] {
                if let given = body["_rev"], given != .string(query) {
                    throw CouchError.badRequest("Document rev from request body and query string have different values")
                }
                body["_rev"] = .string(query)
            }
            let write = try LocalDocumentWrite(id: id, json: body)
            return Response.json(try await self.write(write, in: db, for: principal).json, status: write.deleted ? .ok : .created,
                                 headers: [.location: request.location(db.name, write.id)])
        case .delete:
            guard try await db.removeLocalDocument(withID: principal.storedLocalID(id)) else { throw CouchError.notFound() }
            return Response.json(WriteResult(id: "_local/\(id)", revision: "0-0").json)
        case .post:
            // CouchDB 3.3.3 reads it as a form upload to the document, and wants a `Referer` first.
            guard request.header(HTTPField.Name("Referer")!) != nil else { throw CouchError.badRequest("Referer header required.") }
            throw CouchError.methodNotAllowed
        default:
            throw CouchError.only("DELETE,GET,HEAD,POST,PUT,COPY")
        }
    }
}

extension DocServer {
    /// `GET|POST /{db}/_local_docs`: the `_local` documents as `_all_docs` rows (`{"rev": "0-N"}`), with
    /// `keys` (a missing one is a `not_found` row), `startkey`/`endkey`, `inclusive_end`, `descending`,
    /// `skip`, `limit`, `include_docs` and `update_seq`; `total_rows`, `offset` and `update_seq` are
    /// `null`, as CouchDB 3.3.3 answers.
    func localDocumentList(_ db: Database, _ original: CouchRequest) async throws -> JSON {
        let request = try original.withBodyParameters()
        func key(_ names: String...) throws -> String? {
            guard let value = try names.lazy.compactMap({ try request.json($0) }).first else { return nil }
            guard let text = value.stringValue else { throw CouchError(.badRequest, "query_parse_error", "Keys must be strings") }
            return text
        }
        let includeDocuments = try request.bool("include_docs")
        let all = try await db.localDocuments()
        func row(_ local: LocalDocument) -> ViewRow {
            var document: JSON?
            if includeDocuments {
                var json: JSONObject = ["_id": .string("_local/\(local.id)"), "_rev": .string(local.revision.description)]
                for (name, value) in local.body { json[name] = value }
                document = .object(json)
            }
            return ViewRow(id: "_local/\(local.id)", revision: local.revision.description, document: document)
        }
        var rows: [ViewRow]
        if let keys = try request.json("keys") {
            guard let list = keys.arrayValue else { throw CouchError.badRequest("`keys` parameter must be an array.") }
            let byID = Dictionary(all.map { ("_local/\($0.id)", $0) }, uniquingKeysWith: { first, _ in first })
            rows = list.map { key in
                key.stringValue.flatMap { byID[$0] }.map(row) ?? ViewRow(id: nil, key: key, value: .null, error: "not_found")
            }
        } else {
            let descending = try request.bool("descending")
            let inclusiveEnd = try request.bool("inclusive_end", default: true)
            let start = try key("startkey", "start_key"), end = try key("endkey", "end_key")
            let before: (String, String) -> Bool = descending ? { $0 > $1 } : { $0 < $1 }
            rows = (descending ? all.reversed() : all).map(row).filter { row in
                guard let id = row.id else { return false }
                if let start, before(id, start) { return false }
                if let end, before(end, id) || (!inclusiveEnd && id == end) { return false }
                return true
            }
        }
        rows = Array(rows.dropFirst(try request.int("skip") ?? 0).prefix(try request.int("limit") ?? Int.max))
        var answer: JSONObject = ["total_rows": .null, "offset": .null]
        if try request.bool("update_seq") { answer["update_seq"] = .null }
        answer["rows"] = .array(rows.map(\.json))
        return .object(answer)
    }
}

extension Principal {
    /// The id under which the `_local` document a request names `id` is stored for this principal.
    ///
    /// Local documents carry no channels, and replicators keep their checkpoints in them on both sides.
    /// So a user limited to channels reads and writes local documents of their own, kept apart as
    /// `_user/{name, percent-encoded}/{id}`: their checkpoints work, and they neither read nor overwrite
    /// anyone else's (an administrator's notes, another user's checkpoints). Administrators and users
    /// who read every channel use the ids as CouchDB does.
    func storedLocalID(_ id: String) -> String {
        let bare = id.hasPrefix("_local/") ? String(id.dropFirst("_local/".count)) : id
        guard case .user(let user) = self, !readsEverything else { return bare }
        let name = user.name.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? user.name
        return "_user/\(name)/\(bare)"
    }
}
