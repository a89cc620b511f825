import CouchProtocol
import DocStore
import Foundation
import Hummingbird
import Logging
import NIOCore

/// Which databases were created, updated and deleted, as CouchDB 3.3 keeps it for `/_db_updates`: a
/// database of the server's own (in the system folder, not listed) holds one document per database and
/// kind — `created:name`, `updated:name`, `deleted:name` — written again at each such event, so its
/// changes feed lists each database's latest events in the order they came. Events are gathered for
/// ``gathering`` and written together, each once (CouchDB batches them too).
final class DatabaseEvents: Sendable {
    private let directory: URL
    private let logger: Logger
    private let clock: any Clock<Duration>
    private let state = Locked<State>(State())

    private struct State {
        var database: Database?
        var pending: [String] = []
        /// The task writing the pending events, while there is one.
        var writer: Task<Void, Never>?
        var closed = false
    }

    init(systemDirectory: URL, logger: Logger, clock: any Clock<Duration>) {
        directory = systemDirectory
        self.logger = logger
        self.clock = clock
    }

    /// The database the events are kept in, opened on first use.
    func database() async throws -> Database {
        if let open = state.withLock({ $0.database }), !open.isClosed { return open }
        // The system folder is there: the registry made it for the server's uuid.
        let database = try await Database.open(DatabaseConfiguration(name: "db-updates", directory: directory))
        let kept = state.withLock { state in
            if let open = state.database, !open.isClosed { return open }
            state.database = database
            return database
        }
        // Two first uses at once: the one opened second is not kept.
        if kept !== database { await database.close() }
        return kept
    }

    /// Records an event of database `name`: `created`, `updated` or `deleted`.
    func record(_ kind: String, _ name: String) {
        state.withLock { state in
            guard !state.closed else { return }
            let key = "\(kind):\(name)"
            if !state.pending.contains(key) { state.pending.append(key) }
            // One writer at a time, set under the lock before it can look at the state.
            if state.writer == nil { state.writer = Task { await self.writePending() } }
        }
    }

    /// How long events gather before they are written: a busy server writes its events a few times a
    /// second, not once per commit (CouchDB's global changes wait up to 500 ms).
    static let gathering: Duration = .milliseconds(50)

    /// Writes the pending events, and those that come meanwhile, until there are none.
    private func writePending() async {
        while true {
            try? await clock.sleep(for: DatabaseEvents.gathering)
            let keys = state.withLock { state -> [String] in
                defer { state.pending = [] }
                if state.pending.isEmpty { state.writer = nil }
                return state.pending
            }
            guard !keys.isEmpty else { return }
            await write(keys)
        }
    }

    private func write(_ keys: [String]) async {
        do {
            // Saved without a revision, each document updates whatever it was.
            let results = try await database().save(each: keys.map { Document(id: $0) })
            for result in results where !result.isSuccess {
                logger.warning("database event \(result.id) not recorded: \(result.error?.reason ?? "")")
            }
        } catch {
            logger.warning("database events not recorded: \(error)")
        }
    }

    /// Writes the events still gathering, and closes the database; later events are not recorded.
    /// The writer's wait is cancelled: nothing of a stopped server sleeps on (a test's clock may
    /// never move again).
    func close() async {
        let (keys, writer) = state.withLock { state in
            defer { (state.closed, state.pending, state.writer) = (true, [], nil) }
            return (state.pending, state.writer)
        }
        writer?.cancel()
        if !keys.isEmpty { await write(keys) }
        if let database = state.withLock({ $0.database }) { await database.close() }
    }
}

extension DocServer {
    /// Waits for an event after `sequence` in the events database `db`, with every open database
    /// watched meanwhile for other processes' commits (which are events too).
    private func waitingForUpdates(_ db: Database, after sequence: Int64, timeout: Duration) async -> Bool? {
        let watched = registry.openDatabases
        watched.forEach { $0.beginWatchingOtherConnections() }
        defer { watched.forEach { $0.endWatchingOtherConnections() } }
        return await waitForNews(db, after: sequence, timeout: timeout)
    }

