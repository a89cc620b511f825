import CouchProtocol
import DocStore
import DocStoreJavaScript
import Foundation
import HTTPTypes
import Hummingbird
import ServiceLifecycle
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
    /// `conflicts`, `attachments`, `att_encoding_info` for the documents `include_docs` adds.
    var documentOptions: DocumentOptions?
    var timeout: Duration = .seconds(60)
    var heartbeat: Duration?
    /// Only these documents (`filter=_doc_ids`).
    var documentIDs: [String]?
    /// Only documents matching this selector (`filter=_selector`).
    var selector: MangoSelector?
    /// Only documents in one of these channels (`filter=sync_gateway/bychannel`); `nil` when the
    /// filter names none.
    var channels: [String]?
    /// Only design documents (`filter=_design`).
    var designOnly = false
    /// A filter function registered in Swift, with the request's parameters.
    var function: (filter: ChangesFilterFunction, parameters: [String: String])?
    /// The predicate of a design document's filter (`design/name`) or `_view` (``scriptFilter(_:filters:)``),
    /// once its design document was read.
    var scriptPredicate: (@Sendable (Document) throws -> Bool)?

    init(_ request: CouchRequest, currentSequence: Int64, filters: [String: ChangesFilterFunction] = [:]) throws {
        if let text = request.query["feed"] {
            // `live` is CouchDB's other name for `continuous`.
            guard let feed = Feed(rawValue: text == "live" ? "continuous" : text) else { throw CouchError.badRequest("Supported `feed` types: normal, continuous, live, longpoll, eventsource") }
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
        // As CouchDB: a descending feed starts at the end whatever `since` says (it is not even read).
        let startsAtTheEnd = parameter("descending") == "true" && feed != .continuous && feed != .eventsource
        // A reconnecting EventSource names the last event it saw; CouchDB starts there, whatever `since` says.
        switch startsAtTheEnd ? nil : request.header(HTTPField.Name("Last-Event-ID")!) ?? parameter("since") {
        case nil, "0"?: since = 0
        case "now"?: since = currentSequence
        case let text?:
            // Sequences may arrive as JSON strings ("12-g2w…") or numbers.
            guard let value = CouchSequence.parse(text.trimmingCharacters(in: CharacterSet(charactersIn: "\""))) else {
                throw CouchError.badRequest("Malformed sequence supplied in 'since' parameter.")
            }
            since = value
        }
        if let text = parameter("limit") {
            // As CouchDB: a negative limit is none.
            guard let value = Int(text) else { throw CouchError(.badRequest, "query_parse_error", "Invalid limit: \(text)") }
            limit = value < 0 ? nil : value
        }
        if let text = parameter("seq_interval") { try Self.checkSequenceInterval(text) }
        // As CouchDB's `_changes` (unlike its views): `true` turns a flag on, any other value leaves it off.
        func flag(_ name: String) -> Bool { parameter(name) == "true" }
        descending = flag("descending")
        includeDocuments = flag("include_docs")
        documentOptions = DocumentOptions(includedDocuments: flag)
        switch parameter("style") {
        case nil, "main_only"?: allLeaves = false
        case "all_docs"?: allLeaves = true
        case let other?: throw CouchError.badRequest("Invalid style: \(other)")
        }
        func milliseconds(_ name: String) throws -> Duration? {
            guard let text = parameter(name) else { return nil }
            if name == "heartbeat" {
                if text == "true" { return .seconds(60) }
                guard let value = Int(text) else {
                    throw CouchError.badRequest("Invalid heartbeat value. Expecting a positive integer value (in milliseconds).")
                }
                guard value > 0 else { throw CouchError.badRequest("The heartbeat value should be a positive integer (in milliseconds).") }
            }
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
                throw CouchError.badRequest("`doc_ids` filter parameter is not a list of doc ids.")
            }
            documentIDs = ids
        case "_selector"?:
            guard let selector = try body["selector"] ?? request.json("selector") else {
                throw CouchError.badRequest("Selector must be specified in POST payload")
            }
            self.selector = try MangoSelector(selector).withoutText(for: "changes")
        case "_design"?:
            designOnly = true
        case "sync_gateway/bychannel"?:
            var names: [String] = []
            if case .array(let list)? = body["channels"] { names = list.compactMap(\.stringValue) }
            else if let text = parameter("channels") { names = text.split(separator: ",").map(String.init) }
            // No channel named: every document the user may see (as an empty `limitToChannels`).
            channels = names.isEmpty ? nil : names
        case let name? where filters[name] != nil:
            function = (filters[name]!, Self.filterParameters(request, body: body))
        case let name? where Self.isScriptFilter(name):
            // Looked up by the route before these parameters are read (``scriptFilter(_:filters:)``).
            break
        case let other? where !other.hasPrefix("_"):
            throw CouchError.badRequest("`filter` must be of the form `designname/filtername`")
        case let other?:
            throw CouchError.notFound("Unknown filter \(other); supported: _doc_ids, _selector, _design, _view, sync_gateway/bychannel, design document filters and the registered filters")
        }
        if feed == .continuous || feed == .eventsource { descending = false }
    }

    /// `seq_interval` (how often a clustered CouchDB computes a sequence; every sequence is exact here)
    /// must be a positive integer.
    static func checkSequenceInterval(_ text: String) throws {
        guard let value = Int(text), value > 0 else { throw CouchError.badRequest("invalid_seq_interval") }
    }

    /// Whether `filter` names a design document's function (`design/name`) or `_view`.
    static func isScriptFilter(_ name: String) -> Bool {
        name == "_view" || (name.contains("/") && !name.hasPrefix("_") && name != "sync_gateway/bychannel")
    }

    /// What a filter sees as its parameters (a design document's as `req.query`): the query string's
    /// parameters and a POST body's string members.
    static func filterParameters(_ request: CouchRequest, body: JSONObject) -> [String: String] {
        var parameters = request.query
        for (key, value) in body { if let text = value.stringValue { parameters[key] = text } }
        return parameters
    }

    /// The design document's filter the request names (from the query string or a POST body), if it
    /// names one and no filter registered in Swift has that name, with its parameters.
    static func scriptFilter(_ request: CouchRequest, filters: [String: ChangesFilterFunction]) throws -> (name: String, parameters: [String: String])? {
        // The body is read only where it may name the filter or give it parameters.
        let named = request.query["filter"]
        if let named, filters[named] != nil || !isScriptFilter(named) { return nil }
        let body = request.method == .post && !request.body.isEmpty ? try request.jsonObjectBody() : JSONObject()
        guard let name = named ?? body["filter"]?.stringValue, filters[name] == nil, isScriptFilter(name) else { return nil }
        return (name, filterParameters(request, body: body))
    }

    /// Whether the feed judges each leaf revision on its own: with `style=all_docs`, CouchDB runs a
    /// selector, a filter function or a view's map on every leaf and lists the revisions that pass (a
    /// document whose winner fails but a conflict passes is listed with that conflict alone).
    var judgesEachRevision: Bool { allLeaves && (selector != nil || function != nil || scriptPredicate != nil) }

    /// The filters a revision must pass (``judgesEachRevision``): the selector, the Swift function, the
    /// design document's function.
    var revisionPredicate: @Sendable (Document) throws -> Bool {
        let selector = selector
        let function: ChangesFilterFunction? = self.function?.filter
        let parameters = self.function?.parameters ?? [:]
        let script = scriptPredicate
        return { document in
            if let selector, document.isDeleted || !selector.matches(document) { return false }
            if let function, !function(document, parameters) { return false }
            if let script, try !script(document) { return false }
            return true
        }
    }

    /// These parameters without the filters ``revisionPredicate`` applies.
    var withoutRevisionFilters: ChangesRequest {
        var parameters = self
        parameters.selector = nil
        parameters.function = nil
        parameters.scriptPredicate = nil
        return parameters
    }

    /// The store's filter for these parameters, narrowed to what `principal` may read; channels are
    /// read from `channelsField`.
    func changesFilter(for principal: Principal, channelsField: String) -> ChangesFilter {
        var filter = ChangesFilter(documentIDs: documentIDs, channels: channels, selector: selector, designDocumentsOnly: designOnly)
        filter.channelsField = channelsField
        let readsEverything = principal.readsEverything
        let function: ChangesFilterFunction? = self.function?.filter
        let parameters = self.function?.parameters ?? [:]
        let script = scriptPredicate
        if !readsEverything || function != nil || script != nil {
            filter.predicate = { document in
                if !readsEverything, !principal.canRead(document) { return false }
                if let function, !function(document, parameters) { return false }
                if let script, try !script(document) { return false }
                return true
            }
        }
        return filter
    }
}

