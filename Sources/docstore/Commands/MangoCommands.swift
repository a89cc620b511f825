import ArgumentParser
import CouchProtocol
import DocStore
import Foundation

struct Find: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Find documents with a Mango selector, like CouchDB's _find.",
        discussion: """
            SELECTOR is a JSON object ('{"type": "invoice", "total": {"$gt": 100}}'). --sort and --fields \
            take JSON arrays ('[{"total": "desc"}]', '["_id", "total"]'). A sort needs a json index that gives \
            it (docstore index create). Prints CouchDB's _find JSON: docs, bookmark, and any warning.
            """)

    @OptionGroup var options: DatabaseOptions

    @Argument(help: ArgumentHelp("The selector (JSON).", valueName: "selector"))
    var selector: String

    @Option(help: ArgumentHelp("The sort (a JSON array of fields or {field: asc|desc}).", valueName: "json"))
    var sort: String?

    @Option(help: ArgumentHelp("The fields to print (a JSON array of dotted paths).", valueName: "json"))
    var fields: String?

    @Option(help: "At most this many documents (CouchDB's default).")
    var limit: Int = FindRequest.defaultLimit

    @Option(help: "Documents to pass over first.")
    var skip: Int = 0

    @Option(help: "Continue after the page this bookmark ends.")
    var bookmark: String?

    @Option(name: .customLong("use-index"), help: ArgumentHelp("The index: DDOC or DDOC/NAME.", valueName: "index"))
    var useIndex: String?

    @Flag(help: "Print the plan (CouchDB's _explain) instead of the documents.")
    var explain = false

    func run() async throws {
        var body: JSONObject = ["selector": parseJSONArgument(selector, name: "the selector"), "limit": .integer(limit), "skip": .integer(skip)]
        if let sort { body["sort"] = parseJSONArgument(sort, name: "--sort") }
        if let fields { body["fields"] = parseJSONArgument(fields, name: "--fields") }
        if let bookmark { body["bookmark"] = .string(bookmark) }
        if let useIndex { body["use_index"] = JSON(useIndex.split(separator: "/", maxSplits: 1).map(String.init)) }
        if let remote = options.remote {
            return try await withRemote(remote) { printJSON(try await $0.json("POST", explain ? "_explain" : "_find", body: .object(body))) }
        }
        try await withDatabase(options) { db in
            let query = try FindRequest.query(json: .object(body))
            if explain {
                printJSON(FindResponse.explain(try await db.explain(query), query: query, database: db.name))
            } else {
                printJSON(FindResponse.json(try await db.find(query)))
            }
        }
    }
}

struct Index: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Create, list or delete Mango json and text indexes, like CouchDB's _index.",
        subcommands: [Create.self, List.self, Remove.self])

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create a json or text index on some fields.",
            discussion: """
                FIELDS is a JSON array of fields: for a json index all ascending or all descending \
                ('["type", "date"]', '[{"date": "desc"}]'); for a text index (--type text) string fields \
                ('["title", "body"]', '[]' for every string). Prints CouchDB's answer: \
                {"result": "created"|"exists", "id", "name"}.
                """)

        @OptionGroup var options: DatabaseOptions

        @Argument(help: ArgumentHelp("The fields (a JSON array).", valueName: "fields"))
        var fields: String

        @Option(help: "The index name (default: a hash of its definition).")
        var name: String?

        @Option(help: "The design document (default: a hash of its definition).")
        var ddoc: String?

        @Option(name: .customLong("partial-filter"), help: ArgumentHelp("Index only documents matching this selector (JSON).", valueName: "selector"))
        var partialFilter: String?

        @Option(help: ArgumentHelp("json, or text for a full-text index searched by $text and docstore search.", valueName: "type"))
        var type: String = "json"

        func run() async throws {
            var index: JSONObject = ["fields": parseJSONArgument(fields, name: "the fields")]
            if let partialFilter { index["partial_filter_selector"] = parseJSONArgument(partialFilter, name: "--partial-filter") }
            var body: JSONObject = ["index": .object(index), "type": .string(type)]
            if let name { body["name"] = .string(name) }
            if let ddoc { body["ddoc"] = .string(ddoc) }
            if let remote = options.remote {
                return try await withRemote(remote) { printJSON(try await $0.json("POST", "_index", body: .object(body))) }
            }
            try await withDatabase(options) { db in
                let request = try CreateIndexRequest(json: .object(body))
                printJSON(CreateIndexRequest.answer(try await request.create(in: db)))
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the indexes, as CouchDB's GET _index.")

        @OptionGroup var options: DatabaseOptions

        func run() async throws {
            if let remote = options.remote {
                return try await withRemote(remote) { printJSON(try await $0.json("GET", "_index")) }
            }
            try await withDatabase(options) { db in
                printJSON(IndexListResponse.json(try await db.mangoIndexes()))
            }
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "delete", abstract: "Delete an index.")

        @OptionGroup var options: DatabaseOptions

        @Argument(help: "The design document.")
        var ddoc: String

        @Argument(help: "The index name.")
        var name: String

        @Option(help: ArgumentHelp("json or text.", valueName: "type"))
        var type: String = "json"

        func validate() throws {
            guard MangoIndex.Kind(rawValue: type) != nil else { throw ValidationError("--type must be json or text") }
        }

        func run() async throws {
            if let remote = options.remote {
                let design = ddoc.hasPrefix("_design/") ? String(ddoc.dropFirst("_design/".count)) : ddoc
                let path = "_index/" + [design, type, name].map(RemoteDatabase.encode).joined(separator: "/")
                return try await withRemote(remote) { printJSON(try await $0.json("DELETE", path)) }
            }
            try await withDatabase(options) { db in
                try await db.deleteIndex(designDocument: ddoc, name: name, type: MangoIndex.Kind(rawValue: type)!)
                printJSON(["ok": true])
            }
        }
    }
}
