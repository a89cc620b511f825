import DocStore
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

extension DocServer {
    // MARK: Access checks

    /// Throws 403 unless `principal` may read `document`.
    func checkRead(_ document: Document, _ principal: Principal) throws {
        guard principal.canRead(document.channels) else {
            throw CouchError.forbidden("You are not allowed to access this document (channels \(document.channels)).")
        }
    }

    /// Throws 403 unless `principal` may write `document`, and may write the revision it replaces.
    func checkWrite(_ document: Document, in db: Database, _ principal: Principal) async throws {
        guard !principal.isAdmin else { return }
        guard principal.canWrite(document.channels) else {
            throw CouchError.forbidden("You are not allowed to write to channels \(document.channels).")
        }
        if document.hasID, let current = try await db.document(withID: document.id), !principal.canWrite(current.channels) {
            throw CouchError.forbidden("You are not allowed to change a document in channels \(current.channels).")
        }
    }

    // MARK: /{db}/{docid}

    func documentRoute(_ db: Database, id: String, _ request: CouchRequest, principal: Principal) async throws -> Response {
        switch request.method {
        case .get, .head: return try await getDocument(db, id: id, request, principal: principal)
        case .put: return try await putDocument(db, id: id, request, principal: principal)
        case .delete:
            guard let text = request.query["rev"] ?? request.header(.ifMatch)?.trimmingCharacters(in: CharacterSet(charactersIn: "\"")) else {
                throw CouchError(.conflict, "conflict", "Document update conflict.")
            }
            let revision = try parseRevision(text)
            if !principal.isAdmin {
                guard let current = try await db.document(withID: id, revision: revision) else { throw CouchError.notFound() }
                guard principal.canWrite(current.channels) else { throw CouchError.forbidden("You are not allowed to delete this document.") }
            }
            let tombstone = try await db.delete(id: id, revision: revision)
            return Response.json(tombstone.writeResultJSON, headers: [.eTag: "\"\(tombstone.revision!)\""])
        default:
            throw CouchError.methodNotAllowed
        }
    }

    func parseRevision(_ text: String) throws -> RevisionID {
        guard let revision = RevisionID(text) else {
            throw CouchError.badRequest("Invalid rev format")
        }
        return revision
    }

    /// Options that shape a document's JSON, from the query string.
    struct DocumentOptions {
        var revs = false
        var revsInfo = false
        var conflicts = false
        var deletedConflicts = false
        var attachments = false
        var attsSince: [RevisionID] = []
        var latest = false

        init(_ request: CouchRequest) throws {
            revs = try request.bool("revs")
            revsInfo = try request.bool("revs_info")
            conflicts = try request.bool("conflicts")
            deletedConflicts = try request.bool("deleted_conflicts")
            attachments = try request.bool("attachments")
            latest = try request.bool("latest")
            if let since = try request.json("atts_since") {
                guard let list = since.arrayValue else { throw CouchError.badRequest("atts_since must be a JSON array") }
                attsSince = try list.map { value in
                    guard let text = value.stringValue, let revision = RevisionID(text) else {
                        throw CouchError.badRequest("Invalid rev in atts_since")
                    }
                    return revision
                }
            }
        }

        init() {}
    }