extension DocServer {
    /// `GET|POST /{db}/_changes` in the normal, longpoll, continuous and eventsource feeds.
    func changes(_ db: Database, _ request: CouchRequest, principal: Principal) async throws -> Response {
        guard request.method == .get || request.method == .post else { throw CouchError.methodNotAllowed }
        if request.method == .post { try request.requireJSONContentType() }
        // As CouchDB, a design document's filter is looked up before the other parameters are read (but
        // for `seq_interval`).
        if let text = request.query["seq_interval"] { try ChangesRequest.checkSequenceInterval(text) }
        var scriptPredicate: (@Sendable (Document) throws -> Bool)?
        if let script = try ChangesRequest.scriptFilter(request, filters: filters) {
            guard let javaScript else { throw CouchError.notFound("JavaScript design documents are turned off on this server") }
            let req: JSON
            do {
                req = try await scriptRequest(db, request, principal: principal, id: nil)
            } catch let invalid as CouchError {
                // A parameter the function cannot get: but a filter that is not there is the answer first.
                do {
                    _ = try await db.javaScriptFilter(named: script.name, parameters: script.parameters,
                                                      request: JavaScriptRequest.make(database: db.name), engine: javaScript)
                } catch let error as DocStoreError where error.code == .notFound {
                    throw CouchError.notFound(error.reason)
                }
                throw invalid
            }
            do {
                scriptPredicate = try await db.javaScriptFilter(named: script.name, parameters: script.parameters,
                                                                request: req, engine: javaScript).predicate
            } catch let error as DocStoreError where error.code == .notFound {
                throw CouchError.notFound(error.reason)
            }
        }
        var parsed = try ChangesRequest(request, currentSequence: await db.updateSequence, filters: filters)
        parsed.scriptPredicate = scriptPredicate
        let parameters = parsed
        switch parameters.feed {
        case .normal:
            let (rows, last) = try await collectChanges(db, parameters, principal: principal, since: parameters.since)
            return Response.json(serialized: try await changesAnswer(db, rows, last: last).serialized(nonFiniteAsNull: true))
        case .longpoll:
            let seen = await db.updateSequence
            let (rows, last) = try await collectChanges(db, parameters, principal: principal, since: parameters.since)
            // With `limit=0` there is nothing to wait for: CouchDB answers at once.
            if !rows.isEmpty || parameters.limit == 0 {
                return Response.json(serialized: try await changesAnswer(db, rows, last: last).serialized(nonFiniteAsNull: true))
            }
            // Nothing yet: as CouchDB, the answer starts at once and waits for the first change, with a
            // newline every heartbeat; without a heartbeat it ends after the timeout, with one only after
            // a timeout the request gave — however many commits that pass no filter come meanwhile.
            let body = ResponseBody { [self] writer in
                try await writer.write(ByteBuffer(string: ChangesResponse.streamOpening))
                var (rows, last) = (rows, last)
                // Waiting after the sequence read before the rows: a commit in between is not missed,
                // and one that adds no row (a filtered feed, a local document) is not waited for again.
                var waitAfter = max(last, seen)
                let elapsed = ElapsedClock(configuration.clock)
                let ends = parameters.heartbeat == nil || request.query["timeout"] != nil
                while !Task.isCancelled, !db.isClosed {
                    var wait = parameters.heartbeat.map { min($0, parameters.timeout) } ?? parameters.timeout
                    if ends {
                        let left = parameters.timeout - elapsed.now()
                        guard left > .zero else { break }
                        wait = min(wait, left)
                    }
                    guard let committed = await waitForNews(db, after: waitAfter, timeout: wait) else { break }
                    if committed {
                        let seen = await db.updateSequence
                        (rows, last) = try await collectChanges(db, parameters, principal: principal, since: parameters.since)
                        if !rows.isEmpty { break }
                        waitAfter = max(last, seen)
                        continue
                    }
                    if ends, elapsed.now() >= parameters.timeout { break }
                    try await writer.write(ByteBuffer(string: "\n"))
                }
                try await writer.write(ByteBuffer(string: try await changesAnswer(db, rows, last: last).streamClosing))
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
                        try await writer.write(ByteBuffer(string: eventSource ? ChangesFeedLine.event(row) : ChangesFeedLine.row(row).text))
                    }
                    sent += rows.count
                    since = last
                    if sent >= limit { break }
                    if !rows.isEmpty { idle = .zero }
                    let wait = parameters.heartbeat ?? parameters.timeout
                    guard let committed = await waitForNews(db, after: last, timeout: wait) else { break }
                    if committed { continue }
                    if db.isClosed { break }
                    if parameters.heartbeat != nil {
                        try await writer.write(ByteBuffer(string: eventSource ? ChangesFeedLine.eventHeartbeat : "\n"))
                        idle += wait
                        if request.query["timeout"] != nil, idle >= parameters.timeout { break }
                    } else {
                        break
                    }
                }
                if !eventSource {
                    // As CouchDB, the changes after the last one sent (a feed its limit ended may have some).
                    let pending = (try? await db.pendingChangeCount(since: since)) ?? 0
                    try await writer.write(ByteBuffer(string: ChangesFeedLine.end(lastSequence: CouchSequence.json(since), pending: pending).text))
                }
                try await writer.finish(nil)
            }
            let type = eventSource ? "text/event-stream" : "application/json"
            return Response(status: .ok, headers: [.contentType: type, .cacheControl: "no-cache"], body: body)
        }
    }

    /// Waits for a commit after `sequence`, at most `timeout`: whether one came, or `nil` when the server
    /// is shutting down gracefully, which ends the feed waiting (as the server's stop must not wait
    /// for a client that never leaves).
    func waitForNews(_ db: Database, after sequence: Int64, timeout: Duration) async -> Bool? {
        let committed = await cancelWhenGracefulShutdown { await db.waitForCommit(after: sequence, timeout: timeout, clock: self.configuration.clock) }
        return Task.isShuttingDownGracefully ? nil : committed
    }

    /// The answer for `rows` continuing at `last`, with the count of changes after it.
    private func changesAnswer(_ db: Database, _ rows: [ChangesRow], last: Int64) async throws -> ChangesResponse {
        ChangesResponse(results: rows, lastSequence: CouchSequence.json(last), pending: try await db.pendingChangeCount(since: last))
    }

    /// The rows after `since` that pass the filters and the principal's channels, up to the limit, and
    /// the sequence to continue from.
    func collectChanges(_ db: Database, _ parameters: ChangesRequest, principal: Principal,
                        since: Int64) async throws -> (rows: [ChangesRow], last: Int64) {
        var filter = parameters.changesFilter(for: principal, channelsField: configuration.channelsField)
        if parameters.judgesEachRevision {
            // The store passes the documents the user may read; each leaf is judged by the request's filters.
            filter = parameters.withoutRevisionFilters.changesFilter(for: principal, channelsField: configuration.channelsField)
            filter.leafPredicate = parameters.revisionPredicate
        }
        let page = try await db.changes(since: since, limit: parameters.limit, filter: filter,
                                        includeDocuments: parameters.includeDocuments, descending: parameters.descending)
        var rows: [ChangesRow] = []
        rows.reserveCapacity(page.changes.count)
        for change in page.changes {
            let document = try await includedDocument(of: change, in: db, parameters)
            var row = ChangesRow(change, allLeaves: parameters.allLeaves, document: document)
            row.sequence = CouchSequence.json(change.sequence)
            rows.append(row)
        }
        return (rows, page.lastSequence)
    }

    /// A row's `doc` (`include_docs=true`): the winner as the feed's options show it, `null` for a
    /// change whose document was not read; `nil` without `include_docs`.
    private func includedDocument(of change: ChangesFeedRow, in db: Database, _ parameters: ChangesRequest) async throws -> JSON? {
        guard parameters.includeDocuments else { return nil }
        guard let included = change.document else { return .null }
        return try await includedDocument(included, in: db, parameters.documentOptions)
    }
}