    /// `GET /_db_updates` (server admins), as CouchDB 3.3 answers it: each database's latest events,
    /// `{"db_name", "type", "seq"}`, oldest first (`descending=true` newest), after `since` (a sequence
    /// or `now`), at most `limit`; `feed=normal`, `longpoll` (waits up to `timeout` for an event),
    /// `continuous` (one line each, `heartbeat` newlines while it waits, `{"last_seq"}` at its end) or
    /// `eventsource`.
    func databaseUpdates(_ request: CouchRequest, principal: Principal?) async throws -> Response {
        guard let principal, principal.isAdmin else { throw CouchError.adminRequired }
        guard request.method == .get else { throw CouchError.only("GET") }
        let db = try await registry.events.database()
        let feed = request.query["feed"] ?? "normal"
        guard ["normal", "longpoll", "continuous", "eventsource"].contains(feed) else {
            throw CouchError.badRequest("Supported `feed` types: normal, continuous, longpoll, eventsource")
        }
        func count(_ name: String) throws -> Int? {
            guard let text = request.query[name] else { return nil }
            guard let value = Int(text), value >= 0 else { throw CouchError.badRequest("invalid_integer") }
            return value
        }
        let limit = try count("limit")
        let timeout = Duration.milliseconds(try count("timeout") ?? 60_000)
        let heartbeat: Duration?
        switch request.query["heartbeat"] {
        case nil, "false"?: heartbeat = nil
        case "true"?: heartbeat = .seconds(60)
        default: heartbeat = .milliseconds(max(try count("heartbeat") ?? 0, 100))
        }
        let descending = request.query["descending"] == "true"
        var since: Int64 = 0
        switch request.query["since"] {
        case nil, "0"?: break
        case "now"?: since = await db.updateSequence
        case let text?:
            guard let value = CouchSequence.parse(text.trimmingCharacters(in: CharacterSet(charactersIn: "\""))) else {
                throw CouchError.badRequest("Malformed sequence supplied in 'since' parameter.")
            }
            since = value
        }
        @Sendable func events(after sequence: Int64, limit: Int?) async throws -> (rows: [JSON], last: Int64) {
            let page = try await db.changes(since: descending ? 0 : sequence, limit: limit, descending: descending)
            let rows: [JSON] = page.changes.compactMap { change in
                guard let colon = change.id.firstIndex(of: ":") else { return nil }
                return ["db_name": .string(String(change.id[change.id.index(after: colon)...])),
                        "type": .string(String(change.id[..<colon])), "seq": CouchSequence.json(change.sequence)]
            }
            return (rows, page.lastSequence)
        }
        @Sendable func serialized(_ json: JSON) throws -> String { try json.serializedString() }

        if feed == "normal" || feed == "longpoll" {
            var (rows, last) = try await events(after: since, limit: limit)
            if feed == "longpoll", rows.isEmpty, limit != 0, await waitingForUpdates(db, after: last, timeout: timeout) == true {
                (rows, last) = try await events(after: last, limit: limit)
            }
            return Response.json(["results": .array(rows), "last_seq": CouchSequence.json(last)])
        }
        let eventSource = feed == "eventsource"
        let body = ResponseBody { [self, since] writer in
            var cursor = since
            var sent = 0
            var idle: Duration = .zero
            while !Task.isCancelled, !db.isClosed {
                let (rows, last) = try await events(after: cursor, limit: limit.map { $0 - sent })
                for row in rows {
                    let line = eventSource ? "data: \(try serialized(row))\nid: \(try serialized(row["seq"] ?? .null))\n\n" : try serialized(row) + "\n"
                    try await writer.write(ByteBuffer(string: line))
                }
                sent += rows.count
                cursor = last
                if let limit, sent >= limit { break }
                if !rows.isEmpty { idle = .zero }
                let wait = heartbeat ?? timeout
                // A server stopping ends the feed (nil), as it ends a `_changes` feed.
                guard let committed = await waitingForUpdates(db, after: last, timeout: wait) else { break }
                if committed { continue }
                guard heartbeat != nil, !db.isClosed else { break }
                try await writer.write(ByteBuffer(string: eventSource ? "event: heartbeat\ndata: \n\n" : "\n"))
                idle += wait
                if request.query["timeout"] != nil, idle >= timeout { break }
            }
            if !eventSource { try await writer.write(ByteBuffer(string: try serialized(["last_seq": CouchSequence.json(cursor)]) + "\n")) }
            try await writer.finish(nil)
        }
        return Response(status: .ok, headers: [.contentType: eventSource ? "text/event-stream" : "application/json", .cacheControl: "no-cache"],
                        body: body)
    }
}
