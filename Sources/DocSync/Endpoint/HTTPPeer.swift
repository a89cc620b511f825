import CouchProtocol
import DocStore
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A replication peer over CouchDB's HTTP API (Apache CouchDB, DocServer, Sync Gateway, PouchDB Server).
package struct HTTPPeer: ReplicationPeer {
    /// The database URL, without credentials.
    package let databaseURL: URL
    let transport: HTTPTransport
    let headers: [String: String]
    /// The session of ``ReplicationAuthentication/session(name:password:)``.
    let session: SessionLogin?
    /// DocServer and Sync Gateway filter channels with `sync_gateway/bychannel`; CouchDB with a selector.
    let channelsByFilter: Bool
    /// How many revisions with attachments are fetched or sent at once.
    let maximumRequestsInFlight: Int
    /// Revisions whose attachments are too large to hold in memory move one at a time.
    let largeTransfers = TransferLimiter(limit: 2)
    /// Revisions asked for with `_bulk_get`, and read from its answers (CouchDB's `bulk_get_attempts`
    /// and `bulk_get_docs`).
    private let bulkGets = BulkGetCounter()

    var bulkGetFigures: (attempts: Int, documents: Int) { bulkGets.figures.withLock { $0 } }

    /// Connects: reads the server's welcome to learn its vendor. Requests time out on `clock`.
    package static func connect(_ url: URL, configuration: ReplicationConfiguration, clock: some Clock<Duration>) async throws -> HTTPPeer {
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: false), components.host != nil,
            components.scheme == "http" || components.scheme == "https"
        else {
            throw ReplicationError(.invalidConfiguration, "Not an http(s) database URL: \(url)")
        }
        var headers = configuration.headers
        var sessionCredentials: (name: String, password: String)?
        switch configuration.authentication {
        case .basic(let name, let password)?:
            headers["Authorization"] = "Basic " + Data("\(name):\(password)".utf8).base64EncodedString()
        case .sessionCookie(let cookie)?:
            headers["Cookie"] = "AuthSession=\(cookie)"
        case .bearer(let token)?:
            headers["Authorization"] = "Bearer \(token)"
        case .session(let name, let password)?:
            sessionCredentials = (name, password)
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
        let sessionConfiguration = HTTPTransport.sessionConfiguration()
        // Both directions share the session, and the change feed holds a connection: a request queued
        // for a free connection would wait without progress and time out.
        let lanes = max(1, configuration.maximumRequestsInFlight)
        sessionConfiguration.httpMaximumConnectionsPerHost = 2 * lanes + 4
        // A long poll or a feed may be silent for a heartbeat before the server answers.
        let transport = HTTPTransport(configuration: sessionConfiguration,
                                      idleLimit: configuration.requestTimeout + configuration.heartbeat, clock: clock)
        var root = components
        root.path = "/"
        root.query = nil
        var session: SessionLogin?
        if let sessionCredentials, let sessionURL = URL(string: "_session", relativeTo: root.url)?.absoluteURL {
            let login = SessionLogin(url: sessionURL, name: sessionCredentials.name, password: sessionCredentials.password)
            do {
                try await login.signIn(on: transport, headers: headers)
            } catch {
                // The peer is not made: its URL session would otherwise stay alive, unused.
                transport.close()
                throw error
            }
            session = login
        }
        var byFilter = true
        if let rootURL = root.url {
            var request = URLRequest(url: rootURL)
            for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
            if let cookie = session?.header { request.setValue(cookie, forHTTPHeaderField: "Cookie") }
            if let (data, response) = try? await transport.data(for: request), (response as? HTTPURLResponse)?.statusCode == 200,
                let welcome = try? JSON(parsing: data) {
                let vendor = welcome["vendor"]?["name"]?.stringValue ?? ""
                byFilter = vendor == "DocStore" || welcome["couchdb"] == nil || vendor.contains("Couchbase")
            }
        }
        return HTTPPeer(databaseURL: databaseURL, transport: transport, headers: headers, session: session, channelsByFilter: byFilter,
                        maximumRequestsInFlight: lanes)
    }

    /// Lets running requests finish, then frees the session: a URL session that is never invalidated
    /// stays alive with its connections and buffers (one per replication run, in a long-lived process).
    package func close() {
        transport.close()
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
        if let cookie = session?.header { request.setValue(cookie, forHTTPHeaderField: "Cookie") }
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        return request
    }

    /// Sends a request to `path` under the database URL (already percent-encoded, query included).
    package func send(_ method: String, _ path: String = "", json: JSON? = nil) async throws -> (status: Int, body: Data) {
        var request = try makeRequest(method, path)
        let url = request.url!
        if let json {
            request.httpBody = try json.serializedData()
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        func ask() async throws -> (Data, URLResponse) {
            do {
                return try await transport.data(for: request)
            } catch {
                throw ReplicationError(.network, "\(method) \(url.path): \(error.localizedDescription)", cause: error)
            }
        }
        var (data, response) = try await ask()
        if let session, let http = response as? HTTPURLResponse {
            session.remember(http)
            if http.statusCode == 401 {
                // The session ended: sign in again, and ask once more.
                try await session.signIn(on: transport, headers: headers)
                request.setValue(session.header, forHTTPHeaderField: "Cookie")
                (data, response) = try await ask()
                if let renewed = response as? HTTPURLResponse { session.remember(renewed) }
            }
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

    /// `POST /_bulk_get?query` with `body`: the status and the answer's bytes (read by
    /// CouchProtocol's `BulkGetAnswer`); an error status other than those of a server without `_bulk_get`
    /// (400, 404, 405, 501) is thrown.
    private func bulkGet(_ body: BulkGet.Request, query: String) async throws -> (status: Int, data: Data) {
        let path = "/_bulk_get?" + query
        let (status, data) = try await send("POST", path, json: body.json)
        if status >= 400 && ![400, 404, 405, 501].contains(status) { try throwError(status: status, body: data, method: "POST", path: path) }
        return (status, data)
    }

    /// The typed error for an error answer.
    func throwError(status: Int, body data: Data, method: String, path: String) throws -> Never {
        throw ReplicationError(status: status, body: data, context: "\(method) \(databaseURL.absoluteString)\(path.prefix(80))")
    }

    /// Decodes an answer with a protocol type, a malformed one being the peer's fault.
    private func decode<Value>(_ what: String, _ decode: () throws -> Value) throws -> Value {
        do {
            return try decode()
        } catch let error as DocStoreError {
            throw ReplicationError(.badResponse, "\(databaseURL.absoluteString) answered a malformed \(what): \(error.reason)", cause: error)
        }
    }

    /// `component` percent-encoded for one path segment (`/`, `?`, `#`, `%`, `&`, `+` too).
    package static func encode(_ component: String) -> String {
        var allowed = CharacterSet.urlPathAllowed
        allowed.remove(charactersIn: "/?#%&+")
        return component.addingPercentEncoding(withAllowedCharacters: allowed) ?? component
    }

    /// `value` percent-encoded for a query parameter's name or value (`&`, `=`, `+`, `?`, `#`, `%` too).
    package static func encodeQuery(_ value: String) -> String {
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
    private func changesRequest(since: JSON, limit: Int?, filter: SourceFilter) -> (query: [String], body: JSONObject) {
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
    func openContinuousFeed(since: JSON, filter: SourceFilter, heartbeat: Duration) async throws -> ChangeFeed? {
        var (query, body) = changesRequest(since: since, limit: nil, filter: filter)
        query += ["feed=continuous", "heartbeat=\(max(HTTPPeer.milliseconds(heartbeat), 100))"]
        guard let url = URL(string: databaseURL.absoluteString + "/_changes?" + query.joined(separator: "&")) else {
            throw ReplicationError(.invalidConfiguration, "Bad _changes URL")
        }
        var request = URLRequest(url: url)
        request.httpMethod = "POST"
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        if let cookie = session?.header { request.setValue(cookie, forHTTPHeaderField: "Cookie") }
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.httpBody = try JSON.object(body).serializedData()
        return try ChangeFeed(request, on: transport)
    }

    func changes(since: JSON, limit: Int, filter: SourceFilter, wait: Duration?) async throws -> (rows: [ChangesRow], last: JSON, pending: Int?) {
        var (query, body) = changesRequest(since: since, limit: limit, filter: filter)
        if let wait {
            query += ["feed=longpoll", "timeout=\(max(HTTPPeer.milliseconds(wait), 100))"]
        }
        let path = "/_changes?" + query.joined(separator: "&")
        let (status, data) = try await send("POST", path, json: .object(body))
        if status >= 400 { try throwError(status: status, body: data, method: "POST", path: path) }
        let answer = try decode("_changes answer") { try ChangesResponse(parsing: data) }
        return (answer.results, answer.lastSequence.isNull ? since : answer.lastSequence, answer.pending)
    }

    func missingRevisions(_ offered: [(id: String, revisions: [RevisionID])]) async throws -> [RevisionDifference] {
        let body = RevsDiff.Request(offered.map { RevsDiff.Request.Offer(id: $0.id, revisions: $0.revisions) })
        let (_, json) = try await request("POST", "/_revs_diff", json: body.json)
        return try decode("_revs_diff answer") { try RevsDiff.Response(json: json) }.differences
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
        let body = BulkGet.Request(requests.map { BulkGet.Request.Item(id: $0.id, revision: $0.revision.description) })
        let (status, data) = try await bulkGet(body, query: "revs=true&latest=true&attachments=false&att_encoding_info=true")
        bulkGets.figures.withLock { $0.attempts += requests.count }
        if status >= 400 {
            return try await fetchWithAttachments(requests.map { ($0, nil) }, stagingInto: stagingDatabase)
        }
        let answer = try decode("_bulk_get answer") { try BulkGetAnswer(parsing: data) }
        guard answer.results.count == requests.count else {
            throw ReplicationError(.badResponse, "_bulk_get answered \(answer.results.count) results for \(requests.count) documents")
        }
        var documents: [Document] = []
        var withAttachments: [(request: FetchRequest, size: Int?, inline: Bool)] = []
        for (request, result) in zip(requests, answer.results) {
            guard result.id.map(ExactString.init) == ExactString(request.id) else {
                throw ReplicationError(.badResponse, "_bulk_get answered \(result.id ?? "null") where \(request.id) was asked for")
            }
            var askedAlone = false
            for entry in result.entries {
                let document: Document
                switch entry {
                case .document(let read):
                    document = read
                case .invalid(let error):
                    throw ReplicationError(.badResponse, "\(databaseURL.absoluteString) answered a malformed _bulk_get document: \(error.reason)",
                                           cause: error)
                case .error:
                    // As CouchDB's replicator: a revision the batch could not read is asked for alone.
                    if !askedAlone { withAttachments.append((request, nil, false)) }
                    askedAlone = true
                    continue
                }
                // Without an attachment added after the newest of the target's leaves on its history,
                // the stubs are valid there; otherwise the revision is fetched again with its attachments.
                if document.attachments.isEmpty || HTTPPeer.isComplete(document, possibleAncestors: request.possibleAncestors) {
                    documents.append(document)
                } else {
                    // Inline contents come decoded (CouchDB's JSON answers), so a revision needing an
                    // encoded one comes as multipart, which keeps its bytes and digest.
                    let size = document.attachments.values.reduce(0) { $0 + $1.length }
                    let inline = size <= HTTPPeer.inlineAttachmentLimit && document.attachments.values.allSatisfy { $0.encoding == .identity }
                    withAttachments.append((FetchRequest(id: request.id, revision: document.revision ?? request.revision,
                                                         possibleAncestors: request.possibleAncestors), size, inline))
                }
            }
        }
        bulkGets.figures.withLock { $0.documents += documents.count }
        // Revisions with small attachments come in a few `_bulk_get`s with their contents inline,
        // rather than one `open_revs` request each; large ones stream as before.
        var small: [(FetchRequest, Int)] = []
        var large: [(FetchRequest, Int?)] = []
        for (request, size, inline) in withAttachments {
            if inline, let size { small.append((request, size)) } else { large.append((request, size)) }
        }
        let (inline, unread) = try await fetchInline(small)
        return documents + inline + (try await fetchWithAttachments(large + unread.map { ($0, nil) }, stagingInto: stagingDatabase))
    }

    /// Revisions whose attachments are small, with those the target lacks inline (base64): one
    /// `POST /_bulk_get?attachments=true` per group of revisions, each with its possible ancestors as
    /// `atts_since` (CouchDB 3.3 reads them per item), a group's attachments at most
    /// ``inMemoryAnswerLimit`` bytes by the lengths the first `_bulk_get` reported. Revisions a group
    /// could not read are returned as `unread`, to be asked for alone.
    private func fetchInline(_ requests: [(FetchRequest, size: Int)]) async throws -> (documents: [Document], unread: [FetchRequest]) {
        var groups: [[FetchRequest]] = []
        var groupSize = 0
        for (request, size) in requests {
            if groups.isEmpty || groupSize + size > HTTPPeer.inMemoryAnswerLimit {
                groups.append([])
                groupSize = 0
            }
            groups[groups.count - 1].append(request)
            groupSize += size
        }
        var documents: [Document] = []
        var unread: [FetchRequest] = []
        for group in groups {
            let body = BulkGet.Request(group.map {
                BulkGet.Request.Item(id: $0.id, revision: $0.revision.description, attachmentsSince: $0.possibleAncestors)
            })
            let (status, data) = try await bulkGet(body, query: "revs=true&latest=true&attachments=true")
            // Each revision counts once as a `_bulk_get` attempt: the first request counted them.
            guard status < 400, let answer = try? BulkGetAnswer(parsing: data), answer.results.count == group.count else {
                unread += group
                continue
            }
            for (request, result) in zip(group, answer.results) {
                let fetched = result.entries.compactMap { entry -> Document? in if case .document(let read) = entry { read } else { nil } }
                guard result.id.map(ExactString.init) == ExactString(request.id), fetched.count == result.entries.count,
                      fetched.allSatisfy({ HTTPPeer.isComplete($0, possibleAncestors: request.possibleAncestors) })
                else {
                    unread.append(request)
                    continue
                }
                documents += fetched
                bulkGets.figures.withLock { $0.documents += fetched.count }
            }
        }
        return (documents, unread)
    }

    /// Whether a fetched revision carries every attachment the target may lack: each has its content,
    /// or is a stub added no later than the newest of the target's possible ancestors on the
    /// revision's history (so the target has it).
    private static func isComplete(_ document: Document, possibleAncestors: [RevisionID]) -> Bool {
        let known = (document.revisionHistory ?? []).first(where: possibleAncestors.contains)?.generation ?? -1
        return document.attachments.values.allSatisfy { !$0.isStub || ($0.revpos ?? Int.max) <= known }
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
                    let (file, answer) = try await transport.download(for: urlRequest)
                    return try await readOpenRevision(.file(file), answer, request: request, path: path, stagingInto: stagingDatabase)
                }
            } else {
                let (data, answer) = try await transport.data(for: urlRequest)
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
            let bytes = try body.prefix(Int.max)
            return try decode("open_revs answer") {
                try OpenRevsEntry.decode(JSON(parsing: bytes)).compactMap { entry in
                    guard case .ok(let document) = entry else { return nil }
                    return try Document(couchJSON: document)
                }
            }
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
        for (document, (status, body)) in zip(multipart, answers) { record(document, status: status, body: body, into: &outcome) }
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
        let (status, json) = try await request("POST", "/_bulk_docs", json: BulkDocsRequest(documents: bodies, newEdits: false).json,
                                               allow: [412])
        if status == 412 {
            // CouchDB refuses the whole request for one stub: the revisions without stubs go again alone.
            outcome.missingStubs += documents.filter { document in document.attachments.values.contains(where: \.isStub) }
            let plain = documents.filter { document in !document.attachments.values.contains(where: \.isStub) }
            if !plain.isEmpty { try await storeInBulk(plain, into: &outcome) }
            return
        }
        let byID = Dictionary(documents.map { (ExactString($0.id), $0) }, uniquingKeysWith: { first, _ in first })
        for row in try decode("_bulk_docs answer", { try BulkDocsRequest.decodeAnswer(json) }) {
            guard let failure = row.failure else { continue }
            let id = row.id ?? ""
            outcome.failures.append((id, row.revision.flatMap(RevisionID.init) ?? byID[ExactString(id)]?.revision, failure.summary))
        }
    }

    /// The outcome of one multipart PUT.
    private func record(_ document: Document, status: Int, body: Data, into outcome: inout StoreOutcome) {
        guard !(200..<300).contains(status) else { return }
        let failure = ErrorBody(body: body)
        if status == 412 && failure.error == DocStoreError.Code.missingStub.couchDB {
            outcome.missingStubs.append(document)
        } else {
            outcome.failures.append((document.id, document.revision, "HTTP \(status) \(failure.summary)"))
        }
    }

    /// `PUT /db/id?new_edits=false` with the revision as `multipart/related`.
    private func putMultipart(_ document: Document) async throws -> (status: Int, body: Data) {
        let boundary = Multipart.makeBoundary()
        let related = MultipartDocument(document, revisions: true, encodingInfo: true) { $0.isStub ? .stub : .follows }
        var body = MultipartBody()
        related.appendRelated(to: &body, boundary: boundary)
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
                (data, response) = try await transport.data(for: urlRequest)
            } else {
                (data, response) = try await largeTransfers.run { [transport, urlRequest, body] in
                    let file = try await Self.spool(body)
                    defer { try? FileManager.default.removeItem(at: file) }
                    return try await transport.upload(for: urlRequest, fromFile: file)
                }
            }
        } catch let error as DocStoreError {
            throw error
        } catch {
            throw ReplicationError(.network, "PUT \(databaseURL.path)/\(document.id): \(error.localizedDescription)", cause: error)
        }
        let status = (response as? HTTPURLResponse)?.statusCode ?? 0
        // As CouchDB's replicator: a revision the target refuses (403 forbidden, 401 from a validation
        // function or a user's channels) is a write failure of that document, and the batch goes on.
        if status >= 500 || status == 0 {
            try throwError(status: status, body: data, method: "PUT", path: "/\(document.id)")
        }
        return (status, data)
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

    func filterCode(_ name: String) async throws -> String? {
        guard let (design, function) = designFunction(name) else { return nil }
        let (status, json) = try await request("GET", "/_design/\(HTTPPeer.encode(design))", allow: [404])
        return status == 200 ? json["filters"]?[function]?.stringValue : nil
    }

    func checkpoint(_ id: String) async throws -> Checkpointer.Record? {
        let (status, json) = try await request("GET", "/_local/\(HTTPPeer.encode(id))", allow: [404])
        guard status == 200, let (checkpoint, revision) = ReplicationCheckpoint.decodeLocalDocument(json) else { return nil }
        return Checkpointer.Record(checkpoint: checkpoint, revision: revision)
    }

    func saveCheckpoint(_ id: String, checkpoint: ReplicationCheckpoint, revision: String?) async throws -> String {
        let (_, json) = try await request("PUT", "/_local/\(HTTPPeer.encode(id))", json: checkpoint.localDocument(revision: revision))
        return try decode("checkpoint write answer") { try WriteResult(json: json) }.revision ?? ""
    }
}

/// The `_bulk_get` figures of one peer, shared by its copies.
final class BulkGetCounter: Sendable {
    let figures = Locked<(attempts: Int, documents: Int)>((0, 0))
}
