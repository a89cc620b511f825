import ArgumentParser
import CouchProtocol
import DocStore
import Foundation

struct Query: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Query an index on a document field, like a CouchDB view.",
        discussion: """
            --by FIELD (a dotted path such as address.city) defines an index whose key is that field of \
            every document that has it, and whose value is --value FIELD (or null). The index is created on \
            first use, kept in the database and updated incrementally. Keys are JSON: --key '"Paris"', \
            --start-key '[2026,1]'. Prints CouchDB's view JSON.

            With --db naming a server's database (a URL), --view DDOC/NAME asks the view NAME of its \
            design document _design/DDOC instead, with the same options (the view's own reduce applies; \
            --group and --group-level group it).
            """)

    @OptionGroup var options: DatabaseOptions

    @Option(name: .customLong("by"), help: ArgumentHelp("The field whose value is the key.", valueName: "field"))
    var field: String?

    @Option(help: ArgumentHelp("A view of the server's design document (with a URL --db).", valueName: "ddoc/name"))
    var view: String?

    @Option(name: .customLong("value"), help: ArgumentHelp("The field whose value is the row value.", valueName: "field"))
    var valueField: String?

    @Option(help: ArgumentHelp("Only rows with this key (JSON).", valueName: "json"))
    var key: String?

    @Option(help: ArgumentHelp("Only rows with these keys, in order (a JSON array).", valueName: "json"))
    var keys: String?

    @Option(name: .customLong("start-key"), help: ArgumentHelp("The first key (JSON).", valueName: "json"))
    var startKey: String?

    @Option(name: .customLong("end-key"), help: ArgumentHelp("The last key (JSON).", valueName: "json"))
    var endKey: String?

    @Option(name: .customLong("start-key-doc-id"), help: "Among rows with the start key, start at this document id.")
    var startKeyDocID: String?

    @Option(name: .customLong("end-key-doc-id"), help: "Among rows with the end key, end at this document id.")
    var endKeyDocID: String?

    @Flag(name: .customLong("exclusive-end"), help: "Leave out rows with the end key.")
    var exclusiveEnd = false

    @Flag(help: "Highest key first (then --start-key is the higher key).")
    var descending = false

    @OptionGroup var rows: RowOptions

    @Option(help: ArgumentHelp("Reduce the rows: count, sum or stats (of --value).", valueName: "function"))
    var reduce: String?

    @Flag(help: "Reduce per distinct key.")
    var group = false

    @Option(name: .customLong("group-level"), help: "Reduce per prefix of this many elements of array keys.")
    var groupLevel: Int?

    @Option(help: ArgumentHelp("ok: answer without updating the index; update_after: update afterwards.", valueName: "mode"))
    var stale: String?

    func validate() throws {
        guard (field == nil) != (view == nil) else { throw ValidationError("give either --by FIELD or --view DDOC/NAME") }
        if let view, view.split(separator: "/", omittingEmptySubsequences: false).count != 2 {
            throw ValidationError("--view must be DDOC/NAME")
        }
        if view != nil, reduce != nil { throw ValidationError("--reduce goes with --by: a view has its own reduce") }
        if let reduce, !["count", "sum", "stats"].contains(reduce) {
            throw ValidationError("--reduce must be count, sum or stats")
        }
        if let stale, !["ok", "update_after"].contains(stale) {
            throw ValidationError("--stale must be ok or update_after")
        }
    }

    func run() async throws {
        if let remote = options.remote {
            guard let view else { fail("bad_request: --by builds an index in a local database; for a server's database give --view DDOC/NAME") }
            return try await withRemote(remote) { try await queryView(view, on: $0) }
        }
        guard let field else { fail("bad_request: --view asks a server's view: give --db its database URL") }
        let reduceFunction: ReduceFunction? = switch reduce {
        case "count": .count
        case "sum": .sum
        case "stats": .stats
        default: nil
        }
        let index = IndexDefinition.field(field, value: valueField, reduce: reduceFunction)
        var query = IndexQuery()
        query.key = key.map { parseJSONArgument($0, name: "--key") }
        if let keys {
            guard case .array(let list) = parseJSONArgument(keys, name: "--keys") else {
                fail("bad_request: --keys must be a JSON array")
            }
            query.keys = list
        }
        query.startKey = startKey.map { parseJSONArgument($0, name: "--start-key") }
        query.endKey = endKey.map { parseJSONArgument($0, name: "--end-key") }
        query.startKeyDocID = startKeyDocID
        query.endKeyDocID = endKeyDocID
        query.inclusiveEnd = !exclusiveEnd
        query.descending = descending
        query.limit = rows.limit
        query.skip = rows.skip
        query.includeDocuments = rows.includeDocuments
        query.includeOffset = true
        query.group = group
        query.groupLevel = groupLevel
        query.stale = stale == "ok" ? .ok : stale == "update_after" ? .updateAfter : .updateBefore
        try await withDatabase(options) { db in
            try await db.register(index)
            // A build that takes longer than a second shows its progress on a terminal.
            let result = try await TerminalProgress("index by \(field)", unit: ("document", "documents"), enabled: !rows.quiet, delay: .seconds(1))
                .ticking(following: { db.progress(of: .indexing(indexName: index.name)) }) { try await db.query(index.name, query) }
            for error in result.mapErrors {
                FileHandle.standardError.write(Data("docstore: warning: document \(error.documentID) not indexed: \(error.reason)\n".utf8))
            }
            printJSON(ViewResponse(result, includeDocuments: rows.includeDocuments).json)
        }
    }
}

