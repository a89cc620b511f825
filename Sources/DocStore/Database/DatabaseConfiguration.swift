import Foundation
import Logging

/// Everything needed to open a database. Two opens with the same ``name`` and ``directory`` return
/// the same ``Database`` object while it is open, and two configurations are equal (`==`) when they
/// name the same database: the same ``name`` in the same ``directory``, whatever their other settings.
///
/// Several defaults, as subclasses of a configuration would give them elsewhere, are static members
/// in an extension, used as ``default`` is:
///
/// ```swift
/// extension DatabaseConfiguration {
///     static var inspections: DatabaseConfiguration {
///         DatabaseConfiguration(name: "inspections", directory: DatabaseConfiguration.defaultDirectory)
///     }
/// }
/// let db = try await Database.open(.inspections)
/// ```
///
/// ```swift
/// var config = DatabaseConfiguration(name: "inventory", directory: appSupportURL)
/// config.revisionsLimit = 100
/// let db = try await Database.open(config)
/// ```
public struct DatabaseConfiguration: Sendable {
    /// The database name; the file is `<directory>/<name>.sqlite`. Letters, digits and `_ - . ( ) + $`,
    /// not starting with `.`.
    public var name: String
    /// The folder holding the database file (created if missing).
    public var directory: URL
    /// The map/reduce indexes of this database. Each is persisted; a changed version rebuilds it.
    public var indexes: [IndexDefinition]
    /// How ``Database/makeDocument(from:id:)`` writes `Date` values and ``Database/decode(_:as:)`` reads them.
    public var dateFormat: DateFormat
    /// How many generations of history each branch keeps (CouchDB `_revs_limit`, default 1000), unless
    /// the database has a limit of its own set with ``Database/setRevisionsLimit(_:)``.
    public var revisionsLimit: Int
    /// The durability of commits.
    public var durability: Durability
    /// Whether the bodies of revisions that an edit turns into ancestors are kept until
    /// ``Database/compact()`` (CouchDB and PouchDB without auto-compaction), so that
    /// ``Database/document(withID:revision:includeConflicts:includeRevisionHistory:)`` can still read them.
    ///
    /// Default `false`, as Couchbase Lite and PouchDB's `auto_compaction`: only leaf revisions (the
    /// winner and conflicts) keep a body, which makes an update about twice as fast and keeps the
    /// file from growing with every edit. The revision history itself is kept either way
    /// (up to ``revisionsLimit``), so replication and conflict detection are unaffected. DocServer turns
    /// this on for CouchDB compatibility.
    public var keepsAncestorBodies: Bool
    /// How many idle reader connections to keep.
    public var maximumIdleReaders: Int
    /// Whether a conflict that replication stores between revisions that all carry a property history
    /// (``PropertyHistory``, kept by ``Model`` types with a ``Model/history`` policy) is merged at once,
    /// in the same transaction: the union of the histories, each property's newest value winning.
    /// Default `true`. The merge is deterministic, so databases that merge the same conflict write the
    /// same revisions and converge.
    public var mergesPropertyHistory: Bool
    /// How long a write waits for the file's write lock while another connection (another process)
    /// holds it, before failing with ``DocStoreError/Code/databaseLocked``. Default 10 s. The wait
    /// happens on the writer's own queue, never on the cooperative pool.
    public var lockTimeout: Duration
    /// The most bytes the database file, and its index file, may each grow to; a write that would pass
    /// it fails whole with ``DocStoreError/Code/diskFull``, as on a full disk. `nil` (the default): as
    /// much as the disk holds. The write-ahead logs beside the files are not counted. The limit is not
    /// stored in the file: each open sets its own.
    public var maximumFileSize: Int64?
    /// Where the database logs (swift-log): opening, closing and creating the file at `debug`, a schema
    /// migration at `info`. Messages below the handler's level cost nothing but the level check.
    public var logger: Logger

    /// How commits reach the disk.
    public enum Durability: Sendable, Hashable {
        /// WAL with `synchronous=NORMAL`: a committed write survives a crash or kill of the process;
        /// the last commits may be lost on power failure. The default, as most embedded stores.
        case normal
        /// WAL with `synchronous=FULL`: every commit is synced to disk before it returns.
        case full
    }

    /// The database `default` in ``defaultDirectory``, with default settings.
    public static var `default`: DatabaseConfiguration {
        DatabaseConfiguration(name: "default", directory: defaultDirectory)
    }

