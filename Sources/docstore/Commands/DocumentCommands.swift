import ArgumentParser
import CouchProtocol
import DocStore
import Foundation

struct Put: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Create or update a document from JSON (an argument, or standard input).",
        discussion: """
            The JSON is a CouchDB document: "_id" names it (generated when absent), "_rev" must be the \
            current revision to update it. Prints {"ok":true,"id":…,"rev":…}.
            """)

    @OptionGroup var options: DatabaseOptions

    @Argument(help: "The document JSON; read from standard input when omitted.")
    var json: String?

    func run() async throws {
        let text = json ?? String(decoding: readStandardInput(), as: UTF8.self)
        guard !text.allSatisfy(\.isWhitespace) else { fail("bad_request: no document JSON given") }
        if let remote = options.remote {
            let body = parseJSONArgument(text, name: "the document")
            guard case .object = body else { fail("bad_request: the document must be a JSON object") }
            return try await withRemote(remote) { printJSON(try await $0.json("POST", body: body)) }
        }
        let document: Document
        do {
            document = try Document(json: text)
        } catch let error as DocStoreError {
            fail("\(error.couchDBError): \(error.reason)")
        }
        try await withDatabase(options) { db in
            printJSON(WriteResult(written: try await db.put(document)).json)
        }
    }
}

struct Get: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Print a document as JSON, with _id and _rev.")

    @OptionGroup var options: DatabaseOptions

    @Argument(help: "The document id.")
    var id: String

    @Option(help: "A specific revision.")
    var rev: String?

    @Flag(help: "Include _conflicts.")
    var conflicts = false

    @Flag(help: "Include _revisions (the revision history).")
    var revs = false

    @Flag(help: "Include attachment contents inline (base64).")
    var attachments = false

    func run() async throws {
        let revision = rev.map(parseRevision)
        if let remote = options.remote {
            return try await withRemote(remote) { server in
                printJSON(try await server.json("GET", RemoteDatabase.documentPath(id),
                                                query: [("rev", rev), ("conflicts", conflicts ? "true" : nil), ("revs", revs ? "true" : nil),
                                                        ("attachments", attachments ? "true" : nil)]))
            }
        }
        try await withDatabase(options) { db in
            guard let document = try await db.document(withID: id, revision: revision, includeConflicts: conflicts,
                                                       includeRevisionHistory: revs) else {
                fail("not_found: \(revision == nil ? "missing" : "missing revision") (\(id))")
            }
            var output = document
            if attachments {
                for (name, attachment) in document.attachments {
                    output.attachments[name] = try db.loadingContent(of: attachment)
                }
            }
            printJSON(output.json(attachmentData: attachments, revisions: revs))
        }
    }
}

struct Delete: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Delete a document (at its current revision unless --rev is given).")

    @OptionGroup var options: DatabaseOptions

    @Argument(help: "The document id.")
    var id: String

    @Option(help: "The revision to delete; a stale one is a conflict.")
    var rev: String?

    func run() async throws {
        let revision = rev.map(parseRevision)
        if let remote = options.remote {
            return try await withRemote(remote) { server in
                let path = RemoteDatabase.documentPath(id)
                var target = rev
                if target == nil { target = try await server.json("GET", path)["_rev"]?.stringValue }
                printJSON(try await server.json("DELETE", path, query: [("rev", target)]))
            }
        }
        try await withDatabase(options) { db in
            let target: RevisionID
            if let revision {
                target = revision
            } else {
                guard let current = try await db.document(withID: id) else { fail("not_found: missing (\(id))") }
                target = current.revision!
            }
            printJSON(WriteResult(id: id, revision: try await db.delete(id: id, revision: target).description).json)
        }
    }
}

