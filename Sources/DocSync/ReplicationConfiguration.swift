import DocStore
import Foundation
import Logging

/// One side of a replication: a local database or a remote CouchDB-compatible database URL.
public enum ReplicationEndpoint: Sendable {
    /// A database of this process.
    case local(Database)
    /// A remote database, e.g. `http://127.0.0.1:5984/notes`. Credentials in the URL's user info are
    /// used as HTTP Basic authentication (and never enter the replication id).
    case remote(URL)
}

/// Which way documents move between the configuration's source and target (for the convenience
/// constructors such as ``ReplicationConfiguration/oneTimeBidirectional(with:database:)``, the local
/// database is the source).
public enum ReplicationDirection: String, Sendable {
    /// Source → target.
    case push
    /// Target → source.
    case pull
    /// Both ways.
    case pushAndPull
}

/// How requests to a remote endpoint authenticate.
public enum ReplicationAuthentication: Sendable {
    /// HTTP Basic with a name and password.
    case basic(name: String, password: String)
    /// A CouchDB `AuthSession` cookie, sent as it is.
    case sessionCookie(String)
    /// A CouchDB session, as CouchDB's own replicator keeps one: the replicator signs in at
    /// `POST /_session` with the name and password, sends the session cookie instead of the password,
    /// keeps the fresh cookie the server sends while it is in use, and signs in again when the server
    /// answers 401.
    case session(name: String, password: String)
    /// `Authorization: Bearer <token>`.
    case bearer(String)
}

/// Everything a ``Replicator`` needs, in the spirit of Couchbase Lite's configuration.
///
/// ```swift
/// var config = ReplicationConfiguration.repeatingBidirectional(with: URL(string: "https://sync.example.com/notes")!,
///                                                              database: db)
/// config.limitToChannels = ["user-42"]
/// let replicator = Replicator(configuration: config)
/// replicator.start()
/// ```
public struct ReplicationConfiguration: Sendable {
    /// The source (for `pushAndPull`, the local side).
    public var source: ReplicationEndpoint
    /// The target (for `pushAndPull`, the remote side).
    public var target: ReplicationEndpoint
    /// Source → target, the reverse, or both.
    public var direction: ReplicationDirection = .push
    /// Keep replicating new changes until stopped.
    public var continuous = false
    /// Create the target database when it does not exist.
    public var createTarget = false
    /// Start after this source sequence, not where the checkpoints say (CouchDB's `since_seq`); the
    /// checkpoints are a replication of their own then, as CouchDB keeps them.
    public var startSequence: JSON?
    /// Replicate only documents in these channels (their `channels` field), in both directions; `nil`
    /// or empty: every document the user may see. From a remote DocServer or Sync Gateway this is the
    /// `sync_gateway/bychannel` filter, from CouchDB a `_selector` on `channels`; a local source
    /// filters its own changes feed.
    public var limitToChannels: [String]?
    /// Replicate only these documents.
    public var documentIDs: [String]?
    /// Replicate only documents matching this Mango selector.
    public var selector: JSON?
    /// A server-side filter function (`design/name`) of the source, with its parameters.
    public var filterName: String?
    /// Parameters of ``filterName``, also handed to ``pushFilter``. A filter function reads them as
    /// `req.query`, where (as in any URL) every value is a string: a string goes as it is, any other
    /// value as its JSON text (`5`, `true`, `["a","b"]`).
    public var filterParameters: [String: JSON] = [:]
    /// Decides, for each document about to be pushed from a local source, whether it goes.
    public var pushFilter: (@Sendable (Document, [String: JSON]) -> Bool)?
    /// Runs on each document that a replication left in conflict in a local database, with the
    /// winning revision and the others. Return one of them unchanged to keep it, or a document with
    /// a merged body (its revision names the leaf it builds on; none: the winner), which is saved
    /// as a new revision; the other leaves are then deleted. Return `nil` to leave the conflict.
    public var conflictResolver: (@Sendable (_ winner: Document, _ conflicts: [Document]) -> Document?)?
    /// Authentication for remote endpoints (overrides credentials in the URL).
    public var authentication: ReplicationAuthentication?
    /// Extra HTTP headers sent with every request.
    public var headers: [String: String] = [:]
    /// Changes handled per batch.
    public var batchSize = 100
    /// Requests allowed in flight at once per direction.
    public var maximumRequestsInFlight = 4
    /// How long a continuous replication's change feed waits for news before asking again.
    public var heartbeat: Duration = .seconds(30)
    /// How often a replication that is catching up page by page writes its checkpoint (CouchDB's
    /// `checkpoint_interval`; its replicator waits 30 s, PouchDB writes one after every batch). The
    /// batch that catches up, every batch of a continuous feed and the end of a replication are
    /// checkpointed at once, whatever the interval; a replication interrupted in between starts
    /// again from its last checkpoint and finds the documents already there by `_revs_diff`.
    /// `.zero` checkpoints after every batch. Writing a checkpoint is a write on each side (over
    /// HTTP for a remote one) that the next batch waits for: after every batch of 500 it took a
    /// quarter of a pull's time over loopback (Docs/Performance.md).
    public var checkpointInterval: Duration = .seconds(5)
    /// How long an HTTP request may go without a byte sent or received before it fails with a
    /// transient ``ReplicationError/Code/network`` error (and is retried); a transfer that keeps moving,
    /// such as a large attachment, may take longer. A long poll or a continuous feed is allowed one
    /// ``heartbeat`` more. Measured on the replicator's clock.
    public var requestTimeout: Duration = .seconds(60)
    /// Retries after transient errors: first delay, doubling, up to the maximum delay; a one-shot
    /// replication gives up after `maximumAttempts`.
    public var retry = RetryPolicy()
    /// Where the replication logs (swift-log): its start and end and each batch and checkpoint at
    /// `debug`, retries at `warning`, a failure at `error`. Messages below the handler's level cost
    /// nothing but the level check.
    public var logger = Logger(label: "docsync")

