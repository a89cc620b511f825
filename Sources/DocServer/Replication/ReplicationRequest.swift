import CouchProtocol
import Crypto
import DocStore
import Foundation

/// A replication as a `POST /_replicate` body or a `_replicator` document describes it, read and
/// checked with CouchDB 3.3's rules and messages.
///
/// `source` and `target` are URLs — a string, or `{"url", "headers": {"Authorization": "Basic …"},
/// "auth": {"basic": {"username", "password"}}}` — or, beyond CouchDB 3.3 (which refuses local
/// endpoints), the name of one of this server's databases.
struct ReplicationRequest: Sendable, Hashable {
    /// One end of a replication.
    enum Endpoint: Sendable, Hashable {
        /// A database of this server.
        case local(String)
        /// A database at a URL, credentials included, and the headers to send it (but a Basic
        /// `Authorization`, which becomes the URL's credentials).
        case remote(URL, headers: [String: String] = [:])

        /// The endpoint as CouchDB shows it: the name, or the URL without credentials and with a
        /// trailing slash.
        var description: String {
            switch self {
            case .local(let name): return name
            case .remote(let url, _):
                guard var components = URLComponents(url: url, resolvingAgainstBaseURL: false) else { return "" }
                components.user = nil
                components.password = nil
                if !components.path.hasSuffix("/") { components.path += "/" }
                return components.string ?? ""
            }
        }
    }

    /// Why a description is refused: CouchDB's message, and the form a `_replicator` document's
    /// refusal shows it in (CouchDB prints the Erlang exception there).
    struct Invalid: Error, Sendable {
        let message: String
        let documentReason: String

        /// A bad option: `{throw,{bad_request,<<"…">>}}` in a document's refusal.
        static func option(_ message: String) -> Invalid {
            Invalid(message: message, documentReason: "{throw,{bad_request,<<\"\(message)\">>}}")
        }
    }

    var source: Endpoint
    var target: Endpoint
    var continuous = false
    var createTarget = false
    var cancel = false
    var documentIDs: [String]?
    /// `since_seq`: the source sequence to start after.
    var sinceSequence: JSON?
    var selector: JSON?
    var filter: String?
    var queryParameters: [String: String] = [:]
    /// `checkpoint_interval`: milliseconds between checkpoints while catching up (CouchDB's 30 000 when
    /// not given).
    var checkpointInterval: Int?
    /// CouchDB's `[replicator] checkpoint_interval`, in milliseconds.
    static let defaultCheckpointInterval = 30_000
    /// `worker_batch_size`: changes handled per batch (CouchDB's 500 when not given).
    var workerBatchSize: Int?
    /// CouchDB's `[replicator] worker_batch_size`.
    static let defaultWorkerBatchSize = 500

    /// Reads a description; throws ``Invalid`` with CouchDB's message for what CouchDB refuses.
    init(_ body: JSONObject) throws(Invalid) {
        func flag(_ name: String) throws(Invalid) -> Bool {
            guard let value = body[name], value != .null else { return false }
            guard let bool = value.boolValue else { throw .option("parameter `\(name)` must be a boolean") }
            return bool
        }
        /// An integer option from `least` up, given as a number or (as CouchDB takes it) its digits.
        func integer(_ name: String, least: Int, _ requirement: String) throws(Invalid) -> Int? {
            guard let value = body[name], value != .null else { return nil }
            guard let number = value.intValue ?? value.stringValue.flatMap({ Int($0) }), number >= least else {
                throw .option("parameter `\(name)` must be a \(requirement) integer")
            }
            return number
        }
        continuous = try flag("continuous")
        createTarget = try flag("create_target")
        if let value = body["since_seq"], value != .null { sinceSequence = value }
        cancel = try flag("cancel")
        if let value = body["doc_ids"], value != .null {
            guard let items = value.arrayValue else { throw .option("parameter `doc_ids` must be an array") }
            let ids = items.compactMap(\.stringValue)
            guard ids.count == items.count else { throw .option("parameter `doc_ids` must be an array of strings") }
            // As CouchDB: the ids are URL-decoded (`_design%2Ffoo` is `_design/foo`), sorted, each once.
            documentIDs = Set(ids.map { $0.removingPercentEncoding ?? $0 }).sorted()
        }
        if let value = body["selector"] {
            guard case .object = value else { throw .option("parameter `selector` must be a JSON object") }
            selector = value
        }
        if let value = body["filter"], value != .null {
            guard let name = value.stringValue else { throw .option("parameter `filter` must be a string") }
            filter = name
        }
        if let value = body["query_params"] {
            guard case .object(let parameters) = value else { throw .option("parameter `query_params` must be an object") }
            for (name, value) in parameters { queryParameters[name] = value.stringValue ?? value.description }
        }
        checkpointInterval = try integer("checkpoint_interval", least: 0, "non-negative")
        workerBatchSize = try integer("worker_batch_size", least: 1, "positive")
        if [documentIDs != nil, selector != nil, filter != nil].filter({ $0 }).count > 1 {
            let message = "`doc_ids`,`filter`,`selector` are mutually exclusive"
            throw Invalid(message: message, documentReason: "{throw,{bad_request,\"\(message)\"}}")
        }
        source = try ReplicationRequest.endpoint(body["source"])
        target = try ReplicationRequest.endpoint(body["target"])
        if case .remote(_, let sourceHeaders) = source, case .remote(_, let targetHeaders) = target, sourceHeaders != targetHeaders {
            // DocSync sends one set of headers to both sides; one side's must not reach the other.
            throw .option("`headers` other than Basic `Authorization` must be the same for source and target")
        }
    }

