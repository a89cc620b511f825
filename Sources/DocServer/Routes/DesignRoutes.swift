import CouchProtocol
import Crypto
import DocStore
import DocStoreJavaScript
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// `/{db}/_design/{d}/…`: views, `_info`, shows, lists, update handlers and the design document's
/// attachments; `/{db}/_view_cleanup`. The JavaScript runs in the server's ``JavaScriptEngine``, on
/// its own threads.
///
/// Channels: a user limited to channels sees the rows of views and lists only for documents in their
/// channels (reduced answers are refused them), a show only of a document they may read, and an update
/// handler only over a document they may read, writing only what they may write.
extension DocServer {
    func designRoute(_ db: Database, design: String, _ rest: [String], _ request: CouchRequest,
                     principal: Principal) async throws -> Response {
        switch rest[0] {
        case "_view" where rest.count == 2:
            return try await view(db, name: "\(design)/\(rest[1])", request, principal: principal)
        case "_view" where rest.count == 3 && rest[2] == "queries":
            return try await multiQuery(request) { try await serializedView(db, name: "\(design)/\(rest[1])", $0, principal: principal) }
        case "_view" where rest.count > 2:
            // CouchDB's view handler answers any other path below a view so.
            throw CouchError.only("GET,POST,HEAD")
        case "_info" where rest.count == 1:
            return try await designInfo(db, design: design, request)
        case "_show" where rest.count >= 2:
            let id = rest.count > 2 ? rest[2...].joined(separator: "/") : nil
            return try await show(db, design: design, name: rest[1], id: id, request, principal: principal)
        case "_list" where rest.count == 3 || rest.count == 4:
            let viewDesign = rest.count == 4 ? rest[2] : design
            return try await list(db, design: design, name: rest[1], view: "\(viewDesign)/\(rest[rest.count - 1])", request,
                                  principal: principal)
        case "_update" where rest.count >= 2:
            let id = rest.count > 2 ? rest[2...].joined(separator: "/") : nil
            return try await update(db, design: design, name: rest[1], id: id, request, principal: principal)
        case "_show", "_list", "_update":
            throw CouchError.notFound("Invalid path.")
        default:
            // Anything else names an attachment, as in CouchDB (`_x` one that cannot be written).
            return try await attachmentRoute(db, id: "_design/\(design)", name: rest.joined(separator: "/"), request,
                                             principal: principal)
        }
    }

    /// The engine, or 404 when the server runs without JavaScript.
    private func engine() throws -> JavaScriptEngine {
        guard let javaScript else { throw CouchError.notFound("JavaScript design documents are turned off on this server") }
        return javaScript
    }

    /// A design document, with CouchDB's 404 reasons.
    private func design(_ db: Database, _ name: String) async throws -> DesignDocument {
        do {
            return try await db.designDocument(named: name)
        } catch let error as DocStoreError where error.code == .notFound {
            throw CouchError.notFound(error.reason)
        }
    }

    /// The engine and design document `name`, which must have `function` among its functions of a
    /// kind (`shows`, `lists`, `updates`) — CouchDB's 404 "missing json key" naming the kind or the
    /// function otherwise — in JavaScript (500 `unknown_query_language`).
    private func designFunction(_ db: Database, _ name: String, _ kind: String, _ function: String) async throws
        -> (JavaScriptEngine, DesignDocument) {
        let engine = try engine()
        let design = try await design(db, name)
        guard case .object(let functions)? = design.body[kind] else { throw CouchError.notFound("missing json key: \(kind)") }
        guard functions[function] != nil else { throw CouchError.notFound("missing json key: \(function)") }
        guard design.isJavaScript else { throw CouchError(DocStoreError(.unknownQueryLanguage, design.language)) }
        return (engine, design)
    }

    // MARK: _info

