import DocStore
import Foundation

/// A database's `_security` object as the server enforces it, as CouchDB does: `members` (names and
/// roles; `readers` where an old object has no `members`) may use the database, `admins` too — and
/// may also write its design documents and `_security`; with no member names or roles, every
/// signed-in user may (CouchDB's `{}`). DocServer's channels limit each user within that.
struct SecurityObject: Sendable {
    struct Group: Sendable {
        var names: [String] = []
        var roles: [String] = []

        init() {}

        /// Reads `{"names": [...], "roles": [...]}` (either may be absent).
        init(json: JSON?, member: String) throws {
            guard let json else { return }
            guard case .object(let object) = json else { throw CouchError.badRequest("\(member) must be an object") }
            func strings(_ key: String) throws -> [String] {
                guard let value = object[key] else { return [] }
                let texts = value.arrayValue?.compactMap(\.stringValue)
                guard let texts, texts.count == value.arrayValue?.count else {
                    throw CouchError.badRequest("\(key) must be a JSON list of strings")
                }
                return texts
            }
            names = try strings("names")
            roles = try strings("roles")
        }

        func includes(_ user: ServerUser) -> Bool {
            names.contains(user.name) || roles.contains { user.roles.contains($0) }
        }

        var isEmpty: Bool { names.isEmpty && roles.isEmpty }
    }

    var admins = Group()
    var members = Group()

    init() {}

    /// The object as stored: validation functions see it as `secObj`.
    var json: JSONObject = [:]

    init(json object: JSONObject) throws {
        json = object
        admins = try Group(json: object["admins"], member: "admins")
        members = try Group(json: object["members"] ?? object["readers"], member: "members")
    }

    /// The principal as this database knows it — a user its `admins` name is its administrator —
    /// or CouchDB's 403 for a user who is neither a member nor an admin of a database that has members.
    func authorize(_ principal: Principal) throws -> Principal {
        guard case .user(var user) = principal else { return principal }
        user.isDatabaseAdmin = admins.includes(user)
        guard user.isDatabaseAdmin || members.isEmpty || members.includes(user) else {
            throw CouchError.forbidden("You are not allowed to access this db.")
        }
        return .user(user)
    }
}
