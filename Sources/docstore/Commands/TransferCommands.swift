import ArgumentParser
import CouchProtocol
import DocStore
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
        guard let batchSize else { return try await importAll() }
        let handle: FileHandle
        if let file {
            guard let opened = FileHandle(forReadingAtPath: file) else { fail("not_found: cannot read \(file)") }
            handle = opened
        } else {
            handle = FileHandle.standardInput
        }
        var failures = 0
        let bar = TerminalProgress("import", unit: ("record", "records"), enabled: !quiet)
        try await withDatabase(options) { db in try await bar.around {
            var lines = LineReader(handle: handle)
            var lineNumber = 0
            while true {
                var batch: [Document] = []
                var rejected: [JSON] = []
                while batch.count < batchSize, let line = lines.next() {
                    lineNumber += 1
                    if line.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }) { continue }
                    do {
                        batch.append(try Document(json: JSON(parsing: line)))
                    } catch let error as DocStoreError {
                        rejected.append(["line": .integer(lineNumber), "error": .string(error.couchDBError),
                                         "reason": .string(error.reason)])
                    }
                }
                if batch.isEmpty && rejected.isEmpty { break }
                var output = ""
                for row in rejected { output += row.description + "\n" }
                failures += rejected.count
                if !batch.isEmpty {
                    let results = keepRevisions ? try await db.insertRevisions(batch, source: .local) : try await db.save(batch)
                    for result in results {
                        if !result.isSuccess { failures += 1 }
                        output += WriteResult(result).json.description + "\n"
                    }
                }
                FileHandle.standardOutput.write(Data(output.utf8))
                bar.update(lineNumber, note: failures > 0 ? "\(failures) failed" : nil)
            }
        } }
        if failures > 0 { throw ExitCode(1) }
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
        let quiet = self.quiet
        try await withDatabase(options) { db in
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