    /// `GET /{db}/_design/{d}/_info`: the view group's signature and state, in CouchDB's shape.
    private func designInfo(_ db: Database, design name: String, _ request: CouchRequest) async throws -> Response {
        guard request.method == .get else { throw CouchError.methodNotAllowed }
        let design = try await design(db, name)
        var updateSequence: Int64? = nil
        if let javaScript, design.isJavaScript {
            var query = IndexQuery()
            query.stale = .ok
            query.updateSeq = true
            query.limit = 0
            query.reduce = false
            for view in design.views.keys.sorted() {
                let sequence = try? await db.query(designDocument: design.name, view: view, query, engine: javaScript).updateSequence
                if let sequence { updateSequence = min(updateSequence ?? sequence, sequence) }
            }
        }
        let seq = updateSequence ?? 0
        // The views' share of the index file (the database's indexes share one SQLite file).
        let sizes = design.isJavaScript
            ? try await db.indexSizes(named: design.views.keys.map { JavaScriptViews.indexName(designDocument: design.name, view: $0) })
            : (file: 0, active: 0)
        let pending = try await db.pendingChangeCount(since: seq)
        let tasks = db.activeTasks
        let building = tasks.contains { task in
            guard case .indexing(let index) = task.kind else { return false }
            return DocServer.designDocument(ofIndex: index) == design.id
        }
        let index: JSONObject = [
            "updates_pending": ["minimum": .integer(pending), "preferred": .integer(pending), "total": .integer(pending)],
            "waiting_commit": false, "waiting_clients": 0, "updater_running": .bool(building),
            "update_seq": .integer(Int(seq)),
            "sizes": ["file": .integer(sizes.file), "external": .integer(sizes.active), "active": .integer(sizes.active)],
            "signature": .string(design.signature), "purge_seq": 0, "language": .string(design.language),
            "compact_running": .bool(tasks.contains { $0.kind == .indexCompaction }),
            "collator_versions": JSON(Self.collatorVersions),
        ]
        return Response.json(["name": .string(design.name), "view_index": .object(index)])
    }

    /// The ICU collator version views are ordered by, as CouchDB reports it (`"153.120"`).
    static let collatorVersions: [String] = {
        guard let range = CollationKey.unicodeVersion.range(of: "collator-") else { return [] }
        let version = String(CollationKey.unicodeVersion[range.upperBound...])
        return version.isEmpty ? [] : [version]
    }()

    /// `POST /{db}/_view_cleanup` (database admins): drops the indexes of JavaScript views whose design
    /// document or view is gone.
    func viewCleanup(_ db: Database, _ request: CouchRequest, principal: Principal) async throws -> Response {
        guard principal.isDatabaseAdmin else { throw CouchError.databaseAdminRequired }
        // CouchDB 3.3.3 takes any method and body here.
        try await db.dropStaleJavaScriptViews()
        return Response.json(["ok": true], status: .accepted)
    }

    // MARK: req

