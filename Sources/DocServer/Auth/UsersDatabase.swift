import Crypto
import CryptoExtras
import DocStore
import Foundation

/// CouchDB's users database: user documents `org.couchdb.user:NAME` with `name`, `type: "user"`,
/// `roles` and a password kept as a PBKDF2 hash — and, DocServer's own addition, optional channel
/// grants (`channels`, `read_channels`, `write_channels`).
///
/// The database `[chttpd_auth] authentication_db` names (default `_users`), and any whose last name
/// part is `_users`, is a users database: a password written into a user document (by any write,
/// replicated ones included) is stored hashed, and a user may write only their own document. A
/// database named `_users` also gets the `_design/_auth` design document, whose validation rules
/// (types, names, who may change roles) DocServer enforces natively.
enum UsersDatabase {
    /// The prefix of every user document's id.
    static let prefix = "org.couchdb.user:"
    /// The design document that validates user documents.
    static let designID = "_design/_auth"

    /// The database users are looked up in.
    static func authenticationDatabase(_ node: NodeConfiguration) -> String {
        node.value("chttpd_auth", "authentication_db") ?? "_users"
    }

    /// Whether the last part of a database's name is `_users`: such databases get `_design/_auth`.
    static func isNamedUsers(_ name: String) -> Bool {
        name == "_users" || name.hasSuffix("/_users")
    }

    /// Whether database `name` gets the users database's write rules.
    static func isUsersDatabase(_ name: String, _ node: NodeConfiguration) -> Bool {
        isNamedUsers(name) || name == authenticationDatabase(node)
    }

    /// A `[chttpd_auth]` setting, or its older `[couch_httpd_auth]` name, as CouchDB reads them.
    static func setting(_ key: String, _ node: NodeConfiguration) -> String? {
        node.value("chttpd_auth", key) ?? node.value("couch_httpd_auth", key)
    }

    /// Gives a database of the server the users database's rules, for as long as its name makes it
    /// one: the preparer hashes passwords and keeps users to their own documents; the validator runs
    /// DocServer's `_design/_auth` natively and passes the other design documents on.
    static func install(on database: Database, named name: String, node: NodeConfiguration, iterations: Int) {
        database.writePreparer = { document, _, context in
            guard isUsersDatabase(name, node) else { return false }
            return try prepare(&document, context: context, node: node, defaultIterations: iterations)
        }
        let inner = database.writeValidator
        database.writeValidator = { write in
            guard let own = write.validatingDesignDocuments.firstIndex(where: isOwnDesign) else {
                try inner?(write)
                return
            }
            try validate(write)
            var others = write.validatingDesignDocuments
            others.remove(at: own)
            if !others.isEmpty { try inner?(write.with(validatingDesignDocuments: others)) }
        }
    }

    // MARK: Writes (CouchDB's before_doc_update)

    /// Whether the writer administers the database: a server admin, or named by the `_security`
    /// object's `admins`.
    static func isAdministrator(_ context: WriteContext?) -> Bool {
        guard let context else { return true }
        let roles = context.userContext["roles"]?.arrayValue?.compactMap(\.stringValue) ?? []
        if roles.contains("_admin") { return true }
        let admins = context.securityObject["admins"]
        let names = admins?["names"]?.arrayValue?.compactMap(\.stringValue) ?? []
        let adminRoles = admins?["roles"]?.arrayValue?.compactMap(\.stringValue) ?? []
        if let name = context.userContext["name"]?.stringValue, names.contains(name) { return true }
        return roles.contains { adminRoles.contains($0) }
    }

    /// The rules every write to a users database passes first: a user writes only their own
    /// document (anyone else's: CouchDB's 404 `missing`); a `password` is checked against
    /// `password_regexp` and replaced by its hash. Returns whether the document changed.
    static func prepare(_ document: inout Document, context: WriteContext?, node: NodeConfiguration,
                        defaultIterations: Int) throws -> Bool {
        if !isAdministrator(context), let name = context?.userContext["name"]?.stringValue,
            document.id != prefix + name {
            throw DocStoreError(.notFound, "missing")
        }
        guard let password = document["password"], password != .null else { return false }
        guard let text = password.stringValue else {
            throw DocStoreError(.badRequest, "password must be a string")
        }
        try PasswordRules(node).check(text)
        let scheme = setting("password_scheme", node) ?? "pbkdf2"
        let salt = newSalt()
        switch scheme {
        case "pbkdf2":
            let iterations = setting("iterations", node).flatMap(Int.init).flatMap { $0 > 0 ? $0 : nil } ?? defaultIterations
            document["password_scheme"] = "pbkdf2"
            document["iterations"] = .integer(iterations)
            document["derived_key"] = .string(try pbkdf2(text, salt: salt, iterations: iterations, prf: .sha1))
            document["salt"] = .string(salt)
        case "simple":
            document["password_scheme"] = "simple"
            document["salt"] = .string(salt)
            document["password_sha"] = .string(hex(Array(Insecure.SHA1.hash(data: Array((text + salt).utf8)))))
        default:
            throw DocStoreError(.forbidden, "Server cannot hash passwords at this time.")
        }
        document["password"] = nil
        return true
    }

