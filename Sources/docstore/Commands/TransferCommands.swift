import ArgumentParser
import CouchProtocol
import DocStore
import DocSync
import Foundation

struct Import: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Import an export: a JSON array or NDJSON, full or compact, all or nothing.",
        discussion: """
            Reads the file given, or standard input, and imports every record in one transaction: a \
            record with _rev (the full form of `docstore export`) is inserted with its revision history, \
            as replication does; one without creates its document or updates the current revision. \
            A bad record names its line (or element) and byte offset, and nothing is imported. Prints \
            {"ok":true,"records":N,"revisions_written":M}.

            With --batch-size, NDJSON is instead saved in batches, each one transaction, and a result \
            line is printed and flushed per document once its batch commits (every printed \
            {"ok":true,…} line is durable); records that fail are reported and the others saved, and \
            the exit status is 1 if any failed. For files too large for one transaction.

            Into a server's database (--db URL) the records are NDJSON and always go in batches \
            (--batch-size, 500 by default), each one `_bulk_docs` request, with a result line per \
            record: a server has no all-or-nothing import. A record without _rev updates the \
            document's current revision, as a local import does.
            """)

    @OptionGroup var options: DatabaseOptions

    @Argument(help: "The file to import; standard input when omitted.")
    var file: String?

    @Option(name: .customLong("batch-size"), help: "Save NDJSON in batches of this many documents, each committed on its own.")
    var batchSize: Int?

    @Flag(name: .customLong("keep-revisions"),
          help: "With --batch-size: insert documents with their _rev and _revisions as they are (CouchDB's new_edits=false).")
    var keepRevisions = false

    @Flag(name: .shortAndLong, help: "No progress bar on the terminal.")
    var quiet = false

    func validate() throws {
        if let batchSize, batchSize < 1 { throw ValidationError("--batch-size must be at least 1") }
        if keepRevisions && batchSize == nil {
            throw ValidationError("--keep-revisions goes with --batch-size (a whole import keeps the revisions of full records)")
        }
    }

    func run() async throws {
        if let remote = options.remote { return try await importRemote(remote) }
        guard let batchSize else { return try await importAll() }
        let handle = input()
        var failures = 0
        try await withDatabase(options) { db in
            failures = try await importInBatches(from: handle, of: batchSize, parse: { try Document(json: JSON(parsing: $0)) }) { batch in
                let results = keepRevisions ? try await db.insertRevisions(batch, source: .local) : try await db.save(each: batch)
                return results.map(WriteResult.init)
            }
        }
        if failures > 0 { throw ExitCode(1) }
    }

    /// NDJSON records into a server's database, a `_bulk_docs` request per batch.
    private func importRemote(_ server: RemoteAddress) async throws {
        let handle = input()
        var failures = 0
        try await withRemote(server) { server in
            failures = try await importInBatches(from: handle, of: batchSize ?? 500, parse: { line in
                if line.first == UInt8(ascii: "[") {
                    fail("bad_request: an import into a server reads NDJSON, one document per line (docstore export --format ndjson)")
                }
                guard case .object(let record) = try JSON(parsing: line) else {
                    throw DocStoreError(.badRequest, "A record must be a JSON object")
                }
                return record
            }) { batch in try await save(batch, to: server) }
        }
        if failures > 0 { throw ExitCode(1) }
    }

    /// Reads `handle`'s NDJSON lines in batches of `batchSize` records, each read by `parse`, and
    /// hands each batch to `save`. Prints, and flushes once its batch is saved, a line per record: the
    /// line and error of one `parse` refused, then `save`'s result of each one it was given. Returns
    /// how many records failed.
    private func importInBatches<Record>(from handle: FileHandle, of batchSize: Int, parse: ([UInt8]) throws -> Record,
                                         save: ([Record]) async throws -> [WriteResult]) async throws -> Int {
        var failures = 0
        let bar = TerminalProgress("import", unit: ("record", "records"), enabled: !quiet)
        try await bar.around {
            var lines = LineReader(handle: handle)
            var lineNumber = 0
            while true {
                var batch: [Record] = []
                var output = ""
                while batch.count < batchSize, let line = lines.next() {
                    lineNumber += 1
                    if line.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }) { continue }
                    do {
                        batch.append(try parse(line))
                    } catch let error as DocStoreError {
                        output += JSON(["line": .integer(lineNumber), "error": .string(error.couchDBError), "reason": .string(error.reason)]).description + "\n"
                        failures += 1
                    }
                }
                if batch.isEmpty && output.isEmpty { break }
                if !batch.isEmpty {
                    for result in try await save(batch) {
                        if !result.isSuccess { failures += 1 }
                        output += result.json.description + "\n"
                    }
                }
                FileHandle.standardOutput.write(Data(output.utf8))
                bar.update(lineNumber, note: failures > 0 ? "\(failures) failed" : nil)
            }
        }
        return failures
    }

    /// The file to import, or standard input.
    private func input() -> FileHandle {
        guard let file else { return FileHandle.standardInput }
        guard let opened = FileHandle(forReadingAtPath: file) else { fail("not_found: cannot read \(file)") }
        return opened
    }

    /// One batch into a server: with --keep-revisions as they are (`new_edits=false`, whose answer
    /// lists only the refused); otherwise each record without `_rev` gets its document's current
    /// revision first, so that it updates it.
    private func save(_ batch: [JSONObject], to server: RemoteDatabase) async throws -> [WriteResult] {
        if keepRevisions {
            let answer = try await server.json("POST", "_bulk_docs", body: ["docs": .array(batch.map(JSON.object)), "new_edits": false])
            var refused: [ExactString: WriteResult] = [:]
            for row in answer.arrayValue ?? [] {
                if let result = try? WriteResult(json: row), !result.isSuccess, let id = result.id { refused[ExactString(id)] = result }
            }
            return batch.map { record in
                let id = record["_id"]?.stringValue ?? ""
                return refused[ExactString(id)] ?? WriteResult(id: id, revision: record["_rev"]?.stringValue)
            }
        }
        var documents = batch
        let unrevised = documents.indices.filter { documents[$0]["_rev"] == nil && documents[$0]["_id"]?.stringValue != nil }
        if !unrevised.isEmpty {
            let keys = unrevised.map { documents[$0]["_id"]! }
            let rows = try await server.json("POST", "_all_docs", body: ["keys": .array(keys)])["rows"]?.arrayValue ?? []
            for (index, row) in zip(unrevised, rows) where row["value"]?["deleted"]?.boolValue != true {
                if let revision = row["value"]?["rev"] { documents[index]["_rev"] = revision }
            }
        }
        let answer = try await server.json("POST", "_bulk_docs", body: ["docs": .array(documents.map(JSON.object))])
        let rows = answer.arrayValue ?? []
        guard rows.count == documents.count else {
            throw RemoteError(error: "bad_response", reason: "_bulk_docs answered \(rows.count) rows for \(documents.count) documents")
        }
        return try rows.map(WriteResult.init(json:))
    }

    private func importAll() async throws {
        let data: Data
        if let file {
            guard let contents = FileManager.default.contents(atPath: file) else { fail("not_found: cannot read \(file)") }
            data = contents
        } else {
            data = FileHandle.standardInput.readDataToEndOfFile()
        }
        let bar = TerminalProgress("import", unit: ("record", "records"), enabled: !quiet)
        try await withDatabase(options) { db in
            let summary = try await bar.around { try await db.importDocuments(from: data) { bar.update($0, total: $1) } }
            let line: JSON = ["ok": true, "records": .integer(summary.records), "revisions_written": .integer(summary.revisionsWritten)]
            FileHandle.standardOutput.write(Data((line.description + "\n").utf8))
        }
    }
}

