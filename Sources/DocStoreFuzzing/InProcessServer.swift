import DocServer
import DocStore
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import NIOEmbedded

/// A ``DocServer`` answering requests in this process through its responder — the middleware and
/// router `docstore serve` puts behind its socket — for the HTTP and query-string fuzz targets.
///
/// Its data folder (a temporary one, removed at exit) starts with database `fuzzdb`: documents with
/// keys of every JSON type in channels `a` and `b`; design document `d` with a map view, `_sum`,
/// `_count`, `_approx_count_distinct` and JavaScript-reduce views, a filter, a show, a list, an update
/// handler and `validate_doc_update`; and user `alice`, limited to channel `a`. What a fuzzing run's requests write stays, so an input's answer may depend on the inputs
/// before it; the properties checked hold whatever the state.
final class InProcessServer: Sendable {
    /// The one server of this process, made on first use.
    static let shared = InProcessServer()

    /// The `Authorization` header of the server's administrator (`admin:admin`).
    static let adminAuthorization = "Basic YWRtaW46YWRtaW4="

    private let responder: DocServerResponder
    /// The channel every request's context names. One for the whole run: a channel and its pipeline
    /// refer to each other until the channel is closed, so one per request would be memory lost per
    /// request (LeakSanitizer's first report on these targets).
    private let channel = NIOAsyncTestingChannel()
    /// The server's data folder, removed when the process exits.
    private static let folder = FileManager.default.temporaryDirectory.appendingPathComponent("docstore-fuzz-\(getpid())-\(UUID().uuidString)")

    /// What the server answered; ``cut`` when the body was still coming at the deadline and the
    /// harness hung up, as a client of a feed does.
    struct Answer: Sendable {
        var status: HTTPResponse.Status?
        var headers: HTTPFields = [:]
        var body: [UInt8] = []
        var cut = false
        /// An error the responder threw instead of answering (its middleware renders every error).
        var thrown: String?
    }

    private init() {
        var configuration = ServerConfiguration(dataDirectory: InProcessServer.folder)
        configuration.admin = (name: "admin", password: "admin")
        configuration.passwordIterations = 10
        configuration.javaScriptTimeLimit = .milliseconds(300)
        configuration.lockTimeout = .seconds(2)
        configuration.maximumBodySize = 1 << 20
        let quiet = Logger(label: "docstore.fuzz") { _ in SwiftLogNoOpLogHandler() }
        let settings = configuration
        let made = InProcessServer.wait { () -> Result<DocServer, any Error> in
            do { return .success(try await DocServer(configuration: settings, logger: quiet)) } catch { return .failure(error) }
        }
        guard case .success(let server) = made else { preconditionFailure("the fuzz target's server: \(made)") }
        responder = server.buildResponder()
        atexit { try? FileManager.default.removeItem(at: InProcessServer.folder) }
        seed()
    }

    /// Writes the starting data; stops the process when the server refuses it.
    private func seed() {
        var documents: [JSON] = []
        let keys: [JSON] = [.null, .bool(false), .bool(true), .integer(-3), .integer(0), .double(2.5), .integer(7),
                            .string(""), .string("a"), .string("B"), .string("é"), .array([]), .array([.string("a"), .integer(1)]),
                            .array([.string("a"), .integer(2)]), .array([.string("b"), .integer(1)]), .object(JSONObject([("k", .integer(1))]))]
        for (n, key) in keys.enumerated() {
            documents.append(.object(JSONObject([("_id", .string(String(format: "doc%02d", n))), ("k", key), ("v", .integer(n)),
                                                 ("channels", .array([.string(n % 2 == 0 ? "a" : "b")]))])))
        }
        let design = """
            {"_id":"_design/d","language":"javascript",
             "views":{"map":{"map":"function(doc){ if (doc.k !== undefined) emit(doc.k, doc.v); }"},
                      "sum":{"map":"function(doc){ if (typeof doc.v === 'number') emit(doc.k, doc.v); }","reduce":"_sum"},
                      "count":{"map":"function(doc){ emit([doc.channels, doc.v % 3], null); }","reduce":"_count"},
                      "distinct":{"map":"function(doc){ emit(doc.v % 5, 1); }","reduce":"_approx_count_distinct"},
                      "js":{"map":"function(doc){ emit(doc._id, doc.v); }","reduce":"function(k, v, re){ return sum(v); }"}},
             "filters":{"even":"function(doc, req){ return doc.v % 2 == (req.query.odd ? 1 : 0); }"},
             "shows":{"doc":"function(doc, req){ return {body: JSON.stringify({id: doc && doc._id, q: req.query})}; }"},
             "lists":{"rows":"function(head, req){ var row; send('['); while (row = getRow()) { send(JSON.stringify(row.key) + ','); } send(']'); }"},
             "updates":{"touch":"function(doc, req){ if (!doc) return [null, 'none']; doc.touched = (doc.touched || 0) + 1; return [doc, 'ok']; }"},
             "validate_doc_update":"function(n, o, u){ if (n.forbidden) throw({forbidden: 'no'}); }"}
            """
        let user = #"{"name":"alice","password":"alice","roles":[],"type":"user","channels":["a"]}"#
        let steps: [(HTTPRequest.Method, String, String)] = [
            // `start()` would have made the system databases.
            (.put, "/_users", ""),
            (.put, "/_replicator", ""),
            (.put, "/fuzzdb", ""),
            (.post, "/fuzzdb/_bulk_docs", String(decoding: (try? JSON.object(JSONObject([("docs", .array(documents))])).serialized()) ?? [], as: UTF8.self)),
            (.put, "/fuzzdb/_design/d", design),
            (.put, "/_users/org.couchdb.user:alice", user),
        ]
        for (method, path, body) in steps {
            let answer = self.answer(InProcessServer.request(method, path, body: Array(body.utf8)))
            guard let code = answer?.status?.code, (200..<300).contains(code) else {
                preconditionFailure("the fuzz target's server refused \(method) \(path): \(String(describing: answer))")
            }
        }
    }

