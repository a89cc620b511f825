import Logging
import DocStore

/// Keeps the messages logged through a ``CollectingLogHandler``, for tests that count a server's
/// requests or check what it logged.
public final class MessageLog: Sendable {
    /// Each message with its level, in order.
    package let entries = Locked<[(level: Logger.Level, message: String)]>([])

    public init() {}

    /// How many messages contain `text`.
    public func count(containing text: String) -> Int {
        entries.withLock { $0.filter { $0.message.contains(text) }.count }
    }

    /// The messages logged at `level` or above.
    public func messages(atLeast level: Logger.Level) -> [String] {
        entries.withLock { $0.filter { $0.level >= level }.map(\.message) }
    }
}

/// A log handler that keeps every message (at `logLevel` and above) in a ``MessageLog``.
public struct CollectingLogHandler: LogHandler {
    public let log: MessageLog
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level

    public init(log: MessageLog, logLevel: Logger.Level = .info) {
        self.log = log
        self.logLevel = logLevel
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        log.entries.withLock { $0.append((event.level, event.message.description)) }
    }
}
