import Hummingbird
import HummingbirdCore
import Logging

/// The request context of ``DocServer``'s router: Hummingbird's core context, the request as the
/// CouchDB routes read it (decoded path, query, body) and the user the authentication middleware found.
///
/// Routes an application adds to the router ``DocServer/makeRouter()`` returns get it too: behind the
/// authentication middleware (every route outside the public group) ``userName`` and ``userRoles``
/// say who is asking.
public struct DocServerRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    /// The request as the routes read it, set by the request middleware before routing.
    var couch: CouchRequest?
    /// Who is asking, once the authentication middleware has run; `nil` for anonymous requests.
    var principal: Principal?

    public init(source: ApplicationRequestContextSource) {
        coreContext = CoreRequestContextStorage(source: source)
    }

    /// The authenticated user's name; `nil` when anonymous (or an administrator of an "admin party").
    public var userName: String? { principal?.name }
    /// The authenticated user's roles, `_admin` first for an administrator; empty when anonymous.
    public var userRoles: [String] { principal?.roles ?? [] }

    /// The request as the CouchDB routes read it; an internal error if the request middleware did not
    /// run (a route registered outside ``DocServer/makeRouter()``).
    func request() throws -> CouchRequest {
        guard let couch else { throw CouchError(.internalServerError, "unknown_error", "the request did not pass DocServer's request middleware") }
        return couch
    }
}