    /// The headers given with the remote endpoint(s), for every request of the replication.
    var headers: [String: String] {
        var headers: [String: String] = [:]
        for endpoint in [source, target] {
            if case .remote(_, let given) = endpoint { headers.merge(given) { first, _ in first } }
        }
        return headers
    }

    private static func endpoint(_ value: JSON?) throws(Invalid) -> Endpoint {
        let missing = Invalid(message: "Missing replicator database", documentReason: "Missing replicator database")
        var text = value?.stringValue
        var user: String?
        var password: String?
        var headers: [String: String] = [:]
        if case .object(let object)? = value {
            text = object["url"]?.stringValue
            if case .object(let given)? = object["headers"] {
                for (name, value) in given {
                    guard let value = value.stringValue else { throw .option("header `\(name)` must be a string") }
                    headers[name] = value
                }
            }
            if let name = headers.keys.first(where: { $0.lowercased() == "authorization" }), let header = headers[name],
                header.hasPrefix("Basic "),
                let decoded = Data(base64Encoded: String(header.dropFirst(6))).map({ String(decoding: $0, as: UTF8.self) }),
                let colon = decoded.firstIndex(of: ":") {
                user = String(decoded[..<colon])
                password = String(decoded[decoded.index(after: colon)...])
                headers.removeValue(forKey: name)
            }
            if let basic = object["auth"]?["basic"], let name = basic["username"]?.stringValue, let secret = basic["password"]?.stringValue {
                (user, password) = (name, secret)
            }
        }
        guard let text, !text.isEmpty else { throw missing }
        guard text.hasPrefix("http://") || text.hasPrefix("https://") else {
            guard (try? DatabaseRegistry.validate(text)) != nil else { throw missing }
            return .local(text)
        }
        guard var components = URLComponents(string: text), components.host?.isEmpty == false else {
            throw Invalid(message: "Invalid URL \(text)", documentReason: "Invalid URL \(text)")
        }
        if let user, let password {
            components.user = user
            components.password = password
        }
        guard let url = components.url else { throw Invalid(message: "Invalid URL \(text)", documentReason: "Invalid URL \(text)") }
        return .remote(url, headers: headers)
    }

    /// The replication's id, as CouchDB's: a digest of the server, the endpoints (without
    /// credentials) and what is replicated, then `+continuous` and `+create_target` as they apply.
    /// The same replication described again — with other credentials, or cancelled — has the same id.
    func identifier(server: String) -> String {
        var described: JSONObject = ["server": .string(server), "source": .string(source.description), "target": .string(target.description)]
        if let documentIDs { described["doc_ids"] = JSON(documentIDs) }
        if let sinceSequence { described["since_seq"] = sinceSequence }
        if let selector { described["selector"] = selector }
        if let filter {
            described["filter"] = .string(filter)
            described["query_params"] = .object(JSONObject(queryParameters.sorted { $0.key < $1.key }.map { ($0.key, JSON.string($0.value)) }))
        }
        let text = (try? JSON.object(described).serializedString()) ?? ""
        let base = Insecure.MD5.hash(data: Data(text.utf8)).map { String(format: "%02x", $0) }.joined()
        return base + (continuous ? "+continuous" : "") + (createTarget ? "+create_target" : "")
    }
}
