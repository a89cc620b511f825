import CouchProtocol
import DocStore
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

extension DocServer {
    // MARK: Access checks

    /// Throws 403 unless `principal` may read `document`.
    func checkRead(_ document: Document, _ principal: Principal) throws {
        guard principal.canRead(document) else {
            throw CouchError.forbidden("You are not allowed to access this document (channels \(principal.channels(of: document))).")
        }
    }

    /// Throws 403 unless `principal` may write `document`, and may write the revision it replaces.
    /// A `_replicator` document written as an edit (not `replicated`) is checked as CouchDB checks it
    /// and gains an `owner`.
    func checkWrite(_ document: inout Document, in db: Database, _ principal: Principal, replicated: Bool = false) async throws {
        if db.name == ReplicationScheduler.databaseName, !replicated {
            try admitReplicationDocument(&document, principal)
        }
        if document.id.hasPrefix("_design/"), !principal.isDatabaseAdmin { throw CouchError.designDocumentsNeedAdmin }
        guard !principal.isAdmin else { return }
        guard principal.canWrite(document) else {
            throw CouchError.forbidden("You are not allowed to write to channels \(principal.channels(of: document)).")
        }
        if document.hasID, let current = try await db.document(withID: document.id), !principal.canWrite(current) {
            throw CouchError.forbidden("You are not allowed to change a document in channels \(principal.channels(of: current)).")
        }
    }

    /// CouchDB's rules for a `_replicator` document: it must describe a replication (but for a
    /// deletion, a design document, or one marked `failed`) — else 403 with CouchDB's reason — and it
    /// gets its writer as `owner` when it has none.
    private func admitReplicationDocument(_ document: inout Document, _ principal: Principal) throws {
        guard !document.isDeleted, !document.id.hasPrefix("_design/") else { return }
        if document["owner"] == nil || document["owner"] == .null, let name = principal.name {
            document["owner"] = .string(name)
        } else if !principal.isAdmin, document["owner"]?.stringValue != principal.name {
            // Where admins open `_replicator` to members: nobody writes in another's name.
            throw CouchError.forbidden("Can't update replication documents from other users.")
        }
        guard document["_replication_state"] != "failed" else { return }
        let request: ReplicationRequest
        do {
            request = try ReplicationRequest(document.body)
        } catch {
            throw CouchError.forbidden(error.documentReason)
        }
        // A job runs with the server's rights: only admins may name this server's databases directly
        // (members give URLs with their own credentials, as CouchDB requires of everyone).
        if !principal.isAdmin, [request.source, request.target].contains(where: { if case .local = $0 { true } else { false } }) {
            throw CouchError.forbidden("local_endpoints_not_supported")
        }
    }

    // MARK: /{db}/{docid}

    func documentRoute(_ db: Database, id: String, _ request: CouchRequest, principal: Principal) async throws -> Response {
        if Partition.current {
            // A partitioned database reads ids of any form (404 for those it cannot have) but one
            // without a partition; it writes only well-formed ones.
            if [.get, .head].contains(request.method) {
                try Partition.checkHasPartition(id)
            } else {
                try Partition.check(id)
            }
        }
        switch request.method {
        case .get, .head: return try await getDocument(db, id: id, request, principal: principal)
        case .put: return try await putDocument(db, id: id, request, principal: principal)
        case .delete:
            // As CouchDB: a missing or deleted document is 404 whatever the revision says; a live one
            // without a revision 409.
            guard let tree = try await db.revisionTree(ofDocumentWithID: id) else { throw CouchError.notFound("missing") }
            if tree.winner?.isDeleted ?? true { throw CouchError.notFound("deleted") }
            guard let text = request.query["rev"] ?? request.header(.ifMatch)?.trimmingCharacters(in: CharacterSet(charactersIn: "\"")) else {
                throw CouchError(.conflict, "conflict", "Document update conflict.")
            }
            let revision = try parseRevision(text)
            if id.hasPrefix("_design/"), !principal.isDatabaseAdmin { throw CouchError.designDocumentsNeedAdmin }
            if !principal.isAdmin {
                guard let current = try await db.document(withID: id, revision: revision) else { throw CouchError.notFound() }
                guard principal.canWrite(current) else { throw CouchError.forbidden("You are not allowed to delete this document.") }
            }
            let deleted = try await db.delete(id: id, revision: revision)
            return Response.json(WriteResult(id: id, revision: deleted.description).json, headers: [.eTag: "\"\(deleted)\""])
        case DocServer.copy:
            return try await copyDocument(db, id: id, request, principal: principal)
        case .post:
            return try await formUpload(db, id: id, request, principal: principal)
        default:
            throw CouchError.methodNotAllowed
        }
    }

