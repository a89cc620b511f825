import Crypto
import DocStore
import Foundation
import HTTPTypes
import Hummingbird

/// Who is making a request.
enum Principal: Sendable {
    /// A server administrator (or anyone, when anonymous access is allowed), with the roles of a user
    /// document of the same name, if there is one.
    case admin(name: String?, roles: [String] = [])
    /// A user with roles and channel grants.
    case user(ServerUser)

    var isAdmin: Bool { if case .admin = self { return true } else { return false } }

    /// Whether the principal administers the database of the request: a server admin, or a user its
    /// `_security` object names among `admins` — who may write design documents and `_security`.
    var isDatabaseAdmin: Bool {
        switch self {
        case .admin: return true
        case .user(let user): return user.isDatabaseAdmin
        }
    }

    var name: String? {
        switch self {
        case .admin(let name, _): return name
        case .user(let user): return user.name
        }
    }

    /// The roles `userCtx` shows: `_admin` first for an administrator.
    var roles: [String] {
        switch self {
        case .admin(_, let roles): return ["_admin"] + roles.filter { $0 != "_admin" }
        case .user(let user): return user.roles
        }
    }

    /// Whether the principal may read `document` — whose channels are not read for an admin, nor for a
    /// user who reads every channel (a stored body then stays unparsed).
    func canRead(_ document: Document) -> Bool {
        switch self {
        case .admin: return true
        case .user(let user): return user.canRead(document.channels(inField: user.channelsField))
        }
    }

    /// Whether the principal may write `document` into its channels.
    func canWrite(_ document: Document) -> Bool {
        switch self {
        case .admin: return true
        case .user(let user): return user.canWrite(document.channels(inField: user.channelsField))
        }
    }

    /// The channels of `document` as the server reads them (``ServerConfiguration/channelsField``).
    func channels(of document: Document) -> [String] {
        switch self {
        case .admin: return document.channels
        case .user(let user): return document.channels(inField: user.channelsField)
        }
    }

    /// Whether every document is readable (no per-document filtering needed).
    var readsEverything: Bool {
        switch self {
        case .admin: return true
        case .user(let user): return user.readChannels.contains("*")
        }
    }

    /// CouchDB's `userCtx` in database `database`, as validation, filter and show functions see it.
    func userContext(database: String) -> JSON {
        ["db": .string(database), "name": name.map(JSON.string) ?? .null, "roles": JSON(roles)]
    }

    var userContext: JSON {
        switch self {
        case .admin(let name, _): return ["name": name.map(JSON.string) ?? .null, "roles": JSON(roles)]
        case .user(let user): return ["name": .string(user.name), "roles": JSON(user.roles),
                                      "channels": JSON(user.readChannels)]
        }
    }
}

/// Checks HTTP Basic credentials and `AuthSession` cookies, and makes session cookies.
struct Authenticator: Sendable {
    let configuration: ServerConfiguration
    let users: UserStore
    /// Its `[admins]` are the server's admins: the one the server started with, and those set over HTTP.
    let node: NodeConfiguration
    /// Signs session cookies; made at start, so restarting the server ends sessions.
    let secret: SymmetricKey

    init(configuration: ServerConfiguration, users: UserStore, node: NodeConfiguration) {
        self.configuration = configuration
        self.users = users
        self.node = node
        self.secret = SymmetricKey(size: .bits256)
    }

    /// The principal of a request. One without credentials is an administrator's when anonymous access
    /// is allowed (``ServerConfiguration/allowAnonymous``), else `nil`.
    /// - Throws: 401 for wrong credentials.
    func principal(for request: CouchRequest) async throws -> Principal? {
        principal(authenticated: try await authenticate(request)?.principal)
    }

    /// The principal of a request ``authenticate(_:)`` recognised as `authenticated` (`nil`: anonymous).
    func principal(authenticated: Principal?) -> Principal? {
        authenticated ?? (configuration.allowAnonymous ? .admin(name: nil) : nil)
    }

    /// The principal of a request and the CouchDB handler that recognised it (`jwt`, `proxy`,
    /// `cookie`, `default` for Basic), tried in CouchDB's order: a JWT, proxy headers (when
    /// `[chttpd] authentication_handlers` names `proxy_authentication_handler`), a valid session
    /// cookie (so a signed-in page's requests are its user's, whatever Basic credentials they also
    /// carry), then Basic credentials.
    func authenticate(_ request: CouchRequest) async throws -> (principal: Principal, handler: String)? {
        guard let (principal, handler) = try await recognise(request) else { return nil }
        guard case .user(var user) = principal else { return (principal, handler) }
        user.channelsField = configuration.channelsField
        return (.user(user), handler)
    }

