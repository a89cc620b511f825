import Foundation
import CoreMetrics
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
final class ServerMetrics: Sendable {
    let registry: PrometheusCollectorRegistry
    private let factory: PrometheusMetricsFactory
    private let requests: CoreMetrics.Counter
    private let writes: CoreMetrics.Counter
    private let reads: CoreMetrics.Counter
    private let openDatabases: CoreMetrics.Gauge

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
    }

    /// Counts an answered request.
    func answered(method: String, route: String, status: Int, after duration: Duration) {
        requests.increment()
        CoreMetrics.Counter(label: "couchdb_httpd_request_methods", dimensions: [("method", method)], factory: factory).increment()
        CoreMetrics.Counter(label: "couchdb_httpd_status_codes", dimensions: [("code", String(status))], factory: factory).increment()
        CoreMetrics.Counter(label: "docstore_http_requests_total", dimensions: [("route", route), ("status", String(status))],
                factory: factory).increment()
        CoreMetrics.Timer(label: "docstore_http_request_duration_seconds", dimensions: [("route", route)], factory: factory)
            .record(duration: duration)
    }

    func documentsWritten(_ count: Int) { writes.increment(by: count) }
    func documentsRead(_ count: Int) { reads.increment(by: count) }
    func databasesOpen(_ count: Int) { openDatabases.record(count) }

    /// The metrics in Prometheus's text exposition format.
    func exposition() -> [UInt8] { registry.emitToBuffer() }

    /// The route of a request's path, with its names replaced (`/{db}/{docid}`), for the metrics'
    /// `route` label: a bounded set of values, whatever the databases and documents are called.
    static func route(of segments: [String]) -> String {
        guard let first = segments.first else { return "/" }
        if first.hasPrefix("_") { return "/" + segments.prefix(first == "_node" ? 3 : 1).joined(separator: "/") }
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