    static let copy = HTTPRequest.Method("COPY")!

    /// `COPY /db/doc` with `Destination: id` (or `id?rev=…` to overwrite that revision): the document (or
    /// its revision `?rev=`), attachments included, saved under another id, as CouchDB 3.3.3 answers it.
    private func copyDocument(_ db: Database, id: String, _ request: CouchRequest, principal: Principal) async throws -> Response {
        guard let destination = request.header(HTTPField.Name("Destination")!) else {
            throw CouchError.badRequest("Destination header is mandatory for COPY.")
        }
        guard !destination.contains("://") else { throw CouchError.badRequest("Destination URL must be relative.") }
        let parts = destination.split(separator: "?", maxSplits: 1)
        guard let target = parts.first.flatMap({ String($0).removingPercentEncoding }), !target.isEmpty else {
            throw CouchError.badRequest("Destination header is mandatory for COPY.")
        }
        try Partition.check(target)
        var targetRevision: RevisionID?
        if parts.count == 2 {
            let query = try CouchRequest(method: .get, path: "/", rawQuery: String(parts[1]), headers: [:], body: [])
            targetRevision = try query.query["rev"].map(parseRevision)
        }
        let revision = try request.query["rev"].map(parseRevision)
        guard let source = try await db.document(withID: id, revision: revision), revision != nil || !source.isDeleted else {
            var deleted = false
            if revision == nil { deleted = try await db.revisionTree(ofDocumentWithID: id) != nil }
            throw CouchError.notFound(deleted ? "deleted" : "missing")
        }
        try checkRead(source, principal)
        do {
            try DocumentValidation.validateID(target, allowDesign: true)
        } catch let error as DocStoreError {
            throw CouchError(error)
        }
        var json = source.json()
        json["_id"] = .string(target)
        json["_rev"] = targetRevision.map { .string($0.description) }
        var copy = try Document(couchJSON: json)
        // The copy's attachments are new to its history: their contents go with them.
        copy.attachments = try source.attachments.mapValues { try db.loadingContent(of: $0) }
        try await checkWrite(&copy, in: db, principal)
        let saved = try await db.put(copy)
        return Response.json(WriteResult(written: saved).json, status: .created,
                             headers: [.eTag: "\"\(saved.revision!)\"", .location: request.location(db.name, target)])
    }

