import DocStore
import DocStoreJavaScript
import Foundation
import Logging

/// The databases of the data folder, opened on first use.
final class DatabaseRegistry: Sendable {
    let directory: URL
    let indexes: @Sendable (String) -> [IndexDefinition]
    let javaScript: JavaScriptEngine?
    let serverUUID: String
    let metrics: ServerMetrics
    let logger: Logger
    /// How long a write waits for another connection's write lock (``ServerConfiguration/lockTimeout``).
    let lockTimeout: Duration
    /// The databases opened, with the path of each one's file, which the hot path of every request
    /// checks is still there (``database(named:)``).
    private let opened = Locked<[String: (database: Database, path: String)]>([:])
    /// The `_security` objects read so far, by database name.
    private let securities = Locked<[String: SecurityObject]>([:])
    /// Whether each database read so far is partitioned.
    private let partitioned = Locked<[String: Bool]>([:])
    /// The configuration and default iterations that users databases hash passwords with, once set.
    private let usersRules = Locked<(node: NodeConfiguration, iterations: Int)?>(nil)
    /// Told when the replicator database is opened (with it) and when it is deleted (with `nil`).
    private let replicatorObserver = Locked<(@Sendable (Database?) async -> Void)?>(nil)
    /// The databases' creations, updates and deletions, for `/_db_updates`.
    let events: DatabaseEvents

    init(directory: URL, indexes: @escaping @Sendable (String) -> [IndexDefinition], javaScript: JavaScriptEngine?,
         metrics: ServerMetrics, logger: Logger, lockTimeout: Duration = .seconds(10), clock: any Clock<Duration> = ContinuousClock()) {
        self.directory = directory
        self.lockTimeout = lockTimeout
        self.indexes = indexes
        self.javaScript = javaScript
        self.metrics = metrics
        self.logger = logger
        events = DatabaseEvents(systemDirectory: DocServer.systemDirectory(for: directory), logger: logger, clock: clock)
        let uuidFile = DocServer.systemDirectory(for: directory).appendingPathComponent("server-uuid")
        if let existing = try? String(contentsOf: uuidFile, encoding: .utf8), existing.count == 32 {
            serverUUID = existing
        } else {
            serverUUID = RandomHex.make()
            try? FileManager.default.createDirectory(at: uuidFile.deletingLastPathComponent(), withIntermediateDirectories: true)
            try? serverUUID.write(to: uuidFile, atomically: true, encoding: .utf8)
        }
    }

    func observeReplicatorDatabase(_ observer: @escaping @Sendable (Database?) async -> Void) {
        replicatorObserver.withLock { $0 = observer }
    }

    /// Gives every database opened from now on the users database's write rules, where its name
    /// makes it one (``UsersDatabase/isUsersDatabase(_:_:)``, asked at each write: the configuration
    /// may change).
    func enableUsersDatabases(node: NodeConfiguration, iterations: Int) {
        usersRules.withLock { $0 = (node, iterations) }
    }

    /// The databases whose names start with `_`: CouchDB's system databases.
    static let systemDatabases: Set<String> = [ReplicationScheduler.databaseName, "_users"]

    /// CouchDB's rule for database names, and the system databases `_replicator` and `_users` (also
    /// as the last part, `a/_users`). A `/` (sent as `%2F`) separates folders, as CouchDB keeps such
    /// databases; an empty part (`a/`, `a//b`) is refused.
    static func validate(_ name: String) throws {
        if systemDatabases.contains(name) { return }
        if let slash = name.lastIndex(of: "/"), systemDatabases.contains(String(name[name.index(after: slash)...])) {
            return try validate(String(name[..<slash]))
        }
        let allowed = Set("abcdefghijklmnopqrstuvwxyz0123456789_$()+-/")
        guard let first = name.first, first.isLetter, first.isLowercase, first.isASCII, name.count <= 200,
            name.allSatisfy({ allowed.contains($0) }), !name.hasSuffix("/"), !name.contains("//")
        else {
            throw CouchError(.badRequest, "illegal_database_name",
                             "Name: '\(name)'. Only lowercase characters (a-z), digits (0-9), and any of the characters _, $, (, ), +, -, and / are allowed. Must begin with a letter.")
        }
    }

    func exists(_ name: String) -> Bool { Database.exists(name: name, directory: directory) }

    /// Closes database `name` and deletes its files (a folder its name made stays, as in CouchDB: a
    /// database may be being made in it).
    func delete(_ name: String) async throws {
        await forget(name)
        try await Database.delete(name: name, directory: directory)
        events.record("deleted", name)
    }

    /// The databases open now.
    var openDatabases: [Database] {
        opened.withLock { $0.values.map(\.database) }.filter { !$0.isClosed }
    }