    // MARK: Passwords

    /// 16 random bytes as 32 lowercase hex digits; CouchDB hashes with the digits themselves as salt.
    static func newSalt() -> String {
        hex((0..<16).map { _ in UInt8.random(in: 0...255) })
    }

    enum PRF: String { case sha1, sha224, sha256, sha384, sha512 }

    /// PBKDF2 of `password` with the salt's UTF-8 bytes, as lowercase hex of the PRF's length.
    static func pbkdf2(_ password: String, salt: String, iterations: Int, prf: PRF) throws -> String {
        let (function, length): (KDF.Insecure.PBKDF2.HashFunction, Int) = switch prf {
        case .sha1: (.insecureSHA1, 20)
        case .sha224: (.insecureSHA224, 28)
        case .sha256: (.sha256, 32)
        case .sha384: (.sha384, 48)
        case .sha512: (.sha512, 64)
        }
        let key = try KDF.Insecure.PBKDF2.deriveKey(from: Array(password.utf8), salt: Array(salt.utf8), using: function,
                                                    outputByteCount: length, unsafeUncheckedRounds: iterations)
        return key.withUnsafeBytes { hex(Array($0)) }
    }

    /// Whether `password` is the one a user document's hash was made from: `pbkdf2` (with CouchDB
    /// 3.4's `pbkdf2_prf`, SHA-1 when absent) or the legacy `simple` (also when no scheme is named).
    static func verify(_ password: String, against document: Document) throws -> Bool {
        guard let salt = document.string(forKey: "salt") else { return false }
        let scheme = document.string(forKey: "password_scheme") ?? "simple"
        let computed: String, expected: String?
        switch scheme {
        case "pbkdf2":
            let iterations = document.int(forKey: "iterations") ?? 10_000
            guard iterations >= 1, iterations <= 1_000_000_000,
                let prf = PRF(rawValue: document.string(forKey: "pbkdf2_prf") ?? "sha1")
            else { return false }
            computed = try pbkdf2(password, salt: salt, iterations: iterations, prf: prf)
            expected = document.string(forKey: "derived_key")
        case "simple":
            computed = hex(Array(Insecure.SHA1.hash(data: Array((password + salt).utf8))))
            expected = document.string(forKey: "password_sha")
        default:
            return false
        }
        guard let expected else { return false }
        return constantTimeEqual(Array(computed.utf8), Array(expected.lowercased().utf8))
    }

    // MARK: The _design/_auth validation

    /// `_design/_auth`'s function, kept in the design document for clients that read it; DocServer
    /// runs ``validate(_:)``, its native equivalent, in its place.
    static let validateFunction = """
        function (newDoc, oldDoc, userCtx, secObj) {
          function has(list, item) { return (list || []).indexOf(item) !== -1; }
          var isServerAdmin = has(userCtx.roles, '_admin');
          var admins = (secObj && secObj.admins) || {};
          var isDbAdmin = has(admins.names, userCtx.name) ||
            (userCtx.roles || []).some(function (role) { return has(admins.roles, role); });
          function refuse(reason) { throw({forbidden: reason}); }
          if (newDoc._deleted === true) {
            if (!isServerAdmin && !(oldDoc && userCtx.name === oldDoc.name)) refuse('Only admins may delete other user docs.');
            return;
          }
          if (newDoc.type !== 'user') refuse('doc.type must be user');
          if (!newDoc.name) refuse('doc.name is required');
          if (!newDoc.roles) refuse('doc.roles must exist');
          if (!Array.isArray(newDoc.roles)) refuse('doc.roles must be an array');
          newDoc.roles.forEach(function (role) { if (typeof role !== 'string') refuse('doc.roles can only contain strings'); });
          if (newDoc._id !== 'org.couchdb.user:' + newDoc.name) refuse('Doc ID must be of the form org.couchdb.user:name');
          if (oldDoc && oldDoc.name !== newDoc.name) refuse('Usernames can not be changed.');
          if (newDoc.password_sha && !newDoc.salt) refuse('Users with password_sha must have a salt.See /_utils/script/couch.js for example code.');
          if (newDoc.password_scheme !== undefined) {
            if (['simple', 'pbkdf2', 'bcrypt'].indexOf(newDoc.password_scheme) === -1) refuse('Password scheme `' + newDoc.password_scheme + '` not supported.');
            if (newDoc.password_scheme === 'pbkdf2') {
              if (typeof newDoc.iterations !== 'number') refuse('iterations must be a number.');
              if (typeof newDoc.derived_key !== 'string') refuse('derived_key must be a string.');
            }
          }
          if (!isServerAdmin && !isDbAdmin) {
            if (oldDoc) {
              if (userCtx.name !== newDoc.name) refuse('You may only update your own user document.');
              if (oldDoc.roles.slice().sort().join('\\u0000') !== newDoc.roles.slice().sort().join('\\u0000')) refuse('Only _admin may edit roles');
            } else if (newDoc.roles.length > 0) {
              refuse('Only _admin may set roles');
            }
          }
          newDoc.roles.forEach(function (role) { if (role[0] === '_' && role !== '_metrics') refuse('No system roles (starting with underscore) in users db.'); });
          if (newDoc.name[0] === '_') refuse('Username may not start with underscore.');
          if (newDoc.name.indexOf(':') !== -1) refuse('Character `:` is not allowed in usernames.');
        }
        """

