import Crypto
import CryptoExtras
import DocStore
import Foundation

/// A user of the server: a name, CouchDB roles and the channels it may read and write.
public struct ServerUser: Sendable, Hashable {
    /// The user name.
    public let name: String
    /// Channels whose documents the user may read; `*` means all.
    public var readChannels: [String]
    /// Channels the user may write documents into; `*` means all.
    public var writeChannels: [String]
    /// CouchDB roles (a user document's `roles`, a JWT's), shown in `userCtx` and matched by `_security`.
    public var roles: [String] = []
    /// Whether the user administers the database of the request (named by its `_security` admins).
    var isDatabaseAdmin = false
    /// The body field that holds a document's channels (``ServerConfiguration/channelsField``).
    var channelsField = "channels"

    /// Whether the user may read a document in `channels`.
    func canRead(_ channels: @autoclosure () -> [String]) -> Bool {
        readChannels.contains("*") || channels().contains { readChannels.contains($0) }
    }

    /// Whether the user may write a document in `channels` (a document must be in at least one channel the
    /// user writes, and in none it does not).
    func canWrite(_ channels: [String]) -> Bool {
        if writeChannels.contains("*") { return true }
        return !channels.isEmpty && channels.allSatisfy { writeChannels.contains($0) }
    }

    /// The user of a user document: its roles, and its channels — `channels` (read and write),
    /// `read_channels`, `write_channels` — or every channel when it names none (a CouchDB user,
    /// whom `_security` alone limits).
    init(document: Document) {
        func strings(_ key: String) -> [String]? { document[key]?.arrayValue?.compactMap(\.stringValue) }
        name = document.string(forKey: "name") ?? String(document.id.dropFirst(UsersDatabase.prefix.count))
        roles = strings("roles") ?? []
        let both = strings("channels"), read = strings("read_channels"), write = strings("write_channels")
        let restricted = both != nil || read != nil || write != nil
        readChannels = restricted ? (both ?? []) + (read ?? []) : ["*"]
        writeChannels = restricted ? (both ?? []) + (write ?? []) : ["*"]
    }

    init(name: String, readChannels: [String], writeChannels: [String], roles: [String] = []) {
        self.name = name
        self.readChannels = readChannels
        self.writeChannels = writeChannels
        self.roles = roles
    }
}

/// The server's users: the documents `org.couchdb.user:NAME` of its users database (CouchDB's
/// `_users`, or the one `[chttpd_auth] authentication_db` names), with CouchDB's PBKDF2 password
/// hashes — so users replicate to and from CouchDB — and DocServer's channel grants.
public final class UserStore: Sendable {
    let node: NodeConfiguration
    let iterations: Int
    /// Opens database `name`, creating it when asked; `nil` when it does not exist and is not to be made.
    private let open: @Sendable (_ name: String, _ create: Bool) async throws -> Database?
    /// Passwords already verified, keyed by user, stored hash and a SHA-256 of the password, so that
    /// HTTP Basic requests do not pay PBKDF2 every time; a changed password changes the key.
    private let verified = Locked<Set<String>>([])
    /// User documents read lately (keyed by database and user name), each with the database's
    /// committed sequence and the time it was read: a request signed in as a user would otherwise
    /// read its document every time (6 % of a GET's CPU). A write to the users database in this
    /// process makes them stale at once; a write by another process (`docstore user`) shows after
    /// ``recentDocumentLifetime`` at most — and a password that does not match a remembered
    /// document is checked again against the stored one, so a new password works at once.
    private let recentDocuments = Locked<[String: (document: Document?, sequence: Int64, read: ContinuousClock.Instant)]>([:])
    /// How long a remembered user document is used while this process writes nothing to the users
    /// database.
    static let recentDocumentLifetime: Duration = .seconds(1)
    /// The users database last opened, by name: users are read on every signed-in request.
    private let current = Locked<(name: String, database: Database)?>(nil)
    /// What ``close()`` closes: the database a store of a data folder opened itself.
    private let owned: OpenedDatabases

