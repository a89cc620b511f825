import CouchProtocol
import DocStore
import DocSync
import Foundation
import HTTPTypes
import Hummingbird

extension DocServer {
    /// `POST /_replicate` (admins): a one-shot replication run by DocSync inside the server, answered
    /// when it is done, in CouchDB 3.3's form — `{"ok": true, "no_changes": true}` when there was
    /// nothing to replicate, else `{"ok", "session_id", "replication_id_version", "history": [one
    /// session]}`. `source` and `target` are names of this server's databases or URLs (credentials in
    /// the URL, or `{"url", "headers"}`); `create_target`, `doc_ids`, `selector`, `filter` and
    /// `query_params` as CouchDB. `continuous` and `cancel` are not supported yet (400).
    func replicate(_ request: CouchRequest, principal: Principal) async throws -> Response {
        guard request.method == .post else { throw CouchError(.methodNotAllowed, "method_not_allowed", "Only POST allowed") }
        guard principal.isAdmin else { throw CouchError.adminRequired }
        try request.requireJSONContentType()
        let body = try request.jsonObjectBody()
        if body["continuous"] == true || body["cancel"] == true {
            throw CouchError.badRequest("Continuous replications and their cancellation are not supported by /_replicate yet")
        }
        let createTarget = body["create_target"] == true
        var configuration = ReplicationConfiguration(source: try await endpoint(body["source"], "source", create: false),
                                                     target: try await endpoint(body["target"], "target", create: createTarget))
        configuration.createTarget = createTarget
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
        // The client waits for the answer: an unreachable peer is tried twice, not for minutes.
        configuration.retry.maximumAttempts = 2
        let started = Date()
        let status: ReplicatorStatus
        do {
            status = try await Replicator(configuration: configuration).run()
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
            "session_id": session, "start_time": .string(Self.httpDate(started)), "end_time": .string(Self.httpDate(Date())),
            "missing_checked": .integer(status.changesProcessed), "missing_found": found, "docs_read": found,
            "docs_written": .integer(status.documentsWritten), "doc_write_failures": .integer(status.documentWriteFailures),
        ]
        return Response.json(["ok": true, "session_id": session, "replication_id_version": 4, "history": [history]])
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

    /// A date as HTTP writes it (`Tue, 24 Nov 2026 11:51:43 GMT`), as CouchDB's replication history.
    static func httpDate(_ date: Date) -> String {
        date.formatted(Date.VerbatimFormatStyle(format: "\(weekday: .abbreviated), \(day: .twoDigits) \(month: .abbreviated) \(year: .defaultDigits) \(hour: .twoDigits(clock: .twentyFourHour, hourCycle: .zeroBased)):\(minute: .twoDigits):\(second: .twoDigits) GMT",
                                                locale: Locale(identifier: "en_US_POSIX"), timeZone: .gmt, calendar: Calendar(identifier: .gregorian)))
    }
}
