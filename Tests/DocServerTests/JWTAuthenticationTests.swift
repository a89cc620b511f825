@testable import DocServer
import Crypto
import CryptoExtras
import DocStore
import Foundation
import TestSupport
import XCTest

/// CouchDB 3's JWT authentication, configured at `/_node/_local/_config` as CouchDB's own jwtauth tests
/// configure it: HMAC, RSA and EC keys, the allowed algorithms, a required `iss`.
final class JWTAuthenticationTests: XCTestCase {
    private func token(_ algorithm: String, claims: JSON, sign: ([UInt8]) throws -> Data) throws -> String {
        func encode(_ json: JSON) throws -> String { Base64URL.encode(try json.serialized()) }
        let signed = try encode(["alg": .string(algorithm), "typ": "JWT"]) + "." + (try encode(claims))
        return signed + "." + Base64URL.encode(try sign(Array(signed.utf8)))
    }

    private func set(_ server: TestServer, _ section: String, _ key: String, _ value: String) async throws {
        await XCTAssertEqualAsync(try await server.request("PUT", "/_node/_local/_config/\(section)/\(key)", json: .string(value),
                                                           headers: ["X-Couch-Persist": "false"]).status, 200)
    }

    private func session(_ server: TestServer, _ token: String) async throws -> TestServer.Reply {
        try await server.request("GET", "/_session", headers: ["Authorization": "Bearer \(token)"], as: .none)
    }

    func testHMACRSAAndECTokens() async throws {
        let server = try await TestServer(self)
        let now = Int(Date.now.timeIntervalSince1970)
        // Without keys, JWT is off: a token is ignored and the request anonymous.
        let ignored = try await server.request("GET", "/_session", headers: ["Authorization": "Bearer not-a-token"], as: .none)
        XCTAssertEqual(ignored.json["userCtx"]?["name"], .null)
        let claims: JSON = ["nbf": .integer(now - 60), "exp": .integer(now + 60), "sub": "couch@apache.org", "_couchdb.roles": ["testing"]]

        let secret = Data("zxczxc12zxczxc12".utf8)
        try await set(server, "jwt_keys", "hmac:_default", secret.base64EncodedString())
        try await set(server, "jwt_auth", "allowed_algorithms", "HS256, HS384, HS512")
        let key = SymmetricKey(data: secret)
        for (algorithm, sign) in [("HS256", { Data(HMAC<SHA256>.authenticationCode(for: $0, using: key)) }),
                                  ("HS384", { Data(HMAC<SHA384>.authenticationCode(for: $0, using: key)) }),
                                  ("HS512", { Data(HMAC<SHA512>.authenticationCode(for: $0, using: key)) })] as [(String, ([UInt8]) -> Data)] {
            let answer = try await session(server, try token(algorithm, claims: claims, sign: sign))
            XCTAssertEqual(answer.json["userCtx"]?["name"], "couch@apache.org", algorithm)
            XCTAssertEqual(answer.json["userCtx"]?["roles"], ["testing"], algorithm)
            XCTAssertEqual(answer.json["info"]?["authenticated"], "jwt", algorithm)
        }
        let forged = try await session(server, try token("HS256", claims: claims) { Data(HMAC<SHA256>.authenticationCode(for: $0, using: SymmetricKey(size: .bits256))) })
        XCTAssertEqual(forged.status, 400)
        XCTAssertEqual(forged.json["reason"], "Bad HMAC")

        let rsa = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        try await set(server, "jwt_keys", "rsa:_default", rsa.publicKey.pemRepresentation.replacingOccurrences(of: "\n", with: "\\n"))
        try await set(server, "jwt_auth", "allowed_algorithms", "RS256, RS384, RS512")
        let rs256 = try token("RS256", claims: claims) { try rsa.signature(for: SHA256.hash(data: $0), padding: .insecurePKCS1v1_5).rawRepresentation }
        await XCTAssertEqualAsync(try await session(server, rs256).json["userCtx"]?["name"], "couch@apache.org")
        let rs512 = try token("RS512", claims: claims) { try rsa.signature(for: SHA512.hash(data: $0), padding: .insecurePKCS1v1_5).rawRepresentation }
        await XCTAssertEqualAsync(try await session(server, rs512).json["info"]?["authenticated"], "jwt")
        await XCTAssertEqualAsync(try await session(server, try token("HS256", claims: claims) { Data(HMAC<SHA256>.authenticationCode(for: $0, using: key)) }).status,
                                  400, "an algorithm not allowed")

        let ec = P256.Signing.PrivateKey()
        try await set(server, "jwt_keys", "ec:_default", ec.publicKey.pemRepresentation.replacingOccurrences(of: "\n", with: "\\n"))
        try await set(server, "jwt_auth", "allowed_algorithms", "ES256, ES384, ES512")
        // CouchDB's test signs ES384 with a P-256 key: the curve is the key's, the hash the algorithm's.
        // CouchDB's JOSE signature gives r and s the algorithm's 48 bytes each, zero-padded.
        let es384 = try token("ES384", claims: claims) { bytes in
            let raw = try ec.signature(for: SHA384.hash(data: bytes)).rawRepresentation
            return Data(repeating: 0, count: 16) + raw.prefix(32) + Data(repeating: 0, count: 16) + raw.suffix(32)
        }
        await XCTAssertEqualAsync(try await session(server, es384).json["userCtx"]?["name"], "couch@apache.org")

        // Without a token, Basic works as before.
        await XCTAssertEqualAsync(try await server.request("GET", "/_session").json["info"]?["authenticated"], "default")
    }

