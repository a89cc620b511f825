import ArgumentParser
import DocStore
import DocSync
import Foundation

struct Replicate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Replicate documents from SOURCE to TARGET with the CouchDB replication protocol.",
        discussion: """
            SOURCE and TARGET are database URLs (http://user:password@host:5984/db) or local databases \
            (DIR/NAME, as --db). Exits with 0 only when the replication completed without document failures. \
            With --continuous it keeps going until Ctrl-C (exit 0), retrying through network trouble, \
            or until it fails for good — a database that does not exist, refused credentials (exit 1).
            """)

    @Argument(help: "The source: a URL or a local DIR/NAME.")
    var source: String

    @Argument(help: "The target: a URL or a local DIR/NAME.")
    var target: String

    @Flag(name: .customLong("create-target"), help: "Create the target database if it does not exist.")
    var createTarget = false

    @Flag(help: "Keep replicating new changes until interrupted.")
    var continuous = false

    @Option(help: "Only documents in these comma-separated channels (none named: every document the user may read).")
    var channels: String?

    @Option(name: .customLong("doc-ids"), help: "Only these comma-separated document ids.")
    var documentIDs: String?

    @Option(help: "A server filter function of the source (design/name).")
    var filter: String?

    @Option(name: .customLong("param"), help: "A filter parameter as key=value (repeatable).")
    var parameters: [String] = []

    @Option(name: .customLong("batch-size"), help: "Changes per batch.")
    var batchSize: Int = 100

    @Flag(name: .shortAndLong, help: "No progress: neither the bar on a terminal nor the progress lines.")
    var quiet = false

    func endpoint(_ text: String) async throws -> ReplicationEndpoint {
        if text.hasPrefix("http://") || text.hasPrefix("https://") {
            guard let url = URL(string: text) else { fail("bad_request: invalid URL \(text)") }
            return .remote(url)
        }
        var options = DatabaseOptions()
        options.db = text
        do {
            return .local(try await options.open())
        } catch let error as DocStoreError {
            fail("\(error.couchDBError): \(error.reason)")
        }
    }

    func run() async throws {
        var configuration = ReplicationConfiguration(source: try await endpoint(source), target: try await endpoint(target))
        configuration.createTarget = createTarget
        configuration.continuous = continuous
        configuration.batchSize = max(1, batchSize)
        let wanted = channels.map { $0.split(separator: ",").map(String.init) }
        configuration.limitToChannels = wanted
        configuration.documentIDs = documentIDs.map { $0.split(separator: ",").map(String.init) }
        configuration.filterName = filter
        for parameter in parameters {
            guard let equals = parameter.firstIndex(of: "=") else { fail("bad_request: --param must be key=value") }
            configuration.filterParameters[String(parameter[..<equals])] = .string(String(parameter[parameter.index(after: equals)...]))
        }
        let replicator = Replicator(configuration: configuration)
        // On a terminal a bar (one-shot: changes done of those the source counted) or live counts
        // (continuous); into a pipe or file, the lines scripts read, as before.
        let bar = TerminalProgress(continuous ? "replicate (continuous)" : "replicate", unit: ("change", "changes"), enabled: !quiet)
        let lines = !quiet && isatty(STDOUT_FILENO) == 0
        let continuous = self.continuous
        let progress = Task {
            for await status in replicator.statusChanges() {
                let total = continuous ? nil : status.changesRemaining.map { status.changesProcessed + $0 }
                bar.update(status.changesProcessed, total: total,
                           note: "\(TerminalProgress.grouped(status.documentsWritten)) written, \(status.documentWriteFailures) failed")
                if lines {
                    FileHandle.standardOutput.write(Data("progress changes=\(status.changesProcessed) written=\(status.documentsWritten) failed=\(status.documentWriteFailures) state=\(status.activity.rawValue)\n".utf8))
                }
            }
        }
        // A continuous replication runs until Ctrl-C stops it — or until it fails for good (a source
        // that does not exist, refused credentials), which ends the command as a one-shot failure does.
        var interrupts: (any DispatchSourceSignal)? = nil
        if continuous {
            signal(SIGINT, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: SIGINT)
            source.setEventHandler { Task { await replicator.stop() } }
            source.resume()
            interrupts = source
        }
        defer { interrupts?.cancel() }
        let final: ReplicatorStatus
        do {
            final = try await replicator.run()
        } catch let error as ReplicationError {
            await progress.value
            bar.finish()
            fail("replication_failed: \(error)")
        }
        await progress.value
        bar.finish()
        await Database.closeAll()
        print(#"{"ok":\#(final.documentWriteFailures == 0),"changes":\#(final.changesProcessed),"docs_written":\#(final.documentsWritten),"doc_write_failures":\#(final.documentWriteFailures)}"#)
        if final.documentWriteFailures > 0 { throw ExitCode(1) }
    }
}