    /// The design document a `_users` database gets.
    static var designDocument: Document {
        var document = Document(id: designID)
        document["language"] = "javascript"
        document["validate_doc_update"] = .string(validateFunction)
        return document
    }

    /// Whether a validating design document is DocServer's `_design/_auth`, validated natively.
    static func isOwnDesign(_ document: Document) -> Bool {
        document.id == designID && document["validate_doc_update"]?.stringValue == validateFunction
    }

    /// `_design/_auth`'s rules, in its order, with its (403) reasons.
    static func validate(_ write: ValidatedWrite) throws {
        func refuse(_ reason: String) -> DocStoreError { DocStoreError(.forbidden, reason) }
        let new = write.newDocument, old = write.oldDocument
        let userName = write.context?.userContext["name"]?.stringValue
        let userRoles = write.context?.userContext["roles"]?.arrayValue?.compactMap(\.stringValue) ?? []
        let isServerAdmin = write.context == nil || userRoles.contains("_admin")
        if new.isDeleted {
            guard isServerAdmin || (old != nil && userName != nil && userName == old?.string(forKey: "name")) else {
                throw refuse("Only admins may delete other user docs.")
            }
            return
        }
        guard new.string(forKey: "type") == "user" else { throw refuse("doc.type must be user") }
        guard let name = new.string(forKey: "name"), !name.isEmpty else { throw refuse("doc.name is required") }
        guard let rolesValue = new["roles"], rolesValue != .null, rolesValue != false else { throw refuse("doc.roles must exist") }
        guard let roleValues = rolesValue.arrayValue else { throw refuse("doc.roles must be an array") }
        let roles = roleValues.compactMap(\.stringValue)
        guard roles.count == roleValues.count else { throw refuse("doc.roles can only contain strings") }
        guard new.id == prefix + name else { throw refuse("Doc ID must be of the form org.couchdb.user:name") }
        if let old, old["name"] != new["name"] { throw refuse("Usernames can not be changed.") }
        if new["password_sha"].map(isTruthy) == true, !(new["salt"].map(isTruthy) ?? false) {
            throw refuse("Users with password_sha must have a salt.See /_utils/script/couch.js for example code.")
        }
        if let scheme = new["password_scheme"] {
            guard let text = scheme.stringValue, ["simple", "pbkdf2", "bcrypt"].contains(text) else {
                throw refuse("Password scheme `\(scheme.stringValue ?? scheme.description)` not supported.")
            }
            if text == "pbkdf2" {
                guard new["iterations"]?.doubleValue != nil else { throw refuse("iterations must be a number.") }
                guard new["derived_key"]?.stringValue != nil else { throw refuse("derived_key must be a string.") }
            }
        }
        if !isAdministrator(write.context) {  // neither a server nor a database admin
            if let old {
                guard userName == name else { throw refuse("You may only update your own user document.") }
                let oldRoles = old["roles"]?.arrayValue?.compactMap(\.stringValue) ?? []
                guard oldRoles.sorted() == roles.sorted() else { throw refuse("Only _admin may edit roles") }
            } else if !roles.isEmpty {
                throw refuse("Only _admin may set roles")
            }
        }
        if roles.contains(where: { $0.hasPrefix("_") && $0 != "_metrics" }) {
            throw refuse("No system roles (starting with underscore) in users db.")
        }
        if name.hasPrefix("_") { throw refuse("Username may not start with underscore.") }
        if name.contains(":") { throw refuse("Character `:` is not allowed in usernames.") }
    }

