import Logging
import Synchronization

/// The level of every logger of a server — its HTTP requests', its databases', its replications' —
/// one value they share, so that `PUT /_node/_local/_config/log/level` changes what a running server
/// logs, as in CouchDB.
final class SharedLogLevel: Sendable {
    private let raw: Atomic<Int>

    init(_ level: Logger.Level) {
        raw = Atomic(SharedLogLevel.levels.firstIndex(of: level) ?? 2)
    }

    private static let levels = Logger.Level.allCases

    var level: Logger.Level {
        get { SharedLogLevel.levels[raw.load(ordering: .relaxed)] }
        set { raw.store(SharedLogLevel.levels.firstIndex(of: newValue) ?? 2, ordering: .relaxed) }
    }

    /// Takes the level the configuration's `[log] level` names: a word CouchDB does not know is
    /// `info`, as in CouchDB, and so is a level deleted from the configuration.
    func follow(_ configured: String?) {
        level = configured.flatMap(SharedLogLevel.level(named:)) ?? .info
    }

    /// `logger`, writing where it writes, at this level (and changing it when its level is set).
    func logger(wrapping logger: Logger) -> Logger {
        var handler = logger.handler
        // The shared level decides; the handler writes what it is given.
        handler.logLevel = .trace
        let shared = SharedLevelLogHandler(wrapped: handler, shared: self)
        return Logger(label: logger.label) { _ in shared }
    }

    /// A level as CouchDB's `[log] level` names it (`debug`, `info`, `notice`, `warning`, `error`,
    /// `critical`, and the `warn`, `err`, `crit`, `alert`, `emergency`, `emerg` and `none` it also
    /// takes) or swift-log does (`trace`); `nil` for another word, which CouchDB logs at `info`.
    static func level(named name: String) -> Logger.Level? {
        switch name.lowercased() {
        case "trace": .trace
        case "debug": .debug
        case "info": .info
        case "notice": .notice
        case "warning", "warn": .warning
        case "error", "err": .error
        case "critical", "crit", "alert", "emergency", "emerg", "none": .critical
        default: nil
        }
    }
}

/// A log handler whose level is a ``SharedLogLevel``'s.
private struct SharedLevelLogHandler: LogHandler {
    var wrapped: any LogHandler
    let shared: SharedLogLevel

    var logLevel: Logger.Level {
        get { shared.level }
        set { shared.level = newValue }
    }

    var metadata: Logger.Metadata {
        get { wrapped.metadata }
        set { wrapped.metadata = newValue }
    }

    var metadataProvider: Logger.MetadataProvider? {
        get { wrapped.metadataProvider }
        set { wrapped.metadataProvider = newValue }
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { wrapped[metadataKey: key] }
        set { wrapped[metadataKey: key] = newValue }
    }

    func log(event: LogEvent) {
        wrapped.log(event: event)
    }
}
