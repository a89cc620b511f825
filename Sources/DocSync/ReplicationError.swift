import CouchProtocol
import DocStore

/// The one error type of DocSync: what failed, a reason, and the underlying cause.
public struct ReplicationError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong, as a value that can be extended without breaking `switch` statements (the
    /// same shape as DocStore's `DocStoreError.Code`).
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        let name: String
        let couchDB: String

        private init(_ name: String, couchDB: String) {
            self.name = name
            self.couchDB = couchDB
        }

        /// The peer refused the credentials (HTTP 401).
        public static let unauthorized = Code("unauthorized", couchDB: "unauthorized")
        /// The peer refused the operation (HTTP 403).
        public static let forbidden = Code("forbidden", couchDB: "forbidden")
        /// The source or target database does not exist (and was not to be created).
        public static let databaseNotFound = Code("databaseNotFound", couchDB: "db_not_found")
        /// The peer could not be reached or the connection broke.
        public static let network = Code("network", couchDB: "replication_failed")
        /// The peer answered with an unexpected status or body.
        public static let badResponse = Code("badResponse", couchDB: "replication_failed")
        /// The configuration cannot work (e.g. a server filter on a local source).
        public static let invalidConfiguration = Code("invalidConfiguration", couchDB: "bad_request")
        /// The local database failed.
        public static let localDatabase = Code("localDatabase", couchDB: "replication_failed")

        public var description: String { name }
    }

    /// What went wrong.
    public let code: Code
    /// A sentence for humans.
    public let reason: String
    /// The HTTP status, for errors answered by a peer.
    public let httpStatus: Int?
    /// The underlying error.
    public let cause: (any Error)?

    /// An error of `code`, with a human `reason`, the peer's HTTP status and the error that caused it.
    public init(_ code: Code, _ reason: String, httpStatus: Int? = nil, cause: (any Error)? = nil) {
        self.code = code
        self.reason = reason
        self.httpStatus = httpStatus
        self.cause = cause
    }

    /// Whether trying again later may succeed (network trouble and server errors, not refusals).
    public var isTransient: Bool {
        switch code {
        case .network: return true
        case .badResponse: return (httpStatus ?? 500) >= 500 || httpStatus == 408 || httpStatus == 429
        default: return false
        }
    }

    /// The CouchDB error name for this failure (`unauthorized`, `forbidden`, `db_not_found`, …).
    public var couchDBError: String { code.couchDB }

    public var description: String {
        "\(code): \(reason)" + (httpStatus.map { " (HTTP \($0))" } ?? "")
    }

    /// Errors are equal when code, reason and status are; the cause is not compared.
    public static func == (lhs: ReplicationError, rhs: ReplicationError) -> Bool {
        lhs.code == rhs.code && lhs.reason == rhs.reason && lhs.httpStatus == rhs.httpStatus
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(code)
        hasher.combine(reason)
        hasher.combine(httpStatus)
    }

    static func wrap(_ error: any Error) -> ReplicationError {
        switch error {
        case let error as ReplicationError: return error
        case let error as DocStoreError: return ReplicationError(.localDatabase, error.reason, cause: error)
        default: return ReplicationError(.network, "\(error)", cause: error)
        }
    }
}

extension ReplicationError {
    /// The typed error for a peer's error answer: 401 is ``Code/unauthorized``, 403 ``Code/forbidden``,
    /// any other status ``Code/badResponse``; the reason names `context` (the request) and CouchDB's
    /// error and reason from the body.
    init(status: Int, body: some Collection<UInt8>, context: String) {
        let answer = ErrorBody(body: body)
        let code: Code = switch status {
        case 401: .unauthorized
        case 403: .forbidden
        default: .badResponse
        }
        self.init(code, "\(context): \(answer.summary)", httpStatus: status)
    }
}