    /// Required `exp` and `nbf` claims are judged at the server's time of day
    /// (``ServerConfiguration/currentDate``), with CouchDB's reasons.
    func testExpiryAndNotBeforeAreJudgedAtTheServersTime() async throws {
        let clock = TestClock(advancesOnSleep: false)
        let epoch = Date(timeIntervalSince1970: 2_000_000_000)
        let server = try await TestServer(self) {
            $0.clock = clock
            $0.currentDate = { epoch.addingTimeInterval(Double(clock.now.offset.components.seconds)) }
        }
        let secret = Data("zxczxc12zxczxc12".utf8), key = SymmetricKey(data: secret)
        try await set(server, "jwt_keys", "hmac:_default", secret.base64EncodedString())
        try await set(server, "jwt_auth", "allowed_algorithms", "HS256")
        try await set(server, "jwt_auth", "required_claims", "exp, nbf")
        let sign = { (bytes: [UInt8]) in Data(HMAC<SHA256>.authenticationCode(for: bytes, using: key)) }
        let token = try token("HS256", claims: ["sub": "u", "nbf": 2_000_000_010, "exp": 2_000_000_100], sign: sign)
        let early = try await session(server, token)
        XCTAssertEqual(early.status, 400)
        XCTAssertEqual(early.json["reason"], "nbf not in past")
        clock.advance(by: .seconds(11))
        await XCTAssertEqualAsync(try await session(server, token).json["userCtx"]?["name"], "u")
        clock.advance(by: .seconds(89))
        let late = try await session(server, token)
        XCTAssertEqual(late.status, 400)
        XCTAssertEqual(late.json["reason"], "exp not in future")
        let missing = try await session(server, try self.token("HS256", claims: ["sub": "u", "nbf": 2_000_000_010], sign: sign))
        XCTAssertEqual(missing.json["reason"], "Missing exp claim")
    }

    func testRequiredClaimsAndAdminRole() async throws {
        let server = try await TestServer(self)
        let secret = Data("zxczxc12zxczxc12".utf8), key = SymmetricKey(data: secret)
        try await set(server, "jwt_keys", "hmac:_default", secret.base64EncodedString())
        try await set(server, "jwt_auth", "allowed_algorithms", "HS256")
        try await set(server, "jwt_auth", "required_claims", #"{iss, "hello"}"#)
        let sign = { (bytes: [UInt8]) in Data(HMAC<SHA256>.authenticationCode(for: bytes, using: key)) }
        let good = try await session(server, try token("HS256", claims: ["iss": "hello", "sub": "u", "_couchdb.roles": ["testing"]], sign: sign))
        XCTAssertEqual(good.json["userCtx"]?["name"], "u")
        XCTAssertEqual(good.json["userCtx"]?["roles"], ["testing"])
        let bad = try await session(server, try token("HS256", claims: ["iss": "goodbye", "sub": "u"], sign: sign))
        XCTAssertEqual(bad.status, 400)
        XCTAssertEqual(bad.json["reason"], "Invalid iss claim")
        let missing = try await session(server, try token("HS256", claims: ["sub": "u"], sign: sign))
        XCTAssertEqual(missing.json["reason"], "Missing iss claim")
        XCTAssertEqual(JWTAuthentication.requirements(#"exp, nbf, {iss, "hello"}"#).map(\.claim), ["exp", "nbf", "iss"])

        // Roles from a nested claim (`\.` a dot within a key); a path that leads nowhere is 404.
        try await set(server, "jwt_auth", "roles_claim_path", #"foo.bar\.zonk.roles"#)
        let nested = try token("HS256", claims: ["iss": "hello", "sub": "u", "foo": ["bar.zonk": ["roles": ["nested"]]]], sign: sign)
        await XCTAssertEqualAsync(try await session(server, nested).json["userCtx"]?["roles"], ["nested"])
        let lost = try token("HS256", claims: ["iss": "hello", "sub": "u", "foo": [:]], sign: sign)
        await XCTAssertEqualAsync(try await session(server, lost).json, ["error": "not_found", "reason": "missing json key: bar.zonk"])
        _ = try await server.request("DELETE", "/_node/_local/_config/jwt_auth/roles_claim_path", headers: ["X-Couch-Persist": "false"])

        // `_admin` among the roles makes an admin.
        let admin = try token("HS256", claims: ["iss": "hello", "sub": "ops", "_couchdb.roles": ["_admin"]], sign: sign)
        await XCTAssertEqualAsync(try await server.request("GET", "/_node/_local/_config", headers: ["Authorization": "Bearer \(admin)"], as: .none).status, 200)
    }
}