    /// A document's CouchDB JSON with the requested extras.
    func documentJSON(_ db: Database, _ document: Document, _ options: DocumentOptions) async throws -> JSON {
        var document = document
        var withData = false
        if options.attachments, !document.attachments.isEmpty {
            let history = [document.revision].compactMap { $0 } + (document.revisionHistory ?? [])
            let knownGeneration = options.attsSince.filter { history.contains($0) }.map(\.generation).max() ?? 0
            withData = true
            for (name, attachment) in document.attachments {
                guard (attachment.revpos ?? Int.max) > knownGeneration else { continue }
                document.attachments[name] = try db.loadingContent(of: attachment)
            }
        }
        var json = document.json(attachmentData: withData, revisions: options.revs && document.revisionHistory != nil)
        if (options.conflicts || options.deletedConflicts || options.revsInfo), let tree = try await db.revisionTree(ofDocumentWithID: document.id) {
            if options.conflicts, !tree.conflicts.isEmpty { json["_conflicts"] = JSON(tree.conflicts.map(\.description)) }
            if options.deletedConflicts, !tree.deletedConflicts.isEmpty {
                json["_deleted_conflicts"] = JSON(tree.deletedConflicts.map(\.description))
            }
            if options.revsInfo, let revision = document.revision {
                var info: [JSON] = []
                for ancestor in tree.history(of: revision) {
                    let status: String
                    if tree.isDeleted(ancestor) {
                        status = "deleted"
                    } else if ancestor == revision {
                        status = "available"
                    } else {
                        status = try await db.document(withID: document.id, revision: ancestor) == nil ? "missing" : "available"
                    }
                    info.append(["rev": .string(ancestor.description), "status": .string(status)])
                }
                json["_revs_info"] = .array(info)
            }
        }
        return json
    }

    private func getDocument(_ db: Database, id: String, _ request: CouchRequest, principal: Principal) async throws -> Response {
        let options = try DocumentOptions(request)
        if let openRevs = request.query["open_revs"] {
            return try await openRevisions(db, id: id, openRevs, options, request, principal: principal)
        }
        var revision = try request.query["rev"].map(parseRevision)
        if options.latest, let requested = revision, let tree = try await db.revisionTree(ofDocumentWithID: id),
            !tree.isLeaf(requested) {
            revision = leaves(descendingFrom: requested, in: tree).first
        }
        guard let document = try await db.document(withID: id, revision: revision,
                                                   includeRevisionHistory: options.revs || options.attachments) else {
            let tree = try await db.revisionTree(ofDocumentWithID: id)
            throw CouchError.notFound(tree != nil && revision == nil ? "deleted" : "missing")
        }
        try checkRead(document, principal)
        let json = try await documentJSON(db, document, options)
        return Response.json(json, headers: [.eTag: "\"\(document.revision!)\""])
    }

    /// The leaves of `tree` whose history contains `revision`, best first.
    func leaves(descendingFrom revision: RevisionID, in tree: RevisionTree) -> [RevisionID] {
        tree.rankedLeaves.map(\.revision).filter { tree.history(of: $0).contains(revision) }
    }

    /// `GET /db/doc?open_revs=all|[…]`: the requested leaf revisions, as JSON or multipart/mixed.
    private func openRevisions(_ db: Database, id: String, _ openRevs: String, _ options: DocumentOptions,
                               _ request: CouchRequest, principal: Principal) async throws -> Response {
        guard let tree = try await db.revisionTree(ofDocumentWithID: id) else {
            if openRevs == "all" { throw CouchError.notFound() }
            return try openRevisionsResponse([], missing: [], request)
        }
        var wanted: [RevisionID] = []
        var missing: [String] = []
        if openRevs == "all" {
            wanted = tree.leaves.map(\.revision)
        } else {
            guard case .array(let list)? = try? JSON(parsing: openRevs) else {
                throw CouchError.badRequest("open_revs must be \"all\" or a JSON array of revisions")
            }
            for value in list {
                guard let text = value.stringValue, let revision = RevisionID(text) else {
                    throw CouchError.badRequest("Invalid rev in open_revs")
                }
                if !tree.contains(revision) {
                    missing.append(text)
                } else if options.latest && !tree.isLeaf(revision) {
                    wanted += leaves(descendingFrom: revision, in: tree)
                } else {
                    wanted.append(revision)
                }
            }
        }
        var found: [JSON] = []
        var seen = Set<RevisionID>()
        for revision in wanted where seen.insert(revision).inserted {
            guard let document = try await db.document(withID: id, revision: revision, includeRevisionHistory: true) else {
                missing.append(revision.description)
                continue
            }
            guard principal.canRead(document.channels) else { continue }
            found.append(try await documentJSON(db, document, options))
        }
        return try openRevisionsResponse(found, missing: missing, request)
    }

