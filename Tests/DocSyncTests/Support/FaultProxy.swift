import DocStore
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HTTPTypes
import Hummingbird
import NIOCore

/// A proxy on 127.0.0.1 in front of a server that injects faults into chosen requests: an error status,
/// a connection cut in the middle of the response, or a stall (no answer until the proxy stops).
final class FaultProxy: Sendable {
    enum Fault: Sendable {
        case status(Int)
        case cutResponse
        /// The request gets no byte of answer until ``stop()``; ``waitForStalls(_:)`` sees it begin.
        case stall
    }

    private struct Stalls {
        var begun = 0
        var released = false
        var held: [CheckedContinuation<Void, Never>] = []
        var watchers: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []
    }

    struct Rule: Sendable {
        let pathContains: String
        let fault: Fault
        var remaining: Int
    }

    let upstream: String
    /// What the proxy answers for `GET /` instead of the upstream's welcome (e.g. CouchDB's), if set.
    let welcome: JSON?
    private let rules: Locked<[Rule]>
    private let changesRequests = Locked<[String]>([])
    private let counts = Locked<[String: Int]>([:])
    private let stalls = Locked(Stalls())
    private let session: URLSession
    private let server = LoopbackServer()

    init(upstream: String, rules: [Rule], welcome: JSON? = nil) {
        self.upstream = upstream
        self.welcome = welcome
        self.rules = Locked(rules)
        let configuration = URLSessionConfiguration.ephemeral
        configuration.urlCache = nil
        session = URLSession(configuration: configuration)
    }

    /// Each `_changes` request seen: its query, a space, its body.
    var changesRequestsSeen: [String] { changesRequests.withLock { $0 } }

    /// How many faults are still to be injected.
    var pendingFaults: Int { rules.withLock { $0.reduce(0) { $0 + $1.remaining } } }

    /// Requests seen per endpoint (the last path segment, e.g. `_changes`).
    func requests(to endpoint: String) -> Int { counts.withLock { $0[endpoint] ?? 0 } }

    func start() async throws -> Int {
        try await server.start { [self] request in try await self.handle(request) }
    }

    func stop() async {
        let held = stalls.withLock { stalls in
            stalls.released = true
            defer { stalls.held = [] }
            return stalls.held
        }
        held.forEach { $0.resume() }
        await server.stop()
    }

    /// Sends `request` upstream and waits for the answer — through a completion handler, so that
    /// stopping the proxy (which cancels the handlers' tasks) does not cancel the URL session's task.
    /// `URLSession.data(for:)` would, and FoundationNetworking's cancel waits for the session's queue
    /// while holding the task's status lock, which the queue needs to deliver an answer that is
    /// completing at that moment: the two would wait for each other forever.
    private func forward(_ request: URLRequest) async throws -> (Data, URLResponse) {
        try await withCheckedThrowingContinuation { continuation in
            session.dataTask(with: request) { data, response, error in
                if let data, let response {
                    continuation.resume(returning: (data, response))
                } else {
                    continuation.resume(throwing: error ?? URLError(.badServerResponse))
                }
            }.resume()
        }
    }

    /// Returns once `count` requests have been stalled in all.
    func waitForStalls(_ count: Int = 1) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let ready = stalls.withLock { stalls -> Bool in
                if stalls.begun >= count { return true }
                stalls.watchers.append((count, continuation))
                return false
            }
            if ready { continuation.resume() }
        }
    }

    /// Holds a request until the proxy stops.
    private func stall() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let (released, due) = stalls.withLock { stalls in
                stalls.begun += 1
                let due = stalls.watchers.filter { $0.count <= stalls.begun }.map(\.continuation)
                stalls.watchers.removeAll { $0.count <= stalls.begun }
                if !stalls.released { stalls.held.append(continuation) }
                return (stalls.released, due)
            }
            due.forEach { $0.resume() }
            if released { continuation.resume() }
        }
    }

    private func takeFault(for path: String) -> Fault? {
        rules.withLock { rules in
            guard let index = rules.firstIndex(where: { path.contains($0.pathContains) && $0.remaining > 0 }) else { return nil }
            rules[index].remaining -= 1
            return rules[index].fault
        }
    }

    private func handle(_ request: Request) async throws -> Response {
        var request = request
        let body = try await request.collectBody(upTo: 64 * 1024 * 1024)
        let path = request.uri.path
        let endpoint = String(path.split(separator: "/").last ?? "")
        counts.withLock { $0[endpoint, default: 0] += 1 }
        if endpoint == "_changes" {
            changesRequests.withLock { $0.append((request.uri.query ?? "") + " " + String(decoding: body.readableBytesView, as: UTF8.self)) }
        }
        if path == "/", let welcome {
            return Response(status: .ok, headers: [.contentType: "application/json"],
                            body: ResponseBody(byteBuffer: ByteBuffer(bytes: Array(welcome.description.utf8))))
        }
        let fault = takeFault(for: path)
        if case .status(let code)? = fault {
            let json = Array(#"{"error":"injected","reason":"fault injected by the test proxy"}"#.utf8)
            return Response(status: HTTPResponse.Status(code: code), headers: [.contentType: "application/json"],
                            body: ResponseBody(byteBuffer: ByteBuffer(bytes: json)))
        }
        if case .stall? = fault {
            await stall()
            throw CancellationError()
        }
        var upstreamRequest = URLRequest(url: URL(string: upstream + path + (request.uri.query.map { "?" + $0 } ?? ""))!)
        upstreamRequest.httpMethod = request.method.rawValue
        for field in request.headers where [.authorization, .contentType, .accept, .cookie].contains(field.name) {
            upstreamRequest.setValue(field.value, forHTTPHeaderField: field.name.rawName)
        }
        if body.readableBytes > 0 { upstreamRequest.httpBody = Data(body.readableBytesView) }
        let (data, response) = try await forward(upstreamRequest)
        let http = response as! HTTPURLResponse
        let contentType = http.value(forHTTPHeaderField: "Content-Type") ?? "application/json"
        if case .cutResponse? = fault {
            // Half the body, then the connection breaks (no Content-Length, so the client cannot
            // take the truncated body for a complete one).
            let half = ByteBuffer(bytes: data.prefix(max(1, data.count / 2)))
            return Response(status: HTTPResponse.Status(code: http.statusCode), headers: [.contentType: contentType],
                            body: ResponseBody { writer in
                                try await writer.write(half)
                                throw CancellationError()
                            })
        }
        return Response(status: HTTPResponse.Status(code: http.statusCode), headers: [.contentType: contentType],
                        body: ResponseBody(byteBuffer: ByteBuffer(bytes: data)))
    }
}