struct All: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "List documents in id order, like CouchDB's _all_docs.")

    @OptionGroup var options: DatabaseOptions

    @Option(name: .customLong("start-key"), help: "The first id.")
    var startKey: String?

    @Option(name: .customLong("end-key"), help: "The last id.")
    var endKey: String?

    @Option(help: "Comma-separated ids to list, in order.")
    var keys: String?

    @Option(help: "The most rows to print.")
    var limit: Int?

    @Option(help: "Rows to skip.")
    var skip: Int = 0

    @Flag(help: "Newest id first.")
    var descending = false

    @Flag(name: .customLong("exclusive-end"), help: "Leave out --end-key itself.")
    var exclusiveEnd = false

    @Flag(name: .customLong("include-docs"), help: "Include each document.")
    var includeDocuments = false

    func run() async throws {
        if let remote = options.remote {
            let parameters: [(String, String?)] = [
                ("startkey", startKey.map { JSON.string($0).description }), ("endkey", endKey.map { JSON.string($0).description }),
                ("inclusive_end", exclusiveEnd ? "false" : nil), ("descending", descending ? "true" : nil),
                ("limit", limit.map(String.init)), ("skip", skip > 0 ? String(skip) : nil), ("include_docs", includeDocuments ? "true" : nil),
            ]
            return try await withRemote(remote) { server in
                if let keys {
                    let body: JSON = ["keys": .array(keys.split(separator: ",").map { .string(String($0)) })]
                    printJSON(try await server.json("POST", "_all_docs", query: parameters, body: body))
                } else {
                    printJSON(try await server.json("GET", "_all_docs", query: parameters))
                }
            }
        }
        let query = AllDocumentsQuery(startKey: startKey, endKey: endKey, inclusiveEnd: !exclusiveEnd,
                                      descending: descending, limit: limit, skip: skip,
                                      keys: keys.map { $0.split(separator: ",").map(String.init) },
                                      includeDocuments: includeDocuments)
        try await withDatabase(options) { db in
            printJSON(ViewResponse(try await db.allDocuments(query), includeDocuments: includeDocuments).json)
        }
    }
}

struct Changes: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Print the changes feed, like CouchDB's _changes.")

    @OptionGroup var options: DatabaseOptions

    @Option(help: "The sequence to start after (a server's as it gave it).")
    var since: String = "0"

    @Option(help: "The most rows to print.")
    var limit: Int?

    @Flag(name: .customLong("include-docs"), help: "Include each document.")
    var includeDocuments = false

    @Option(help: "main_only (the winning revision) or all_docs (every leaf revision).")
    var style: String = "main_only"

    func validate() throws {
        guard ["main_only", "all_docs"].contains(style) else {
            throw ValidationError("--style must be main_only or all_docs")
        }
    }

    func run() async throws {
        if let remote = options.remote {
            return try await withRemote(remote) { server in
                printJSON(try await server.json("GET", "_changes", query: [
                    ("since", since), ("limit", limit.map(String.init)), ("include_docs", includeDocuments ? "true" : nil),
                    ("style", style == "all_docs" ? style : nil),
                ]))
            }
        }
        guard let since = Int64(since) else { fail("bad_request: --since must be a sequence number for a local database") }
        try await withDatabase(options) { db in
            let page = try await db.changes(since: since, limit: limit, includeDocuments: includeDocuments)
            let pending = try await db.pendingChangeCount(since: page.lastSequence)
            let rows = page.changes.map { ChangesRow($0, allLeaves: style == "all_docs", document: $0.document?.json()) }
            printJSON(ChangesResponse(results: rows, lastSequence: .integer(Int(page.lastSequence)), pending: pending).json)
        }
    }
}

struct Info: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Print document counts, sequence and size.")

    @OptionGroup var options: DatabaseOptions

    func run() async throws {
        if let remote = options.remote {
            return try await withRemote(remote) { printJSON(try await $0.json("GET")) }
        }
        try await withDatabase(options) { db in
            printJSON(try await db.info().couchDBJSON)
        }
    }
}

struct Compact: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Drop bodies of old (non-leaf) revisions and unused attachment contents.")

    @OptionGroup var options: DatabaseOptions

    @Flag(name: .shortAndLong, help: "No progress on the terminal.")
    var quiet = false

    func run() async throws {
        if let remote = options.remote {
            // The server compacts in the background, as CouchDB answers `_compact` at once.
            return try await withRemote(remote) { printJSON(try await $0.json("POST", "_compact", body: [:])) }
        }
        let bar = TerminalProgress("compact", unit: ("document", "documents"), enabled: !quiet)
        try await withDatabase(options) { db in
            let dropped = try await bar.ticking(following: { db.progress(of: .databaseCompaction) }) { try await db.compact() }
            printJSON(["ok": true, "revisions_dropped": .integer(dropped)])
        }
    }
}
