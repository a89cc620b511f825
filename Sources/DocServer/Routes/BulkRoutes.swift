import CouchProtocol
import DocStore
import DocStoreJavaScript
import Foundation
import HTTPTypes
import Hummingbird

extension DocServer {
    /// `POST /{db}/_bulk_docs`: `{"docs": […], "new_edits": true|false}`.
    ///
    /// As CouchDB: every document is read before any is written, so a malformed one (not an object, a
    /// reserved id or member, a replicated one without `_rev`) fails the whole request with 400; a stub
    /// that names no attachment fails it with 412 `missing_stub`; other failures (conflicts, access)
    /// are rows of the answer. `_local` documents are written as ``LocalDocumentWrite`` says, after the
    /// others, answered in their place (with `new_edits=false` only their failures, as CouchDB).
    func bulkDocuments(_ db: Database, _ request: CouchRequest, principal: Principal) async throws -> Response {
        guard request.method == .post else { throw CouchError.methodNotAllowed }
        try request.requireJSONContentType()
        // The documents (`{"docs": [{…}]}`) keep their bodies as the bytes sent where they can.
        let requestObject = try request.jsonObjectBody(documentDepth: 3)
        let body = try BulkDocsRequest(json: .object(requestObject))
        let (items, newEdits) = (body.documents, body.newEdits)
        var parsed: [Document] = []
        parsed.reserveCapacity(items.count)
        var locals: [(position: Int, write: LocalDocumentWrite)] = []
        for item in items {
            guard case .object(let members) = item else { throw CouchError.badRequest("Document must be a JSON object") }
            if case .string(let id)? = members["_id"], id.hasPrefix("_local/") {
                locals.append((parsed.count + locals.count, try LocalDocumentWrite(id: id, json: members)))
                continue
            }
            do {
                var document = try Document(couchJSON: item)
                if document.hasID {
                    try DocumentValidation.validateID(document.id, allowDesign: true)
                } else if newEdits {
                    document.id = newUUID()
                }
                if document.hasID { try Partition.check(document.id) }
                // Replicated revisions keep their attachments' bytes and digests as their peer sent them.
                if newEdits { compressAttachments(of: &document) }
                try DocumentValidation.validateBody(document.body)
                if !newEdits && document.revision == nil {
                    throw CouchError.badRequest("When `new_edits: false`, the document needs `_rev` or `_revisions` specified")
                }
                parsed.append(document)
            } catch let error as DocStoreError {
                throw CouchError(error)
            }
        }
        // CouchDB 3.3.3 refuses `all_or_nothing` (but with `new_edits=false`, where it ignores it), naming
        // each document.
        if newEdits, requestObject["all_or_nothing"] == true {
            let failure = ErrorBody(error: "not_implemented", reason: "all_or_nothing is not supported")
            let refused = items.map { item -> JSON in
                var row = WriteResult(id: item["_id"]?.stringValue ?? newUUID(), failure: failure).json
                row["rev"] = .string(item["_rev"]?.stringValue ?? "0-")
                return row
            }
            return Response.json(.array(refused), status: .expectationFailed)
        }
        var rows = [WriteResult?](repeating: nil, count: parsed.count + locals.count)
        let localPositions = Set(locals.map(\.position))
        let documentPositions = rows.indices.filter { !localPositions.contains($0) }
        var documents: [Document] = []
        var positions: [Int] = []
        for (position, var document) in zip(documentPositions, parsed) {
            do {
                try await checkWrite(&document, in: db, principal, replicated: !newEdits)
                documents.append(document)
                positions.append(position)
            } catch let error as CouchError {
                rows[position] = WriteResult(id: document.hasID ? document.id : nil, failure: error.body)
            }
        }
        if newEdits {
            let refused = try await partitionOverflows(documents, in: db)
            for index in refused.keys.sorted(by: >) {
                rows[positions[index]] = WriteResult(id: documents[index].id, failure: refused[index]!.body)
                documents.remove(at: index)
                positions.remove(at: index)
            }
        }
        let results = newEdits ? try await db.put(each: documents) : try await db.insertRevisions(documents)
        if let missing = results.lazy.compactMap(\.error).first(where: { $0.code == .missingStub }) {
            throw CouchError(missing)
        }
        for (index, (position, result)) in zip(positions, results).enumerated() {
            var row = WriteResult(result)
            // A refused replicated revision is named with its revision, as CouchDB names it.
            if !newEdits, result.error != nil { row.revision = documents[index].revision?.description }
            rows[position] = row
        }
        for (position, write) in locals {
            do {
                rows[position] = try await self.write(write, in: db, for: principal)
            } catch let error as CouchError {
                rows[position] = WriteResult(id: write.id, failure: error.body)
            }
        }
        return Response.json(BulkDocsRequest.answer(rows.compactMap { $0 }, newEdits: newEdits), status: .created)
    }