    /// The users of a data folder, without a server: its `_users` database (or the one its persisted
    /// configuration names), created when a user is first added.
    public convenience init(dataDirectory: URL, iterations: Int = 100_000) async throws {
        let node = NodeConfiguration(base: [:], file: DocServer.systemDirectory(for: dataDirectory).appendingPathComponent("config.json"))
        let owned = OpenedDatabases()
        self.init(node: node, iterations: iterations, owned: owned) { name, create in
            guard create || Database.exists(name: name, directory: dataDirectory) else { return nil }
            let database = try await Database.open(DatabaseRegistry.configuration(name: name, directory: dataDirectory, indexes: []))
            owned.list.withLock { $0.append(database) }
            return database
        }
    }

    init(node: NodeConfiguration, iterations: Int, owned: OpenedDatabases = OpenedDatabases(),
         open: @escaping @Sendable (_ name: String, _ create: Bool) async throws -> Database?) {
        self.node = node
        self.iterations = iterations
        self.open = open
        self.owned = owned
    }

    /// The users database; created (a `_users` one with `_design/_auth`) when `create` says so.
    func database(create: Bool = false) async throws -> Database? {
        let name = UsersDatabase.authenticationDatabase(node)
        if !create, let known = current.withLock({ $0 }), known.name == name, !known.database.isClosed { return known.database }
        guard let database = try await open(name, create) else { return nil }
        current.withLock { $0 = (name, database) }
        if create, UsersDatabase.isNamedUsers(name) { try await UserStore.ensureDesignDocument(in: database) }
        return database
    }

    /// Gives a `_users` database DocServer's `_design/_auth`, unless it has it.
    static func ensureDesignDocument(in database: Database) async throws {
        let existing = try await database.document(withID: UsersDatabase.designID)
        guard existing?["validate_doc_update"]?.stringValue != UsersDatabase.validateFunction else { return }
        var design = existing ?? UsersDatabase.designDocument
        design["language"] = "javascript"
        design["validate_doc_update"] = .string(UsersDatabase.validateFunction)
        do {
            _ = try await database.put(design)
        } catch let error as DocStoreError where error.code == .conflict {
            // Made at the same moment by another opener: it is there.
        }
    }

    /// Closes the users database a store of a data folder opened (a server's stay open with the server).
    public func close() async {
        for database in owned.list.withLock({ $0 }) { await database.close() }
    }

    /// The databases a store opened itself.
    final class OpenedDatabases: Sendable {
        let list = Locked<[Database]>([])
    }

    /// Creates or replaces a user: its password (hashed as CouchDB hashes it), roles and channels
    /// (`nil` for a user that `_security` alone limits).
    /// - Throws: `bad_request` for an empty name or password, or a name CouchDB refuses.
    public func setUser(name: String, password: String, roles: [String] = [], readChannels: [String]? = nil,
                        writeChannels: [String]? = nil) async throws {
        guard !name.isEmpty, !name.hasPrefix("_"), !name.contains(":") else {
            throw CouchError.badRequest("User names must be non-empty, not start with _ and not contain ':'")
        }
        guard !password.isEmpty else { throw CouchError.badRequest("Password must not be empty") }
        guard let database = try await database(create: true) else { throw CouchError.notFound("Database does not exist.") }
        let id = UsersDatabase.prefix + name
        var document = try await database.document(withID: id) ?? Document(id: id)
        let salt = UsersDatabase.newSalt()
        let rounds = UsersDatabase.setting("iterations", node).flatMap(Int.init) ?? iterations
        document.body = [
            "name": .string(name), "type": "user", "roles": JSON(roles), "password_scheme": "pbkdf2",
            "iterations": .integer(rounds), "derived_key": .string(try UsersDatabase.pbkdf2(password, salt: salt, iterations: rounds, prf: .sha1)),
            "salt": .string(salt),
        ]
        if let readChannels { document["read_channels"] = JSON(readChannels) }
        if let writeChannels { document["write_channels"] = JSON(writeChannels) }
        _ = try await database.put(document)
    }

    /// Removes a user; returns whether it existed.
    @discardableResult
    public func removeUser(name: String) async throws -> Bool {
        guard let database = try await database(),
            let document = try await database.document(withID: UsersDatabase.prefix + name) else { return false }
        _ = try await database.delete(document)
        return true
    }

    /// All users, by name.
    public func users() async throws -> [ServerUser] {
        guard let database = try await database() else { return [] }
        let query = AllDocumentsQuery(startKey: UsersDatabase.prefix, endKey: UsersDatabase.prefix + "\u{10FFFF}", includeDocuments: true)
        return try await database.allDocuments(query).rows.compactMap { $0.document.map(ServerUser.init(document:)) }
    }

