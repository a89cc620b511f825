import Crypto
import CryptoExtras
import DocStore
import Foundation

/// CouchDB 3's JWT authentication (`Authorization: Bearer <token>`), configured as CouchDB configures
/// it: keys in `[jwt_keys]` (`hmac:<kid>` base64 secrets, `rsa:<kid>` and `ec:<kid>` PEM public keys
/// with `\n` written as two characters; `_default` for a token without `kid`), the algorithms in
/// `jwt_auth/allowed_algorithms` (HS, RS, ES with 256, 384, 512), required claims in
/// `jwt_auth/required_claims` (`exp`, `nbf`, or `{iss, "value"}`), the user the `sub` claim, their
/// roles the `_couchdb.roles` claim (or `jwt_auth/roles_claim_name`, or the nested claim
/// `jwt_auth/roles_claim_path` leads to). A token that does not check out
/// is 400, as in CouchDB.
struct JWTAuthentication {
    let node: NodeConfiguration
    /// The time of day `exp` and `nbf` are judged at.
    let now: Date

    /// The name and roles a token vouches for.
    func verify(_ token: String) throws -> (name: String, roles: [String]) {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 3, let headerData = Base64URL.decode(parts[0]), let payloadData = Base64URL.decode(parts[1]),
            let signature = Base64URL.decode(parts[2]),
            case .object(let header)? = try? JSON(parsing: headerData), case .object(let claims)? = try? JSON(parsing: payloadData)
        else { throw CouchError.badRequest("Malformed token") }
        guard let algorithm = header["alg"]?.stringValue else { throw CouchError.badRequest("Missing alg header parameter") }
        let allowed = (node.value("jwt_auth", "allowed_algorithms") ?? "RS256, HS256")
            .split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        guard allowed.contains(algorithm) else { throw CouchError.badRequest("Invalid alg header parameter") }
        let kid = header["kid"]?.stringValue ?? "_default"
        let signed = Array((parts[0] + "." + parts[1]).utf8)
        guard try Self.check(signature, of: signed, algorithm: algorithm, kid: kid, node: node) else {
            throw CouchError.badRequest(algorithm.hasPrefix("HS") ? "Bad HMAC" : "Bad signature")
        }
        try checkClaims(claims)
        guard let subject = claims["sub"]?.stringValue else { throw CouchError.badRequest("Missing sub claim") }
        return (subject, try roles(in: claims))
    }

    /// The roles: the claim `jwt_auth/roles_claim_path` leads to (dotted, `\.` a dot within a key;
    /// 404 `missing json key: …` where it leads nowhere), else the top-level claim
    /// `jwt_auth/roles_claim_name` (`_couchdb.roles` by default).
    private func roles(in claims: JSONObject) throws -> [String] {
        guard let path = node.value("jwt_auth", "roles_claim_path") else {
            let name = node.value("jwt_auth", "roles_claim_name") ?? "_couchdb.roles"
            return claims[name]?.arrayValue?.compactMap(\.stringValue) ?? []
        }
        // The path reads as a Mango field path does: dots between keys, `\.` a dot within one.
        guard let keys = try? FieldPath(path).components else { throw CouchError.notFound("missing json key: \(path)") }
        var value = JSON.object(claims)
        for key in keys {
            guard let next = value[key] else { throw CouchError.notFound("missing json key: \(key)") }
            value = next
        }
        return value.arrayValue?.compactMap(\.stringValue) ?? []
    }

    private func checkClaims(_ claims: JSONObject) throws {
        let now = now.timeIntervalSince1970
        for requirement in Self.requirements(node.value("jwt_auth", "required_claims") ?? "") {
            guard let value = claims[requirement.claim] else { throw CouchError.badRequest("Missing \(requirement.claim) claim") }
            if let expected = requirement.value, value.stringValue != expected {
                throw CouchError.badRequest("Invalid \(requirement.claim) claim")
            }
            if requirement.claim == "exp", let exp = value.doubleValue, exp <= now { throw CouchError.badRequest("exp not in future") }
            if requirement.claim == "nbf", let nbf = value.doubleValue, nbf > now { throw CouchError.badRequest("nbf not in past") }
        }
    }

