import DocStore
import Foundation
import HTTPTypes
import Hummingbird

extension DocServer {
    /// `POST /{db}/_bulk_docs`: `{"docs": […], "new_edits": true|false}`.
    ///
    /// As CouchDB: every document is read before any is written, so a malformed one (not an object, a
    /// reserved id or member, a replicated one without `_rev`) fails the whole request with 400; a stub
    /// that names no attachment fails it with 412 `missing_stub`; other failures (conflicts, access)
    /// are rows of the answer.
    func bulkDocuments(_ db: Database, _ request: CouchRequest, principal: Principal) async throws -> Response {
        guard request.method == .post else { throw CouchError.methodNotAllowed }
        try request.requireJSONContentType()
        let body = try request.jsonObjectBody()
        guard let docs = body["docs"] else { throw CouchError.badRequest("POST body must include `docs` parameter.") }
        guard case .array(let items) = docs else { throw CouchError.badRequest("`docs` parameter must be an array.") }
        var newEdits = true
        if let value = body["new_edits"] {
            guard case .bool(let flag) = value else { throw CouchError.badRequest("`new_edits` parameter must be a boolean.") }
            newEdits = flag
        }
        var parsed: [Document] = []
        parsed.reserveCapacity(items.count)
        for item in items {
            guard case .object = item else { throw CouchError.badRequest("Document must be a JSON object") }
            do {
                let document = try Document(json: item)
                if document.hasID { try DocumentValidation.validateID(document.id, allowDesign: true) }
                try DocumentValidation.validateBody(document.body)
                if !newEdits && document.revision == nil {
                    throw CouchError.badRequest("When `new_edits: false`, the document needs `_rev` or `_revisions` specified")
                }
                parsed.append(document)
            } catch let error as DocStoreError {
                throw CouchError(error)
            }
        }
        var rows = [JSON?](repeating: nil, count: parsed.count)
        var documents: [Document] = []
        var positions: [Int] = []
        for (position, document) in parsed.enumerated() {
            do {
                try await checkWrite(document, in: db, principal)
                documents.append(document)
                positions.append(position)
            } catch let error as CouchError {
                rows[position] = ["id": document.hasID ? .string(document.id) : .null, "error": .string(error.error), "reason": .string(error.reason)]
            }
        }
        let results = newEdits ? try await db.save(documents) : try await db.insertRevisions(documents)
        if let missing = results.lazy.compactMap(\.error).first(where: { $0.code == .missingStub }) {
            throw CouchError(missing)
        }
        for (position, result) in zip(positions, results) {
            // With new_edits=false CouchDB lists only the failures.
            if !newEdits && result.isSuccess { continue }
            rows[position] = result.couchDBJSON
        }
        return Response.json(.array(rows.compactMap { $0 }), status: .created)
    }

