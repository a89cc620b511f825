import CoreMetrics
import DocStore
import DocSync
import Foundation
import Metrics
import Prometheus

/// The server's metrics: swift-metrics counters, timers and a gauge made by a Prometheus factory over
/// the server's own registry, and served in Prometheus's text format at `/_node/_local/_prometheus`
/// (as CouchDB 3.2+). Where CouchDB 3.3 has a metric, it has CouchDB's name; the others are
/// `docstore_…`.
///
/// | metric | kind | what |
/// |---|---|---|
/// | `couchdb_httpd_requests_total` | counter | requests answered |
/// | `couchdb_httpd_request_methods{method}` | counter | by method |
/// | `couchdb_httpd_status_codes{code}` | counter | by status |
/// | `docstore_http_requests_total{route,status}` | counter | by route (`/{db}/_changes`, …) and status |
/// | `docstore_http_request_duration_seconds{route}` | histogram | time to the answer's head |
/// | `couchdb_database_writes_total` | counter | document revisions written (local and replicated) |
/// | `couchdb_database_reads_total` | counter | documents read by `GET /{db}/{id}` and `_bulk_get` |
/// | `couchdb_open_databases_total` | gauge | databases open |
/// | `couchdb_couch_replicator_jobs_total` | gauge | replication jobs (`_replicate` and `_replicator`) |
/// | `couchdb_couch_replicator_jobs_running` | gauge | jobs running (not crashing) |
/// | `couchdb_couch_replicator_jobs_adds_total` | counter | jobs added |
/// | `couchdb_couch_replicator_jobs_starts_total` | counter | runs started (a retry is a start) |
/// | `couchdb_couch_replicator_jobs_crashes_total` | counter | runs failed, or peers lost |
/// | `couchdb_couch_replicator_checkpoints_total` | counter | checkpoints saved |
/// | `couchdb_couch_replicator_docs_completed_state_updates_total` | counter | `_replicator` documents marked `completed` |
/// | `couchdb_couch_replicator_docs_failed_state_updates_total` | counter | `_replicator` documents marked `failed` |
/// | `docstore_replication_docs_read_total` | counter | revisions read from sources |
/// | `docstore_replication_docs_written_total` | counter | revisions written to targets (its rate is docs/s) |
/// | `docstore_replication_doc_write_failures_total` | counter | revisions targets refused |
/// | `docstore_replication_changes_total` | counter | source changes examined |
final class ServerMetrics: Sendable {
    let registry: PrometheusCollectorRegistry
    private let factory: PrometheusMetricsFactory
    private let requests: CoreMetrics.Counter
    private let writes: CoreMetrics.Counter
    private let reads: CoreMetrics.Counter
    private let openDatabases: CoreMetrics.Gauge
    /// The series each kind of answer counts in, made once: a series made per request (a registry
    /// lookup under a lock, and its name's strings) cost a single GET 1.5 % of its time.
    private let answers = Locked<[AnswerKind: AnswerSeries]>([:])

    private struct AnswerKind: Hashable {
        let method: String
        let route: String
        let status: Int
    }

    private struct AnswerSeries: Sendable {
        let method: CoreMetrics.Counter
        let status: CoreMetrics.Counter
        let route: CoreMetrics.Counter
        let duration: CoreMetrics.Timer
    }

    /// At most this many kinds of answers keep their series (methods and routes are few; a client
    /// sending made-up methods gets series made per request instead of a table that grows).
    private static let keptAnswerKinds = 4096

    init() {
        registry = PrometheusCollectorRegistry()
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.defaultDurationHistogramBuckets = [.milliseconds(1), .milliseconds(5), .milliseconds(25), .milliseconds(100),
                                                   .milliseconds(500), .seconds(2), .seconds(10)]
        self.factory = factory
        requests = CoreMetrics.Counter(label: "couchdb_httpd_requests_total", factory: factory)
        writes = CoreMetrics.Counter(label: "couchdb_database_writes_total", factory: factory)
        reads = CoreMetrics.Counter(label: "couchdb_database_reads_total", factory: factory)
        openDatabases = CoreMetrics.Gauge(label: "couchdb_open_databases_total", factory: factory)
        // The replication series are there from the start, at zero.
        for label in ["couchdb_couch_replicator_jobs_adds_total", "couchdb_couch_replicator_jobs_starts_total",
                      "couchdb_couch_replicator_jobs_crashes_total", "couchdb_couch_replicator_checkpoints_total",
                      "couchdb_couch_replicator_docs_completed_state_updates_total",
                      "couchdb_couch_replicator_docs_failed_state_updates_total", "docstore_replication_docs_read_total",
                      "docstore_replication_docs_written_total", "docstore_replication_doc_write_failures_total",
                      "docstore_replication_changes_total"] {
            _ = CoreMetrics.Counter(label: label, factory: factory)
        }
        replicationJobs(total: 0, running: 0)
    }