    /// `exp, nbf, {iss, "hello"}` → (exp, nil), (nbf, nil), (iss, hello).
    static func requirements(_ text: String) -> [(claim: String, value: String?)] {
        var result: [(String, String?)] = []
        var rest = Substring(text)
        while !rest.isEmpty {
            rest = rest.drop { $0 == "," || $0 == " " }
            if rest.first == "{", let close = rest.firstIndex(of: "}") {
                let inner = rest[rest.index(after: rest.startIndex)..<close].split(separator: ",", maxSplits: 1)
                    .map { $0.trimmingCharacters(in: .whitespaces) }
                if let claim = inner.first { result.append((claim, inner.count > 1 ? inner[1].trimmingCharacters(in: CharacterSet(charactersIn: "\"")) : nil)) }
                rest = rest[rest.index(after: close)...]
            } else {
                let item = rest.prefix { $0 != "," }
                let claim = item.trimmingCharacters(in: .whitespaces)
                if !claim.isEmpty { result.append((claim, nil)) }
                rest = rest.dropFirst(item.count)
            }
        }
        return result
    }

    private static func check(_ signature: Data, of signed: [UInt8], algorithm: String, kid: String, node: NodeConfiguration) throws -> Bool {
        let bits = algorithm.dropFirst(2)
        func digest<H: HashFunction>(_: H.Type) -> H.Digest { H.hash(data: signed) }
        func pem(_ kind: String) throws -> String {
            guard let value = node.value("jwt_keys", "\(kind):\(kid)") else { throw CouchError.badRequest("Unknown kid: \(kid)") }
            return value.replacingOccurrences(of: "\\n", with: "\n")
        }
        switch algorithm.prefix(2) {
        case "HS":
            guard let encoded = node.value("jwt_keys", "hmac:\(kid)"), let secret = Data(base64Encoded: encoded) else {
                throw CouchError.badRequest("Unknown kid: \(kid)")
            }
            let key = SymmetricKey(data: secret)
            switch bits {
            case "256": return HMAC<SHA256>.isValidAuthenticationCode(signature, authenticating: signed, using: key)
            case "384": return HMAC<SHA384>.isValidAuthenticationCode(signature, authenticating: signed, using: key)
            case "512": return HMAC<SHA512>.isValidAuthenticationCode(signature, authenticating: signed, using: key)
            default: return false
            }
        case "RS":
            let key = try _RSA.Signing.PublicKey(pemRepresentation: try pem("rsa"))
            let rsaSignature = _RSA.Signing.RSASignature(rawRepresentation: signature)
            switch bits {
            case "256": return key.isValidSignature(rsaSignature, for: digest(SHA256.self), padding: .insecurePKCS1v1_5)
            case "384": return key.isValidSignature(rsaSignature, for: digest(SHA384.self), padding: .insecurePKCS1v1_5)
            case "512": return key.isValidSignature(rsaSignature, for: digest(SHA512.self), padding: .insecurePKCS1v1_5)
            default: return false
            }
        case "ES":
            let text = try pem("ec")
            // JOSE signatures are r and s side by side, each as long as the algorithm's hash says (CouchDB
            // pads a P-256 key's ES384 signature to 48 bytes each): resized to the key's curve.
            func raw(_ size: Int) -> Data? {
                guard signature.count % 2 == 0 else { return nil }
                let half = signature.count / 2
                var result = Data()
                for part in [signature.prefix(half), signature.suffix(half)] {
                    let trimmed = part.drop { $0 == 0 }
                    guard trimmed.count <= size else { return nil }
                    result += Data(repeating: 0, count: size - trimmed.count) + trimmed
                }
                return result
            }
            func valid<D: Digest>(_ digest: D) -> Bool {
                if let key = try? P256.Signing.PublicKey(pemRepresentation: text) {
                    return raw(32).flatMap { try? P256.Signing.ECDSASignature(rawRepresentation: $0) }.map { key.isValidSignature($0, for: digest) } ?? false
                }
                if let key = try? P384.Signing.PublicKey(pemRepresentation: text) {
                    return raw(48).flatMap { try? P384.Signing.ECDSASignature(rawRepresentation: $0) }.map { key.isValidSignature($0, for: digest) } ?? false
                }
                if let key = try? P521.Signing.PublicKey(pemRepresentation: text) {
                    return raw(66).flatMap { try? P521.Signing.ECDSASignature(rawRepresentation: $0) }.map { key.isValidSignature($0, for: digest) } ?? false
                }
                return false
            }
            switch bits {
            case "256": return valid(digest(SHA256.self))
            case "384": return valid(digest(SHA384.self))
            case "512": return valid(digest(SHA512.self))
            default: return false
            }
        default:
            return false
        }
    }
}
