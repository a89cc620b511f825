import CouchProtocol
import DocStore
import Foundation
import HTTPTypes
import Hummingbird

/// An HTTP error with CouchDB's JSON body `{"error": …, "reason": …}`.
public struct CouchError: Error, Sendable {
    /// The HTTP status.
    public let status: HTTPResponse.Status
    /// CouchDB's error name (`not_found`, `conflict`, …).
    public let error: String
    /// The human reason.
    public let reason: String

    public init(_ status: HTTPResponse.Status, _ error: String, _ reason: String) {
        self.status = status
        self.error = error
        self.reason = reason
    }

    /// The CouchDB answer for a DocStore error.
    public init(_ error: DocStoreError) {
        // DocStore names the malformed revision; CouchDB's answer does not.
        let reason = error.code == .invalidRevision && error.reason.hasPrefix("Invalid rev format") ? "Invalid rev format" : error.reason
        self.init(HTTPResponse.Status(code: error.httpStatus), error.couchDBError, reason)
    }

    static func badRequest(_ reason: String) -> CouchError { CouchError(.badRequest, "bad_request", reason) }
    static func notFound(_ reason: String = "missing") -> CouchError { CouchError(.notFound, "not_found", reason) }
    static func forbidden(_ reason: String) -> CouchError { CouchError(.forbidden, "forbidden", reason) }
    static let unauthorized = CouchError(.unauthorized, "unauthorized", "Name or password is incorrect.")
    static let authenticationRequired = CouchError(.unauthorized, "unauthorized", "You are not authorized to access this db.")
    static let adminRequired = CouchError(.unauthorized, "unauthorized", "You are not a server admin.")
    /// What a database's administrators alone may do (`_compact`, `_view_cleanup`), as CouchDB words it.
    static let databaseAdminRequired = CouchError(.unauthorized, "unauthorized", "You are not a server or db admin.")
    /// Design documents are written by admins only, as in CouchDB.
    static let designDocumentsNeedAdmin = CouchError(.forbidden, "forbidden", "You are not a db or server admin.")
    static let methodNotAllowed = CouchError(.methodNotAllowed, "method_not_allowed", "Only the methods of the CouchDB API are allowed here.")

    /// 405 as CouchDB words it for an endpoint of fixed methods (`"Only GET allowed"`).
    static func only(_ methods: String) -> CouchError {
        CouchError(.methodNotAllowed, "method_not_allowed", "Only \(methods) allowed")
    }

    /// The JSON body.
    var body: ErrorBody { ErrorBody(error: error, reason: reason) }

    var response: Response { Response.json(body.json, status: status) }
}

extension Response {
    /// A JSON response as CouchDB writes them (`application/json`, newline-terminated).
    static func json(_ value: JSON, status: HTTPResponse.Status = .ok, headers extra: HTTPFields = [:]) -> Response {
        json(serialized: (try? value.serialized()) ?? Array(value.description.utf8), status: status, headers: extra)
    }

    /// A JSON answer from its text, already written.
    static func json(serialized: [UInt8], status: HTTPResponse.Status = .ok, headers extra: HTTPFields = [:]) -> Response {
        // One copy, into a buffer that has room for the newline CouchDB ends its JSON with.
        var body = ByteBuffer()
        body.reserveCapacity(serialized.count + 1)
        body.writeBytes(serialized)
        body.writeInteger(UInt8(0x0A))
        var headers: HTTPFields = [.contentType: "application/json"]
        if extra[.cacheControl] == nil { headers[.cacheControl] = "must-revalidate" }
        headers.append(contentsOf: extra)
        return Response(status: status, headers: headers, body: ResponseBody(byteBuffer: body))
    }
}
