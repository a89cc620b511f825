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
        return HTTPPeer(databaseURL: databaseURL, session: session, headers: headers, channelsByFilter: byFilter)
    }

    /// Lets running requests finish, then frees the session: a URL session that is never invalidated
    /// stays alive with its connections and buffers (one per replication run, in a long-lived process).
    func close() {
        session.finishTasksAndInvalidate()
    }

    // MARK: Requests

    /// Sends a request to `path` under the database URL (already percent-encoded, query included).
    func send(_ method: String, _ path: String = "", json: JSON? = nil) async throws -> (status: Int, body: Data) {
        guard let url = URL(string: databaseURL.absoluteString + path) else {
            throw ReplicationError(.invalidConfiguration, "Bad request path \(path)")
        }
        var request = URLRequest(url: url)
        request.httpMethod = method
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        request.setValue("application/json", forHTTPHeaderField: "Accept")
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
        let body = (try? JSON(parsing: data)) ?? .null
        if status >= 400 && !allow.contains(status) {
            let reason = body["reason"]?.stringValue ?? body["error"]?.stringValue ?? String(decoding: data.prefix(200), as: UTF8.self)
            switch status {
            case 401: throw ReplicationError(.unauthorized, "\(databaseURL.absoluteString): \(reason)", httpStatus: status)
            case 403: throw ReplicationError(.forbidden, "\(databaseURL.absoluteString)\(path): \(reason)", httpStatus: status)
            default: throw ReplicationError(.badResponse, "\(method) \(databaseURL.path)\(path.prefix(80)): \(reason)", httpStatus: status)
            }
        }
        return (status, body)
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

    func fetch(_ requests: [(id: String, revision: RevisionID, attsSince: [RevisionID])]) async throws -> [Document] {
        let docs: [JSON] = requests.map { request in
            var spec: JSONObject = ["id": .string(request.id), "rev": .string(request.revision.description)]
            if !request.attsSince.isEmpty { spec["atts_since"] = JSON(request.attsSince.map(\.description)) }
            return .object(spec)
        }
        let (status, json) = try await request("POST", "/_bulk_get?revs=true&attachments=true", json: ["docs": .array(docs)],
                                               allow: [400, 404, 405, 501])
        if status >= 400 { return try await fetchOneByOne(requests) }
        var documents: [Document] = []
        for result in json["results"]?.arrayValue ?? [] {
            for entry in result["docs"]?.arrayValue ?? [] {
                if let ok = entry["ok"] { documents.append(try Document(json: ok)) }
            }
        }
        return documents
    }

    /// The fallback for servers without `_bulk_get`:
    /// `GET /db/id?open_revs=["rev"]&revs=true&latest=true&attachments=true`, answered as JSON.
    private func fetchOneByOne(_ requests: [(id: String, revision: RevisionID, attsSince: [RevisionID])]) async throws -> [Document] {
        var documents: [Document] = []
        for request in requests {
            let openRevs = HTTPPeer.encodeQuery(JSON([request.revision.description]).description)
            var path = "/\(HTTPPeer.encode(request.id))?open_revs=\(openRevs)&revs=true&latest=true&attachments=true"
            if !request.attsSince.isEmpty {
                path += "&atts_since=" + HTTPPeer.encodeQuery(JSON(request.attsSince.map(\.description)).description)
            }
            let (status, json) = try await self.request("GET", path, allow: [404])
            guard status == 200 else { continue }
            for entry in json.arrayValue ?? [] {
                if let ok = entry["ok"] { documents.append(try Document(json: ok)) }
            }
        }
        return documents
    }

    func store(_ documents: [Document]) async throws -> [(id: String, reason: String)] {
        guard !documents.isEmpty else { return [] }
        let body: JSON = ["docs": .array(documents.map { $0.json(attachmentData: true, revisions: true) }), "new_edits": false]
        let (_, json) = try await request("POST", "/_bulk_docs", json: body)
        return (json.arrayValue ?? []).compactMap { row in
            guard let error = row["error"]?.stringValue else { return nil }
            return (row["id"]?.stringValue ?? "", "\(error): \(row["reason"]?.stringValue ?? "")")
        }
    }

    func checkpoint(_ id: String) async throws -> (body: JSONObject, revision: String)? {
        let (status, json) = try await request("GET", "/_local/\(HTTPPeer.encode(id))", allow: [404])
        guard status == 200, case .object(var body) = json else { return nil }
        let revision = body.removeValue(forKey: "_rev")?.stringValue ?? ""
        body.removeValue(forKey: "_id")
        return (body, revision)
    }

    func saveCheckpoint(_ id: String, body: JSONObject, revision: String?) async throws -> String {
        var document = body
        if let revision { document["_rev"] = .string(revision) }
        let (_, json) = try await request("PUT", "/_local/\(HTTPPeer.encode(id))", json: .object(document))
        return json["rev"]?.stringValue ?? ""
    }
}
