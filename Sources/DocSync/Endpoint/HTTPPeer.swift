import CouchProtocol
import DocStore
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A replication peer over CouchDB's HTTP API (Apache CouchDB, DocServer, Sync Gateway, PouchDB Server).
struct HTTPPeer: ReplicationPeer {
    /// The database URL, without credentials.
    let databaseURL: URL
    let session: URLSession
    let headers: [String: String]
    /// DocServer and Sync Gateway filter channels with `sync_gateway/bychannel`; CouchDB with a selector.
    let channelsByFilter: Bool
    /// How many revisions with attachments are fetched or sent at once.
    let maximumRequestsInFlight: Int
    /// Revisions whose attachments are too large to hold in memory move one at a time.
    let largeTransfers = TransferLimiter(limit: 2)

    /// Connects: reads the server's welcome to learn its vendor.
    static func connect(_ url: URL, configuration: ReplicationConfiguration) async throws -> HTTPPeer {
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: false), components.host != nil,
            components.scheme == "http" || components.scheme == "https"
        else {
            throw ReplicationError(.invalidConfiguration, "Not an http(s) database URL: \(url)")
        }
        var headers = configuration.headers
        switch configuration.authentication {
        case .basic(let name, let password)?:
            headers["Authorization"] = "Basic " + Data("\(name):\(password)".utf8).base64EncodedString()
        case .sessionCookie(let cookie)?:
            headers["Cookie"] = "AuthSession=\(cookie)"
        case .bearer(let token)?:
            headers["Authorization"] = "Bearer \(token)"
        case nil:
            if let user = components.percentEncodedUser {
                let name = user.removingPercentEncoding ?? user
                let password = components.percentEncodedPassword.map { $0.removingPercentEncoding ?? $0 } ?? ""
                headers["Authorization"] = "Basic " + Data("\(name):\(password)".utf8).base64EncodedString()
            }
        }
        components.user = nil
        components.password = nil
        if components.path.hasSuffix("/") { components.path.removeLast() }
        let databaseURL = components.url!
        let sessionConfiguration = URLSessionConfiguration.ephemeral
        sessionConfiguration.httpShouldSetCookies = false
        // No response cache: replication never reuses a response, and FoundationNetworking's cache
        // lookup runs on a queue of its own, which lets a cancel race the task's completion and trap.
        sessionConfiguration.urlCache = nil
        sessionConfiguration.requestCachePolicy = .reloadIgnoringLocalCacheData
        sessionConfiguration.timeoutIntervalForRequest = Double(milliseconds(configuration.requestTimeout)
            + milliseconds(configuration.heartbeat)) / 1000
        let session = URLSession(configuration: sessionConfiguration)
        var root = components
        root.path = "/"
        root.query = nil
        var byFilter = true
        if let rootURL = root.url {
            var request = URLRequest(url: rootURL)
            for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
            if let (data, response) = try? await session.response(for: request), (response as? HTTPURLResponse)?.statusCode == 200,
                let welcome = try? JSON(parsing: data) {
                let vendor = welcome["vendor"]?["name"]?.stringValue ?? ""
                byFilter = vendor == "DocStore" || welcome["couchdb"] == nil || vendor.contains("Couchbase")
            }
        }
        return HTTPPeer(databaseURL: databaseURL, session: session, headers: headers, channelsByFilter: byFilter,
                        maximumRequestsInFlight: max(1, configuration.maximumRequestsInFlight))
    }

    /// Lets running requests finish, then frees the session: a URL session that is never invalidated
    /// stays alive with its connections and buffers (one per replication run, in a long-lived process).
    func close() {
        session.finishTasksAndInvalidate()
    }

    // MARK: Requests

    /// A request to `path` under the database URL (already percent-encoded, query included), with the
    /// peer's headers and `Accept: application/json`.
    func makeRequest(_ method: String, _ path: String) throws -> URLRequest {
        guard let url = URL(string: databaseURL.absoluteString + path) else {
            throw ReplicationError(.invalidConfiguration, "Bad request path \(path)")
        }
        var request = URLRequest(url: url)
        request.httpMethod = method
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        return request
    }

    /// Sends a request to `path` under the database URL (already percent-encoded, query included).
    func send(_ method: String, _ path: String = "", json: JSON? = nil) async throws -> (status: Int, body: Data) {
        var request = try makeRequest(method, path)
        let url = request.url!
        if let json {
            request.httpBody = try json.serializedData()
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        let data: Data, response: URLResponse
        do {
            (data, response) = try await session.response(for: request)
        } catch {
            throw ReplicationError(.network, "\(method) \(url.path): \(error.localizedDescription)", cause: error)
        }
        let status = (response as? HTTPURLResponse)?.statusCode ?? 0
        return (status, data)
    }

    /// Sends a request and returns its JSON, mapping error statuses to typed errors.
    func request(_ method: String, _ path: String = "", json: JSON? = nil, allow: Set<Int> = []) async throws -> (status: Int, json: JSON) {
        let (status, data) = try await send(method, path, json: json)
        if status >= 400 && !allow.contains(status) { try throwError(status: status, body: data, method: method, path: path) }
        return (status, (try? JSON(parsing: data)) ?? .null)
    }

    /// The typed error for an error answer.
    func throwError(status: Int, body data: Data, method: String, path: String) throws -> Never {
        let body = (try? JSON(parsing: data)) ?? .null
        let reason = body["reason"]?.stringValue ?? body["error"]?.stringValue ?? String(decoding: data.prefix(200), as: UTF8.self)
        switch status {
        case 401: throw ReplicationError(.unauthorized, "\(databaseURL.absoluteString): \(reason)", httpStatus: status)
        case 403: throw ReplicationError(.forbidden, "\(databaseURL.absoluteString)\(path): \(reason)", httpStatus: status)
        default: throw ReplicationError(.badResponse, "\(method) \(databaseURL.path)\(path.prefix(80)): \(reason)", httpStatus: status)
        }
    }

    static func encode(_ component: String) -> String {
        var allowed = CharacterSet.urlPathAllowed
        allowed.remove(charactersIn: "/?#%&+")
        return component.addingPercentEncoding(withAllowedCharacters: allowed) ?? component
    }

    static func encodeQuery(_ value: String) -> String {
        var allowed = CharacterSet.urlQueryAllowed
        allowed.remove(charactersIn: "&=+?#%")
        return value.addingPercentEncoding(withAllowedCharacters: allowed) ?? value
    }

    // MARK: ReplicationPeer

    func identity() async throws -> String { databaseURL.absoluteString }

    func prepare(create: Bool) async throws {
        let (status, _) = try await request("GET", "", allow: [404])
        guard status == 404 else { return }
        guard create else {
            throw ReplicationError(.databaseNotFound, "\(databaseURL.absoluteString) does not exist", httpStatus: 404)
        }
        _ = try await request("PUT", "", allow: [412])
    }

    /// The query items and JSON body of a `_changes` request; parameters go in both, since CouchDB reads
    /// the query string and Sync Gateway the body.
    private func changesRequest(since: JSON, limit: Int?, filter: ChangesFilter) -> (query: [String], body: JSONObject) {
        var query = ["style=all_docs"]
        if let limit { query.append("limit=\(limit)") }
        switch since {
        case .integer(let n): query.append("since=\(n)")
        case .string(let text): query.append("since=\(HTTPPeer.encodeQuery(text))")
        default: query.append("since=\(HTTPPeer.encodeQuery(since.description))")
        }
        var body = JSONObject()
        if let ids = filter.documentIDs {
            query.append("filter=_doc_ids")
            body["doc_ids"] = JSON(ids)
        } else if let selector = filter.selector {
            query.append("filter=_selector")
            body["selector"] = selector.root
        } else if let channels = filter.channels {
            if channelsByFilter {
                query += ["filter=sync_gateway/bychannel", "channels=\(HTTPPeer.encodeQuery(channels.joined(separator: ",")))"]
                body["filter"] = "sync_gateway/bychannel"
                body["channels"] = JSON(channels.joined(separator: ","))
            } else {
                query.append("filter=_selector")
                body["selector"] = ["channels": ["$elemMatch": ["$in": JSON(channels)]]]
            }
        } else if let named = filter.named {
            query.append("filter=\(HTTPPeer.encodeQuery(named.name))")
            for (key, value) in named.parameters.sorted(by: { $0.key < $1.key }) {
                query.append("\(HTTPPeer.encodeQuery(key))=\(HTTPPeer.encodeQuery(value))")
                body[key] = .string(value)
            }
        }
        return (query, body)
    }

    static func milliseconds(_ duration: Duration) -> Int {
        Int(duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000)
    }

    /// A continuous `_changes` feed from `since`, read as it arrives, with heartbeats every `heartbeat`.
    func openContinuousFeed(since: JSON, filter: ChangesFilter, heartbeat: Duration) async throws -> ChangeFeed? {
        var (query, body) = changesRequest(since: since, limit: nil, filter: filter)
        query += ["feed=continuous", "heartbeat=\(max(HTTPPeer.milliseconds(heartbeat), 100))"]
        guard let url = URL(string: databaseURL.absoluteString + "/_changes?" + query.joined(separator: "&")) else {
            throw ReplicationError(.invalidConfiguration, "Bad _changes URL")
        }
        var request = URLRequest(url: url)
        request.httpMethod = "POST"
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.httpBody = try JSON.object(body).serializedData()
        let feed = ChangeFeed()
        feed.open(request, configuration: session.configuration)
        return feed
    }

    func changes(since: JSON, limit: Int, filter: ChangesFilter, wait: Duration?) async throws -> (rows: [ChangeRow], last: JSON) {
        var (query, body) = changesRequest(since: since, limit: limit, filter: filter)
        if let wait {
            query += ["feed=longpoll", "timeout=\(max(HTTPPeer.milliseconds(wait), 100))"]
        }
        let (_, json) = try await request("POST", "/_changes?" + query.joined(separator: "&"), json: .object(body))
        guard let results = json["results"]?.arrayValue else {
            throw ReplicationError(.badResponse, "_changes answered without results")
        }
        var rows: [ChangeRow] = []
        for row in results {
            guard let id = row["id"]?.stringValue, let changes = row["changes"]?.arrayValue else { continue }
            rows.append(ChangeRow(sequence: row["seq"] ?? .null, id: id,
                                  revisions: changes.compactMap { $0["rev"]?.stringValue.flatMap(RevisionID.init) },
                                  deleted: row["deleted"]?.boolValue ?? false))
        }
        return (rows, json["last_seq"] ?? rows.last?.sequence ?? since)
    }

    func missingRevisions(_ offered: [(id: String, revisions: [RevisionID])]) async throws -> [RevisionDifference] {
        var body = JSONObject()
        for (id, revisions) in offered { body[id] = JSON(revisions.map(\.description)) }
        let (_, json) = try await request("POST", "/_revs_diff", json: .object(body))
        guard case .object(let answer) = json else { throw ReplicationError(.badResponse, "_revs_diff answered \(json)") }
        return answer.map { id, entry in
            RevisionDifference(id: id,
                               missing: entry["missing"]?.arrayValue?.compactMap { $0.stringValue.flatMap(RevisionID.init) } ?? [],
                               possibleAncestors: entry["possible_ancestors"]?.arrayValue?.compactMap { $0.stringValue.flatMap(RevisionID.init) } ?? [])
        }
    }

    // MARK: Fetching revisions (pull)

    /// Revisions as CouchDB's replicator reads them: one `_bulk_get` without attachment bodies for the
    /// batch, then — for each revision with an attachment the target lacks — `GET ?open_revs=[rev]`
    /// with `atts_since`, answered `multipart/mixed`, whose attachment parts are streamed into the
    /// target database (or kept in memory without one). Large answers are downloaded to a file first,
    /// so memory does not grow with attachment sizes. Servers without `_bulk_get` get `open_revs` for
    /// every revision.
    func fetch(_ requests: [FetchRequest], stagingInto stagingDatabase: Database?) async throws -> [Document] {
        guard !requests.isEmpty else { return [] }
        let docs: [JSON] = requests.map { ["id": .string($0.id), "rev": .string($0.revision.description)] }
        let (status, json) = try await request("POST", "/_bulk_get?revs=true&latest=true&attachments=false",
                                               json: ["docs": .array(docs)], allow: [400, 404, 405, 501])
        if status >= 400 {
            return try await fetchWithAttachments(requests.map { ($0, nil) }, stagingInto: stagingDatabase)
        }
        var documents: [Document] = []
        var withAttachments: [(FetchRequest, Int?)] = []
        for (request, result) in zip(requests, json["results"]?.arrayValue ?? []) {
            for entry in result["docs"]?.arrayValue ?? [] {
                guard let ok = entry["ok"] else { continue }
                let document = try Document(json: ok)
                // Without an attachment added after the newest of the target's leaves on its history,
                // the stubs are valid there; otherwise the revision is fetched again with its attachments.
                if document.attachments.isEmpty || HTTPPeer.stubsAreValid(document, possibleAncestors: request.possibleAncestors) {
                    documents.append(document)
                } else {
                    let size = document.attachments.values.reduce(0) { $0 + $1.length }
                    withAttachments.append((FetchRequest(id: request.id, revision: document.revision ?? request.revision,
                                                         possibleAncestors: request.possibleAncestors), size))
                }
            }
        }
        return documents + (try await fetchWithAttachments(withAttachments, stagingInto: stagingDatabase))
    }

    /// Whether every attachment of a revision fetched without attachment bodies was added no later
    /// than the newest of the target's possible ancestors on the revision's history.
    private static func stubsAreValid(_ document: Document, possibleAncestors: [RevisionID]) -> Bool {
        let known = (document.revisionHistory ?? []).first(where: possibleAncestors.contains)?.generation ?? -1
        return document.attachments.values.allSatisfy { ($0.revpos ?? Int.max) <= known }
    }

    /// Answers larger than this (by the attachment lengths a `_bulk_get` reported) are downloaded to a
    /// file rather than held in memory, and requests larger than this are sent from a file.
    static let inMemoryAnswerLimit = 1024 * 1024

    /// A revision whose attachment bytes to send are at most this many, all stored as they are, goes
    /// inline (base64) in `_bulk_docs` rather than in a multipart PUT of its own.
    static let inlineAttachmentLimit = 64 * 1024

    /// Each revision with its attachments, `maximumRequestsInFlight` requests at a time.
    private func fetchWithAttachments(_ requests: [(FetchRequest, Int?)], stagingInto stagingDatabase: Database?) async throws -> [Document] {
        guard !requests.isEmpty else { return [] }
        return try await requests.concurrentMap(limit: maximumRequestsInFlight) { request, size in
            try await self.fetchOpenRevision(request, expectedSize: size, stagingInto: stagingDatabase)
        }.flatMap { $0 }
    }

    /// `GET /db/id?revs=true&open_revs=["rev"]&latest=true&atts_since=[…]` answered as `multipart/mixed`
    /// (or as JSON by a server that does not do multipart).
    private func fetchOpenRevision(_ request: FetchRequest, expectedSize: Int?, stagingInto stagingDatabase: Database?) async throws -> [Document] {
        let openRevs = HTTPPeer.encodeQuery(JSON([request.revision.description]).description)
        var path = "/\(HTTPPeer.encode(request.id))?revs=true&open_revs=\(openRevs)&latest=true"
        if !request.possibleAncestors.isEmpty {
            path += "&atts_since=" + HTTPPeer.encodeQuery(JSON(request.possibleAncestors.map(\.description)).description)
        }
        var urlRequest = try makeRequest("GET", path)
        urlRequest.setValue("multipart/mixed", forHTTPHeaderField: "Accept")
        let body: ResponseBody
        let response: URLResponse
        do {
            if (expectedSize ?? Int.max) > HTTPPeer.inMemoryAnswerLimit {
                return try await largeTransfers.run { [self, urlRequest, path] in
                    let (file, answer) = try await session.download(for: urlRequest)
                    return try await readOpenRevision(.file(file), answer, request: request, path: path, stagingInto: stagingDatabase)
                }
            } else {
                let (data, answer) = try await session.response(for: urlRequest)
                (body, response) = (.memory(data), answer)
            }
        } catch let error as ReplicationError {
            throw error
        } catch {
            throw ReplicationError(.network, "GET \(databaseURL.path)/\(request.id): \(error.localizedDescription)", cause: error)
        }
        return try await readOpenRevision(body, response, request: request, path: path, stagingInto: stagingDatabase)
    }

    /// The revisions of an `open_revs` answer (removing its file, if it was downloaded).
    private func readOpenRevision(_ body: ResponseBody, _ response: URLResponse, request: FetchRequest, path: String,
                                  stagingInto stagingDatabase: Database?) async throws -> [Document] {
        defer { body.remove() }
        let status = (response as? HTTPURLResponse)?.statusCode ?? 0
        if status == 404 { return [] }
        if status >= 400 { try throwError(status: status, body: try body.prefix(4096), method: "GET", path: path) }
        let contentType = (response as? HTTPURLResponse)?.value(forHTTPHeaderField: "Content-Type") ?? "application/json"
        guard Multipart.mediaType(of: contentType) == "multipart/mixed", let boundary = Multipart.boundary(from: contentType) else {
            let json = try JSON(parsing: try body.prefix(Int.max))
            return try (json.arrayValue ?? []).compactMap { try $0["ok"].map(Document.init(json:)) }
        }
        return try await OpenRevisionsReader.read(body, boundary: boundary, stagingInto: stagingDatabase)
    }

    // MARK: Storing revisions (push)

    /// Revisions as CouchDB's replicator writes them: those whose attachments are all stubs, or small
    /// inline contents stored as they are, in `_bulk_docs` with `new_edits=false`; every other one as
    /// its own `PUT /db/id?new_edits=false` in `multipart/related`, the JSON with `"follows": true`
    /// stubs, then each attachment's stored bytes (gzip ones as they are) — in memory when small,
    /// spooled to a file when large, never read whole into memory. A `missing_stub` refusal is reported
    /// for the replicator to send those revisions again with every attachment.
    func store(_ documents: [Document]) async throws -> StoreOutcome {
        var outcome = StoreOutcome()
        var bulk: [Document] = []
        var multipart: [Document] = []
        for document in documents {
            let contents = document.attachments.values.filter { !$0.isStub }
            let inline = contents.allSatisfy { $0.encoding == .identity }
                && contents.reduce(0) { $0 + $1.encodedLength } <= HTTPPeer.inlineAttachmentLimit
            if inline { bulk.append(document) } else { multipart.append(document) }
        }
        if !bulk.isEmpty { try await storeInBulk(bulk, into: &outcome) }
        let answers = try await multipart.concurrentMap(limit: maximumRequestsInFlight) { try await putMultipart($0) }
        for (document, (status, json)) in zip(multipart, answers) { record(document, status: status, json: json, into: &outcome) }
        return outcome
    }

    private func storeInBulk(_ documents: [Document], into outcome: inout StoreOutcome) async throws {
        var bodies: [JSON] = []
        for document in documents {
            var loaded = document
            for (name, attachment) in document.attachments where !attachment.isStub {
                loaded.attachments[name] = attachment.with(encodedData: try await Self.collect(attachment))
            }
            bodies.append(loaded.json(attachmentData: true, revisions: true))
        }
        let (status, json) = try await request("POST", "/_bulk_docs", json: ["docs": .array(bodies), "new_edits": false], allow: [412])
        if status == 412 {
            // CouchDB refuses the whole request for one stub: the revisions without stubs go again alone.
            outcome.missingStubs += documents.filter { document in document.attachments.values.contains(where: \.isStub) }
            let plain = documents.filter { document in !document.attachments.values.contains(where: \.isStub) }
            if !plain.isEmpty { try await storeInBulk(plain, into: &outcome) }
            return
        }
        let byID = Dictionary(documents.map { (ExactString($0.id), $0) }, uniquingKeysWith: { first, _ in first })
        for row in json.arrayValue ?? [] {
            guard let error = row["error"]?.stringValue else { continue }
            let id = row["id"]?.stringValue ?? ""
            outcome.failures.append((id, byID[ExactString(id)]?.revision, "\(error): \(row["reason"]?.stringValue ?? "")"))
        }
    }

    private func record(_ document: Document, status: Int, json: JSON, into outcome: inout StoreOutcome) {
        switch status {
        case 200..<300: break
        case 412 where json["error"]?.stringValue == "missing_stub": outcome.missingStubs.append(document)
        default:
            let reason = "\(json["error"]?.stringValue ?? "HTTP \(status)"): \(json["reason"]?.stringValue ?? "")"
            outcome.failures.append((document.id, document.revision, reason))
        }
    }

    /// `PUT /db/id?new_edits=false` with the revision as `multipart/related`.
    private func putMultipart(_ document: Document) async throws -> (status: Int, json: JSON) {
        let boundary = Multipart.makeBoundary()
        var bare = document
        bare.attachments = [:]
        guard case .object(var object) = bare.json(revisions: true) else { return (0, .null) }
        var members = JSONObject()
        var following: [(String, Attachment)] = []
        for name in document.attachments.keys.sorted() {
            let attachment = document.attachments[name]!
            if attachment.isStub {
                members[name] = attachment.json(.stub, encodingInfo: true)
            } else {
                members[name] = attachment.json(.follows, encodingInfo: true)
                following.append((name, attachment))
            }
        }
        object["_attachments"] = .object(members)
        var body = MultipartBody()
        body.appendRelated(json: try JSON.object(object).serialized(), following: following, boundary: boundary)
        var urlRequest = try makeRequest("PUT", "/\(HTTPPeer.encode(document.id))?new_edits=false")
        urlRequest.setValue("multipart/related; boundary=\"\(boundary)\"", forHTTPHeaderField: "Content-Type")
        let data: Data, response: URLResponse
        do {
            if body.length <= HTTPPeer.inMemoryAnswerLimit {
                var bytes = Data(capacity: body.length)
                for piece in body.pieces {
                    switch piece {
                    case .bytes(let header): bytes.append(contentsOf: header)
                    case .attachment(let attachment): bytes.append(try await Self.collect(attachment))
                    }
                }
                urlRequest.httpBody = bytes
                (data, response) = try await session.response(for: urlRequest)
            } else {
                (data, response) = try await largeTransfers.run { [session, urlRequest, body] in
                    let file = try await Self.spool(body)
                    defer { try? FileManager.default.removeItem(at: file) }
                    return try await session.upload(for: urlRequest, fromFile: file)
                }
            }
        } catch let error as DocStoreError {
            throw error
        } catch {
            throw ReplicationError(.network, "PUT \(databaseURL.path)/\(document.id): \(error.localizedDescription)", cause: error)
        }
        let status = (response as? HTTPURLResponse)?.statusCode ?? 0
        let json = (try? JSON(parsing: data)) ?? .null
        if status == 401 || status == 403 || status >= 500 {
            try throwError(status: status, body: data, method: "PUT", path: "/\(document.id)")
        }
        return (status, json)
    }

    /// Writes a multipart body to a new temporary file, attachment by attachment in pieces.
    private static func spool(_ body: MultipartBody) async throws -> URL {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("docsync-\(UUID().uuidString).upload")
        guard FileManager.default.createFile(atPath: file.path, contents: nil) else {
            throw ReplicationError(.localDatabase, "Cannot create \(file.path)")
        }
        do {
            let handle = try FileHandle(forWritingTo: file)
            defer { try? handle.close() }
            for piece in body.pieces {
                switch piece {
                case .bytes(let bytes): try handle.write(contentsOf: bytes)
                case .attachment(let attachment):
                    for try await chunk in try AttachmentContent.storedBytes(of: attachment) { try handle.write(contentsOf: chunk) }
                }
            }
        } catch {
            try? FileManager.default.removeItem(at: file)
            throw error
        }
        return file
    }

    /// An attachment's stored bytes, whole.
    private static func collect(_ attachment: Attachment) async throws -> Data {
        if let bytes = attachment.encodedData { return bytes }
        var data = Data(capacity: attachment.encodedLength)
        for try await chunk in try AttachmentContent.storedBytes(of: attachment) { data.append(chunk) }
        return data
    }

    func checkpoint(_ id: String) async throws -> Checkpointer.Record? {
        let (status, json) = try await request("GET", "/_local/\(HTTPPeer.encode(id))", allow: [404])
        guard status == 200, case .object(var body) = json else { return nil }
        let revision = body.removeValue(forKey: "_rev")?.stringValue ?? ""
        body.removeValue(forKey: "_id")
        return Checkpointer.Record(checkpoint: ReplicationCheckpoint(json: body), revision: revision)
    }

    func saveCheckpoint(_ id: String, checkpoint: ReplicationCheckpoint, revision: String?) async throws -> String {
        var document = checkpoint.json
        if let revision { document["_rev"] = .string(revision) }
        let (_, json) = try await request("PUT", "/_local/\(HTTPPeer.encode(id))", json: .object(document))
        return json["rev"]?.stringValue ?? ""
    }
}