    /// `POST /{db}/_bulk_get?revs=…&attachments=…&latest=…`: `{"docs": [{"id", "rev"?, "atts_since"?}]}`
    /// — an entry without `rev` asks for every leaf, as CouchDB's — answered as JSON, or as
    /// `multipart/mixed` to a client that accepts that and not JSON (each document complete: its
    /// attachments' bytes follow it). A document's `atts_since` asks for its
    /// attachments, stubs for those no newer than the newest of those revisions on its history.
    func bulkGet(_ db: Database, _ request: CouchRequest, principal: Principal) async throws -> Response {
        guard request.method == .post else { throw CouchError.methodNotAllowed }
        try request.requireJSONContentType()
        for name in ["open_revs", "new_edits", "w", "rev", "atts_since"] where request.query[name] != nil {
            throw CouchError.badRequest("\"\(name)\" query parameter is not acceptable")
        }
        let body = try BulkGet.Request(json: .object(try request.jsonObjectBody()))
        let base = try DocumentOptions(request)
        let multipart = !request.accepts("application/json")
            && (request.accepts("multipart/mixed") || request.accepts("multipart/related"))
        // The requests first, then every revision they name read in one snapshot.
        struct Item {
            var request: BulkGet.Request.Item
            var options: DocumentOptions
            var read: Int?
        }
        var list: [Item] = []
        var reads: [(id: String, revision: RevisionID?)] = []
        for entry in body.items {
            var item = Item(request: entry, options: base, read: nil)
            if !entry.attachmentsSince.isEmpty {
                item.options.attsSince = entry.attachmentsSince
                item.options.attachments = true
            }
            // A revision CouchDB reads but no database holds (`0-a`) is missing without a read.
            let revision = entry.revision.flatMap { RevisionID($0) }
            if entry.refusal == nil, let id = entry.id, entry.revision == nil || revision != nil {
                item.read = reads.count
                reads.append((id, revision))
            }
            list.append(item)
        }
        let found = try await db.revisionsWithHistory(reads, latest: base.latest)
        let revisionCount = found.reduce(0) { $0 + $1.count }
        metrics.documentsRead(revisionCount)

        // A JSON answer is written as it is made; a revision without attachments and without the
        // options that need its revision tree (a replicator's read) is written straight from its
        // stored bytes (``DocStore/JSONWriter/writeDocument(_:revisions:)``).
        var json = multipart ? nil : BulkGet.Writer(nonFiniteAsNull: true, capacity: 64 + revisionCount * 1024)
        let revisionsLimit = await db.revisionsLimit
        let boundary = multipart ? "--" + Multipart.makeBoundary() : ""
        var parts = MultipartBody()
        for item in list {
            let id = item.request.id
            // Failures are written in their place in a JSON answer, and after the documents'
            // parts in a multipart one.
            var failures: [BulkGet.Failure] = []
            func refuse(_ refusal: BulkGet.Failure) throws {
                failures.append(refusal)
                try json?.appendFailure(refusal)
            }
            func refuse(_ error: String, _ reason: String) throws {
                // CouchDB names a revision that was not given "undefined" (Erlang's atom, written as text).
                let revision = item.request.revision ?? (id == nil ? nil : "undefined")
                try refuse(BulkGet.Failure(id: id, revision: revision, error: ErrorBody(error: error, reason: reason)))
            }
            json?.beginResult(id: id)
            if let refusal = item.request.refusal {
                try refuse(refusal)
            } else if let id, Partition.current, let error = Partition.error(of: id) {
                try refuse(BulkGet.Failure(id: id, revision: nil, error: error.body))
            } else if let read = item.read {
                if found[read].isEmpty { try refuse("not_found", "missing") }
                for document in found[read] {
                    guard principal.canRead(document) else {
                        try refuse("forbidden", "You are not allowed to access this document.")
                        continue
                    }
                    if json != nil, let plain = Self.plainAnswer(document, item.options, revisionsLimit: revisionsLimit) {
                        try json?.appendDocument { try $0.writeDocument(plain.document, revisions: plain.revisions) }
                        continue
                    }
                    let answer = try await self.answer(for: document, in: db, item.options,
                                                       withData: multipart || item.options.attachments, multipart: multipart)
                    try json?.appendDocument { try $0.write(answer.json) }
                    guard multipart else { continue }
                    if answer.following.isEmpty {
                        parts.append(Multipart.partHeader(boundary: boundary, headers: [("Content-Type", "application/json")], first: false))
                        parts.append((try? answer.json.serialized()) ?? [])
                    } else {
                        let inner = Multipart.makeBoundary()
                        parts.append(Multipart.partHeader(boundary: boundary, headers: [
                            ("X-Doc-Id", document.id), ("X-Rev-Id", document.revision!.description),
                            ("Content-Type", "multipart/related; boundary=\(inner)"),
                        ], first: false))
                        answer.appendRelated(to: &parts, boundary: inner)
                    }
                }
            } else {
                try refuse("not_found", "missing")
            }
            json?.endResult()
            if multipart {
                for refusal in failures { appendBulkGetError(refusal, to: &parts, boundary: boundary) }
            }
        }
        if let json { return Response.json(serialized: json.finish()) }
        parts.append(Multipart.closing(boundary: boundary) + [0x0D, 0x0A])
        return Response(status: .ok, headers: [.contentType: "multipart/mixed; boundary=\"\(boundary)\""], body: parts.responseBody(db))
    }

