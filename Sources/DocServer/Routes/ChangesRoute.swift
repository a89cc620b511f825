import DocStore
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// The parameters of one `_changes` request.
struct ChangesRequest: Sendable {
    enum Feed: String, Sendable { case normal, longpoll, continuous, eventsource }

    var feed: Feed = .normal
    var since: Int64 = 0
    var limit: Int?
    var descending = false
    var allLeaves = false
    var includeDocuments = false
    var conflicts = false
    var timeout: Duration = .seconds(60)
    var heartbeat: Duration?
    /// Only these documents (`filter=_doc_ids`).
    /// By exact bytes: the NFC and NFD spellings of an id are two documents.
    var documentIDs: Set<ExactString>?
    /// Only documents matching this selector (`filter=_selector`).
    var selector: Selector?
    /// Only documents in one of these channels (`filter=sync_gateway/bychannel`).
    var channels: Set<String>?
    /// Only design documents (`filter=_design`).
    var designOnly = false
    /// A filter function registered in Swift, with the request's parameters.
    var function: (filter: ChangesFilterFunction, parameters: [String: String])?

    init(_ request: CouchRequest, currentSequence: Int64, filters: [String: ChangesFilterFunction] = [:]) throws {
        if let text = request.query["feed"] {
            guard let feed = Feed(rawValue: text) else { throw CouchError.badRequest("Invalid feed: \(text)") }
            self.feed = feed
        }
        let body = request.method == .post && !request.body.isEmpty ? try request.jsonObjectBody() : JSONObject()
        // CouchDB reads parameters from the query string, Sync Gateway from the body: accept both.
        func parameter(_ name: String) -> String? {
            if let value = request.query[name] { return value }
            switch body[name] {
            case .string(let text)?: return text
            case .integer(let n)?: return String(n)
            case .bool(let b)?: return String(b)
            default: return nil
            }
        }
        switch parameter("since") {
        case nil, "0"?: since = 0
        case "now"?: since = currentSequence
        case let text?:
            // Sequences may arrive as JSON strings ("12") or numbers.
            let trimmed = text.trimmingCharacters(in: CharacterSet(charactersIn: "\""))
            guard let value = Int64(trimmed.split(separator: "-").first ?? ""), value >= 0 else {
                throw CouchError.badRequest("Invalid since sequence: \(text)")
            }
            since = value
        }
        if let text = parameter("limit") {
            guard let value = Int(text), value >= 0 else { throw CouchError(.badRequest, "query_parse_error", "Invalid limit: \(text)") }
            limit = value
        }
        func flag(_ name: String) throws -> Bool {
            guard let text = parameter(name) else { return false }
            guard text == "true" || text == "false" else { throw CouchError(.badRequest, "query_parse_error", "Invalid boolean \(name)") }
            return text == "true"
        }
        descending = try flag("descending")
        includeDocuments = try flag("include_docs")
        conflicts = try flag("conflicts")
        switch parameter("style") {
        case nil, "main_only"?: allLeaves = false
        case "all_docs"?: allLeaves = true
        case let other?: throw CouchError.badRequest("Invalid style: \(other)")
        }
        func milliseconds(_ name: String) throws -> Duration? {
            guard let text = parameter(name) else { return nil }
            if name == "heartbeat" && text == "true" { return .seconds(60) }
            guard let value = Int(text), value >= 0 else { throw CouchError(.badRequest, "query_parse_error", "Invalid \(name): \(text)") }
            return .milliseconds(max(value, 100))
        }
        heartbeat = try milliseconds("heartbeat")
        timeout = try milliseconds("timeout") ?? .seconds(60)

        switch parameter("filter") {
        case nil:
            break
        case "_doc_ids"?:
            let list: JSON? = try body["doc_ids"] ?? request.json("doc_ids")
            guard let ids = list?.arrayValue?.compactMap(\.stringValue) else {
                throw CouchError.badRequest("filter=_doc_ids needs a doc_ids array")
            }
            documentIDs = Set(ids.map(ExactString.init))
        case "_selector"?:
            guard let selector = try body["selector"] ?? request.json("selector") else {
                throw CouchError.badRequest("filter=_selector needs a selector")
            }
            self.selector = try Selector(selector)
        case "_design"?:
            designOnly = true
        case "sync_gateway/bychannel"?:
            var names: [String] = []
            if case .array(let list)? = body["channels"] { names = list.compactMap(\.stringValue) }
            else if let text = parameter("channels") { names = text.split(separator: ",").map(String.init) }
            guard !names.isEmpty else { throw CouchError.badRequest("filter=sync_gateway/bychannel needs channels") }
            channels = Set(names)
        case let name? where filters[name] != nil:
            var parameters = request.query
            for (key, value) in body { if let text = value.stringValue { parameters[key] = text } }
            function = (filters[name]!, parameters)
        case let other?:
            throw CouchError.notFound("Unknown filter \(other); supported: _doc_ids, _selector, _design, sync_gateway/bychannel and the registered filters")
        }
        if feed == .continuous || feed == .eventsource { descending = false }
    }