    private static func isTruthy(_ value: JSON) -> Bool {
        switch value {
        case .null, false: return false
        case .string(let text): return !text.isEmpty
        default: return value.doubleValue.map { $0 != 0 } ?? true
        }
    }
}

/// `password_regexp`: CouchDB's Erlang list of patterns a new password must match, each alone
/// (`"re"`, `{"re"}`) or with the reason a user is told (`{"re", "Reason"}`).
struct PasswordRules {
    private var rules: [(NSRegularExpression, String?)] = []
    /// Why the setting cannot be used (it is not such a list), if it cannot.
    private var unusable = false

    init(_ node: NodeConfiguration) {
        guard let text = UsersDatabase.setting("password_regexp", node)?.trimmingCharacters(in: .whitespaces),
            !text.isEmpty, text != "[]"
        else { return }
        guard case .list(let items)? = try? ErlangTerm.parse(text) else {
            unusable = true
            return
        }
        for item in items {
            let pattern: String, reason: String?
            switch item {
            case .string(let text):
                (pattern, reason) = (text, nil)
            case .tuple(let parts) where parts.count == 1:
                guard case .string(let text) = parts[0] else { unusable = true; return }
                (pattern, reason) = (text, nil)
            case .tuple(let parts) where parts.count == 2:
                guard case .string(let text) = parts[0] else { unusable = true; return }
                if case .string(let why) = parts[1], !why.isEmpty { (pattern, reason) = (text, why) } else { (pattern, reason) = (text, nil) }
            default:
                unusable = true
                return
            }
            guard let expression = try? NSRegularExpression(pattern: pattern) else { unusable = true; return }
            rules.append((expression, reason))
        }
    }

    /// Throws CouchDB's 400 for a password a rule refuses, its 403 when the rules are unusable.
    func check(_ password: String) throws {
        if unusable { throw DocStoreError(.forbidden, "Server cannot hash passwords at this time.") }
        let range = NSRange(password.startIndex..., in: password)
        for (expression, reason) in rules where expression.firstMatch(in: password, range: range) == nil {
            throw DocStoreError(.badRequest, "Password does not conform to requirements." + (reason.map { " " + $0 } ?? ""))
        }
    }
}

/// The few Erlang terms configuration values are written in: strings, lists and tuples.
enum ErlangTerm: Equatable {
    case string(String)
    case list([ErlangTerm])
    case tuple([ErlangTerm])
    case atom(String)

    struct SyntaxError: Error {}

    static func parse(_ text: String) throws -> ErlangTerm {
        var chars = Array(text.unicodeScalars)[...]
        let term = try parseTerm(&chars)
        skipSpace(&chars)
        if chars.first == "." { chars.removeFirst(); skipSpace(&chars) }
        guard chars.isEmpty else { throw SyntaxError() }
        return term
    }

    private static func skipSpace(_ chars: inout ArraySlice<Unicode.Scalar>) {
        while let first = chars.first, first.properties.isWhitespace { chars.removeFirst() }
    }

    private static func parseTerm(_ chars: inout ArraySlice<Unicode.Scalar>) throws -> ErlangTerm {
        skipSpace(&chars)
        guard let first = chars.popFirst() else { throw SyntaxError() }
        switch first {
        case "\"":
            var text = String.UnicodeScalarView()
            while let scalar = chars.popFirst() {
                if scalar == "\"" { return .string(String(text)) }
                if scalar == "\\" {
                    guard let escaped = chars.popFirst() else { break }
                    switch escaped {
                    case "n": text.append("\n")
                    case "t": text.append("\t")
                    case "r": text.append("\r")
                    default: text.append(escaped)
                    }
                } else {
                    text.append(scalar)
                }
            }
            throw SyntaxError()
        case "[", "{":
            let close: Unicode.Scalar = first == "[" ? "]" : "}"
            var items: [ErlangTerm] = []
            skipSpace(&chars)
            if chars.first == close {
                chars.removeFirst()
            } else {
                while true {
                    items.append(try parseTerm(&chars))
                    skipSpace(&chars)
                    guard let separator = chars.popFirst() else { throw SyntaxError() }
                    if separator == close { break }
                    guard separator == "," else { throw SyntaxError() }
                }
            }
            return first == "[" ? .list(items) : .tuple(items)
        default:
            guard first.properties.isLowercase || first.properties.numericType != nil else { throw SyntaxError() }
            var text = String.UnicodeScalarView([first])
            while let next = chars.first, next.properties.isAlphabetic || next.properties.numericType != nil || next == "_" {
                text.append(next)
                chars.removeFirst()
            }
            return .atom(String(text))
        }
    }
}
