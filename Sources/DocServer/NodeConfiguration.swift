import CouchProtocol
import Crypto
import CryptoExtras
import DocStore
import Foundation

/// CouchDB's configuration (`/_node/{node}/_config`): sections of string values in three layers — the
/// values the server started with (from ``ServerConfiguration``), those set over HTTP and kept in the
/// data folder (`.docstore-system/config.json`, CouchDB's `local.ini`), and those set with
/// `X-Couch-Persist: false`, which `_reload` drops. A later layer wins; a key deleted in one is gone
/// from the ones below it too. DocServer reads the settings it honours from here on each use, so a
/// change takes effect at once.
final class NodeConfiguration: Sendable {
    /// The values the server started with.
    private let base: [String: [String: String]]
    private let file: URL
    /// The persisted and the in-memory layer (`nil` marks a key deleted in that layer), and every
    /// value the three layers make, merged again on each change: a setting read on each request is one
    /// lookup.
    private let layers = Locked<Layers>(Layers())

    private struct Layers {
        var persisted: [String: [String: String?]] = [:]
        var memory: [String: [String: String?]] = [:]
        var merged: [String: [String: String]] = [:]

        mutating func merge(onto base: [String: [String: String]]) {
            var result = base
            for layer in [persisted, memory] {
                for (section, values) in layer {
                    for (key, value) in values { result[section, default: [:]][key] = value }
                    if result[section]?.isEmpty == true { result[section] = nil }
                }
            }
            merged = result
        }
    }

    /// The sections CouchDB refuses to change over HTTP.
    static let protectedSections: Set<String> = [
        "daemons", "external", "httpd_design_handlers", "httpd_db_handlers", "httpd_global_handlers",
        "native_query_servers", "os_daemons", "query_servers", "feature_flags",
    ]

    init(base: [String: [String: String]], file: URL) {
        self.base = base
        self.file = file
        let persisted = Self.read(file)
        layers.withLock {
            $0.persisted = persisted
            $0.merge(onto: base)
        }
    }

    private static func read(_ file: URL) -> [String: [String: String?]] {
        guard let data = try? Data(contentsOf: file), case .object(let sections)? = try? JSON(parsing: data) else { return [:] }
        var result: [String: [String: String?]] = [:]
        for (section, keys) in sections {
            guard case .object(let values) = keys else { continue }
            for (key, value) in values { result[section, default: [:]][key] = value.stringValue }
        }
        return result
    }

    /// Every section with its values.
    func all() -> [String: [String: String]] {
        layers.withLock { $0.merged }
    }

    /// The values of `section` (empty when there is none).
    func section(_ section: String) -> [String: String] { all()[section] ?? [:] }

    /// The value of `key` in `section`, or `nil`.
    func value(_ section: String, _ key: String) -> String? {
        layers.withLock { $0.merged[section]?[key] }
    }

    /// The value `key` of `section` had when the server started.
    func baseValue(_ section: String, _ key: String) -> String? { base[section]?[key] }

    /// `value(section, key)` as an integer, or `fallback`.
    func integer(_ section: String, _ key: String, default fallback: Int) -> Int {
        value(section, key).flatMap { Int(Self.trimmingSpaces($0)) } ?? fallback
    }

    /// `value(section, key)` as a Boolean (`"true"`), or `fallback`.
    func bool(_ section: String, _ key: String, default fallback: Bool) -> Bool {
        value(section, key).map { Self.trimmingSpaces($0) == "true" } ?? fallback
    }

