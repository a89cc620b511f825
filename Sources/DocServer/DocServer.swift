import DocStore
import DocStoreJavaScript
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1
import ServiceLifecycle
import Synchronization
import UnixSignals

/// A CouchDB-compatible HTTP endpoint over the DocStore databases of one folder.
///
/// CouchDB's replicator, PouchDB, DocSync and any CouchDB client can read, write and replicate with it.
/// Databases are the `<name>.sqlite` files of ``ServerConfiguration/dataDirectory``; users and their
/// channel grants live in the server's own database (see ``UserStore``).
///
/// ```swift
/// var configuration = ServerConfiguration(dataDirectory: URL(fileURLWithPath: "./docstore-data"))
/// configuration.admin = ("admin", "secret")
/// let server = try await DocServer(configuration: configuration)
/// try await server.run()          // until SIGINT or SIGTERM
/// ```
public final class DocServer: Sendable {
    /// The configuration the server runs with.
    public let configuration: ServerConfiguration
    /// The server's users.
    public let users: UserStore
    let registry: DatabaseRegistry
    let authenticator: Authenticator
    /// `_changes` filter functions registered in Swift, by name (`design/name`).
    let filters: [String: ChangesFilterFunction]
    /// Runs design documents' JavaScript; `nil` when ``ServerConfiguration/javaScript`` is off.
    let javaScript: JavaScriptEngine?
    let logger: Logger
    let metrics: ServerMetrics
    /// The replications running: started by `POST /_replicate` or by `_replicator` documents.
    let scheduler: ReplicationScheduler
    /// CouchDB's configuration, read and written at `/_node/{node}/_config`.
    let nodeConfiguration: NodeConfiguration
    /// Makes `_uuids` and the ids of new documents, as `uuids/algorithm` says.
    let uuids = UUIDGenerator()
    /// When the server was made, for `_system`'s uptime.
    let started = ContinuousClock.now
    private let state = Locked<(port: Int?, task: Task<Void, any Error>?, group: ServiceGroup?)>((nil, nil, nil))
    /// What answers a rewritten request (`_rewrite`), made the first time one is.
    let rewriteChain = Locked<MiddlewareChain<DocServerRequestContext>?>(nil)
    /// The design document whose `_compact/{ddoc}` compacts each database's index file now, by
    /// database name: the `design_document` of its `view_compaction` task.
    let designCompactions = Locked<[String: String]>([:])
    /// The level of all the server's loggers: the configuration's `[log] level`.
    let logLevel: SharedLogLevel

    /// Prepares a server: creates the data folder if needed and opens the user store.
    /// - Parameter indexes: the natively registered indexes of each database, by database name; index
    ///   `a/b` is served at `/db/_design/a/_view/b`.
    ///   - filters: `_changes` filter functions by name (`design/name`), used as
    ///     `_changes?filter=design/name&param=…`: each gets the document and the request's parameters.
    public init(configuration: ServerConfiguration,
                indexes: @escaping @Sendable (String) -> [IndexDefinition] = { _ in [] },
                filters: [String: ChangesFilterFunction] = [:],
                logger: Logger = Logger(label: "docstore.server")) async throws {
        // Every logger of the server shares one level, which `_config/log/level` changes while it runs.
        let logLevel = SharedLogLevel(configuration.logLevel ?? logger.logLevel)
        self.logLevel = logLevel
        let logger = logLevel.logger(wrapping: logger)
        try FileManager.default.createDirectory(at: configuration.dataDirectory, withIntermediateDirectories: true)
        self.configuration = configuration
        self.metrics = ServerMetrics()
        let engine = configuration.javaScript ? JavaScriptEngine(timeLimit: configuration.javaScriptTimeLimit, memoryLimit: configuration.javaScriptMemoryLimit) : nil
        self.javaScript = engine
        let registry = DatabaseRegistry(directory: configuration.dataDirectory, indexes: indexes, javaScript: engine,
                                        metrics: metrics, logger: logger, lockTimeout: configuration.lockTimeout,
                                        clock: configuration.clock)
        self.registry = registry
        let scheduler = ReplicationScheduler(registry: registry, metrics: metrics, logger: logger, host: configuration.host,
                                             clock: configuration.clock, currentDate: configuration.currentDate)
        self.scheduler = scheduler
        // The replicator database's documents run from the moment it is opened, until it is deleted.
        // Weakly: the scheduler holds the registry, and a server let go must free both.
        registry.observeReplicatorDatabase { [weak scheduler] database in
            if let database { scheduler?.watchDocuments(database) } else { await scheduler?.unwatchDocuments() }
        }
        var base: [String: [String: String]] = [
            "chttpd": ["port": String(configuration.port), "bind_address": configuration.host,
                       "max_http_request_size": String(configuration.maximumBodySize)],
            "couchdb": ["database_dir": configuration.dataDirectory.path, "view_index_dir": configuration.dataDirectory.path,
                        "single_node": "true", "uuid": registry.serverUUID, "max_document_size": "8000000"],
            "uuids": ["algorithm": "sequential", "max_count": "1000"],
            "chttpd_auth": ["authentication_db": "_users"],
            "log": ["level": logLevel.level.rawValue],
        ]
        if let admin = configuration.admin {
            base["admins"] = [admin.name: NodeConfiguration.hashedAdminPassword(admin.password, iterations: 10)]
        }
        let node = NodeConfiguration(base: base, file: DocServer.systemDirectory(for: configuration.dataDirectory).appendingPathComponent("config.json"))
        self.nodeConfiguration = node
        // A level set over HTTP before a restart is kept, as CouchDB keeps it in its local.ini.
        logLevel.follow(node.value("log", "level"))
        registry.enableUsersDatabases(node: node, iterations: configuration.passwordIterations)
        self.users = UserStore(node: node, iterations: configuration.passwordIterations) { name, create in
            guard create || registry.exists(name) else { return nil }
            return try await registry.open(name)
        }
        let legacy = DocServer.systemDirectory(for: configuration.dataDirectory).appendingPathComponent("users.sqlite")
        if FileManager.default.fileExists(atPath: legacy.path) {
            logger.warning("""
                \(legacy.path) holds users of an earlier DocServer, which are no longer read: users are now \
                documents of the _users database, as in CouchDB. Add them again with `docstore user add`, then \
                delete that file.
                """)
        }
        self.authenticator = Authenticator(configuration: configuration, users: users, node: node)
        self.filters = filters
        self.logger = logger
    }

