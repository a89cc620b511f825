import CouchProtocol
import DocStore
import Foundation
import HTTPTypes
import Hummingbird

/// CouchDB's `uuids/algorithm`, as `_uuids` and new documents without an id get them: `sequential`
/// (the default: 26 random hex digits, then a 6-digit counter that grows by a random step, a new prefix
/// when it nears its end), `random`, `utc_random` (14 hex digits of microseconds, then 18 random) and
/// `utc_id` (the microseconds and `uuids/utc_id_suffix`). An unknown algorithm gives random ids.
final class UUIDGenerator: Sendable {
    private let state = Locked<(prefix: String, counter: Int, micros: Int64)>((RandomHex.make(count: 26), 0, 0))

    func next(algorithm: String, suffix: String) -> String {
        switch algorithm {
        case "sequential":
            return state.withLock { state in
                state.counter += Int.random(in: 1...0xFFD)
                if state.counter >= 0xFFF000 {
                    state.prefix = RandomHex.make(count: 26)
                    state.counter = Int.random(in: 1...0xFFD)
                }
                return state.prefix + Self.hex(state.counter, digits: 6)
            }
        case "utc_random":
            return Self.hex(microseconds(), digits: 14) + RandomHex.make(count: 18)
        case "utc_id":
            return Self.hex(microseconds(), digits: 14) + suffix
        default:
            return RandomHex.make()
        }
    }

    /// Microseconds since 1970, one more than the last when the clock has not moved on.
    private func microseconds() -> Int64 {
        let now = Int64(Date.now.timeIntervalSince1970 * 1_000_000)
        return state.withLock { state in
            state.micros = max(now, state.micros + 1)
            return state.micros
        }
    }

    private static func hex<T: BinaryInteger>(_ value: T, digits: Int) -> String {
        let text = String(value, radix: 16)
        return String(repeating: "0", count: max(0, digits - text.count)) + text
    }
}

extension DocServer {
    /// The node's name: a single node, as CouchDB names a node that is not part of a cluster.
    static let nodeName = "nonode@nohost"

    /// A new document id, as `uuids/algorithm` makes them.
    func newUUID() -> String {
        uuids.next(algorithm: nodeConfiguration.value("uuids", "algorithm") ?? "sequential",
                   suffix: nodeConfiguration.value("uuids", "utc_id_suffix") ?? "")
    }

    /// `/_membership`, `/_node/{node}/…` (`_config`, `_versions`, `_stats`, `_system`, `_restart`,
    /// `_prometheus`) and `/_reshard`, for admins, as a single CouchDB 3.3.3 node answers them.
    func nodeRoute(_ request: CouchRequest, principal: Principal?) async throws -> Response {
        guard let principal, principal.isAdmin else { throw CouchError.adminRequired }
        let segments = request.segments
        switch segments[0] {
        case "_membership":
            guard segments.count == 1 else { throw CouchError.notFound() }
            guard request.method == .get || request.method == .head else { throw CouchError.only("GET") }
            return Response.json(["all_nodes": [.string(Self.nodeName)], "cluster_nodes": [.string(Self.nodeName)]])
        case "_reshard":
            throw CouchError(.badRequest, "bad_request", "Resharding is not supported: a DocStore database is one file, not shards")
        default:
            break
        }
        guard segments.count >= 2 else { throw CouchError.badRequest("Incomplete path to _node request") }
        guard segments[1] == "_local" || segments[1] == Self.nodeName else { throw CouchError.notFound("no such node: \(segments[1])") }
        let rest = Array(segments.dropFirst(2))
        // The node's name, to any method (as CouchDB 3.3.3).
        guard let first = rest.first else { return Response.json(["name": .string(Self.nodeName)]) }
        switch first {
        case "_config": return try configRoute(Array(rest.dropFirst()), request)
        case "_versions":
            guard request.method == .get || request.method == .head else { throw CouchError.only("GET") }
            return Response.json([
                "javascript_engine": ["name": "javascriptcore", "version": "4.1"],
                "collation_driver": ["name": "libicu"],
                "docstore": ["version": "0.1.0"],
            ])
        case "_stats":
            guard request.method == .get || request.method == .head else { throw CouchError.only("GET") }
            // The figures CouchDB also keeps (the others are at `_prometheus`); a path names a part.
            var part: JSON? = metrics.statistics()
            for step in rest.dropFirst() { part = part?[step] }
            return Response.json(part ?? .null)
        case "_system":
            guard request.method == .get || request.method == .head else { throw CouchError.only("GET") }
            return Response.json(["uptime": .integer(Int((ContinuousClock.now - started).components.seconds)),
                                  "memory": [:], "run_queue": 0, "process_count": 1, "message_queues": [:], "distribution": [:]])
        case "_restart":
            guard request.method == .post else { throw CouchError.only("POST") }
            // A restart of the node reloads its configuration; the process stays.
            nodeConfiguration.reload()
            logLevel.follow(nodeConfiguration.value("log", "level"))
            return Response.json(["ok": true])
        case "_prometheus" where rest.count == 1:
            guard request.method == .get else { throw CouchError.methodNotAllowed }
            return Response(status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                            body: ResponseBody(byteBuffer: ByteBuffer(bytes: metrics.exposition())))
        default:
            if first.hasPrefix("_") { throw CouchError(.badRequest, "illegal_database_name", "Name: '\(first)'. Only lowercase characters (a-z), digits (0-9), and any of the characters _, $, (, ), +, -, and / are allowed. Must begin with a letter.") }
            throw CouchError.notFound()
        }
    }

