import Crypto
import CryptoExtras
import DocStore
import Foundation
import Synchronization

/// A user of the server: a name, a password hash and the channels it may read and write.
public struct ServerUser: Sendable, Hashable {
    /// The user name.
    public let name: String
    /// Channels whose documents the user may read; `*` means all.
    public var readChannels: [String]
    /// Channels the user may write documents into; `*` means all.
    public var writeChannels: [String]
    /// CouchDB roles (a JWT's `_couchdb.roles`), shown in `userCtx`.
    public var roles: [String] = []

    /// Whether the user may read a document in `channels`.
    func canRead(_ channels: [String]) -> Bool {
        readChannels.contains("*") || channels.contains { readChannels.contains($0) }
    }

    /// Whether the user may write a document in `channels` (a document must be in at least one channel the
    /// user writes, and in none it does not).
    func canWrite(_ channels: [String]) -> Bool {
        if writeChannels.contains("*") { return true }
        return !channels.isEmpty && channels.allSatisfy { writeChannels.contains($0) }
    }

    var json: JSON {
        ["name": .string(name), "type": "user", "roles": [], "read_channels": JSON(readChannels), "write_channels": JSON(writeChannels)]
    }
}

/// Users kept in the server's own DocStore database (`<data>/.docstore-system/users.sqlite`), with
/// PBKDF2-SHA256 password hashes (random 16-byte salt, configurable iterations).
public final class UserStore: Sendable {
    let database: Database
    let iterations: Int
    /// Passwords already verified, keyed by user and a SHA-256 of the password, so that HTTP Basic
    /// requests do not pay PBKDF2 every time. Cleared when users change.
    private let verified = Mutex<Set<String>>([])

    /// Opens the user store of a data folder.
    public init(dataDirectory: URL, iterations: Int = 100_000) async throws {
        self.database = try await Database.open(name: "users", directory: UserStore.directory(for: dataDirectory))
        self.iterations = iterations
    }

    static func directory(for dataDirectory: URL) -> URL {
        dataDirectory.appendingPathComponent(".docstore-system", isDirectory: true)
    }

    /// Closes the user database.
    public func close() async { await database.close() }

    /// Creates or replaces a user.
    /// - Throws: `bad_request` for an empty name or password.
    public func setUser(name: String, password: String, readChannels: [String], writeChannels: [String]) async throws {
        guard !name.isEmpty, !name.hasPrefix("_"), !name.contains(":") else {
            throw CouchError.badRequest("User names must be non-empty, not start with _ and not contain ':'")
        }
        guard !password.isEmpty else { throw CouchError.badRequest("Password must not be empty") }
        var salt = [UInt8](repeating: 0, count: 16)
        for i in salt.indices { salt[i] = UInt8.random(in: 0...255) }
        let key = try derive(password: password, salt: salt, iterations: iterations)
        var document = try await database.document(withID: name) ?? Document(id: name)
        document.body = [
            "type": "user", "name": .string(name), "password_scheme": "pbkdf2-sha256",
            "iterations": .integer(iterations), "salt": .string(hex(salt)), "derived_key": .string(hex(key)),
            "read_channels": JSON(readChannels), "write_channels": JSON(writeChannels),
        ]
        try await database.save(document)
        verified.withLock { $0.removeAll() }
    }

    /// Removes a user; returns whether it existed.
    @discardableResult
    public func removeUser(name: String) async throws -> Bool {
        guard let document = try await database.document(withID: name) else { return false }
        try await database.delete(document)
        verified.withLock { $0.removeAll() }
        return true
    }

    /// All users, by name.
    public func users() async throws -> [ServerUser] {
        try await database.allDocuments(AllDocumentsQuery(includeDocuments: true)).rows.compactMap { row in
            row.document.map(UserStore.user(from:))
        }
    }

    /// The user named `name`, if any.
    public func user(named name: String) async throws -> ServerUser? {
        guard !name.isEmpty, !name.hasPrefix("_") else { return nil }
        return try await database.document(withID: name).map(UserStore.user(from:))
    }

    static func user(from document: Document) -> ServerUser {
        func strings(_ key: String) -> [String] { document[key]?.arrayValue?.compactMap(\.stringValue) ?? [] }
        return ServerUser(name: document.id, readChannels: strings("read_channels"), writeChannels: strings("write_channels"))
    }

    /// The user, if `password` is theirs.
    func authenticate(name: String, password: String) async throws -> ServerUser? {
        guard !name.isEmpty, !name.hasPrefix("_"), let document = try await database.document(withID: name) else { return nil }
        let cacheKey = name + "\u{0}" + hex(Array(SHA256.hash(data: Array(password.utf8))))
        if verified.withLock({ $0.contains(cacheKey) }) { return UserStore.user(from: document) }
        guard let saltHex = document.string(forKey: "salt"), let salt = bytes(hex: saltHex),
            let expected = document.string(forKey: "derived_key"), let rounds = document.int(forKey: "iterations"),
            rounds > 0
        else { return nil }
        let key = try derive(password: password, salt: salt, iterations: rounds)
        // Constant-time comparison of the derived keys.
        guard let expectedBytes = bytes(hex: expected), expectedBytes.count == key.count else { return nil }
        var difference: UInt8 = 0
        for (a, b) in zip(expectedBytes, key) { difference |= a ^ b }
        guard difference == 0 else { return nil }
        verified.withLock { _ = $0.insert(cacheKey) }
        return UserStore.user(from: document)
    }

    /// The part of the stored hash that session cookies are bound to, so a password change ends sessions.
    func sessionSecret(for name: String) async throws -> String? {
        try await database.document(withID: name)?.string(forKey: "salt")
    }

    private func derive(password: String, salt: [UInt8], iterations: Int) throws -> [UInt8] {
        let key = try KDF.Insecure.PBKDF2.deriveKey(from: Array(password.utf8), salt: salt, using: .sha256,
                                                    outputByteCount: 32, unsafeUncheckedRounds: iterations)
        return key.withUnsafeBytes { Array($0) }
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