    /// Backoff after transient errors.
    public struct RetryPolicy: Sendable {
        /// The delay before the first retry; each next one doubles it.
        public var initialDelay: Duration = .milliseconds(250)
        /// The longest delay between two attempts.
        public var maximumDelay: Duration = .seconds(300)
        /// Attempts after which a one-shot replication fails with the last error.
        public var maximumAttempts = 5
        /// The default policy: 250 ms doubling up to 5 minutes, 5 attempts.
        public init() {}

        /// The delay before retry number `attempt` (0-based).
        public func delay(forAttempt attempt: Int) -> Duration {
            let factor = 1 << min(attempt, 30)
            let delay = initialDelay * factor
            return delay < maximumDelay ? delay : maximumDelay
        }
    }

    /// A configuration replicating `source` into `target`.
    public init(source: ReplicationEndpoint, target: ReplicationEndpoint) {
        self.source = source
        self.target = target
    }

    /// Push and pull with a remote database, continuously.
    public static func repeatingBidirectional(with url: URL, database: Database) -> ReplicationConfiguration {
        var configuration = ReplicationConfiguration(source: .local(database), target: .remote(url))
        configuration.direction = .pushAndPull
        configuration.continuous = true
        return configuration
    }

    /// Push and pull with a remote database once.
    public static func oneTimeBidirectional(with url: URL, database: Database) -> ReplicationConfiguration {
        var configuration = ReplicationConfiguration(source: .local(database), target: .remote(url))
        configuration.direction = .pushAndPull
        return configuration
    }

    /// Pull a remote database into a local one once (the local database is the source, the
    /// direction `.pull`, so the status and delegate report it receiving).
    public static func oneTimeServerToClient(with url: URL, database: Database) -> ReplicationConfiguration {
        var configuration = ReplicationConfiguration(source: .local(database), target: .remote(url))
        configuration.direction = .pull
        return configuration
    }
}

extension ReplicationConfiguration {
    /// A direction as logs name it, `from → to`: a one-way replication's only direction is its
    /// ``ReplicationFlow/push`` whatever the user calls it, so the endpoints say which way it goes.
    func route(of flow: ReplicationFlow) -> String {
        let (from, to) = flow == .push ? (source, target) : (target, source)
        return "\(from.logDescription) → \(to.logDescription)"
    }
}