    private func appendBulkGetError(_ failure: BulkGet.Failure, to parts: inout MultipartBody, boundary: String) {
        parts.append(Multipart.partHeader(boundary: boundary, headers: [("Content-Type", "application/json; error=\"true\"")], first: false))
        parts.append((try? failure.json.serialized()) ?? [])
    }

    /// `GET|POST /{db}/_all_docs` with CouchDB's options (JSON-encoded keys).
    func allDocuments(_ db: Database, _ request: CouchRequest, principal: Principal) async throws -> Response {
        if request.segments.count == 3, request.segments[2] == "queries" {
            return try await multiQuery(request) { try await allDocumentsAnswer(db, $0, principal: principal).serialized(nonFiniteAsNull: true) }
        }
        guard request.segments.count == 2 else { throw CouchError.notFound() }
        guard request.method == .get || request.method == .post || request.method == .head else { throw CouchError.methodNotAllowed }
        return Response.json(serialized: try await allDocumentsAnswer(db, request, principal: principal).serialized(nonFiniteAsNull: true))
    }

    /// `_all_docs`'s answer to a request's options (from the query string and a POST body, the query
    /// string winning): rows the principal may read. `designOnly` answers `_design_docs`: the rows of
    /// design documents, `total_rows` counting them. A key that is not a string names no document: its
    /// row is `not_found`, as in CouchDB 3.3.3.
    func allDocumentsAnswer(_ db: Database, _ original: CouchRequest, principal: Principal, idRange: (low: String, high: String)? = nil,
                            designOnly: Bool = false, limit maximum: Int? = nil) async throws -> ViewResponse {
        if original.method == .post, case .object(let body) = try original.jsonBody(), let keys = body["keys"], keys.arrayValue == nil {
            throw CouchError.badRequest("`keys` body member must be an array.")
        }
        var request = try original.withBodyParameters()
        var idRange = idRange, maximum = maximum
        if let partition = request.query["partition"], idRange == nil {
            // `_all_docs?partition=p` is the partition's `_all_docs`, in a partitioned database only.
            guard Partition.current else {
                throw CouchError(.badRequest, "query_parse_error", "`partition` parameter is not supported on this db")
            }
            try Partition.validate(partition: partition)
            idRange = Partition.range(partition)
            maximum = partitionQueryLimit
        }
        if let maximum {
            if let limit = try request.int("limit"), limit > maximum {
                throw CouchError(.badRequest, "query_parse_error", "Limit is too large, must not exceed \(maximum)")
            }
            if request.query["limit"] == nil { request.query["limit"] = String(maximum) }
        }
        try request.checkViewParametersInOrder()
        var query = AllDocumentsQuery()
        (query.startKey, query.endKey) = try request.idBounds()
        query.inclusiveEnd = try request.bool("inclusive_end", default: true)
        query.descending = try request.bool("descending")
        query.limit = try request.int("limit")
        query.skip = try request.int("skip") ?? 0
        if let (low, high) = idRange {
            // Design document ids sort between "_design/" and "_design0", a partition's between "p:"
            // and "p;": none of them an id.
            if query.descending {
                query.startKey = min(query.startKey ?? high, high)
                query.endKey = max(query.endKey ?? low, low)
            } else {
                query.startKey = max(query.startKey ?? low, low)
                query.endKey = min(query.endKey ?? high, high)
            }
        }
        let includeDocuments = try request.bool("include_docs")
        // Checked with or without `include_docs`, as CouchDB does.
        _ = try DocumentOptions(includedDocuments: { try request.bool($0) })
        let keys: [JSON]? = try request.json("keys").map { list in
            guard let array = list.arrayValue else { throw CouchError.badRequest("`keys` parameter must be an array.") }
            return array
        }
        try Self.refuseKeysWithKeyOrRange(request, keys: keys)
        // A key that is not a string stands in the query as an id no document can have.
        var standIns: [String: JSON] = [:]
        if let keys {
            query.keys = keys.enumerated().map { index, key in
                if let text = key.stringValue { return text }
                let standIn = "_\u{0}\(index)"
                standIns[standIn] = key
                return standIn
            }
        }
        let filtering = !principal.readsEverything
        query.includeDocuments = includeDocuments || filtering
        let result = try await db.allDocuments(query)
        var answer = ViewResponse(result, includeDocuments: includeDocuments)
        if !standIns.isEmpty {
            for index in answer.rows.indices {
                if case .string(let key) = answer.rows[index].key, let original = standIns[key] { answer.rows[index].key = original }
            }
        }
        if designOnly { answer.totalRows = try await designDocumentCount(db) }
        if try request.bool("update_seq") {
            // CouchDB 3.3.3 gives `null` for a `keys` query.
            answer.updateSequence = query.keys == nil ? CouchSequence.json(await db.updateSequence) : .null
        }
        if filtering {
            answer.rows = zip(result.rows, answer.rows).compactMap { row, json in
                if let document = row.document, !principal.canRead(document) { return nil }
                if row.document == nil, row.error == nil, !row.isDeleted { return nil }
                return json
            }
        }
        if includeDocuments { try await refineIncludedDocuments(of: &answer, db, request) }
        return answer
    }

