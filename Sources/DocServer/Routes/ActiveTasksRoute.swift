import DocStore
import DocStoreJavaScript
import Foundation
import Hummingbird

extension DocServer {
    /// `GET /_active_tasks` (admins), as CouchDB lists its work: the replications running, and the
    /// open databases' ``ActiveTask``s — `indexer` (an index built or brought up to date),
    /// `view_compaction` and `database_compaction` — with CouchDB's members.
    func activeTasks(_ request: CouchRequest, principal: Principal) throws -> Response {
        guard request.method == .get else { throw CouchError(.methodNotAllowed, "method_not_allowed", "Only GET allowed") }
        guard principal.isAdmin else { throw CouchError.adminRequired }
        let databases = registry.openDatabases.flatMap(\.activeTasks).map(taskJSON)
        return Response.json(.array(scheduler.activeTasks() + databases))
    }

    /// A database's task as CouchDB 3.3.3 shows it. `database` is the database's name (CouchDB names a
    /// shard's file; a DocStore database is one file); `pid` is a stand-in of an Erlang process id.
    func taskJSON(_ task: ActiveTask) -> JSON {
        var json: JSONObject = [
            "node": .string(scheduler.node), "pid": .string("<0.\(task.id).0>"), "process_status": "running",
            "database": .string(task.database), "changes_done": .integer(task.changesDone),
            "total_changes": .integer(task.totalChanges), "progress": .integer(task.progress),
            "started_on": .integer(Int(task.started.timeIntervalSince1970)),
            "updated_on": .integer(Int(task.updated.timeIntervalSince1970)),
        ]
        switch task.kind {
        case .indexing(let index):
            json["type"] = "indexer"
            json["design_document"] = .string(DocServer.designDocument(ofIndex: index))
            json["indexer_pid"] = json["pid"]
        case .indexCompaction:
            json["type"] = "view_compaction"
            json["design_document"] = designCompactions.withLock { $0[task.database] }.map(JSON.string) ?? .null
            json["phase"] = "view"
            json["view"] = 0
        case .databaseCompaction:
            json["type"] = "database_compaction"
            json["phase"] = "document_copy"
        }
        return .object(json)
    }

    /// The design document an index belongs to, as its HTTP routes name it: a JavaScript view's and
    /// a Mango index's own, `_design/d` for an index registered in Swift as `d/v` (read at
    /// `_design/d/_view/v`), and `_design/` + the name for one without a slash.
    static func designDocument(ofIndex name: String) -> String {
        if name.hasPrefix("javascript:") {
            // `javascript:{design}/{view}`; a view's name has no slash of its own here.
            let rest = name.dropFirst("javascript:".count)
            return "_design/" + (rest.lastIndex(of: "/").map { String(rest[..<$0]) } ?? String(rest))
        }
        for prefix in ["mango:", "mango-text:"] where name.hasPrefix(prefix) {
            // `mango:_design/{design}/{name}`.
            let rest = name.dropFirst(prefix.count)
            return rest.lastIndex(of: "/").map { String(rest[..<$0]) } ?? String(rest)
        }
        return "_design/" + (name.firstIndex(of: "/").map { String(name[..<$0]) } ?? name)
    }
}
