import Foundation
import Logging

/// How a ``DocServer`` runs: where its databases live, where it listens, who may do what.
public struct ServerConfiguration: Sendable {
    /// The folder of the served databases: each `<name>.sqlite` in it is database `<name>`.
    public var dataDirectory: URL
    /// The address to bind; loopback by default.
    public var host: String = "127.0.0.1"
    /// The port; 0 picks a free one (see ``DocServer/port``).
    public var port: Int = 5984
    /// The administrator's name and password. Defaults to the `DOCSTORE_ADMIN` environment variable
    /// (`name:password`) when set.
    public var admin: (name: String, password: String)?
    /// Whether requests without credentials are served, with administrator rights (CouchDB's "admin
    /// party"). Off by default.
    public var allowAnonymous = false
    /// The largest JSON request body (and JSON part of a multipart document) accepted; larger ones get
    /// 413 `too_large`. Attachment bytes do not count against it.
    public var maximumBodySize = 64 * 1024 * 1024
    /// The largest attachment accepted, in a standalone `PUT /db/doc/name` or a multipart document;
    /// larger ones get 413 `attachment_too_large` (CouchDB's `max_attachment_size`, 1 GiB by default).
    /// Attachments are streamed to and from SQLite in chunks, so memory does not grow with this limit.
    public var maximumAttachmentSize = 1024 * 1024 * 1024
    /// Connections idle (or stalled mid-request) this long are closed.
    public var idleTimeout: Duration = .seconds(30)
    /// PBKDF2-SHA256 iterations for new password hashes.
    public var passwordIterations = 100_000
    /// How long a `_session` cookie stays valid.
    public var sessionLifetime: Duration = .seconds(600)
    /// How much the server logs: `.info` writes a line for every request, `.warning` only what went
    /// wrong. `nil` (the default) leaves the level of the logger the server was given (its
    /// `logger:` parameter, else swift-log's default: `.info`, to standard error).
    public var logLevel: Logger.Level?
    /// The body field that names a document's channels, which decide which users read and write it
    /// and which documents the `sync_gateway/bychannel` filter passes: a string (one channel) or an
    /// array of strings. `channels` by default, as Sync Gateway's default sync function reads it;
    /// `channel` serves data written for a PredixSync service, whose documents name one channel so.
    public var channelsField = "channels"

    /// The clock the server waits on: the heartbeats and timeouts of `_changes` and `_db_updates`
    /// feeds, the retry delays of `_replicator` jobs and the replications it runs. Tests give one in
    /// virtual time, so they wait for nothing.
    public var clock: any Clock<Duration> = ContinuousClock()
    /// The time of day the server reads: the expiry of session cookies, a JSON Web Token's `exp` and
    /// `nbf`, the timestamps of replications and of `_stats`. Tests give one that moves with ``clock``.
    public var currentDate: @Sendable () -> Date = { Date() }

    /// Runs the JavaScript of design documents (views, filters, `validate_doc_update`, shows, lists,
    /// update handlers) as CouchDB does; on by default. When off, their routes answer as for a
    /// design document without them and writes are not validated.
    public var javaScript = true
    /// How long one call of a design document's function may run before it is stopped (CouchDB's
    /// `os_process_timeout`, 5 s).
    public var javaScriptTimeLimit: Duration = .seconds(5)
    /// How far one such call may grow the process's resident memory before it is stopped, in bytes
    /// (``JavaScriptEngine/memoryLimit``; 256 MiB, `nil` for no bound). CouchDB stops its JavaScript
    /// processes at a 64 MiB heap.
    public var javaScriptMemoryLimit: Int? = 256 * 1024 * 1024

    /// How long a write waits for the write lock of a database file that another connection (another
    /// process, such as a `docstore` command) holds before it fails with a 503 (`service_unavailable`,
    /// naming the lock). Default 10 s.
    public var lockTimeout: Duration = .seconds(10)
    /// Cross-origin requests from browsers (CouchDB's `[cors]`); `nil`, the default, answers none.
    public var cors: CORSConfiguration?
    /// Serves the web administration page at `/_utils/` (CouchDB's Fauxton place): plain HTML, CSS and
    /// JavaScript embedded in the library, which talk to this server's API as the signed-in user. On by
    /// default; `docstore serve --no-utils` turns it off, and `/_utils` is then 404.
    public var utilsPage = true

    /// A configuration serving the databases in `dataDirectory`.
    public init(dataDirectory: URL) {
        self.dataDirectory = dataDirectory
        if let value = ProcessInfo.processInfo.environment["DOCSTORE_ADMIN"], let colon = value.firstIndex(of: ":") {
            admin = (String(value[..<colon]), String(value[value.index(after: colon)...]))
        }
    }
}

/// Which web pages may call the server from another origin, as CouchDB's `[cors]` section says it:
/// preflight `OPTIONS` requests from an allowed origin are answered 204 without credentials, and the
/// answers to its requests carry `Access-Control-Allow-Origin` (and `-Credentials`,
/// `-Expose-Headers`). Requests from other origins get no CORS headers, so browsers refuse them.
public struct CORSConfiguration: Sendable, Hashable {
    /// Allowed origins (`https://app.example:8443`), or `["*"]` for any.
    public var origins: [String]
    /// Whether pages may send credentials (cookies, `Authorization`): answers carry
    /// `Access-Control-Allow-Credentials: true`. PouchDB always sends them.
    public var credentials: Bool
    /// The methods a preflight allows.
    public var methods = ["CONNECT", "COPY", "DELETE", "GET", "HEAD", "OPTIONS", "POST", "PUT", "TRACE"]
    /// The request headers a preflight allows.
    public var headers = ["accept", "authorization", "content-type", "origin", "referer", "x-csrf-token"]
    /// How long a browser may cache a preflight's answer, in seconds.
    public var maxAge = 600

    /// CORS for `origins`, with credentials unless `credentials` is false. As CouchDB, answers name the
    /// page's own origin, also for `*` (browsers refuse `*` with credentials).
    public init(origins: [String], credentials: Bool = true) {
        self.origins = origins
        self.credentials = credentials
    }

    /// The headers CouchDB lets pages read from an answer.
    static let exposedHeaders = "content-type, cache-control, accept-ranges, etag, server, x-couch-request-id, x-couch-update-newrev, x-couchdb-body-time"

    func allows(_ origin: String) -> Bool { origins.contains("*") || origins.contains(origin) }
}
