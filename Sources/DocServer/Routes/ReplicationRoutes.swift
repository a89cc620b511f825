import CouchProtocol
import DocStore
import DocSync
import Foundation
import HTTPTypes
import Hummingbird
import Crypto
import Synchronization

extension DocServer {
    /// `POST /_replicate` (admins): a one-shot replication run by DocSync inside the server, answered
    /// when it is done, in CouchDB 3.3's form — `{"ok": true, "no_changes": true}` when there was
    /// nothing to replicate, else `{"ok", "session_id", "replication_id_version", "history": [one
    /// session]}`. `source` and `target` are names of this server's databases or URLs (credentials in
    /// the URL, or `{"url", "headers"}`); `create_target`, `doc_ids`, `selector`, `filter` and
    /// `query_params` as CouchDB.
    ///
    /// With `"continuous": true` the replication starts in the background and the answer comes at once:
    /// `{"ok": true, "_local_id": "<id>+continuous"}`, the id a digest of the source, target and
    /// options (the same request again finds the same job). `"cancel": true` with the same
    /// description stops it (`{"ok": true, "_local_id": …}`; 404 `missing` when there is none).
    /// Running replications are listed by `GET /_active_tasks`.
    func replicate(_ request: CouchRequest, principal: Principal) async throws -> Response {
        guard request.method == .post else { throw CouchError(.methodNotAllowed, "method_not_allowed", "Only POST allowed") }
        guard principal.isAdmin else { throw CouchError.adminRequired }
        try request.requireJSONContentType()
        let body = try request.jsonObjectBody()
        let continuous = body["continuous"] == true
        let id = try ReplicationJobs.identifier(of: body) + (continuous ? "+continuous" : "")
        if body["cancel"] == true {
            guard await replications.cancel(id) else { throw CouchError.notFound("missing") }
            return Response.json(["ok": true, "_local_id": .string(id)])
        }
        if continuous, replications.contains(id) { return Response.json(["ok": true, "_local_id": .string(id)]) }
        let createTarget = body["create_target"] == true
        var configuration = ReplicationConfiguration(source: try await endpoint(body["source"], "source", create: false),
                                                     target: try await endpoint(body["target"], "target", create: createTarget))
        configuration.createTarget = createTarget
        configuration.logger = logger
        if let ids = body["doc_ids"] {
            guard let list = ids.arrayValue?.compactMap(\.stringValue), list.count == ids.arrayValue?.count else {
                throw CouchError.badRequest("doc_ids must be an array of strings")
            }
            configuration.documentIDs = list
        }
        if let selector = body["selector"] {
            guard case .object = selector else { throw CouchError.badRequest("selector must be an object") }
            configuration.selector = selector
        }
        if let filter = body["filter"] {
            guard let name = filter.stringValue else { throw CouchError.badRequest("filter must be a string") }
            configuration.filterName = name
        }
        if case .object(let parameters)? = body["query_params"] {
            for (name, value) in parameters { configuration.filterParameters[name] = value.stringValue ?? value.description }
        }
        let description = ReplicationJobs.Description(id: id, source: configuration.source.logDescription,
                                                     target: configuration.target.logDescription,
                                                     continuous: continuous, user: principal.name, started: Date())
        if continuous {
            configuration.continuous = true
            let replicator = Replicator(configuration: configuration)
            replications.add(replicator, description)
            replicator.start()
            return Response.json(["ok": true, "_local_id": .string(id)])
        }
        // The client waits for the answer: an unreachable peer is tried twice, not for minutes.
        configuration.retry.maximumAttempts = 2
        let started = Date()
        let status: ReplicatorStatus
        let replicator = Replicator(configuration: configuration)
        replications.add(replicator, description)
        defer { replications.remove(id, replicator) }
        do {
            status = try await replicator.run()
        } catch let error as ReplicationError {
            throw CouchError(.badGateway, "replication_failed", error.description)
        }
        if let error = status.error {
            throw CouchError(.badGateway, "replication_failed", error.description)
        }
        if status.changesProcessed == 0 { return Response.json(["ok": true, "no_changes": true]) }
        let session = JSON.string(UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: ""))
        let found = JSON.integer(status.documentsWritten + status.documentWriteFailures)
        let history: JSON = [
            "session_id": session, "start_time": .string(started.checkpointTimestamp), "end_time": .string(Date.now.checkpointTimestamp),
            "missing_checked": .integer(status.changesProcessed), "missing_found": found, "docs_read": found,
            "docs_written": .integer(status.documentsWritten), "doc_write_failures": .integer(status.documentWriteFailures),
        ]
        return Response.json(["ok": true, "session_id": session, "replication_id_version": 4, "history": [history]])
    }

    /// `GET /_active_tasks` (admins): the replications running, in CouchDB's form.
    func activeTasks(_ request: CouchRequest, principal: Principal) throws -> Response {
        guard request.method == .get else { throw CouchError(.methodNotAllowed, "method_not_allowed", "Only GET allowed") }
        guard principal.isAdmin else { throw CouchError.adminRequired }
        return Response.json(.array(replications.tasks()))
    }

    /// A replication endpoint named in a `_replicate` body: a URL (a string, or `{"url", "headers"}`
    /// with an `Authorization` header) or the name of one of this server's databases.
    private func endpoint(_ value: JSON?, _ role: String, create: Bool) async throws -> ReplicationEndpoint {
        var text = value?.stringValue
        var authorization: String?
        if case .object(let object)? = value {
            text = object["url"]?.stringValue
            authorization = object["headers"]?["Authorization"]?.stringValue
        }
        guard let text, !text.isEmpty else { throw CouchError.badRequest("Must specify \(role) as a database name or URL") }
        if text.hasPrefix("http://") || text.hasPrefix("https://") {
            guard var components = URLComponents(string: text) else { throw CouchError.badRequest("Invalid \(role) URL") }
            if let authorization, authorization.hasPrefix("Basic "),
                let decoded = Data(base64Encoded: String(authorization.dropFirst(6))).map({ String(decoding: $0, as: UTF8.self) }),
                let colon = decoded.firstIndex(of: ":") {
                components.user = String(decoded[..<colon])
                components.password = String(decoded[decoded.index(after: colon)...])
            }
            guard let url = components.url else { throw CouchError.badRequest("Invalid \(role) URL") }
            return .remote(url)
        }
        try DatabaseRegistry.validate(text)
        if !registry.exists(text) {
            guard create else { throw CouchError(.notFound, "db_not_found", "could not open \(text)") }
            return .local(try await registry.open(text))
        }
        return .local(try await registry.database(named: text))
    }
}

