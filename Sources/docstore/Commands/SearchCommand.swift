import ArgumentParser
import CouchProtocol
import DocStore
import Foundation

struct Search: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Search a text index with a full-text query.",
        discussion: """
            INDEX is a Mango text index (docstore index create --type text), by name or as DDOC/NAME. \
            QUERY is in the seed's syntax (Docs/Search.md): words, "phrases", prefix*, AND, OR, NOT, \
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
            let found = try await TerminalProgress("index \(chosen.name)", unit: nil, enabled: !rows.quiet, delay: .seconds(1))
                .ticking { try await db.search(index: chosen.indexName, search) }
            printJSON(SearchResponse.json(found, includeDocuments: rows.includeDocuments))
        }
    }
}