    /// Counts an answered request.
    func answered(method: String, route: String, status: Int, after duration: Duration) {
        requests.increment()
        let kind = AnswerKind(method: method, route: route, status: status)
        let series = answers.withLock { $0[kind] } ?? {
            let made = AnswerSeries(
                method: CoreMetrics.Counter(label: "couchdb_httpd_request_methods", dimensions: [("method", method)], factory: factory),
                status: CoreMetrics.Counter(label: "couchdb_httpd_status_codes", dimensions: [("code", String(status))], factory: factory),
                route: CoreMetrics.Counter(label: "docstore_http_requests_total", dimensions: [("route", route), ("status", String(status))],
                                           factory: factory),
                duration: CoreMetrics.Timer(label: "docstore_http_request_duration_seconds", dimensions: [("route", route)], factory: factory))
            answers.withLock { if $0.count < Self.keptAnswerKinds { $0[kind] = made } }
            return made
        }()
        series.method.increment()
        series.status.increment()
        series.route.increment()
        series.duration.record(duration: duration)
    }

    // MARK: Replication

    private func count(_ label: String, by amount: Int = 1) {
        guard amount > 0 else { return }
        CoreMetrics.Counter(label: label, factory: factory).increment(by: amount)
    }

    func replicationJobAdded() { count("couchdb_couch_replicator_jobs_adds_total") }
    func replicationStarted() { count("couchdb_couch_replicator_jobs_starts_total") }
    func replicationCrashed() { count("couchdb_couch_replicator_jobs_crashes_total") }

    func replicationJobs(total: Int, running: Int) {
        CoreMetrics.Gauge(label: "couchdb_couch_replicator_jobs_total", factory: factory).record(total)
        CoreMetrics.Gauge(label: "couchdb_couch_replicator_jobs_running", factory: factory).record(running)
    }

    func replicationDocumentState(completed: Bool) {
        count(completed ? "couchdb_couch_replicator_docs_completed_state_updates_total" : "couchdb_couch_replicator_docs_failed_state_updates_total")
    }

    /// Counts what a replication did between two of its statuses (of the same run).
    func replicated(from previous: ReplicatorStatus, to status: ReplicatorStatus) {
        count("docstore_replication_docs_read_total", by: status.figures.documentsRead - previous.figures.documentsRead)
        count("docstore_replication_docs_written_total", by: status.documentsWritten - previous.documentsWritten)
        count("docstore_replication_doc_write_failures_total", by: status.documentWriteFailures - previous.documentWriteFailures)
        count("docstore_replication_changes_total", by: status.changesProcessed - previous.changesProcessed)
        let saved = status.positions.filter { flow, position in
            previous.positions[flow].map { $0.checkpointed != position.checkpointed } ?? false
        }
        count("couchdb_couch_replicator_checkpoints_total", by: saved.count)
    }

    func documentsWritten(_ count: Int) { writes.increment(by: count) }
    func documentsRead(_ count: Int) { reads.increment(by: count) }
    func databasesOpen(_ count: Int) { openDatabases.record(count) }

    /// The metrics in Prometheus's text exposition format.
    func exposition() -> [UInt8] { registry.emitToBuffer() }