    /// Where databases live when no folder is given: on Apple platforms a `DocStore` folder in the
    /// user's Application Support (the caches folder on tvOS, whose other folders are read-only); on
    /// Linux `$XDG_DATA_HOME/docstore`, else `~/.local/share/docstore`.
    public static var defaultDirectory: URL {
        #if os(tvOS)
        let base = FileManager.default.urls(for: .cachesDirectory, in: .userDomainMask)[0]
        return base.appendingPathComponent("DocStore", isDirectory: true)
        #elseif canImport(Darwin)
        let base = FileManager.default.urls(for: .applicationSupportDirectory, in: .userDomainMask)[0]
        return base.appendingPathComponent("DocStore", isDirectory: true)
        #else
        let environment = ProcessInfo.processInfo.environment
        if let data = environment["XDG_DATA_HOME"], data.hasPrefix("/") {
            return URL(fileURLWithPath: data, isDirectory: true).appendingPathComponent("docstore", isDirectory: true)
        }
        return FileManager.default.homeDirectoryForCurrentUser
            .appendingPathComponent(".local/share/docstore", isDirectory: true)
        #endif
    }

    /// A configuration with defaults for everything but the name and folder.
    public init(name: String, directory: URL) {
        self.name = name
        self.directory = directory
        self.indexes = []
        self.dateFormat = .iso8601
        self.revisionsLimit = 1000
        self.durability = .normal
        self.keepsAncestorBodies = false
        self.maximumIdleReaders = 4
        self.mergesPropertyHistory = true
        self.lockTimeout = .seconds(10)
        self.logger = Logger(label: "docstore")
    }

    /// The first setting in which `other` differs from this configuration, described for an error
    /// message; `nil` when they agree (the name and folder are the caller's to compare).
    func firstDifference(from other: DatabaseConfiguration) -> String? {
        if revisionsLimit != other.revisionsLimit { return "revisionsLimit \(revisionsLimit), not \(other.revisionsLimit)" }
        if durability != other.durability { return "durability \(durability), not \(other.durability)" }
        if keepsAncestorBodies != other.keepsAncestorBodies {
            return "keepsAncestorBodies \(keepsAncestorBodies), not \(other.keepsAncestorBodies)"
        }
        if mergesPropertyHistory != other.mergesPropertyHistory {
            return "mergesPropertyHistory \(mergesPropertyHistory), not \(other.mergesPropertyHistory)"
        }
        if maximumIdleReaders != other.maximumIdleReaders {
            return "maximumIdleReaders \(maximumIdleReaders), not \(other.maximumIdleReaders)"
        }
        let sample = Date(timeIntervalSince1970: 1_234_567_890.125)
        if dateFormat.format(sample) != other.dateFormat.format(sample) { return "another date format" }
        let mine = indexes.map { "\($0.name)@\($0.version)/\($0.collation)" }
        let theirs = other.indexes.map { "\($0.name)@\($0.version)/\($0.collation)" }
        if mine != theirs { return "indexes \(mine), not \(theirs)" }
        return nil
    }

    /// The database file: `<name>.sqlite` in ``directory``; a name with `/` (`team/notes`, as CouchDB
    /// allows) is a file in a subfolder (`team/notes.sqlite`).
    public var fileURL: URL {
        directory.appendingPathComponent(name + ".sqlite", isDirectory: false)
    }

    /// The folder that holds ``fileURL``: ``directory``, or a subfolder of it for a name with `/`.
    var folderURL: URL { fileURL.deletingLastPathComponent() }

    /// Checks the name: non-empty parts separated by `/`, none starting with a dot.
    static func validate(name: String) throws {
        let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.()+$/")
        let parts = name.split(separator: "/", omittingEmptySubsequences: false)
        guard !name.isEmpty, name.count <= 200, name.allSatisfy({ allowed.contains($0) }),
            parts.allSatisfy({ !$0.isEmpty && !$0.hasPrefix(".") })
        else {
            throw DocStoreError(.badRequest,
                                "Invalid database name \"\(name)\": use letters, digits and _ - . ( ) + $, parts separated by / and not starting with a dot")
        }
    }
}

extension DatabaseConfiguration: Hashable {
    /// Whether both name the same database: the same name in the same folder (its standardized
    /// path). Other settings are not compared: opening either gives the same ``Database``.
    public static func == (lhs: DatabaseConfiguration, rhs: DatabaseConfiguration) -> Bool {
        lhs.name == rhs.name && lhs.directory.standardizedFileURL.path == rhs.directory.standardizedFileURL.path
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(name)
        hasher.combine(directory.standardizedFileURL.path)
    }
}