    /// CouchDB's `req` object for a request on database `name`.
    func scriptRequest(_ db: Database, _ request: CouchRequest, principal: Principal, id: String?) async throws -> JSON {
        // The function gets `key`, `startkey`, `endkey` and `descending` parsed: CouchDB fails a request
        // where one is not JSON.
        for name in JavaScriptRequest.jsonQueryKeys where request.query[name] != nil { _ = try request.json(name) }
        var headers: [String: String] = [:]
        for field in request.headers { headers[field.name.rawName] = field.value }
        // HTTP/1's Host travels as the request's authority, not as a header field.
        if headers["Host"] == nil, let authority = request.authority { headers["Host"] = authority }
        var path = [db.name]
        path += request.segments.dropFirst()
        let body: String? = request.method == .get || request.method == .head || request.body.isEmpty && request.method == .delete
            ? nil : String(decoding: request.body, as: UTF8.self)
        let security = try await registry.security(of: db.name, db)
        var cookies = JSONObject()
        for pair in (request.header(.cookie) ?? "").split(separator: ";") {
            let parts = pair.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            if parts.count == 2 { cookies[parts[0]] = .string(parts[1]) }
        }
        var json = JavaScriptRequest.make(database: db.name, method: request.method.rawValue, path: path, query: request.query,
                                          headers: headers, body: body, id: id,
                                          userContext: principal.userContext(database: db.name),
                                          securityObject: .object(security.json),
                                          info: (try? await db.info().serverJSON) ?? [:],
                                          rawPath: "/" + path.map { $0.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(["/"])) ?? $0 }
                                            .joined(separator: "/") + (request.rawQuery.map { "?" + $0 } ?? ""))
        if case .object(var members) = json {
            members["cookie"] = .object(cookies)
            json = .object(members)
        }
        return json
    }

    // MARK: Shows

    /// `GET|POST /{db}/_design/{d}/_show/{s}[/{id}]`: a show function's answer for the document (or none).
    private func show(_ db: Database, design name: String, name show: String, id: String?, _ request: CouchRequest,
                      principal: Principal) async throws -> Response {
        let (engine, design) = try await designFunction(db, name, "shows", show)
        var documentJSON: String? = nil
        var documentRevision = "none"
        if let id {
            let revision = try request.query["rev"].map { try parseRevision($0) }
            // A show function sees the document's `_conflicts`, as CouchDB gives them.
            if let document = try await db.document(withID: id, revision: revision, includeConflicts: true), !document.isDeleted {
                try checkRead(document, principal)
                documentJSON = try document.json().serializedString()
                documentRevision = document.revision?.description ?? "none"
            }
        }
        // As CouchDB: the answer's ETag depends on the design document, the document, what the client
        // accepts, the user and the query, and the function cannot set another.
        let tagParts: [String] = [design.revision?.description ?? "", documentRevision, request.header(.accept) ?? "",
                                  principal.userContext(database: db.name).description, request.rawQuery ?? ""]
        let etag = "\"" + Insecure.MD5.hash(data: Array(tagParts.joined(separator: "\u{0}").utf8)).map { String(format: "%02X", $0) }.joined() + "\""
        if id != nil, documentJSON != nil, request.ifNoneMatch(etag) {
            return Response(status: .notModified, headers: [.eTag: etag])
        }
        let req = try await scriptRequest(db, request, principal: principal, id: id)
        let response = try await engine.show(show, of: design, documentJSON: documentJSON, request: req, documentPath: id != nil)
        var answer = try externalResponse(response, status: 200)
        if id != nil, documentJSON != nil { answer.headers[.eTag] = etag }
        return answer
    }

    // MARK: Lists

    /// `GET|POST /{db}/_design/{d}/_list/{l}/[{d2}/]{v}`: a list function over a view's rows, which
    /// take every view option; `{v}` `_all_docs` lists `_all_docs`.
    private func list(_ db: Database, design name: String, name list: String, view: String, _ request: CouchRequest,
                      principal: Principal) async throws -> Response {
        guard [.get, .post, .options].contains(request.method) else { throw CouchError.only("GET,POST,HEAD") }
        let (engine, design) = try await designFunction(db, name, "lists", list)
        // As CouchDB, `_list/{l}/_all_docs` lists the rows of `_all_docs`.
        let json = view == "\(name)/_all_docs"
            ? try await allDocumentsAnswer(db, request, principal: principal).json
            : try await viewAnswer(db, name: view, try viewQuery(request), principal: principal).json
        guard case .object(var head) = json else { throw CouchError.notFound() }
        let rows = head.removeValue(forKey: "rows")?.arrayValue ?? []
        let req = try await scriptRequest(db, request, principal: principal, id: nil)
        let result = try await engine.list(list, of: design, head: .object(head), request: req, rows: rows)
        var start = result["start"] ?? [:]
        if case .object(var members) = start {
            members["body"] = result["body"] ?? ""
            start = .object(members)
        }
        return try externalResponse(start, status: 200, contentType: "application/json")
    }

    // MARK: Updates

    /// `POST|PUT /{db}/_design/{d}/_update/{u}[/{id}]`: an update handler; the document it returns is
    /// saved (201 with `X-Couch-Update-NewRev` and `X-Couch-Id`), through the same checks as any write.
    private func update(_ db: Database, design name: String, name update: String, id: String?, _ request: CouchRequest,
                        principal: Principal) async throws -> Response {
        let (engine, design) = try await designFunction(db, name, "updates", update)
        var documentJSON: String? = nil
        if let id, let document = try await db.document(withID: id), !document.isDeleted {
            try checkRead(document, principal)
            documentJSON = try document.json().serializedString()
        }
        let req = try await scriptRequest(db, request, principal: principal, id: id)
        let result = try await engine.update(update, of: design, documentJSON: documentJSON, request: req)
        guard case .array(let pair) = result, pair.count == 2 else { throw CouchError(.internalServerError, "render_error", "bad update answer") }
        guard case .object = pair[0] else { return try externalResponse(pair[1], status: 200) }
        var document: Document
        do {
            document = try Document(couchJSON: pair[0])
        } catch let error as DocStoreError {
            throw CouchError(error)
        }
        guard document.hasID, !document.id.isEmpty else {
            // As CouchDB 3.3.3: a document without `_id` (`[{}, …]`) has an empty id.
            let notString = pair[0]["_id"].map { $0.stringValue == nil } ?? false
            throw CouchError(.badRequest, "illegal_docid", notString ? "Document id must be a string" : "Document id must not be empty")
        }
        try await checkWrite(&document, in: db, principal)
        let saved = try await db.put(document)
        var extra = HTTPFields()
        extra[HTTPField.Name("X-Couch-Update-NewRev")!] = saved.revision?.description ?? ""
        extra[HTTPField.Name("X-Couch-Id")!] = saved.id.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? saved.id
        return try externalResponse(pair[1], status: 201, extraHeaders: extra)
    }

    // MARK: Responses

    /// CouchDB's "external response" of a show, list or update function: `code`, `headers`, and one of
    /// `body` (text, `text/html` unless said), `json` (`application/json`) or `base64` (bytes,
    /// `application/binary`).
    private func externalResponse(_ response: JSON, status: Int, contentType: String = "text/html; charset=utf-8",
                                  extraHeaders: HTTPFields = [:]) throws -> Response {
        var code = status
        var type = contentType
        var bytes: [UInt8] = []
        var headers = HTTPFields()
        switch response {
        case .string(let text):
            bytes = Array(text.utf8)
        case .object(let members):
            for (key, value) in members {
                switch key {
                case "code":
                    guard let number = value.intValue, (100...599).contains(number) else {
                        throw CouchError(.internalServerError, "external_response_error", "Invalid code from external server: \(value)")
                    }
                    code = number
                case "json":
                    bytes = try value.serialized()
                    type = "application/json"
                case "body":
                    bytes = Array((value.stringValue ?? value.description).utf8)
                case "base64":
                    guard let data = Data(base64Encoded: value.stringValue ?? "") else {
                        throw CouchError(.internalServerError, "external_response_error", "Invalid base64 from external server")
                    }
                    bytes = Array(data)
                    type = "application/binary"
                case "headers":
                    guard case .object(let fields) = value else { continue }
                    for (name, text) in fields {
                        guard let fieldName = HTTPField.Name(name) else { continue }
                        headers[fieldName] = text.stringValue ?? text.description
                    }
                case "stop":
                    continue
                default:
                    throw CouchError(.internalServerError, "external_response_error",
                                     "Invalid data from external server: {<<\"\(key)\">>,\(value)}")
                }
            }
        default:
            break
        }
        if headers[.contentType] == nil { headers[.contentType] = type }
        for field in extraHeaders { headers.append(field) }
        return Response(status: HTTPResponse.Status(code: code), headers: headers,
                        body: ResponseBody(byteBuffer: ByteBuffer(bytes: bytes)))
    }
}