    /// A request as a client sends it: JSON body, the administrator's credentials unless `headers` name others.
    static func request(_ method: HTTPRequest.Method, _ target: String, headers: HTTPFields = [:], body: [UInt8] = []) -> Request {
        var fields = headers
        if fields[.authorization] == nil { fields[.authorization] = adminAuthorization }
        if !body.isEmpty, fields[.contentType] == nil { fields[.contentType] = "application/json" }
        fields[.contentLength] = body.isEmpty && method != .post && method != .put ? nil : String(body.count)
        return Request(head: HTTPRequest(method: method, scheme: "http", authority: "localhost", path: target, headerFields: fields),
                       body: RequestBody(buffer: ByteBuffer(bytes: body)))
    }

    /// The answer to `request`, waited for on this thread. A body still streaming after `patience`
    /// is cut (the harness hangs up and cancels the request); `nil` when the request then does not
    /// end within ten seconds — a hang.
    func answer(_ request: Request, patience: Duration = .seconds(10)) -> Answer? {
        let sink = Sink()
        let (responder, channel) = (self.responder, self.channel)
        let done = DispatchSemaphore(value: 0)
        let task = Task {
            defer { done.signal() }
            let context = DocServerRequestContext(source: .init(channel: channel, logger: Logger(label: "docstore.fuzz") { _ in SwiftLogNoOpLogHandler() }))
            let response: Response
            do {
                response = try await responder.respond(to: request, context: context)
            } catch {
                sink.state.withLock { $0.thrown = "\(error)" }
                return
            }
            sink.state.withLock {
                $0.status = response.status
                $0.headers = response.headers
            }
            try? await response.body.write(SinkWriter(sink: sink))
        }
        let seconds = Double(patience.components.seconds) + Double(patience.components.attoseconds) / 1e18
        if done.wait(timeout: .now() + seconds) == .timedOut {
            sink.state.withLock { $0.cut = true }
            task.cancel()
            guard done.wait(timeout: .now() + 10) == .success else { return nil }
        }
        return sink.state.withLock { $0 }
    }

    /// Runs `work` on Swift's pool and waits for it on this thread — libFuzzer's or a test's, never a
    /// thread of the pool.
    static func wait<T: Sendable>(_ work: @escaping @Sendable () async -> T) -> T {
        let result = Locked<T?>(nil)
        let done = DispatchSemaphore(value: 0)
        Task {
            let value = await work()
            result.withLock { $0 = value }
            done.signal()
        }
        done.wait()
        return result.withLock { $0! }
    }

    /// Where an answer's body collects.
    private final class Sink: Sendable {
        let state = Locked<Answer>(Answer())
    }

    /// Collects a body; once the harness has hung up, or past 16 MB, a write fails as it would on a
    /// closed connection.
    private struct SinkWriter: ResponseBodyWriter {
        let sink: Sink

        mutating func write(_ buffer: ByteBuffer) async throws {
            try sink.state.withLock { state in
                guard !state.cut, state.body.count < 16 << 20 else { throw CancellationError() }
                state.body += buffer.readableBytesView
            }
        }

        consuming func finish(_ trailingHeaders: HTTPFields?) async throws {}
    }
}