    /// `/_node/{node}/_config[/section[/key]]` and `_config/_reload`, as CouchDB 3.3.3 answers them:
    /// values are JSON strings; a PUT or DELETE answers the value before it; `X-Couch-Persist: false`
    /// keeps a change in memory only, until `_reload`.
    private func configRoute(_ path: [String], _ request: CouchRequest) throws -> Response {
        if path == ["_reload"] {
            guard request.method == .post else { throw CouchError.only("POST") }
            nodeConfiguration.reload()
            logLevel.follow(nodeConfiguration.value("log", "level"))
            return Response.json(["ok": true])
        }
        switch path.count {
        case 0:
            guard request.method == .get || request.method == .head else { throw CouchError.only("GET") }
            return Response.json(.object(JSONObject(nodeConfiguration.all().sorted { $0.key < $1.key }.map { section, values in
                (section, JSON.object(JSONObject(values.sorted { $0.key < $1.key }.map { ($0.key, JSON.string($0.value)) })))
            })))
        case 1:
            guard request.method == .get || request.method == .head else { throw CouchError.only("GET") }
            return Response.json(.object(JSONObject(nodeConfiguration.section(path[0]).sorted { $0.key < $1.key }.map { ($0.key, JSON.string($0.value)) })))
        case 2:
            let (section, key) = (path[0], path[1])
            let persist = request.header(HTTPField.Name("X-Couch-Persist")!) != "false"
            switch request.method {
            case .get, .head:
                guard let value = nodeConfiguration.value(section, key) else { throw CouchError.notFound("unknown_config_value") }
                return Response.json(.string(value))
            case .put:
                guard !NodeConfiguration.protectedSections.contains(section) else {
                    throw CouchError.forbidden("Config section blacklisted for modification over HTTP API.")
                }
                guard !request.body.isEmpty else { throw CouchError.badRequest("Missing request body") }
                guard let parsed = try? JSON(parsing: request.body) else { throw CouchError.badRequest("invalid UTF-8 JSON") }
                guard case .string(let text) = parsed else { throw CouchError.badRequest("The value must be a JSON string") }
                var value = text.trimmingCharacters(in: CharacterSet(charactersIn: "\t\n\u{0B}\u{0C}\r "))
                if section == "admins" {
                    value = NodeConfiguration.hashedAdminPassword(value, iterations: nodeConfiguration.integer(
                        "chttpd_auth", "iterations", default: nodeConfiguration.integer("couch_httpd_auth", "iterations", default: 10)))
                }
                let old = try nodeConfiguration.set(section, key, to: value, persist: persist)
                if section == "log", key == "level" { logLevel.follow(value) }
                return Response.json(.string(old ?? ""))
            case .delete:
                guard !NodeConfiguration.protectedSections.contains(section) else {
                    throw CouchError.forbidden("Config section blacklisted for modification over HTTP API.")
                }
                guard let old = nodeConfiguration.value(section, key) else { throw CouchError.notFound("unknown_config_value") }
                try nodeConfiguration.set(section, key, to: nil, persist: persist)
                if section == "log", key == "level" { logLevel.follow(nil) }
                return Response.json(.string(old))
            default:
                throw CouchError.only("GET,PUT,DELETE")
            }
        default:
            throw CouchError.notFound()
        }
    }
}
