import ArgumentParser
import DocStore
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A database on a CouchDB-compatible server (Apache CouchDB, DocServer, …), as `--db
/// http://user:password@host:5984/db` names it: the commands ask it over HTTP what they would ask a
/// local database, and print its JSON answers.
struct RemoteDatabase: Sendable {
    /// The database's URL, without credentials.
    let url: URL
    /// The URL as given, credentials included, for a replication to read.
    let replicationURL: URL
    /// `Basic …` from the URL's credentials.
    let authorization: String?

    /// The database `text` names, if it is an `http` or `https` URL.
    init?(_ text: String) {
        guard text.hasPrefix("http://") || text.hasPrefix("https://") else { return nil }
        guard var components = URLComponents(string: text), components.host != nil,
              components.path.split(separator: "/").count == 1, let replicationURL = components.url else {
            fail("bad_request: \(text) is not a database URL (http://user:password@host:port/db)")
        }
        self.replicationURL = replicationURL
        if let user = components.percentEncodedUser {
            let name = user.removingPercentEncoding ?? user
            let password = components.percentEncodedPassword.map { $0.removingPercentEncoding ?? $0 } ?? ""
            authorization = "Basic " + Data("\(name):\(password)".utf8).base64EncodedString()
        } else {
            authorization = nil
        }
        components.user = nil
        components.password = nil
        components.query = nil
        components.fragment = nil
        guard let url = components.url else { fail("bad_request: \(text) is not a database URL") }
        self.url = url
    }

    /// The database's name on its server.
    var name: String { url.lastPathComponent }

    /// `path` under the database (a document id, `_all_docs`, …; empty for the database itself),
    /// asked with `method`, the `query` parameters that have a value and a JSON `body`. Returns the
    /// answer's JSON; an error status throws a ``RemoteError`` with CouchDB's `error` and `reason`.
    func json(_ method: String, _ path: String = "", query: [(String, String?)] = [], body: JSON? = nil) async throws -> JSON {
        var text = url.absoluteString
        if !path.isEmpty { text += "/" + path }
        let parameters = query.compactMap { name, value in value.map { Self.encode(name) + "=" + Self.encode($0) } }
        if !parameters.isEmpty { text += "?" + parameters.joined(separator: "&") }
        guard let requestURL = URL(string: text) else { throw RemoteError(error: "bad_request", reason: "cannot ask \(text)") }
        var request = URLRequest(url: requestURL)
        request.httpMethod = method
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        if let authorization { request.setValue(authorization, forHTTPHeaderField: "Authorization") }
        if let body {
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            request.httpBody = Data(try body.serialized())
        }
        let data: Data
        let response: URLResponse
        do {
            (data, response) = try await URLSession.shared.data(for: request)
        } catch {
            throw RemoteError(error: "network", reason: "\(url.host ?? "the server") did not answer: \(error.localizedDescription)")
        }
        let status = (response as? HTTPURLResponse)?.statusCode ?? 0
        let answer = try? JSON(parsing: data)
        guard (200..<300).contains(status) else {
            throw RemoteError(error: answer?["error"]?.stringValue ?? "http_\(status)",
                              reason: answer?["reason"]?.stringValue ?? String(decoding: data.prefix(200), as: UTF8.self))
        }
        guard let answer else { throw RemoteError(error: "bad_response", reason: "the answer to \(method) \(text) is not JSON") }
        return answer
    }

    /// A document's path: its id percent-encoded, but for the slash after `_design` or `_local`.
    static func documentPath(_ id: String) -> String {
        for prefix in ["_design/", "_local/"] where id.hasPrefix(prefix) {
            return prefix + encode(String(id.dropFirst(prefix.count)))
        }
        return encode(id)
    }

    /// `text` percent-encoded for a path segment or a query value: everything but letters, digits and
    /// `-._~` (so `+`, `&`, `=` and `/` in JSON keys and ids arrive as written).
    static func encode(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: unreserved) ?? text
    }

    private static let unreserved = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~")
}

/// An error answer of a server, or a server that did not answer.
struct RemoteError: Error {
    /// CouchDB's `error` (`not_found`, `conflict`, …).
    let error: String
    let reason: String
}

/// Runs a command body with the remote database `--db` names, turning errors into one clear line on
/// standard error and a non-zero exit code, as ``withDatabase(_:_:)`` does for a local one.
func withRemote(_ remote: RemoteDatabase, _ body: (RemoteDatabase) async throws -> Void) async throws {
    try await reportingErrors { try await body(remote) }
}