    /// `text` without the spaces and tabs around it (what `CharacterSet.whitespaces` trims: tab and
    /// the space separators), in Swift: Foundation's `trimmingCharacters` on Linux goes through
    /// `NSString` and cost 2 % of a single GET, which reads settings on the way.
    static func trimmingSpaces(_ text: String) -> Substring {
        // Most values have nothing to trim: a first and last byte that are ASCII and not a space or
        // a tab say so without looking at Unicode properties.
        if let first = text.utf8.first, let last = text.utf8.last, first < 0x80, last < 0x80,
            first != 0x20, first != 0x09, last != 0x20, last != 0x09 {
            return Substring(text)
        }
        func isSpace(_ scalar: Unicode.Scalar) -> Bool { scalar == "\t" || scalar.properties.generalCategory == .spaceSeparator }
        let scalars = text.unicodeScalars
        guard let first = scalars.firstIndex(where: { !isSpace($0) }), let last = scalars.lastIndex(where: { !isSpace($0) }) else {
            return ""
        }
        return Substring(scalars[first...last])
    }

    /// Sets `key` of `section` (kept in the data folder unless `persist` is false) and returns the
    /// value it had.
    @discardableResult
    func set(_ section: String, _ key: String, to value: String?, persist: Bool) throws -> String? {
        let old = self.value(section, key)
        let base = self.base
        let snapshot = layers.withLock { layers -> [String: [String: String?]]? in
            layers.memory[section, default: [:]][key] = .some(value)
            if persist { layers.persisted[section, default: [:]][key] = .some(value) }
            layers.merge(onto: base)
            return persist ? layers.persisted : nil
        }
        if let snapshot { try write(snapshot) }
        return old
    }

    /// Drops the changes made without persisting them, as CouchDB's `_reload` rereads its files.
    func reload() {
        let base = self.base
        layers.withLock {
            $0.memory = [:]
            $0.merge(onto: base)
        }
    }

    private func write(_ persisted: [String: [String: String?]]) throws {
        var sections = JSONObject()
        for (section, values) in persisted.sorted(by: { $0.key < $1.key }) {
            var object = JSONObject()
            for (key, value) in values.sorted(by: { $0.key < $1.key }) { object[key] = value.map(JSON.string) ?? .null }
            sections[section] = .object(object)
        }
        do {
            try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
            try Data(try JSON.object(sections).serialized()).write(to: file, options: .atomic)
        } catch {
            throw CouchError(DocStoreError(.io, "Cannot write the configuration to \(file.path)", cause: error))
        }
    }

    // MARK: Admins

    /// An admin's password as CouchDB keeps it in `[admins]`: `-pbkdf2-<derived key>,<salt>,<iterations>`
    /// (PBKDF2-SHA1, hex), for a plain password; a hashed one (`-pbkdf2-`, `-hashed-`) stays as it is.
    static func hashedAdminPassword(_ value: String, iterations: Int) -> String {
        if value.hasPrefix("-pbkdf2-") || value.hasPrefix("-hashed-") { return value }
        let salt = (0..<16).map { _ in UInt8.random(in: 0...255) }
        let hex = { (bytes: [UInt8]) in bytes.map { String(format: "%02x", $0) }.joined() }
        let salted = hex(salt)
        return "-pbkdf2-\(hex(derivedKey(value, salt: salted, iterations: iterations))),\(salted),\(iterations)"
    }

    /// Whether `password` is the one `stored` (``hashedAdminPassword(_:iterations:)``) was made from.
    static func adminPassword(_ password: String, matches stored: String) -> Bool {
        guard stored.hasPrefix("-pbkdf2-") else { return false }
        let parts = stored.dropFirst("-pbkdf2-".count).split(separator: ",")
        guard parts.count == 3, let iterations = Int(parts[2]), iterations > 0 else { return false }
        let key = derivedKey(password, salt: String(parts[1]), iterations: iterations).map { String(format: "%02x", $0) }.joined()
        return constantTimeEqual(Array(key.utf8), Array(parts[0].utf8))
    }

    private static func derivedKey(_ password: String, salt: String, iterations: Int) -> [UInt8] {
        guard let key = try? KDF.Insecure.PBKDF2.deriveKey(from: Array(password.utf8), salt: Array(salt.utf8), using: .insecureSHA1,
                                                           outputByteCount: 20, unsafeUncheckedRounds: iterations) else { return [] }
        return key.withUnsafeBytes { [UInt8]($0) }
    }
}