    /// `POST /{db}/_bulk_get?revs=…&attachments=…&latest=…`: `{"docs": [{"id", "rev"?, "atts_since"?}]}`,
    /// answered as JSON, or as `multipart/mixed` to a client that accepts that and not JSON (each
    /// document complete: its attachments' bytes follow it). A document's `atts_since` asks for its
    /// attachments, stubs for those no newer than the newest of those revisions on its history.
    func bulkGet(_ db: Database, _ request: CouchRequest, principal: Principal) async throws -> Response {
        guard request.method == .post else { throw CouchError.methodNotAllowed }
        try request.requireJSONContentType()
        for name in ["open_revs", "new_edits", "w", "rev", "atts_since"] where request.query[name] != nil {
            throw CouchError.badRequest("\"\(name)\" query parameter is not acceptable")
        }
        let body = try request.jsonObjectBody()
        guard case .array(let items)? = body["docs"] else { throw CouchError.badRequest("Missing JSON list of 'docs'.") }
        let base = try DocumentOptions(request)
        let multipart = !request.accepts("application/json")
            && (request.accepts("multipart/mixed") || request.accepts("multipart/related"))
        // The requests first, then every revision they name read in one snapshot.
        struct Item {
            var id: String?
            var revisionText: String?
            var options: DocumentOptions
            var read: Int?
        }
        var list: [Item] = []
        var reads: [(id: String, revision: RevisionID?)] = []
        for entry in items {
            guard case .object(let spec) = entry, let id = spec["id"]?.stringValue else {
                list.append(Item(id: nil, revisionText: nil, options: base, read: nil))
                continue
            }
            var item = Item(id: id, revisionText: spec["rev"]?.stringValue, options: base, read: nil)
            if let since = spec["atts_since"], since.arrayValue?.isEmpty == false {
                item.options.attsSince = try DocumentOptions.revisions(since, name: "atts_since")
                item.options.attachments = true
            }
            let revision = item.revisionText.flatMap(RevisionID.init)
            if item.revisionText == nil || revision != nil {
                item.read = reads.count
                reads.append((id, revision))
            }
            list.append(item)
        }
        let found = try await db.revisionsWithHistory(reads, latest: base.latest)

        var results: [JSON] = []
        let boundary = "--" + Multipart.makeBoundary()
        var parts = MultipartBody()
        for item in list {
            guard let id = item.id else {
                let error: JSONObject = ["id": .null, "rev": .null, "error": "bad_request", "reason": "Missing id"]
                results.append(["id": .null, "docs": [["error": .object(error)]]])
                if multipart { appendBulkGetError(error, to: &parts, boundary: boundary) }
                continue
            }
            func failure(_ error: String, _ reason: String) -> JSONObject {
                ["id": .string(id), "rev": item.revisionText.map(JSON.string) ?? .null, "error": .string(error), "reason": .string(reason)]
            }
            var docs: [JSON] = []
            if let read = item.read {
                if found[read].isEmpty { docs.append(["error": .object(failure("not_found", "missing"))]) }
                for document in found[read] {
                    guard principal.canRead(document.channels) else {
                        docs.append(["error": .object(failure("forbidden", "You are not allowed to access this document."))])
                        continue
                    }
                    let answer = try await self.answer(for: document, in: db, item.options,
                                                       withData: multipart || item.options.attachments, multipart: multipart)
                    docs.append(["ok": answer.json])
                    guard multipart else { continue }
                    if answer.following.isEmpty {
                        parts.append(Multipart.partHeader(boundary: boundary, headers: [("Content-Type", "application/json")], first: false))
                        parts.append((try? answer.json.serialized()) ?? [])
                    } else {
                        let inner = Multipart.makeBoundary()
                        parts.append(Multipart.partHeader(boundary: boundary, headers: [
                            ("X-Doc-Id", id), ("X-Rev-Id", document.revision!.description),
                            ("Content-Type", "multipart/related; boundary=\(inner)"),
                        ], first: false))
                        parts.appendRelated(answer, boundary: inner)
                    }
                }
            } else {
                docs.append(["error": .object(failure("bad_request", "Invalid rev format"))])
            }
            if multipart {
                for doc in docs { if case .object(let error)? = doc["error"] { appendBulkGetError(error, to: &parts, boundary: boundary) } }
            }
            results.append(["id": .string(id), "docs": .array(docs)])
        }
        guard multipart else { return Response.json(["results": .array(results)]) }
        parts.append(Multipart.closing(boundary: boundary) + [0x0D, 0x0A])
        return Response(status: .ok, headers: [.contentType: "multipart/mixed; boundary=\"\(boundary)\""], body: parts.responseBody(db))
    }

    private func appendBulkGetError(_ error: JSONObject, to parts: inout MultipartBody, boundary: String) {
        parts.append(Multipart.partHeader(boundary: boundary, headers: [("Content-Type", "application/json; error=\"true\"")], first: false))
        parts.append((try? JSON.object(error).serialized()) ?? [])
    }

    /// `GET|POST /{db}/_all_docs` with CouchDB's options (JSON-encoded keys).
    func allDocuments(_ db: Database, _ request: CouchRequest, principal: Principal) async throws -> Response {
        guard request.method == .get || request.method == .post || request.method == .head else { throw CouchError.methodNotAllowed }
        func stringKey(_ names: String...) throws -> String? {
            for name in names {
                guard let value = try request.json(name) else { continue }
                guard let text = value.stringValue else { throw CouchError(.badRequest, "query_parse_error", "\(name) must be a JSON string") }
                return text
            }
            return nil
        }
        var query = AllDocumentsQuery()
        query.startKey = try stringKey("startkey", "start_key", "startkey_docid", "start_key_doc_id")
        query.endKey = try stringKey("endkey", "end_key", "endkey_docid", "end_key_doc_id")
        if let key = try stringKey("key") { query.startKey = key; query.endKey = key }
        query.inclusiveEnd = try request.bool("inclusive_end", default: true)
        query.descending = try request.bool("descending")
        query.limit = try request.int("limit")
        query.skip = try request.int("skip") ?? 0
        let includeDocuments = try request.bool("include_docs")
        var keys: [JSON]? = try request.json("keys")?.arrayValue
        if request.method == .post {
            try request.requireJSONContentType()
            let body = try request.jsonObjectBody()
            if let list = body["keys"] {
                guard let array = list.arrayValue else { throw CouchError.badRequest("`keys` body member must be an array.") }
                keys = array
            }
        }
        if let keys {
            query.keys = try keys.map { key in
                guard let text = key.stringValue else { throw CouchError.badRequest("keys must be strings") }
                return text
            }
        }
        let filtering = !principal.readsEverything
        query.includeDocuments = includeDocuments || filtering
        let result = try await db.allDocuments(query)
        var rows: [JSON] = []
        for row in result.rows {
            if filtering, let document = row.document, !principal.canRead(document.channels) { continue }
            if filtering, row.document == nil, row.error == nil, !row.isDeleted { continue }
            rows.append(row.couchDBJSON(includeDocuments: includeDocuments))
        }
        return Response.json(["total_rows": .integer(result.totalRows), "offset": .integer(result.offset), "rows": .array(rows)])
    }