    /// The port the server listens on, once started (useful with port 0).
    public var port: Int? { state.withLock { $0.port } }

    private func makeApplication(onRunning: @escaping @Sendable (Int) -> Void) -> Application<DocServerResponder> {
        Application(
            router: self,
            server: .docServer(configuration),
            configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: DocServer.serverHeader),
            onServerRunning: { channel in onRunning(channel.localAddress?.port ?? 0) },
            logger: logger
        )
    }

    /// The service group that runs the server: a graceful shutdown (on `signals`, or asked by
    /// ``stop()``) stops accepting, ends the open `_changes` feeds and waits for requests in flight —
    /// at most ten seconds, after which they are cancelled.
    private func serviceGroup(_ application: some Service, signals: [UnixSignal]) -> ServiceGroup {
        var configuration = ServiceGroupConfiguration(services: [.init(service: application)],
                                                      gracefulShutdownSignals: signals, logger: logger)
        configuration.maximumGracefulShutdownDuration = .seconds(10)
        return ServiceGroup(configuration: configuration)
    }

    /// Starts serving in the background and returns the port it listens on.
    @discardableResult
    public func start() async throws -> Int {
        try await prepare()
        let (ports, continuation) = AsyncStream<Int>.makeStream()
        let application = makeApplication { port in
            continuation.yield(port)
            continuation.finish()
        }
        // A service group of its own, so that `stop()` can shut the server down gracefully: it stops
        // accepting, ends open `_changes` feeds and lets the requests in flight finish.
        let group = serviceGroup(application, signals: [])
        let task = Task {
            // A server that ends without listening (its port taken) ends the wait for the port.
            defer { continuation.finish() }
            try await group.run()
        }
        state.withLock {
            $0.task = task
            $0.group = group
        }
        for await port in ports {
            state.withLock { $0.port = port }
            return port
        }
        state.withLock {
            $0.task = nil
            $0.group = nil
        }
        await closeEverything()
        _ = try await task.value
        throw CouchError(.internalServerError, "server_error", "The server stopped before listening")
    }

    /// Stops the replications, then closes the databases and the user store.
    private func closeEverything() async {
        await scheduler.stopAll()
        await registry.closeAll()
    }

    /// Stops a server started with ``start()`` gracefully — no new connections, continuous and longpoll
    /// `_changes` feeds ended, requests in flight finished — and closes its databases.
    public func stop() async {
        let (task, group) = state.withLock { state -> (Task<Void, any Error>?, ServiceGroup?) in
            defer {
                state.task = nil
                state.group = nil
            }
            return (state.task, state.group)
        }
        await group?.triggerGracefulShutdown()
        _ = try? await task?.value
        await closeEverything()
    }

    /// Serves until the process receives SIGINT or SIGTERM: then the server shuts down gracefully (open
    /// `_changes` feeds end, in-flight requests finish) and the databases are closed.
    public func run(onListening: @escaping @Sendable (Int) -> Void = { _ in }) async throws {
        try await prepare()
        let application = makeApplication { [self] port in
            state.withLock { $0.port = port }
            onListening(port)
        }
        do {
            try await serviceGroup(application, signals: [.sigterm, .sigint]).run()
        } catch {
            // A server that could not listen (its port taken) leaves no replication running.
            await closeEverything()
            throw error
        }
        await closeEverything()
    }

    /// Opens the system databases, created when missing as CouchDB does at start: `_replicator`
    /// (admins only) — so that the persistent replications its documents describe run again, each
    /// from its checkpoint — and `_users`, with its `_design/_auth`.
    ///
    /// ``start()`` and ``run(onListening:)`` call it. An application that serves DocServer as its own
    /// Hummingbird responder calls it once before serving; calling it again does nothing more.
    public func prepare() async throws {
        _ = try await registry.open(ReplicationScheduler.databaseName)
        _ = try await users.database(create: UsersDatabase.authenticationDatabase(nodeConfiguration) == "_users")
    }

    /// The folder of the server's own files in a data folder: its configuration and uuid.
    static func systemDirectory(for dataDirectory: URL) -> URL {
        dataDirectory.appendingPathComponent(".docstore-system", isDirectory: true)
    }

    // MARK: Requests

    /// Whether a request's body is read by its route as it arrives rather than collected first:
    /// standalone attachment uploads and multipart documents, which carry attachments of any size.
    static func streamsBody(_ request: CouchRequest) -> Bool {
        let segments = request.segments
        guard segments.count >= 2 || request.method == .post else { return false }
        // The node's endpoints take small JSON bodies: `/_node/{node}/_config/…` is no attachment.
        if segments.first == "_node" { return false }
        let isMultipart = request.header(.contentType).map { Multipart.mediaType(of: $0) == "multipart/related" } ?? false
        switch request.method {
        case .put:
            guard segments.count >= 2, !segments[1].hasPrefix("_") || segments[1] == "_design" else { return false }
            let documentSegments = segments[1] == "_design" ? 3 : 2
            // Below a design document, `_update`, `_show`, `_view`… are functions, not attachments.
            if segments.count > documentSegments { return !(segments[1] == "_design" && segments[3].hasPrefix("_")) }
            return segments.count == documentSegments && isMultipart
        case .post:
            return segments.count == 1 && isMultipart
        default:
            return false
        }
    }

    /// The `Server` header of every answer.
    static let serverHeader = "CouchDB/3.3.3 (DocStore/0.1.0)"

    static let requestIDHeader = HTTPField.Name("X-Couch-Request-ID")!
    /// CouchDB's time spent reading the request body, which clients may read; DocServer says 0, as
    /// CouchDB does for most requests.
    static let bodyTimeHeader = HTTPField.Name("X-CouchDB-Body-Time")!

    /// Where ``requestID()`` counts from: a random start, so that two runs do not repeat ids.
    private static let requestCounter = Atomic<UInt64>(UInt64.random(in: 0...UInt64.max))

    /// A new request id: ten hex digits that look random, as CouchDB's. A counter mixed by SplitMix64's
    /// finalizer rather than the system's generator, whose `getrandom` call per request was 1.2 % of
    /// a single GET's CPU; the ids only tell requests apart in logs.
    static func requestID() -> String {
        var z = requestCounter.wrappingAdd(0x9E37_79B9_7F4A_7C15, ordering: .relaxed).newValue
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        z ^= z >> 31
        return String(unsafeUninitializedCapacity: 10) { buffer in
            for index in 0..<10 {
                let digit = UInt8(truncatingIfNeeded: z >> UInt64(60 - 4 * index)) & 0xF
                buffer[index] = digit < 10 ? 48 + digit : 87 + digit
            }
            return 10
        }
    }

    func welcome(_ request: CouchRequest) throws -> Response {
        guard request.method == .get || request.method == .head else { throw CouchError.methodNotAllowed }
        return Response.json([
            "couchdb": "Welcome", "version": "3.3.3", "git_sha": "docstore",
            "uuid": .string(registry.serverUUID), "features": ["access-ready"],
            "vendor": ["name": "DocStore", "version": "0.1.0"],
        ])
    }

    /// `GET /_uuids?count=N` (1 to 1000), never cached, as CouchDB 3.3.3 answers it.
    func uuids(_ request: CouchRequest) throws -> Response {
        guard request.method == .get || request.method == .head else { throw CouchError.only("GET") }
        var count = 1
        if let text = request.query["count"] {
            // As CouchDB 3.3.3: 0 is an empty list, a negative count is not "positive".
            guard let value = Int(text), value >= 0 else { throw CouchError.badRequest("count must be a positive integer") }
            count = value
        }
        guard count <= nodeConfiguration.integer("uuids", "max_count", default: 1000) else { throw CouchError.badRequest("count parameter too large") }
        let ids = (0..<count).map { _ in JSON.string(newUUID()) }
        // As CouchDB: never cached, and an ETag of its own each time.
        return Response.json(["uuids": .array(ids)], headers: [
            .cacheControl: "no-cache", HTTPField.Name("Pragma")!: "no-cache", .expires: "Mon, 01 Jan 1990 00:00:00 GMT",
            .eTag: "\"\(RandomHex.make())\"",
        ])
    }
}

/// A `_changes` filter function: whether `document` passes, given the request's parameters.
public typealias ChangesFilterFunction = @Sendable (_ document: Document, _ parameters: [String: String]) -> Bool