/// The replications `POST /_replicate` started and that are still running, for `cancel` and
/// `_active_tasks`; stopped with the server.
final class ReplicationJobs: Sendable {
    struct Description: Sendable {
        let id: String
        let source: String
        let target: String
        let continuous: Bool
        let user: String?
        let started: Date
    }

    private let jobs = Mutex<[String: (replicator: Replicator, description: Description)]>([:])

    /// The identifier of a replication: a digest of its source, target and options (as CouchDB's
    /// replication id, which does not depend on `continuous`, `cancel` or `create_target`).
    static func identifier(of body: JSONObject) throws -> String {
        var described = JSONObject()
        for key in ["source", "target", "doc_ids", "selector", "filter", "query_params"] {
            if let value = body[key] { described[key] = value }
        }
        let text = try JSON.object(described).serializedString()
        return Insecure.MD5.hash(data: Data(text.utf8)).map { String(format: "%02x", $0) }.joined()
    }

    func contains(_ id: String) -> Bool { jobs.withLock { $0[id] != nil } }

    func add(_ replicator: Replicator, _ description: Description) {
        jobs.withLock { $0[description.id] = (replicator, description) }
    }

    /// Forgets a finished job, unless another has taken its place.
    func remove(_ id: String, _ replicator: Replicator) {
        jobs.withLock { jobs in if jobs[id]?.replicator === replicator { jobs.removeValue(forKey: id) } }
    }

    /// Stops and forgets a job; whether there was one.
    func cancel(_ id: String) async -> Bool {
        guard let job = jobs.withLock({ $0.removeValue(forKey: id) }) else { return false }
        await job.replicator.stop()
        return true
    }

    func stopAll() async {
        let all = jobs.withLock { jobs in
            defer { jobs = [:] }
            return Array(jobs.values)
        }
        for job in all { await job.replicator.stop() }
    }

    /// The running jobs as CouchDB's `_active_tasks` lists replications.
    func tasks() -> [JSON] {
        let now = Int(Date().timeIntervalSince1970)
        return jobs.withLock { $0.values.sorted { $0.description.id < $1.description.id } }.map { job in
            let status = job.replicator.status
            let description = job.description
            let found = status.documentsWritten + status.documentWriteFailures
            return [
                "type": "replication", "replication_id": .string(description.id), "continuous": .bool(description.continuous),
                "source": .string(description.source), "target": .string(description.target),
                "docs_read": .integer(found), "docs_written": .integer(status.documentsWritten),
                "doc_write_failures": .integer(status.documentWriteFailures), "revisions_checked": .integer(status.changesProcessed),
                "missing_revisions_found": .integer(found), "changes_pending": .null,
                "process_status": .string(status.activity == .busy ? "running" : "waiting"),
                "started_on": .integer(Int(description.started.timeIntervalSince1970)), "updated_on": .integer(now),
                "user": description.user.map(JSON.string) ?? .null,
            ]
        }
    }
}
