import CouchProtocol
import DocStore
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The CouchDB session of ``ReplicationAuthentication/session(name:password:)``, kept as CouchDB's own
/// replicator keeps it: signed in at `POST /_session`, its `AuthSession` cookie sent with every
/// request, replaced by the fresh cookie a server sends while the session is in use, and signed in for
/// again when the server answers 401 (the session ended: its lifetime, a password change, a restart).
final class SessionLogin: Sendable {
    /// The server's `/_session`.
    let url: URL
    let name: String
    let password: String
    private let cookie = Locked<String?>(nil)

    init(url: URL, name: String, password: String) {
        self.url = url
        self.name = name
        self.password = password
    }

    /// The cookie to send (`AuthSession=…`), once signed in.
    var header: String? { cookie.withLock { $0 }.map { "AuthSession=" + $0 } }

    /// Signs in (again) with the name and password; `headers` are the replication's own.
    func signIn(on transport: HTTPTransport, headers: [String: String]) async throws {
        var request = URLRequest(url: url)
        request.httpMethod = "POST"
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        request.httpBody = try JSON.object(["name": .string(name), "password": .string(password)]).serializedData()
        let data: Data, response: URLResponse
        do {
            (data, response) = try await transport.data(for: request)
        } catch {
            throw ReplicationError(.network, "POST \(url.path): \(error.localizedDescription)", cause: error)
        }
        let status = (response as? HTTPURLResponse)?.statusCode ?? 0
        guard (200..<300).contains(status) else {
            throw ReplicationError(status: status, body: data, context: "POST \(url.absoluteString) (signing in as \(name))")
        }
        guard let http = response as? HTTPURLResponse, remember(http) else {
            throw ReplicationError(.unauthorized, "\(url.absoluteString) signed \(name) in without a session cookie")
        }
    }

    /// Keeps the session cookie an answer sets (a renewed one); whether it set one.
    @discardableResult
    func remember(_ response: HTTPURLResponse) -> Bool {
        guard let setCookie = response.value(forHTTPHeaderField: "Set-Cookie") else { return false }
        for part in setCookie.split(separator: ";") {
            let field = part.trimmingCharacters(in: .whitespaces)
            guard field.hasPrefix("AuthSession=") else { continue }
            let value = String(field.dropFirst("AuthSession=".count))
            guard !value.isEmpty else { return false }
            cookie.withLock { $0 = value }
            return true
        }
        return false
    }
}