    func database(named name: String) async throws -> Database {
        // Every request to a database asks here: one this registry opened (its name was valid) and
        // that is still open answers at once, if its file is still there (another process may have
        // deleted it) — without making its configuration and paths again and asking DocStore.
        if let (database, path) = opened.withLock({ $0[name] }), !database.isClosed, access(path, F_OK) == 0 { return database }
        try DatabaseRegistry.validate(name)
        guard exists(name) else { throw CouchError.notFound("Database does not exist.") }
        return try await open(name)
    }

    /// How the server opens database `name` (and `docstore` commands open the server's databases).
    static func configuration(name: String, directory: URL, indexes: [IndexDefinition]) -> DatabaseConfiguration {
        var configuration = DatabaseConfiguration(name: name, directory: directory)
        configuration.indexes = indexes
        // As CouchDB: an old revision stays readable (`GET /db/doc?rev=`) until `_compact`.
        configuration.keepsAncestorBodies = true
        return configuration
    }

    func open(_ name: String) async throws -> Database {
        let isReplicator = name == ReplicationScheduler.databaseName
        let existed = exists(name)
        var configuration = DatabaseRegistry.configuration(name: name, directory: directory, indexes: indexes(name))
        configuration.logger = logger
        configuration.lockTimeout = lockTimeout
        let database = try await Database.open(configuration)
        let creates = isReplicator && !existed
        // As CouchDB creates it: for admins only.
        if creates { try await database.setSecurityObject(ReplicationScheduler.adminOnly) }
        let (isNew, count) = opened.withLock { opened -> (Bool, Int) in
            let isNew = opened[name]?.database !== database
            if isNew { opened[name] = (database, configuration.fileURL.path) }
            return (isNew, opened.count)
        }
        if isNew {
            if let javaScript { database.enableJavaScript(engine: javaScript) }
            if let rules = usersRules.withLock({ $0 }) { UsersDatabase.install(on: database, named: name, node: rules.node, iterations: rules.iterations) }
            // As CouchDB makes it (at start, and when made again): a `_users` database validates its
            // user documents with `_design/_auth`.
            if UsersDatabase.isNamedUsers(name) { try await UserStore.ensureDesignDocument(in: database) }
            metrics.databasesOpen(count)
            if !existed { events.record("created", name) }
            // Every revision the database stores, from any route or replication, counts as a write,
            // and is an update of the database for `/_db_updates`.
            // Counting is not waiting: this listener does not have the file watched for other processes.
            let batches = database.observeChanges(watchingOtherConnections: false)
            let (metrics, events) = (self.metrics, self.events)
            Task {
                for await batch in batches {
                    metrics.documentsWritten(batch.count)
                    events.record("updated", name)
                }
            }
            if isReplicator, let observer = replicatorObserver.withLock({ $0 }) {
                await observer(database)
            }
        }
        return database
    }

    /// The security object of database `name`, read once and kept.
    func security(of name: String, _ database: Database) async throws -> SecurityObject {
        if let known = securities.withLock({ $0[name] }) { return known }
        let object = (try? SecurityObject(json: try await database.securityObject())) ?? SecurityObject()
        securities.withLock { $0[name] = object }
        return object
    }

    func setSecurity(_ object: SecurityObject, of name: String) { securities.withLock { $0[name] = object } }

    /// Whether database `name` was created partitioned, read once and kept.
    func isPartitioned(_ name: String, _ database: Database) async throws -> Bool {
        if let known = partitioned.withLock({ $0[name] }) { return known }
        let value = try await database.property("partitioned") == "true"
        partitioned.withLock { $0[name] = value }
        return value
    }

    /// Makes database `name` partitioned.
    func setPartitioned(_ name: String, _ database: Database) async throws {
        try await database.setProperty("partitioned", "true")
        partitioned.withLock { $0[name] = true }
    }

    /// Forgets a database that is being deleted.
    func forget(_ name: String) async {
        if name == ReplicationScheduler.databaseName, let observer = replicatorObserver.withLock({ $0 }) {
            await observer(nil)
        }
        securities.withLock { _ = $0.removeValue(forKey: name) }
        partitioned.withLock { _ = $0.removeValue(forKey: name) }
        metrics.databasesOpen(opened.withLock { opened in
            opened.removeValue(forKey: name)
            return opened.count
        })
    }

    /// Every database's name, those in folders (`a/b`) included, sorted: the DocStore databases of
    /// the data folder whose names CouchDB allows (`.docstore-system` and other hidden folders hold
    /// none).
    func names() throws -> [String] {
        do {
            return try Database.allDatabaseNames(in: directory).filter { (try? DatabaseRegistry.validate($0)) != nil }
        } catch let error as DocStoreError {
            throw CouchError(error)
        }
    }

    func closeAll() async {
        let all = opened.withLock { state in
            defer { state = [:] }
            return state.values.map(\.database)
        }
        metrics.databasesOpen(0)
        for database in all { await database.close() }
        await events.close()
    }
}
