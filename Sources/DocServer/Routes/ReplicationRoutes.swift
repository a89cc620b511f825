import CouchProtocol
import DocStore
import DocSync
import Foundation
import HTTPTypes
import Hummingbird

extension DocServer {
    /// `POST /_replicate`: a replication run by DocSync inside the server (see
    /// ``ReplicationRequest`` for the body). A one-shot one is answered when it is done, in CouchDB
    /// 3.3's form — `{"ok": true, "no_changes": true}` when there was nothing to replicate, else
    /// `{"ok", "session_id", "replication_id_version", "history": [one session]}`; a failure is a 502
    /// `replication_failed` (CouchDB answers 500).
    ///
    /// With `"continuous": true` the replication starts in the background and the answer comes at once:
    /// 202 `{"ok": true, "_local_id": "<id>+continuous"}` (the same description again finds the same
    /// job). `"cancel": true` with the same description stops it (`{"ok": true, "_local_id": …}`; 404
    /// `missing` when there is none). Jobs are listed by `_active_tasks` and `_scheduler/jobs`.
    ///
    /// As CouchDB: any signed-in user may replicate between URLs (which carry the credentials the
    /// replication uses on each side); naming this server's databases directly, which would use the
    /// server's rights, is for admins. A job is cancelled by an admin or the user who started it.
    func replicate(_ request: CouchRequest, principal: Principal) async throws -> Response {
        guard request.method == .post else { throw CouchError(.methodNotAllowed, "method_not_allowed", "Only POST allowed") }
        try request.requireJSONContentType()
        let body = try request.jsonObjectBody()
        func checkCancel(_ id: String) throws {
            guard !principal.isAdmin, let job = scheduler.job(id) else { return }
            guard job.user == principal.name else { throw CouchError.adminRequired }
        }
        if body["cancel"] == true, let named = (body["replication_id"] ?? body["_local_id"] ?? body["id"])?.stringValue {
            // Cancelled by its id, as CouchDB allows.
            try checkCancel(named)
            guard scheduler.job(named)?.document == nil, await scheduler.stop(named) else { throw CouchError.notFound("missing") }
            return Response.json(["ok": true, "_local_id": .string(named)])
        }
        let description: ReplicationRequest
        do {
            description = try ReplicationRequest(body)
        } catch {
            throw CouchError.badRequest(error.message)
        }
        if !principal.isAdmin, [description.source, description.target].contains(where: { if case .local = $0 { true } else { false } }) {
            throw CouchError.adminRequired
        }
        let id = description.identifier(server: registry.serverUUID)
        if description.cancel {
            try checkCancel(id)
            guard scheduler.job(id)?.document == nil, await scheduler.stop(id) else { throw CouchError.notFound("missing") }
            return Response.json(["ok": true, "_local_id": .string(id)])
        }
        // The endpoints are checked now, so that a missing database is the client's 404.
        _ = try await scheduler.endpoint(description.source, create: false)
        _ = try await scheduler.endpoint(description.target, create: description.createTarget)
        // A job with this id may be running already: the request joins it (and one that ends meanwhile
        // makes room for a new one).
        var job: ReplicationScheduler.Job?
        while job == nil {
            job = scheduler.add(description, id: id, user: principal.name, document: nil, retrying: false) ?? scheduler.job(id)
        }
        if description.continuous { return Response.json(["ok": true, "_local_id": .string(id)], status: .accepted) }
        guard let job else { throw CouchError.notFound("missing") }
        let status = await scheduler.outcome(of: job)
        if let error = status.error {
            // A remote database that is not there is the client's 404, as CouchDB answers it.
            if error.httpStatus == 404, status.changesProcessed == 0 {
                let missing = [description.source, description.target].first { endpoint in
                    if case .remote = endpoint { return error.reason.contains(endpoint.description.dropLast()) }
                    return false
                } ?? description.source
                throw CouchError(.notFound, "db_not_found", "could not open \(missing.description)")
            }
            throw CouchError(.badGateway, "replication_failed", error.description)
        }
        guard status.activity != .stopped else {
            throw CouchError(.badGateway, "replication_failed", "The replication was cancelled before it ended")
        }
        if status.changesProcessed == 0 { return Response.json(["ok": true, "no_changes": true]) }
        if description.documentIDs != nil {
            // CouchDB replicates listed documents without checkpoints, and says so.
            let figures = job.figures
            return Response.json(["ok": true, "start_time": .string(job.startTime.checkpointTimestamp),
                                  "end_time": .string(configuration.currentDate().checkpointTimestamp), "docs_read": .integer(figures.documentsRead),
                                  "docs_written": .integer(figures.documentsWritten), "doc_write_failures": .integer(figures.documentWriteFailures)])
        }
        // The checkpoint's sessions, this one first, as CouchDB's answer gives them.
        let position = job.status.positions.values.first
        if let position, let current = position.history.first {
            return Response.json(["ok": true, "session_id": .string(current.sessionID), "source_last_seq": position.checkpointed,
                                  "replication_id_version": 4, "history": .array(position.history.map(\.json))])
        }
        var entry = ReplicationCheckpoint.Session(sessionID: RandomHex.make())
        entry.startTime = job.startTime.checkpointTimestamp
        entry.endTime = configuration.currentDate().checkpointTimestamp
        entry.startSequence = position?.startedFrom ?? 0
        entry.endSequence = position?.checkpointed ?? 0
        entry.recordedSequence = entry.endSequence
        job.figures.record(into: &entry)
        return Response.json(["ok": true, "session_id": .string(entry.sessionID), "source_last_seq": entry.endSequence,
                              "replication_id_version": 4, "history": [entry.json]])
    }

