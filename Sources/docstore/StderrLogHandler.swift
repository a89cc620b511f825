import Logging

/// swift-log's `StreamLogHandler` on standard error, with the logger's metadata kept here and handed
/// over only when a line is written.
///
/// `StreamLogHandler` renders its metadata into text each time an entry is set, and the HTTP server
/// sets a request id on every request's logger: 2–3 % of a single-client GET's CPU time went to text
/// that a server logging warnings never writes. The lines are the same.
struct StderrLogHandler: LogHandler {
    private var stream: StreamLogHandler
    var metadata: Logger.Metadata = [:]

    init(label: String) {
        stream = StreamLogHandler.standardError(label: label)
    }

    var logLevel: Logger.Level {
        get { stream.logLevel }
        set { stream.logLevel = newValue }
    }

    var metadataProvider: Logger.MetadataProvider? {
        get { stream.metadataProvider }
        set { stream.metadataProvider = newValue }
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var event = event
        if !metadata.isEmpty { event.metadata = metadata.merging(event.metadata ?? [:]) { $1 } }
        stream.log(event: event)
    }
}