    /// ``authenticate(_:)`` but for the channel field, which it sets on a user.
    private func recognise(_ request: CouchRequest) async throws -> (principal: Principal, handler: String)? {
        let authorization = request.header(.authorization)
        if let authorization, authorization.lowercased().hasPrefix("bearer "),
            !node.section("jwt_keys").isEmpty {
            // CouchDB's JWT: its roles are the user's channels; `_admin` among them makes an admin.
            // Without keys in `[jwt_keys]` the handler is off and the token is ignored, as CouchDB's
            // default handlers do.
            let (name, roles) = try JWTAuthentication(node: node, now: configuration.currentDate()).verify(String(authorization.dropFirst(7)))
            if roles.contains("_admin") { return (.admin(name: name, roles: roles), "jwt") }
            return (.user(ServerUser(name: name, readChannels: roles, writeChannels: roles, roles: roles)), "jwt")
        }
        if let principal = proxyPrincipal(request) { return (principal, "proxy") }
        if let token = cookie(named: "AuthSession", in: request.header(.cookie)), !token.isEmpty,
            let principal = try await principal(forSession: token) {
            // An invalid or expired cookie is ignored (the request continues as anonymous), as CouchDB does.
            return (principal, "cookie")
        }
        guard let authorization else { return nil }
        let parts = authorization.split(separator: " ", maxSplits: 1)
        // As CouchDB: another scheme is not Basic's to refuse (the request is anonymous), and
        // `_:_` are no credentials.
        guard parts.count == 2, parts[0].lowercased() == "basic" else { return nil }
        guard let decoded = Data(base64Encoded: String(parts[1])).flatMap({ String(data: $0, encoding: .utf8) }),
            let colon = decoded.firstIndex(of: ":")
        else { throw CouchError.unauthorized }
        let name = String(decoded[..<colon]), password = String(decoded[decoded.index(after: colon)...])
        if name == "_", password == "_" { return nil }
        guard let principal = try await check(name: name, password: password) else { throw CouchError.unauthorized }
        return (principal, "default")
    }

    /// CouchDB's proxy authentication, when `[chttpd] authentication_handlers` turns it on: a proxy in
    /// front of the server names the user (`X-Auth-CouchDB-UserName`) and their roles
    /// (`X-Auth-CouchDB-Roles`, comma-separated) — with `[chttpd_auth] proxy_use_secret` and a
    /// `secret`, vouched for by `X-Auth-CouchDB-Token`, the hex HMAC (SHA-256 or SHA-1) of the name.
    /// The user is a CouchDB user: `_security` limits them, by name and roles (`_admin` makes an admin).
    private func proxyPrincipal(_ request: CouchRequest) -> Principal? {
        guard node.value("chttpd", "authentication_handlers")?.contains("proxy_authentication_handler") == true else { return nil }
        func header(_ key: String, _ standard: String) -> String? {
            HTTPField.Name(UsersDatabase.setting(key, node) ?? standard).flatMap { request.headers[$0] }
        }
        guard let name = header("x_auth_username", "X-Auth-CouchDB-UserName"), !name.isEmpty else { return nil }
        let roles = (header("x_auth_roles", "X-Auth-CouchDB-Roles") ?? "").split(separator: ",")
            .map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        if UsersDatabase.setting("proxy_use_secret", node) == "true", let secret = UsersDatabase.setting("secret", node) {
            guard let token = header("x_auth_token", "X-Auth-CouchDB-Token")?.lowercased() else { return nil }
            let key = SymmetricKey(data: Array(secret.utf8))
            let candidates = [hex(Array(HMAC<SHA256>.authenticationCode(for: Array(name.utf8), using: key))),
                              hex(Array(HMAC<Insecure.SHA1>.authenticationCode(for: Array(name.utf8), using: key)))]
            guard candidates.contains(where: { constantTimeEqual(Array($0.utf8), Array(token.utf8)) }) else { return nil }
        }
        if roles.contains("_admin") { return .admin(name: name, roles: roles) }
        return .user(ServerUser(name: name, readChannels: ["*"], writeChannels: ["*"], roles: roles))
    }