    /// `POST /db/doc` with an HTML form (`multipart/form-data`): its `_attachments` file fields added to
    /// the document at its `_rev` field, as CouchDB takes them. Like CouchDB it wants a `Referer` (400
    /// without) and a form (415 for anything else).
    private func formUpload(_ db: Database, id: String, _ request: CouchRequest, principal: Principal) async throws -> Response {
        guard request.header(HTTPField.Name("Referer")!) != nil else { throw CouchError.badRequest("Referer header required.") }
        let type = request.header(.contentType) ?? ""
        guard Multipart.mediaType(of: type) == "multipart/form-data", let boundary = Multipart.boundary(from: type) else {
            throw CouchError(.unsupportedMediaType, "bad_content_type", "Content-Type must be multipart/form-data")
        }
        let parts: [(headers: MultipartHeaders, body: [UInt8])]
        do {
            parts = try Multipart.parse(request.body, boundary: boundary)
        } catch let error as DocStoreError {
            throw CouchError(error)
        }
        func field(_ headers: MultipartHeaders) -> String? {
            guard let disposition = headers["Content-Disposition"], let range = disposition.range(of: "name=\"") else { return nil }
            return String(disposition[range.upperBound...].prefix { $0 != "\"" })
        }
        var document = try await db.document(withID: id) ?? Document(id: id)
        if let revisionPart = parts.first(where: { field($0.headers) == "_rev" }) {
            let given = try parseRevision(String(decoding: revisionPart.body, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
            guard given == document.revision else { throw CouchError(.conflict, "conflict", "Document update conflict.") }
        }
        for part in parts where field(part.headers) == "_attachments" {
            guard let name = part.headers.filename, !name.isEmpty else { continue }
            do {
                try Attachment.checkName(name)
            } catch let error as DocStoreError {
                throw CouchError(error)
            }
            document.attachments[name] = Attachment(data: Data(part.body), contentType: part.headers["Content-Type"] ?? "application/octet-stream")
        }
        compressAttachments(of: &document)
        try await checkWrite(&document, in: db, principal)
        let saved = try await db.put(document)
        return Response.json(WriteResult(written: saved).json, status: .created, headers: [.eTag: "\"\(saved.revision!)\""])
    }

    /// `?batch=ok`: CouchDB answers 202 `{"ok": true, "id": …}` at once and writes later, so that the
    /// client learns nothing of how the write went. DocServer writes before answering, and answers the same.
    private func batchAnswer(id: String, _ write: () async throws -> Void) async -> Response {
        do {
            try await write()
        } catch {
            logger.debug("batch=ok write of \(id) failed: \(error)")
        }
        return Response.json(["ok": true, "id": .string(id)], status: .accepted)
    }

    /// A `rev` to read: `nil` for one CouchDB reads but no database holds (`0-a`, missing), else as
    /// ``parseRevision(_:)``.
    func revisionToRead(_ text: String) throws -> RevisionID? {
        if !RevisionID.isReadableByCouchDB(text) { throw CouchError.badRequest("Invalid rev format") }
        return RevisionID.readAsCouchDB(text)
    }

    func parseRevision(_ text: String) throws -> RevisionID {
        guard let revision = RevisionID.readAsCouchDB(text) else {
            throw CouchError.badRequest("Invalid rev format")
        }
        return revision
    }

    /// `GET /db/doc`: the winner or a given revision, as JSON — or with `attachments=true` (or
    /// `atts_since`) as `multipart/related` when the client accepts it, attachments after the JSON.
    private func getDocument(_ db: Database, id: String, _ request: CouchRequest, principal: Principal) async throws -> Response {
        var options = try DocumentOptions(request)
        // As CouchDB, `rev` must be a revision even where `open_revs` makes it unused; one that no
        // database holds (`0-a`) is missing.
        let revisionText = request.query["rev"]
        var revision = try revisionText.flatMap(revisionToRead)
        // `open_revs=[]` is CouchDB's plain read.
        if let openRevs = request.query["open_revs"], openRevs.filter({ !$0.isWhitespace }) != "[]" {
            // As CouchDB 3.3.3, `atts_since` does not thin an `open_revs` answer: every attachment's
            // bytes follow each revision (its replicator, which sends it, counts on nothing less).
            var options = options.forARevision
            options.attsSince = []
            return try await openRevisions(db, id: id, openRevs, options, request, principal: principal)
        }
        // atts_since alone asks for attachments, as in CouchDB (an empty list for all of them).
        if request.query["atts_since"] != nil { (options.attachments, options.attsSinceGiven) = (true, true) }
        // CouchDB 3.3.3 answers a single read with `latest=true` with the winner, whatever `rev` says.
        if options.latest {
            revision = nil
        } else if revisionText != nil && revision == nil {
            throw CouchError.notFound("missing")
        }
        if revision != nil { options = options.forARevision }
        guard let document = try await db.document(withID: id, revision: revision,
                                                   includeRevisionHistory: options.revs || options.attachments) else {
            let tree = try await db.revisionTree(ofDocumentWithID: id)
            throw CouchError.notFound(tree != nil && revision == nil ? "deleted" : "missing")
        }
        try checkRead(document, principal)
        let etag = "\"\(document.revision!)\""
        // As CouchDB, an answer that carries members of the revision tree (`_revs_info`, or a
        // `_conflicts` or `_deleted_conflicts` that is there) or `_local_seq` has no ETag and is never
        // 304: they change while the revision stays.
        var fromTree = options.revsInfo || options.localSequence
        if !fromTree, options.conflicts || options.deletedConflicts, let tree = try await db.revisionTree(ofDocumentWithID: id) {
            fromTree = (options.conflicts && !tree.conflicts.isEmpty) || (options.deletedConflicts && !tree.deletedConflicts.isEmpty)
        }
        if !fromTree, request.ifNoneMatch(etag) {
            return Response(status: .notModified, headers: [.eTag: etag])
        }
        var headers = HTTPFields()
        if !fromTree { headers[.eTag] = etag }
        let multipart = options.attachments && request.accepts("multipart/related")
        let answer = try await self.answer(for: document, in: db, options, withData: options.attachments, multipart: multipart)
        guard multipart, !answer.following.isEmpty else {
            return Response.json(answer.json, headers: headers)
        }
        let boundary = Multipart.makeBoundary()
        var body = MultipartBody()
        answer.appendRelated(to: &body, boundary: boundary)
        headers[.contentType] = "multipart/related; boundary=\"\(boundary)\""
        return Response(status: .ok, headers: headers, body: request.isHead ? ResponseBody() : body.responseBody(db))
    }

    /// The leaves of `tree` whose history contains `revision`, best first (CouchDB's rank).
    func leaves(descendingFrom revision: RevisionID, in tree: RevisionTree) -> [RevisionID] {
        tree.rankedLeaves.map(\.revision).filter { tree.history(of: $0).contains(revision) }
    }

    /// `GET /db/doc?open_revs=all|[…]`: the requested revisions, each complete — as `multipart/mixed`
    /// (every attachment's bytes following each leaf) when the client accepts it, else as JSON.
    private func openRevisions(_ db: Database, id: String, _ openRevs: String, _ options: DocumentOptions,
                               _ request: CouchRequest, principal: Principal) async throws -> Response {
        // As CouchDB 3.3.3: "all", or a JSON array of revisions; each revision asked for of a document
        // that is not there is `missing`, as is one CouchDB reads but no database holds (`0-a`).
        var requested: [(text: String, revision: RevisionID?)] = []
        if openRevs != "all" {
            let parsed: JSON
            do { parsed = try JSON(parsing: openRevs) } catch { throw CouchError.badRequest("invalid UTF-8 JSON") }
            guard case .array(let list) = parsed else { throw CouchError.badRequest("Invalid list of revisions") }
            for value in list {
                guard let text = value.stringValue, RevisionID.isReadableByCouchDB(text) else { throw CouchError.badRequest("Invalid rev format") }
                requested.append((text, RevisionID.readAsCouchDB(text)))
            }
        }
        guard let tree = try await db.revisionTree(ofDocumentWithID: id) else {
            if openRevs == "all" { throw CouchError.notFound() }
            return try await openRevisionsResponse(db, [], missing: RevisionID.couchDBOrdered(requested.map(\.text)), options, request)
        }
        var wanted: [RevisionID] = []
        var missing: [String] = []
        if openRevs == "all" {
            wanted = tree.leaves.map(\.revision)
        } else {
            for (text, revision) in requested {
                guard let revision, tree.contains(revision) else {
                    missing.append(text)
                    continue
                }
                if options.latest && !tree.isLeaf(revision) {
                    wanted += leaves(descendingFrom: revision, in: tree)
                } else {
                    wanted.append(revision)
                }
            }
        }
        // As CouchDB 3.3.3: each revision once, in ascending order (generation, then hash), then the
        // missing ones, ordered alike.
        var found: [Document] = []
        for revision in Set(wanted).sorted() {
            guard let document = try await db.document(withID: id, revision: revision, includeRevisionHistory: true) else {
                missing.append(revision.description)
                continue
            }
            guard principal.canRead(document) else { continue }
            found.append(document)
        }
        return try await openRevisionsResponse(db, found, missing: RevisionID.couchDBOrdered(missing), options, request)
    }

    func openRevisionsResponse(_ db: Database, _ found: [Document], missing: [String], _ options: DocumentOptions,
                                       _ request: CouchRequest) async throws -> Response {
        guard request.accepts("multipart/mixed") else {
            var rows: [OpenRevsEntry] = []
            for document in found {
                rows.append(.ok(try await answer(for: document, in: db, options, withData: options.attachments, multipart: false).json))
            }
            rows += missing.map(OpenRevsEntry.missing)
            return Response.json(.array(rows.map(\.json)))
        }
        let boundary = Multipart.makeBoundary()
        let inner = Multipart.makeBoundary()
        var body = MultipartBody()
        for (index, document) in found.enumerated() {
            let answer = try await self.answer(for: document, in: db, options, withData: true, multipart: true)
            if answer.following.isEmpty {
                body.append(Multipart.partHeader(boundary: boundary, headers: [("Content-Type", "application/json")], first: index == 0))
                body.append((try? answer.json.serialized()) ?? [])
            } else {
                body.append(Multipart.partHeader(boundary: boundary, headers: [("Content-Type", "multipart/related; boundary=\"\(inner)\"")],
                                                 first: index == 0))
                answer.appendRelated(to: &body, boundary: inner)
            }
        }
        for (index, revision) in missing.enumerated() {
            body.append(Multipart.partHeader(boundary: boundary, headers: [("Content-Type", "application/json; error=\"true\"")],
                                             first: found.isEmpty && index == 0))
            body.append((try? OpenRevsEntry.missing(revision).json.serialized()) ?? [])
        }
        if found.isEmpty && missing.isEmpty {
            body.append(Array("--\(boundary)--".utf8))
        } else {
            body.append(Multipart.closing(boundary: boundary))
        }
        return Response(status: .ok, headers: [.contentType: "multipart/mixed; boundary=\"\(boundary)\""],
                        body: body.responseBody(db))
    }

    /// `PUT /db/doc`: a new revision (or with `new_edits=false` a replicated one), from JSON or a
    /// multipart document.
    private func putDocument(_ db: Database, id: String, _ request: CouchRequest, principal: Principal) async throws -> Response {
        var document = try await documentFromBody(request, db: db)
        if try request.bool("new_edits", default: true) { compressAttachments(of: &document) }
        if let given = document.revision, let etag = request.header(.ifMatch)?.trimmingCharacters(in: CharacterSet(charactersIn: "\"")),
            etag != given.description {
            throw CouchError.badRequest("Document rev and etag have different values")
        }
        // As CouchDB, the URL names the document; an `_id` in the body is not looked at.
        document.id = id
        if let given = document.revision, let query = request.query["rev"], query != given.description {
            throw CouchError.badRequest("Document rev from request body and query string have different values")
        }
        if document.revision == nil, let text = request.query["rev"] ?? request.header(.ifMatch)?.trimmingCharacters(in: CharacterSet(charactersIn: "\"")) {
            var json = document.json()
            json["_rev"] = .string(text)
            document = try Document(couchJSON: json).with(attachmentsOf: document)
        }
        let newEdits = try request.bool("new_edits", default: true)
        if newEdits, request.query["batch"] == "ok" {
            return await batchAnswer(id: id) { [document] in
                var document = document
                try await checkWrite(&document, in: db, principal)
                _ = try await db.put(document)
            }
        }
        try await checkWrite(&document, in: db, principal, replicated: !newEdits)
        if !newEdits {
            guard document.revision != nil else {
                throw CouchError.badRequest("When `new_edits: false`, the document needs `_rev` or `_revisions` specified")
            }
            let result = try await db.insertRevisions([document])[0]
            if let error = result.error { throw CouchError(error) }
            return Response.json(WriteResult(written: document).json, status: document.isDeleted ? .ok : .created,
                                 headers: [.eTag: "\"\(document.revision!)\""])
        }
        if let refusal = try await partitionOverflows([document], in: db)[0] { throw refusal }
        let saved = try await db.put(document)
        // As CouchDB, a deletion written by PUT is a 200.
        return Response.json(WriteResult(written: saved).json, status: saved.isDeleted ? .ok : .created,
                             headers: [.eTag: "\"\(saved.revision!)\"", .location: request.location(db.name, id)])
    }

    /// `POST /{db}`: a new document, id from the body or generated.
    func createDocument(_ db: Database, _ request: CouchRequest, principal: Principal) async throws -> Response {
        if request.bodyStream == nil { try request.requireJSONContentType() }
        if request.bodyStream == nil, request.body.firstRange(of: Array(#""_local/"#.utf8)) != nil,
            case .string(let id)? = try request.jsonObjectBody()["_id"], id.hasPrefix("_local/") {
            let write = try LocalDocumentWrite(id: id, json: try request.jsonObjectBody())
            return Response.json(try await self.write(write, in: db, for: principal).json, status: .created)
        }
        var document = try await documentFromBody(request, db: db)
        compressAttachments(of: &document)
        if request.query["batch"] == "ok" {
            if !document.hasID { document.id = newUUID() }
            return await batchAnswer(id: document.id) { [document] in
                var document = document
                try await checkWrite(&document, in: db, principal)
                _ = try await db.put(document)
            }
        }
        if !document.hasID { document.id = newUUID() }
        try Partition.check(document.id)
        try await checkWrite(&document, in: db, principal)
        if let refusal = try await partitionOverflows([document], in: db)[0] { throw refusal }
        let saved = try await db.put(document)
        return Response.json(WriteResult(written: saved).json, status: .created, headers: [.location: request.location(db.name, saved.id)])
    }
}

extension Document {
    /// This document with the attachments (and their contents) of `other`.
    func with(attachmentsOf other: Document) -> Document {
        var copy = self
        copy.attachments = other.attachments
        return copy
    }
}
