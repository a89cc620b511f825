import ArgumentParser
import CouchProtocol
import DocStore
import Foundation

struct Search: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Search a text index with a full-text query.",
        discussion: """
            INDEX is a Mango text index (docstore index create --type text), by name or as DDOC/NAME. \
            QUERY is in the PredixSDK's full-text syntax (Docs/Search.md): words, "phrases", prefix*, AND, OR, NOT, \
            NEAR, NEAR/n, parentheses. Prints the view endpoint's JSON: {"total_rows", "rows": [{"id", \
            "score", "snippet"?, "value"?, "doc"?}]}, the most relevant first.
            """)

    @OptionGroup var options: DatabaseOptions

    @Option(help: ArgumentHelp("The text index: NAME or DDOC/NAME.", valueName: "index"))
    var index: String

    @Argument(help: ArgumentHelp("The full-text query.", valueName: "query"))
    var query: String

    @Flag(help: "Include a snippet of each document's best matching field, matched words in [ and ].")
    var snippets = false

    @OptionGroup var rows: RowOptions

    func run() async throws {
        if let remote = options.remote { return try await withRemote(remote, searchRemote) }
        try await withDatabase(options) { db in
            let textIndexes = try await db.mangoIndexes().filter { $0.type == .text }
            let matching = textIndexes.filter { candidate in
                let ddoc = candidate.designDocument.dropFirst("_design/".count)
                return candidate.name == index || "\(ddoc)/\(candidate.name)" == index || "\(candidate.designDocument)/\(candidate.name)" == index
            }
            guard let chosen = matching.first else {
                let known = textIndexes.map { "\($0.designDocument.dropFirst("_design/".count))/\($0.name)" }
                throw DocStoreError(.notFound, "No text index named \(index)" + (known.isEmpty ? "; there is none" : "; there are: \(known.joined(separator: ", "))"))
            }
            guard matching.count == 1 else {
                throw DocStoreError(.badRequest, "\(index) names several text indexes: give DDOC/NAME")
            }
            var search = try SearchQuery(query)
            search.snippets = snippets
            search.limit = rows.limit
            search.skip = rows.skip
            search.includeDocuments = rows.includeDocuments
            let found = try await TerminalProgress("index \(chosen.name)", unit: ("document", "documents"), enabled: !rows.quiet, delay: .seconds(1))
                .ticking(following: { db.progress(of: .indexing(indexName: chosen.indexName)) }) { try await db.search(index: chosen.indexName, search) }
            printJSON(SearchResponse.json(found, includeDocuments: rows.includeDocuments))
        }
    }

    /// The search on a server: its text index named `--index` (from `_index`), asked at its view
    /// endpoint with `full_text`, as DocServer answers it.
    private func searchRemote(_ server: RemoteDatabase) async throws {
        let indexes = try await server.json("GET", "_index")["indexes"]?.arrayValue ?? []
        let textIndexes = indexes.compactMap { index -> (design: String, name: String)? in
            guard index["type"]?.stringValue == "text", let design = index["ddoc"]?.stringValue, let name = index["name"]?.stringValue else { return nil }
            return (String(design.dropFirst("_design/".count)), name)
        }
        let matching = textIndexes.filter { $0.name == index || "\($0.design)/\($0.name)" == index || "_design/\($0.design)/\($0.name)" == index }
        guard let chosen = matching.first else {
            let known = textIndexes.map { "\($0.design)/\($0.name)" }
            throw RemoteError(error: "not_found", reason: "No text index named \(index)" + (known.isEmpty ? "; there is none" : "; there are: \(known.joined(separator: ", "))"))
        }
        guard matching.count == 1 else { throw RemoteError(error: "bad_request", reason: "\(index) names several text indexes: give DDOC/NAME") }
        let path = "_design/" + RemoteDatabase.encode(chosen.design) + "/_view/" + RemoteDatabase.encode(chosen.name)
        printJSON(try await server.json("GET", path, query: [
            ("full_text", JSON.string(query).description), ("snippets", snippets ? "true" : nil), ("limit", rows.limit.map(String.init)),
            ("skip", rows.skip > 0 ? String(rows.skip) : nil), ("include_docs", rows.includeDocuments ? "true" : nil),
        ]))
    }
}