    /// The principal for a name and password, if they match the administrator or a user.
    func check(name: String, password: String) async throws -> Principal? {
        if let stored = node.value("admins", name) {
            let ok: Bool
            if let admin = configuration.admin, admin.name == name, stored == node.baseValue("admins", name) {
                // The admin the server started with: its password is known, no hash to compute.
                ok = constantTimeEqual(Array(admin.password.utf8), Array(password.utf8))
            } else {
                ok = try await computingApart { NodeConfiguration.adminPassword(password, matches: stored) }
            }
            guard ok else { return nil }
            return configurationAdmin(name, document: (try? await users.document(named: name)) ?? nil)
        }
        return try await users.authenticate(name: name, password: password).map(Principal.user)
    }

    /// An admin of the configuration, with — as CouchDB gives it — the roles of the user document of
    /// its name, if there is one (one that cannot be read gives none).
    private func configurationAdmin(_ name: String, document: Document?) -> Principal {
        .admin(name: name, roles: document?["roles"]?.arrayValue?.compactMap(\.stringValue) ?? [])
    }

    // MARK: Session cookies

    /// `base64url(name:expiry:hmac)`; the HMAC covers the name, the expiry and the user's salt.
    func makeSessionToken(for principal: Principal) async throws -> String {
        let name = principal.name ?? ""
        let expiry = Int(configuration.currentDate().timeIntervalSince1970) + Int(configuration.sessionLifetime.components.seconds)
        let binding = principal.isAdmin ? "admin" : (try await users.sessionSecret(for: name) ?? "")
        let payload = "\(name):\(expiry)"
        return Base64URL.encode((payload + ":" + sessionMAC(payload, binding: binding)).utf8)
    }

    /// The `Set-Cookie` value of a session token.
    func sessionCookie(_ token: String) -> String {
        "AuthSession=\(token); Version=1; Path=/; Max-Age=\(Int(configuration.sessionLifetime.components.seconds)); HttpOnly; SameSite=Strict"
    }

    /// A fresh session cookie for a request its `AuthSession` cookie signed in, once a tenth of that
    /// cookie's lifetime has passed — as CouchDB renews it, so a session in use does not end; `nil`
    /// before then.
    func renewedSessionCookie(for request: CouchRequest, principal: Principal) async throws -> String? {
        guard let token = cookie(named: "AuthSession", in: request.header(.cookie)), let (_, expiry, _) = sessionFields(token) else { return nil }
        let lifetime = Int(configuration.sessionLifetime.components.seconds)
        guard expiry - Int(configuration.currentDate().timeIntervalSince1970) < lifetime - max(1, lifetime / 10) else { return nil }
        return sessionCookie(try await makeSessionToken(for: principal))
    }

    /// The hex HMAC of a session's `name:expiry`, bound to the user's salt (`admin` for admins).
    private func sessionMAC(_ payload: String, binding: String) -> String {
        hex(Array(HMAC<SHA256>.authenticationCode(for: Array((payload + ":" + binding).utf8), using: secret)))
    }

    /// A session token's name, expiry and MAC, if it has their form.
    private func sessionFields(_ token: String) -> (name: String, expiry: Int, mac: String)? {
        guard let data = Base64URL.decode(token), let text = String(data: data, encoding: .utf8) else { return nil }
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 3, let expiry = Int(parts[1]) else { return nil }
        return (String(parts[0]), expiry, String(parts[2]))
    }

    private func principal(forSession token: String) async throws -> Principal? {
        guard let (name, expiry, mac) = sessionFields(token), expiry > Int(configuration.currentDate().timeIntervalSince1970) else { return nil }
        let isAdmin = node.value("admins", name) != nil
        // The user document is read once: it gives the salt the cookie is bound to, and the user.
        let document = isAdmin ? ((try? await users.document(named: name)) ?? nil) : try await users.document(named: name)
        let binding = isAdmin ? "admin" : (document?.string(forKey: "salt") ?? "")
        guard constantTimeEqual(Array(sessionMAC("\(name):\(expiry)", binding: binding).utf8), Array(mac.utf8)) else { return nil }
        if isAdmin { return configurationAdmin(name, document: document) }
        return document.map { .user(ServerUser(document: $0)) }
    }

    func cookie(named name: String, in header: String?) -> String? {
        guard let header else { return nil }
        for part in header.split(separator: ";") {
            let pair = part.trimmingCharacters(in: .whitespaces).split(separator: "=", maxSplits: 1)
            if pair.count == 2, pair[0] == name { return String(pair[1]) }
        }
        return nil
    }
}

func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
    guard a.count == b.count else { return false }
    var difference: UInt8 = 0
    for (x, y) in zip(a, b) { difference |= x ^ y }
    return difference == 0
}
