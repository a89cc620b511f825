import DocStore

/// The one error type of DocSync: what failed, a reason, and the underlying cause.
public struct ReplicationError: Error, Sendable, CustomStringConvertible {
    /// What went wrong.
    public enum Code: String, Sendable, Hashable {
        /// The peer refused the credentials (HTTP 401).
        case unauthorized
        /// The peer refused the operation (HTTP 403).
        case forbidden
        /// The source or target database does not exist (and was not to be created).
        case databaseNotFound
        /// The peer could not be reached or the connection broke.
        case network
        /// The peer answered with an unexpected status or body.
        case badResponse
        /// The configuration cannot work (e.g. a server filter on a local source).
        case invalidConfiguration
        /// The local database failed.
        case localDatabase
    }

    /// What went wrong.
    public let code: Code
    /// A sentence for humans.
    public let reason: String
    /// The HTTP status, for errors answered by a peer.
    public let httpStatus: Int?
    /// The underlying error.
    public let cause: (any Error)?

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

    public var description: String {
        "\(code.rawValue): \(reason)" + (httpStatus.map { " (HTTP \($0))" } ?? "")
    }

    static func wrap(_ error: any Error) -> ReplicationError {
        switch error {
        case let error as ReplicationError: return error
        case let error as DocStoreError: return ReplicationError(.localDatabase, error.reason, cause: error)
        default: return ReplicationError(.network, "\(error)", cause: error)
        }
    }
}