    /// Where CouchDB's `/_node/{node}/_stats` has each series that CouchDB also has: its path there,
    /// the label that names the last step (a method, a status), its type and description.
    private static let statistics: [String: (path: [String], label: String?, type: String, description: String)] = [
        "couchdb_httpd_requests_total": (["couchdb", "httpd", "requests"], nil, "counter", "number of HTTP requests"),
        "couchdb_httpd_request_methods": (["couchdb", "httpd_request_methods"], "method", "counter", "number of HTTP %@ requests"),
        "couchdb_httpd_status_codes": (["couchdb", "httpd_status_codes"], "code", "counter", "number of HTTP %@ responses"),
        "couchdb_database_reads_total": (["couchdb", "database_reads"], nil, "counter", "number of times a document was read from a database"),
        "couchdb_database_writes_total": (["couchdb", "database_writes"], nil, "counter", "number of times a database was changed"),
        "couchdb_open_databases_total": (["couchdb", "open_databases"], nil, "counter", "number of open databases"),
        "couchdb_couch_replicator_jobs_adds_total": (["couch_replicator", "jobs", "adds"], nil, "counter", "number of jobs added to replicator"),
        "couchdb_couch_replicator_jobs_starts_total": (["couch_replicator", "jobs", "starts"], nil, "counter", "number of jobs started by replicator"),
        "couchdb_couch_replicator_jobs_crashes_total": (["couch_replicator", "jobs", "crashes"], nil, "counter", "number of job crashed"),
        "couchdb_couch_replicator_jobs_total": (["couch_replicator", "jobs", "total"], nil, "gauge", "total number of replicator jobs"),
        "couchdb_couch_replicator_jobs_running": (["couch_replicator", "jobs", "running"], nil, "gauge", "replicator jobs running"),
        "couchdb_couch_replicator_checkpoints_total": (["couch_replicator", "checkpoints", "success"], nil, "counter",
                                                       "number of checkpoints successfully saves"),
        "couchdb_couch_replicator_docs_completed_state_updates_total": (["couch_replicator", "docs", "completed_state_updates"], nil,
                                                                         "counter", "number of `completed` state document updates"),
        "couchdb_couch_replicator_docs_failed_state_updates_total": (["couch_replicator", "docs", "failed_state_updates"], nil,
                                                                      "counter", "number of `failed` state document updates"),
    ]

    /// The figures CouchDB also keeps, nested as its `/_node/{node}/_stats` answers them
    /// (`{"couchdb": {"httpd": {"requests": {"value", "type", "desc"}}, …}, "couch_replicator": …}`),
    /// read off the series `_prometheus` serves. Histograms (CouchDB's `request_time`) are left out.
    func statistics() -> JSON {
        func insert(_ leaf: JSON, at path: ArraySlice<String>, into object: inout JSONObject) {
            guard let key = path.first else { return }
            guard path.count > 1 else { return object[key] = leaf }
            var child = object[key]?.objectValue ?? [:]
            insert(leaf, at: path.dropFirst(), into: &child)
            object[key] = .object(child)
        }
        var tree = JSONObject()
        let text = String(decoding: exposition(), as: UTF8.self)
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]), value.isFinite else { continue }
            let series = line[..<space]
            let name = series.firstIndex(of: "{").map { String(series[..<$0]) } ?? String(series)
            guard let place = ServerMetrics.statistics[name] else { continue }
            var path = place.path
            var description = place.description
            if let label = place.label {
                // `name{label="value"}`: the value is the last step.
                guard let start = series.range(of: "\(label)=\""), let end = series[start.upperBound...].firstIndex(of: "\"") else { continue }
                let step = String(series[start.upperBound..<end])
                path.append(step)
                description = description.replacingOccurrences(of: "%@", with: step)
            }
            let whole = value.rounded() == value && abs(value) < 9e15
            let leaf: JSON = ["value": whole ? .integer(Int(value)) : .double(value),
                              "type": .string(place.type), "desc": .string(description)]
            insert(leaf, at: path[...], into: &tree)
        }
        return .object(tree)
    }

    /// The route of a request's path, with its names replaced (`/{db}/{docid}`), for the metrics'
    /// `route` label: a bounded set of values, whatever the databases and documents are called.
    static func route(of segments: PathSegments) -> String {
        guard segments.count > 0 else { return "/" }
        let first = segments[0]
        if first.hasPrefix("_") {
            guard first == "_node" else { return "/" + first }
            return "/" + (0..<min(segments.count, 3)).map { segments[$0] }.joined(separator: "/")
        }
        guard segments.count > 1 else { return "/{db}" }
        switch segments[1] {
        case "_design":
            if segments.count >= 5, segments[3] == "_view" { return "/{db}/_design/{ddoc}/_view/{view}" }
            return segments.count > 3 ? "/{db}/_design/{ddoc}/{attachment}" : "/{db}/_design/{ddoc}"
        case "_local":
            return "/{db}/_local/{docid}"
        case let name where name.hasPrefix("_"):
            return "/{db}/" + name
        default:
            return segments.count > 2 ? "/{db}/{docid}/{attachment}" : "/{db}/{docid}"
        }
    }
}