    var needsDocuments: Bool { includeDocuments || selector != nil || channels != nil || function != nil }
}

extension DocServer {
    /// `GET|POST /{db}/_changes` in the normal, longpoll, continuous and eventsource feeds.
    func changes(_ db: Database, _ request: CouchRequest, principal: Principal) async throws -> Response {
        guard request.method == .get || request.method == .post else { throw CouchError.methodNotAllowed }
        if request.method == .post { try request.requireJSONContentType() }
        let parameters = try ChangesRequest(request, currentSequence: await db.updateSequence, filters: filters)
        switch parameters.feed {
        case .normal:
            let (rows, last) = try await collectChanges(db, parameters, principal: principal, since: parameters.since)
            return Response.json(try await changesBody(db, rows, last: last))
        case .longpoll:
            let (rows, last) = try await collectChanges(db, parameters, principal: principal, since: parameters.since)
            if !rows.isEmpty { return Response.json(try await changesBody(db, rows, last: last)) }
            // Nothing yet: as CouchDB, the answer starts at once and waits for the first change, with a
            // newline every heartbeat; without a heartbeat it ends after the timeout.
            let body = ResponseBody { [self] writer in
                try await writer.write(ByteBuffer(string: "{\"results\":[\n"))
                var (rows, last) = (rows, last)
                var waited: Duration = .zero
                while !Task.isCancelled, !db.isClosed {
                    let wait = parameters.heartbeat.map { min($0, parameters.timeout) } ?? parameters.timeout
                    // Waiting after the sequence read: a commit in between is not missed.
                    if await db.waitForCommit(after: last, timeout: wait) {
                        (rows, last) = try await collectChanges(db, parameters, principal: principal, since: parameters.since)
                        if !rows.isEmpty { break }
                        continue
                    }
                    waited += wait
                    guard parameters.heartbeat != nil, request.query["timeout"] == nil || waited < parameters.timeout else { break }
                    try await writer.write(ByteBuffer(string: "\n"))
                }
                let pending = try await db.pendingChangeCount(since: last)
                let text = rows.map(\.description).joined(separator: ",\n") + "\n],\n\"last_seq\":\(last),\"pending\":\(pending)}\n"
                try await writer.write(ByteBuffer(string: text))
                try await writer.finish(nil)
            }
            return Response(status: .ok, headers: [.contentType: "application/json", .cacheControl: "must-revalidate"], body: body)
        case .continuous, .eventsource:
            let eventSource = parameters.feed == .eventsource
            let body = ResponseBody { [self] writer in
                var since = parameters.since
                var sent = 0
                let limit = parameters.limit ?? Int.max
                var idle: Duration = .zero
                while !Task.isCancelled {
                    var batch = parameters
                    batch.limit = limit == Int.max ? nil : limit - sent
                    let (rows, last) = try await collectChanges(db, batch, principal: principal, since: since)
                    for row in rows {
                        let text = row.description
                        let line = eventSource ? "data: \(text)\nid: \(row["seq"]?.intValue ?? 0)\n\n" : text + "\n"
                        try await writer.write(ByteBuffer(string: line))
                    }
                    sent += rows.count
                    since = last
                    if sent >= limit { break }
                    if !rows.isEmpty { idle = .zero }
                    let wait = parameters.heartbeat ?? parameters.timeout
                    if await db.waitForCommit(after: last, timeout: wait) { continue }
                    if db.isClosed { break }
                    if parameters.heartbeat != nil {
                        try await writer.write(ByteBuffer(string: "\n"))
                        idle += wait
                        if request.query["timeout"] != nil, idle >= parameters.timeout { break }
                    } else {
                        break
                    }
                }
                if !eventSource {
                    try await writer.write(ByteBuffer(string: "{\"last_seq\":\(since),\"pending\":0}\n"))
                }
                try await writer.finish(nil)
            }
            let type = eventSource ? "text/event-stream" : "application/json"
            return Response(status: .ok, headers: [.contentType: type, .cacheControl: "no-cache"], body: body)
        }
    }

