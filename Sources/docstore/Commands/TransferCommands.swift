import ArgumentParser
import CouchProtocol
import DocStore
import Foundation

struct Import: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Save documents from NDJSON (one CouchDB JSON document per line).",
        discussion: """
            Reads the file given, or standard input. Documents are saved in batches, each batch one \
            transaction; after a batch commits, one result line per document is printed and flushed, so \
            every printed {"ok":true,…} line is durable. Exits with status 1 if any document failed.
            """)

    @OptionGroup var options: DatabaseOptions

    @Argument(help: "An NDJSON file; standard input when omitted.")
    var file: String?

    @Option(name: .customLong("batch-size"), help: "Documents per transaction.")
    var batchSize: Int = 500

    @Flag(name: .customLong("keep-revisions"),
          help: "Insert documents with their _rev and _revisions as they are (CouchDB's new_edits=false), to restore an export.")
    var keepRevisions = false

    func validate() throws {
        guard batchSize >= 1 else { throw ValidationError("--batch-size must be at least 1") }
    }

    func run() async throws {
        let handle: FileHandle
        if let file {
            guard let opened = FileHandle(forReadingAtPath: file) else { fail("not_found: cannot read \(file)") }
            handle = opened
        } else {
            handle = FileHandle.standardInput
        }
        var failures = 0
        try await withDatabase(options) { db in
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
            }
        }
        if failures > 0 { throw ExitCode(1) }
    }
}

struct Export: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write every live document as NDJSON, with revision history and attachments inline, in id order.",
        discussion: "Restore with `docstore import --keep-revisions`.")

    @OptionGroup var options: DatabaseOptions

    func run() async throws {
        try await withDatabase(options) { db in
            var startKey: String? = nil
            while true {
                let page = try await db.allDocuments(AllDocumentsQuery(startKey: startKey, limit: 500,
                                                                       skip: startKey == nil ? 0 : 1))
                var output = ""
                for row in page.rows {
                    guard var document = try await db.document(withID: row.id, includeRevisionHistory: true) else { continue }
                    for (name, attachment) in document.attachments {
                        document.attachments[name] = try db.loadingContent(of: attachment)
                    }
                    output += document.json(attachmentData: true, revisions: true).description + "\n"
                }
                FileHandle.standardOutput.write(Data(output.utf8))
                guard page.rows.count == 500, let last = page.rows.last else { break }
                startKey = last.id
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