extension Query {
    /// The view `design/name` of a server's database, asked with the options given.
    private func queryView(_ view: String, on server: RemoteDatabase) async throws {
        let parts = view.split(separator: "/", omittingEmptySubsequences: false).map { RemoteDatabase.encode(String($0)) }
        let path = "_design/\(parts[0])/_view/\(parts[1])"
        func json(_ text: String?, _ name: String) -> String? { text.map { parseJSONArgument($0, name: name).description } }
        let parameters: [(String, String?)] = [
            ("key", json(key, "--key")), ("startkey", json(startKey, "--start-key")), ("endkey", json(endKey, "--end-key")),
            ("startkey_docid", startKeyDocID), ("endkey_docid", endKeyDocID), ("inclusive_end", exclusiveEnd ? "false" : nil),
            ("descending", descending ? "true" : nil), ("limit", rows.limit.map(String.init)), ("skip", rows.skip > 0 ? String(rows.skip) : nil),
            ("include_docs", rows.includeDocuments ? "true" : nil), ("group", group ? "true" : nil), ("group_level", groupLevel.map(String.init)),
            ("update", stale == "ok" ? "false" : stale == "update_after" ? "lazy" : nil),
        ]
        if let keys {
            guard case .array = parseJSONArgument(keys, name: "--keys") else { fail("bad_request: --keys must be a JSON array") }
            printJSON(try await server.json("POST", path, query: parameters, body: ["keys": parseJSONArgument(keys, name: "--keys")]))
        } else {
            printJSON(try await server.json("GET", path, query: parameters))
        }
    }
}

/// `--limit`, `--skip` and `--include-docs`, as `docstore query` and `docstore search` take them.
struct RowOptions: ParsableArguments {
    @Option(help: "The most rows to print.")
    var limit: Int?

    @Option(help: "Rows to skip.")
    var skip: Int = 0

    @Flag(name: .customLong("include-docs"), help: "Include each row's document.")
    var includeDocuments = false

    @Flag(name: .shortAndLong, help: "No progress on the terminal while the index builds.")
    var quiet = false

    func validate() throws {
        if let limit, limit < 0 { throw ValidationError("--limit must not be negative") }
        if skip < 0 { throw ValidationError("--skip must not be negative") }
    }
}