    /// `GET /_scheduler/jobs[/{id}]` and `GET /_scheduler/docs[/_replicator[/{docid}]]` (admins), as
    /// CouchDB 3.3: the jobs running (from `_replicate` and `_replicator`), and the `_replicator`
    /// documents with their state (`initializing`, `running`, `crashing`, `error`, `completed`,
    /// `failed`); lists take `limit` and `skip`, and the documents `states=running,completed,…`.
    func schedulerRoute(_ request: CouchRequest, principal: Principal) throws -> Response {
        guard principal.isAdmin else { throw CouchError.adminRequired }
        guard request.method == .get || request.method == .head else {
            throw CouchError(.methodNotAllowed, "method_not_allowed", "Only GET,HEAD allowed")
        }
        let segments = Array(request.segments.dropFirst())
        let skip = max(try request.int("skip") ?? 0, 0)
        let limit = max(try request.int("limit") ?? Int.max, 0)
        func page(_ rows: [JSON], _ member: String, total: Int) -> Response {
            Response.json(["total_rows": .integer(total), "offset": .integer(skip), member: .array(Array(rows.dropFirst(skip).prefix(limit)))])
        }
        switch segments.first {
        case "jobs":
            if segments.count == 2 {
                guard let job = scheduler.job(segments[1]) else { throw CouchError.notFound("missing") }
                return Response.json(scheduler.schedulerJob(job))
            }
            guard segments.count == 1 else { throw CouchError.notFound("missing") }
            let jobs = scheduler.allJobs.map(scheduler.schedulerJob)
            return page(jobs, "jobs", total: jobs.count)
        case "docs":
            guard segments.count == 1 || segments[1] == ReplicationScheduler.databaseName else { throw CouchError.notFound("missing") }
            let documents = scheduler.schedulerDocuments()
            if segments.count == 3 {
                guard let found = documents.first(where: { $0["doc_id"]?.stringValue == segments[2] }) else { throw CouchError.notFound("missing") }
                return Response.json(found)
            }
            guard segments.count <= 2 else { throw CouchError.notFound("missing") }
            var rows = documents
            if let text = request.query["states"] {
                let states = text.split(separator: ",").map(String.init)
                guard !states.isEmpty, states.allSatisfy({ ReplicationScheduler.State(rawValue: $0) != nil || $0 == "pending" }) else {
                    throw CouchError(.badRequest, "query_parse_error",
                                     "States must be one or more of [initializing,error,running,pending,crashing,completed,failed]")
                }
                rows = rows.filter { states.contains($0["state"]?.stringValue ?? "") }
            }
            return page(rows, "docs", total: documents.count)
        default:
            throw CouchError(.notFound, "not_found", "missing")
        }
    }
}