struct Export: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write the database (or a selection) to standard output, as JSON or NDJSON, full or compact.",
        discussion: """
            The full form (the default) has every leaf revision — conflicts and deleted documents \
            too — with _rev, _revisions and attachments inline: `docstore import` into an empty database \
            reproduces the database. The compact form has the current value of each live document only \
            (_id and its members; no revision, history or attachments). Documents come in id order.
            """)

    @OptionGroup var options: DatabaseOptions

    @Option(help: "json (one array) or ndjson (one document per line).")
    var format: String = "json"

    @Flag(help: "Current values only.")
    var compact = false

    @Option(help: "A Mango selector: export only the documents whose current revision matches it.")
    var selector: String?

    @Flag(name: .shortAndLong, help: "No progress bar on the terminal.")
    var quiet = false

    func validate() throws {
        guard ExportOptions.Format(rawValue: format) != nil else { throw ValidationError("--format must be json or ndjson") }
    }

    func run() async throws {
        var exportOptions = ExportOptions(format: ExportOptions.Format(rawValue: format)!, form: compact ? .compact : .full)
        if let selector { exportOptions.selector = try MangoSelector(JSON(parsing: selector)) }
        if let remote = options.remote {
            return try await withRemote(remote) { try await exportRemote($0, exportOptions) }
        }
        try await withDatabase(options) { db in try await export(db, exportOptions) }
    }

    /// A server's database, exported as a local one is: pulled first (every leaf, deleted ones and
    /// attachments, as replication carries them) into a temporary local database.
    private func exportRemote(_ server: RemoteDatabase, _ exportOptions: ExportOptions) async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("docstore-export-" + RandomHex.make())
        defer { try? FileManager.default.removeItem(at: folder) }
        let copy = try await Database.open(name: "export", directory: folder)
        do {
            let replicator = Replicator(configuration: ReplicationConfiguration(source: .remote(server.replicationURL), target: .local(copy)))
            let pulled = try await TerminalProgress("pull \(server.name)", unit: nil, enabled: !quiet, delay: .seconds(1)).ticking {
                try await replicator.run()
            }
            if pulled.documentWriteFailures > 0 {
                throw RemoteError(error: "replication_failed", reason: "\(pulled.documentWriteFailures) documents of \(server.name) could not be read")
            }
            try await export(copy, exportOptions)
        } catch let error as ReplicationError {
            await copy.close()
            throw RemoteError(error: "replication_failed", reason: "\(error)")
        } catch {
            await copy.close()
            throw error
        }
        await copy.close()
    }

    /// Writes `db`'s export to standard output, with a progress bar on a terminal.
    private func export(_ db: Database, _ exportOptions: ExportOptions) async throws {
        let quiet = self.quiet
        // The total is the documents' count (with the deleted ones in the full form); a selection
        // or conflicts make it an estimate, and the bar ends full either way.
        let info = try await db.info()
        let bar = TerminalProgress("export", unit: ("record", "records"),
                                   total: info.documentCount + (exportOptions.form == .full ? info.deletedDocumentCount : 0), enabled: !quiet)
        var records = 0
        try await bar.around {
            let written = try await db.export(exportOptions) { chunk in
                FileHandle.standardOutput.write(chunk)
                // About one line per record (its JSON is written without line breaks).
                records += chunk.reduce(0) { $0 + ($1 == 0x0A ? 1 : 0) }
                bar.update(records)
            }
            bar.update(written, total: written)
        }
    }
}

/// Reads a file handle line by line as raw bytes, without loading it all.
struct LineReader {
    let handle: FileHandle
    private var buffer: [UInt8] = []
    private var start = 0
    private var atEnd = false

    init(handle: FileHandle) { self.handle = handle }

    mutating func next() -> [UInt8]? {
        while true {
            if let newline = buffer[start...].firstIndex(of: 0x0A) {
                defer { start = newline + 1 }
                return Array(buffer[start..<newline])
            }
            if atEnd {
                guard start < buffer.count else { return nil }
                defer { start = buffer.count }
                return Array(buffer[start...])
            }
            buffer.removeFirst(start)
            start = 0
            let chunk = handle.readData(ofLength: 1 << 16)
            if chunk.isEmpty { atEnd = true } else { buffer.append(contentsOf: chunk) }
        }
    }
}