    /// How many design documents `db` has: the rows of `_all_docs` between "_design/" and "_design0".
    private func designDocumentCount(_ db: Database) async throws -> Int {
        func before(_ id: String) async throws -> Int {
            var query = AllDocumentsQuery()
            query.startKey = id
            query.limit = 0
            return try await db.allDocuments(query).offset ?? 0
        }
        return try await before("_design0") - before("_design/")
    }

    /// CouchDB's `conflicts`, `attachments` and `att_encoding_info` with `include_docs`: each included
    /// document read again with them.
    func refineIncludedDocuments(of answer: inout ViewResponse, _ db: Database, _ request: CouchRequest) async throws {
        guard let options = try DocumentOptions(includedDocuments: { try request.bool($0) }) else { return }
        for index in answer.rows.indices {
            guard case .object(let members)? = answer.rows[index].document, let id = members["_id"]?.stringValue else { continue }
            let revision = members["_rev"]?.stringValue.flatMap(RevisionID.init)
            if let document = try await db.document(withID: id, revision: revision) {
                answer.rows[index].document = try await includedDocument(document, in: db, options)
            }
        }
    }

    /// `POST /{db}/_revs_diff`: `{"id": ["rev", …]}` → the revisions this database lacks.
    func revisionsDiff(_ db: Database, _ request: CouchRequest, principal: Principal) async throws -> Response {
        guard request.method == .post else { throw CouchError.methodNotAllowed }
        try request.requireJSONContentType()
        let body = try RevsDiff.Request(json: .object(try request.jsonObjectBody()))
        let differences = try await db.missingRevisions(body.offered.map { ($0.id, $0.revisions) })
        return Response.json(RevsDiff.Response(differences).json)
    }

    /// `POST /{db}/_missing_revs`: `{"id": ["rev", …]}` → `{"missing_revs": {"id": [missing, …]}}`, the
    /// older form of `_revs_diff` (without possible ancestors) that CouchDB 3.3 still answers.
    func missingRevisions(_ db: Database, _ request: CouchRequest) async throws -> Response {
        guard request.method == .post else { throw CouchError.methodNotAllowed }
        try request.requireJSONContentType()
        let body = try RevsDiff.Request(json: .object(try request.jsonObjectBody()))
        let differences = try await db.missingRevisions(body.offered.map { ($0.id, $0.revisions) })
        return Response.json(RevsDiff.Response(differences).missingRevisionsJSON)
    }
}
