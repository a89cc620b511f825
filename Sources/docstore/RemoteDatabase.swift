import CouchProtocol
import DocStore
import DocSync
import Foundation

/// The `--db` of a command when it names a database on a CouchDB-compatible server (Apache CouchDB,
/// `docstore serve`, …): `http://user:password@host:5984/db`. Only the scheme is looked at here;
/// ``withRemote(_:_:)`` reads the rest, where a malformed URL is an error like any other.
struct RemoteAddress: Sendable {
    /// `--db` as given, credentials included.
    let text: String

    /// The address `text` names, if it is an `http` or `https` URL.
    init?(_ text: String) {
        guard text.hasPrefix("http://") || text.hasPrefix("https://") else { return nil }
        self.text = text
    }

    /// The database URL, credentials included (for a replication to read).
    func url() throws -> URL {
        guard let components = URLComponents(string: text), components.host != nil,
              components.path.split(separator: "/").count == 1, let url = components.url else {
            throw RemoteError(error: "bad_request", reason: "\(text) is not a database URL (http://user:password@host:port/db)")
        }
        return url
    }
}

/// A database on a server, asked over DocSync's HTTP client (its credentials, session login,
/// timeouts and connection handling): the commands ask it over HTTP what they would ask a local
/// database, and print its JSON answers.
struct RemoteDatabase: Sendable {
    /// The URL as given, credentials included, for a replication to read.
    let replicationURL: URL
    let peer: HTTPPeer

    /// The database's name on its server.
    var name: String { peer.databaseURL.lastPathComponent }

    /// `path` under the database (already encoded with ``encode(_:)``: a document id, `_all_docs`, …;
    /// empty for the database itself), asked with `method`, the `query` parameters that have a value
    /// and a JSON `body`. Returns the answer's JSON; an error status throws a ``RemoteError`` with
    /// CouchDB's `error` and `reason`.
    func json(_ method: String, _ path: String = "", query: [(String, String?)] = [], body: JSON? = nil) async throws -> JSON {
        var target = path.isEmpty ? "" : "/" + path
        let parameters = query.compactMap { name, value in
            value.map { HTTPPeer.encodeQuery(name) + "=" + HTTPPeer.encodeQuery($0) }
        }
        if !parameters.isEmpty { target += "?" + parameters.joined(separator: "&") }
        let (status, data) = try await peer.send(method, target, json: body)
        guard (200..<300).contains(status) else {
            let answer = ErrorBody(body: data)
            throw RemoteError(error: answer.error == "unknown_error" ? "http_\(status)" : answer.error, reason: answer.reason)
        }
        guard let answer = try? JSON(parsing: data) else {
            throw RemoteError(error: "bad_response", reason: "the answer to \(method) \(name)\(target) is not JSON")
        }
        return answer
    }

    /// A document's path: its id percent-encoded, but for the slash after `_design` or `_local`.
    static func documentPath(_ id: String) -> String {
        for prefix in ["_design/", "_local/"] where id.hasPrefix(prefix) {
            return prefix + encode(String(id.dropFirst(prefix.count)))
        }
        return encode(id)
    }

    /// `text` percent-encoded for one path segment, as DocSync encodes them.
    static func encode(_ text: String) -> String {
        HTTPPeer.encode(text)
    }
}

/// An error answer of a server, or a server that did not answer.
struct RemoteError: Error {
    /// CouchDB's `error` (`not_found`, `conflict`, …).
    let error: String
    let reason: String
}

/// Runs a command body with the server's database `address` names, connected through DocSync's
/// client and closed afterwards, turning errors (the client's `ReplicationError`s included) into one
/// clear line on standard error and a non-zero exit code, as ``withDatabase(_:_:)`` does for a local one.
func withRemote(_ address: RemoteAddress, _ body: (RemoteDatabase) async throws -> Void) async throws {
    try await reportingErrors {
        let url = try address.url()
        var configuration = ReplicationConfiguration(source: .remote(url), target: .remote(url))
        configuration.maximumRequestsInFlight = 1
        let peer = try await HTTPPeer.connect(url, configuration: configuration, clock: ContinuousClock())
        defer { peer.close() }
        try await body(RemoteDatabase(replicationURL: url, peer: peer))
    }
}