    /// The user named `name`, if any.
    public func user(named name: String) async throws -> ServerUser? {
        try await document(named: name).map(ServerUser.init(document:))
    }

    /// The user document of `name`, if any.
    /// - Throws: CouchDB's 401 for a document in conflict (unless `allow_conflicted_user_docs`).
    /// - Parameter fresh: read it from the database even if it was read lately.
    func document(named name: String, fresh: Bool = false) async throws -> Document? {
        try await rememberedDocument(named: name, fresh: fresh).document
    }

    /// The user document of `name` (or that there is none), and whether that was remembered rather
    /// than read now.
    private func rememberedDocument(named name: String, fresh: Bool) async throws -> (document: Document?, remembered: Bool) {
        guard !name.isEmpty, let database = try await database() else { return (nil, false) }
        let key = database.name + "\u{0}" + name
        // Taken before the read: a write committed meanwhile makes the entry stale, never the reverse.
        let sequence = database.committedSequence
        if !fresh, let recent = recentDocuments.withLock({ $0[key] }), recent.sequence == sequence,
            ContinuousClock.now - recent.read < Self.recentDocumentLifetime {
            return (try recent.document.map(usable), true)
        }
        let document = try await database.document(withID: UsersDatabase.prefix + name, includeConflicts: true)
        recentDocuments.withLock { recent in
            if recent.count >= 4096 { recent.removeAll() }
            recent[key] = (document, sequence, .now)
        }
        return (try document.map(usable), false)
    }

    /// `document`, unless it is in conflict and the configuration does not allow that.
    private func usable(_ document: Document) throws -> Document {
        if !document.conflicts.isEmpty, UsersDatabase.setting("allow_conflicted_user_docs", node) != "true" {
            throw CouchError(.unauthorized, "unauthorized",
                             "User document conflicts must be resolved before the document is used for authentication purposes.")
        }
        return document
    }

    /// The user, if `password` is theirs.
    func authenticate(name: String, password: String) async throws -> ServerUser? {
        let (document, remembered) = try await rememberedDocument(named: name, fresh: false)
        if let document, let user = try await check(password, name: name, against: document) { return user }
        // A user added or changed by another process since: the stored document decides.
        guard remembered, let stored = try await self.document(named: name, fresh: true), stored.revision != document?.revision else {
            return nil
        }
        return try await check(password, name: name, against: stored)
    }

    /// The user of `document`, if `password` is theirs.
    private func check(_ password: String, name: String, against document: Document) async throws -> ServerUser? {
        let stored = [document.string(forKey: "derived_key"), document.string(forKey: "password_sha"), document.string(forKey: "salt")]
        let cacheKey = ([name] + stored.map { $0 ?? "" } + [hex(Array(SHA256.hash(data: Array(password.utf8))))]).joined(separator: "\u{0}")
        if verified.withLock({ $0.contains(cacheKey) }) { return ServerUser(document: document) }
        guard try await computingApart({ try UsersDatabase.verify(password, against: document) }) else { return nil }
        verified.withLock { _ = $0.insert(cacheKey) }
        return ServerUser(document: document)
    }

    /// The part of the stored hash that session cookies are bound to, so a password change ends sessions.
    func sessionSecret(for name: String) async throws -> String? {
        try await document(named: name)?.string(forKey: "salt")
    }
}

func hex(_ bytes: [UInt8]) -> String {
    let digits = Array("0123456789abcdef".utf8)
    var out: [UInt8] = []
    out.reserveCapacity(bytes.count * 2)
    for byte in bytes {
        out.append(digits[Int(byte >> 4)])
        out.append(digits[Int(byte & 0xF)])
    }
    return String(decoding: out, as: UTF8.self)
}

func bytes(hex text: String) -> [UInt8]? {
    let chars = Array(text.utf8)
    guard chars.count % 2 == 0 else { return nil }
    var out: [UInt8] = []
    out.reserveCapacity(chars.count / 2)
    func value(_ c: UInt8) -> UInt8? {
        switch c {
        case 48...57: return c - 48
        case 97...102: return c - 87
        case 65...70: return c - 55
        default: return nil
        }
    }
    var i = 0
    while i < chars.count {
        guard let high = value(chars[i]), let low = value(chars[i + 1]) else { return nil }
        out.append(high << 4 | low)
        i += 2
    }
    return out
}