    private func openRevisionsResponse(_ found: [JSON], missing: [String], _ request: CouchRequest) throws -> Response {
        if request.accepts("multipart/mixed") {
            let boundary = UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
            var parts: [(headers: [(String, String)], body: [UInt8])] = found.map { doc in
                ([("Content-Type", "application/json")], (try? doc.serialized()) ?? [])
            }
            for revision in missing {
                parts.append(([("Content-Type", "application/json; error=\"true\"")], Array(#"{"missing":"\#(revision)"}"#.utf8)))
            }
            let body = Multipart.encode(parts: parts, boundary: boundary)
            return Response(status: .ok, headers: [.contentType: "multipart/mixed; boundary=\"\(boundary)\""],
                            body: ResponseBody(byteBuffer: ByteBuffer(bytes: body)))
        }
        let rows = found.map { JSON.object(["ok": $0]) } + missing.map { JSON.object(["missing": .string($0)]) }
        return Response.json(.array(rows))
    }

    /// Reads a document from a request body: JSON, or `multipart/related` whose first part is the JSON
    /// and whose next parts are the attachments marked `"follows": true`, in order.
    func documentFromBody(_ request: CouchRequest) throws -> Document {
        let type = request.header(.contentType) ?? "application/json"
        guard type.lowercased().hasPrefix("multipart/related") else {
            do {
                return try Document(json: try request.jsonBody())
            } catch let error as DocStoreError {
                throw CouchError(error)
            }
        }
        guard let boundary = Multipart.boundary(from: type) else { throw CouchError.badRequest("multipart body without boundary") }
        let parts = try Multipart.parse(request.body, boundary: boundary)
        guard let first = parts.first, case .object(var object) = try? JSON(parsing: first.body) else {
            throw CouchError.badRequest("The first part of a multipart document must be its JSON")
        }
        var following: [(String, JSONObject)] = []
        if case .object(var stubs)? = object["_attachments"] {
            for (name, stub) in stubs {
                if case .object(let meta) = stub, meta["follows"]?.boolValue == true {
                    following.append((name, meta))
                    stubs.removeValue(forKey: name)
                }
            }
            object["_attachments"] = stubs.isEmpty ? nil : .object(stubs)
        }
        guard parts.count - 1 == following.count else {
            throw CouchError.badRequest("Expected \(following.count) attachment parts, got \(parts.count - 1)")
        }
        var document: Document
        do {
            document = try Document(json: .object(object))
        } catch let error as DocStoreError {
            throw CouchError(error)
        }
        for ((name, meta), part) in zip(following, parts.dropFirst()) {
            let data = Data(part.body)
            if let length = meta["length"]?.intValue, meta["encoding"] == nil, length != data.count {
                throw CouchError.badRequest("Attachment \(name) has \(data.count) bytes, expected \(length)")
            }
            let contentType = meta["content_type"]?.stringValue ?? part.header("content-type") ?? "application/octet-stream"
            document.attachments[name] = try Attachment(encodedData: data, encoding: meta["encoding"] == "gzip" ? .gzip : .identity,
                                                        contentType: contentType, digest: meta["digest"]?.stringValue,
                                                        revpos: meta["revpos"]?.intValue)
        }
        return document
    }

    private func putDocument(_ db: Database, id: String, _ request: CouchRequest, principal: Principal) async throws -> Response {
        var document = try documentFromBody(request)
        if document.hasID, document.id != id {
            throw CouchError.badRequest("Document id in the body does not match the URL")
        }
        document.id = id
        if document.revision == nil, let text = request.query["rev"] ?? request.header(.ifMatch)?.trimmingCharacters(in: CharacterSet(charactersIn: "\"")) {
            var json = document.json()
            json["_rev"] = .string(text)
            document = try Document(json: json).with(attachmentsOf: document)
        }
        try await checkWrite(document, in: db, principal)
        if try !request.bool("new_edits", default: true) {
            guard document.revision != nil else { throw CouchError.badRequest("new_edits=false needs a _rev") }
            let result = try await db.insertRevisions([document])[0]
            if let error = result.error { throw CouchError(error) }
            return Response.json(["ok": true, "id": .string(id), "rev": .string(document.revision!.description)], status: .created)
        }
        let saved = try await db.save(document)
        return Response.json(saved.writeResultJSON, status: .created,
                             headers: [.eTag: "\"\(saved.revision!)\"", .location: "/\(db.name)/\(id)"])
    }

    /// `POST /{db}`: a new document, id from the body or generated.
    func createDocument(_ db: Database, _ request: CouchRequest, principal: Principal) async throws -> Response {
        let document = try documentFromBody(request)
        try await checkWrite(document, in: db, principal)
        let saved = try await db.save(document)
        return Response.json(saved.writeResultJSON, status: .created, headers: [.location: "/\(db.name)/\(saved.id)"])
    }

    // MARK: Attachments

    func attachmentRoute(_ db: Database, id: String, name: String, _ request: CouchRequest, principal: Principal) async throws -> Response {
        let revision = try request.query["rev"].map(parseRevision)
        switch request.method {
        case .get, .head:
            guard let document = try await db.document(withID: id, revision: revision) else { throw CouchError.notFound() }
            try checkRead(document, principal)
            guard let attachment = document.attachments[name] else { throw CouchError.notFound("Document is missing attachment") }
            let data = try await db.attachmentData(attachment)
            let headers: HTTPFields = [.contentType: attachment.contentType, .eTag: "\"\(attachment.digest)\"",
                                       .contentLength: String(data.count)]
            if request.method == .head { return Response(status: .ok, headers: headers) }
            return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: data)))
        case .put, .delete:
            var document: Document
            if let current = try await db.document(withID: id) {
                guard let revision, revision == current.revision else {
                    throw CouchError(.conflict, "conflict", "Document update conflict.")
                }
                document = current
            } else {
                guard revision == nil else { throw CouchError(.conflict, "conflict", "Document update conflict.") }
                guard request.method == .put else { throw CouchError.notFound() }
                document = Document(id: id)
            }
            try await checkWrite(document, in: db, principal)
            if request.method == .put {
                let contentType = request.header(.contentType) ?? "application/octet-stream"
                document.attachments[name] = Attachment(data: Data(request.body), contentType: contentType)
            } else {
                guard document.attachments.removeValue(forKey: name) != nil else {
                    throw CouchError.notFound("Document is missing attachment")
                }
            }
            let saved = try await db.save(document)
            return Response.json(saved.writeResultJSON, status: request.method == .put ? .created : .ok,
                                 headers: [.eTag: "\"\(saved.revision!)\""])
        default:
            throw CouchError.methodNotAllowed
        }
    }

    // MARK: _local

    func localDocument(_ db: Database, id: String, _ request: CouchRequest) async throws -> Response {
        switch request.method {
        case .get, .head:
            guard let local = try await db.localDocument(withID: id) else { throw CouchError.notFound() }
            var json = JSONObject()
            json["_id"] = .string("_local/\(local.id)")
            json["_rev"] = .string(local.revision)
            for (key, value) in local.body { json[key] = value }
            return Response.json(.object(json))
        case .put:
            var body = try request.jsonObjectBody()
            let revision = body.removeValue(forKey: "_rev")?.stringValue ?? request.query["rev"]
            body.removeValue(forKey: "_id")
            body.removeValue(forKey: "_revisions")
            let newRevision = try await db.saveLocalDocument(withID: id, body: body, revision: revision)
            return Response.json(["ok": true, "id": .string("_local/\(id)"), "rev": .string(newRevision)], status: .created)
        case .delete:
            guard let revision = request.query["rev"] else { throw CouchError(.conflict, "conflict", "Document update conflict.") }
            try await db.deleteLocalDocument(withID: id, revision: revision)
            return Response.json(["ok": true, "id": .string("_local/\(id)"), "rev": "0-0"])
        default:
            throw CouchError.methodNotAllowed
        }
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