    /// `POST /{db}/_revs_diff`: `{"id": ["rev", …]}` → the revisions this database lacks.
    func revisionsDiff(_ db: Database, _ request: CouchRequest, principal: Principal) async throws -> Response {
        guard request.method == .post else { throw CouchError.methodNotAllowed }
        try request.requireJSONContentType()
        let body = try request.jsonObjectBody()
        var offered: [(id: String, revisions: [RevisionID])] = []
        for (id, value) in body {
            guard let list = value.arrayValue else { throw CouchError.badRequest("Revisions of \(id) must be an array") }
            offered.append((id, try list.map { item in
                guard let text = item.stringValue, let revision = RevisionID(text) else { throw CouchError.badRequest("Invalid rev format") }
                return revision
            }))
        }
        var answer = JSONObject()
        for difference in try await db.missingRevisions(offered) {
            var entry: JSONObject = ["missing": JSON(difference.missing.map(\.description))]
            if !difference.possibleAncestors.isEmpty {
                entry["possible_ancestors"] = JSON(difference.possibleAncestors.map(\.description))
            }
            answer[difference.id] = .object(entry)
        }
        return Response.json(.object(answer))
    }

    /// `GET|POST /{db}/_design/{a}/_view/{b}`: the natively registered index `a/b`.
    func view(_ db: Database, name: String, _ request: CouchRequest, principal: Principal) async throws -> Response {
        guard request.method == .get || request.method == .post else { throw CouchError.methodNotAllowed }
        var query = IndexQuery()
        query.includeOffset = true
        query.key = try request.json("key")
        query.keys = try request.json("keys")?.arrayValue
        query.startKey = try request.json("startkey") ?? request.json("start_key")
        query.endKey = try request.json("endkey") ?? request.json("end_key")
        query.startKeyDocID = request.query["startkey_docid"] ?? request.query["start_key_doc_id"]
        query.endKeyDocID = request.query["endkey_docid"] ?? request.query["end_key_doc_id"]
        query.inclusiveEnd = try request.bool("inclusive_end", default: true)
        query.descending = try request.bool("descending")
        query.limit = try request.int("limit")
        query.skip = try request.int("skip") ?? 0
        query.includeDocuments = try request.bool("include_docs")
        if request.query["reduce"] != nil { query.reduce = try request.bool("reduce") }
        query.group = try request.bool("group")
        query.groupLevel = try request.int("group_level")
        query.updateSeq = try request.bool("update_seq")
        switch request.query["stale"] ?? request.query["update"] {
        case "ok", "false": query.stale = .ok
        case "update_after", "lazy": query.stale = .updateAfter
        case nil, "true": break
        case let other?: throw CouchError(.badRequest, "query_parse_error", "Invalid value for stale/update: \(other)")
        }
        if request.method == .post {
            try request.requireJSONContentType()
            let body = try request.jsonObjectBody()
            if let keys = body["keys"] {
                guard let array = keys.arrayValue else { throw CouchError.badRequest("`keys` body member must be an array.") }
                query.keys = array
            }
        }
        let filtering = !principal.readsEverything
        if filtering, query.reduce != false, try await db.indexDefinition(named: name)?.reduce != nil {
            // A reduced value would mix in documents the user cannot read.
            throw CouchError.forbidden("Reduced views are only available to users who can read every document; use reduce=false.")
        }
        let requestedDocs = query.includeDocuments
        if filtering { query.includeDocuments = true }
        var result: QueryResult
        do {
            result = try await db.query(name, query)
        } catch let error as DocStoreError where error.code == .notFound {
            throw CouchError.notFound("missing_named_view")
        }
        var json = result.couchDBJSON(includeDocuments: requestedDocs)
        if filtering {
            let visible = result.rows.enumerated().filter { _, row in
                guard let document = row.document else { return false }
                return principal.canRead(document.channels)
            }
            let rows = json["rows"]!.arrayValue!
            json["rows"] = .array(visible.map { rows[$0.offset] })
        }
        return Response.json(json)
    }
}