    /// `{"results": […], "last_seq": …, "pending": …}`.
    private func changesBody(_ db: Database, _ rows: [JSON], last: Int64) async throws -> JSON {
        let pending = try await db.pendingChangeCount(since: last)
        return ["results": .array(rows), "last_seq": .integer(Int(last)), "pending": .integer(pending)]
    }

    /// The rows after `since` that pass the filters and the principal's channels, up to the limit, and
    /// the sequence to continue from.
    func collectChanges(_ db: Database, _ parameters: ChangesRequest, principal: Principal,
                        since: Int64) async throws -> (rows: [JSON], last: Int64) {
        let filtering = !principal.readsEverything
        let needDocuments = parameters.needsDocuments || filtering
        let limit = parameters.limit ?? Int.max
        var rows: [JSON] = []
        var cursor = since
        if parameters.descending {
            // Without filters every row is kept, so SQLite can stop at the limit.
            let unfiltered = !filtering && parameters.documentIDs == nil && parameters.channels == nil
                && parameters.selector == nil && parameters.function == nil && !parameters.designOnly
            let page = try await db.changes(since: since, limit: unfiltered ? parameters.limit : nil,
                                            includeDocuments: needDocuments, descending: true)
            for change in page.changes where rows.count < limit {
                if let row = try await changeRow(db, change, parameters, principal: principal) { rows.append(row) }
            }
            return (rows, page.changes.first?.sequence ?? since)
        }
        if limit == 0 { return ([], since) }
        // Read before the pages: a commit after the pages must stay above the sequence answered.
        let committed = await db.updateSequence
        while rows.count < limit {
            let page = try await db.changes(since: cursor, limit: 500, includeDocuments: needDocuments)
            for change in page.changes {
                if let row = try await changeRow(db, change, parameters, principal: principal) { rows.append(row) }
                cursor = change.sequence
                if rows.count >= limit { break }
            }
            if page.changes.count < 500 { break }
        }
        if rows.count < limit { cursor = max(cursor, committed) }
        return (rows, cursor)
    }

    private func changeRow(_ db: Database, _ change: Change, _ parameters: ChangesRequest,
                           principal: Principal) async throws -> JSON? {
        if let ids = parameters.documentIDs, !ids.contains(ExactString(change.id)) { return nil }
        if parameters.designOnly, !change.id.hasPrefix("_design/") { return nil }
        let document = change.document
        let channels = document?.channels ?? []
        if !principal.readsEverything, !principal.canRead(channels) { return nil }
        if let wanted = parameters.channels, !channels.contains(where: wanted.contains) { return nil }
        if let selector = parameters.selector {
            guard let document, !document.isDeleted, selector.matches(document.json()) else { return nil }
        }
        if let (function, arguments) = parameters.function {
            guard let document, function(document, arguments) else { return nil }
        }
        var row = change.couchDBJSON(allLeaves: parameters.allLeaves)
        row["doc"] = nil
        if parameters.includeDocuments {
            var json = document?.json() ?? .null
            if parameters.conflicts, let tree = try await db.revisionTree(ofDocumentWithID: change.id), !tree.conflicts.isEmpty {
                json["_conflicts"] = JSON(tree.conflicts.map(\.description))
            }
            row["doc"] = json
        }
        return row
    }
}
