import DocStore
import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTPTypes

/// The HTTP/1.1 connection handling of ``DocServer``: Hummingbird's HTTP/1 pipeline behind a
/// ``ChunkSizeGuardHandler``, and a request loop that answers what the HTTP parser rejects the way
/// CouchDB does — with a JSON error body (405 for an unknown method token, 400 otherwise) instead of an
/// empty 400 — and closes the connection after a response that asks for it (``ConnectionControl``),
/// rather than reading on through a large request body that was refused.
struct CouchHTTPChannel: ServerChildChannel, HTTPChannelHandler {
    typealias Value = NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>

    let responder: HTTPChannelHandler.Responder
    let http1: HTTP1Channel
    /// The largest chunk a request may declare (``ChunkSizeGuard/limit``).
    let chunkLimit: UInt64

    init(responder: @escaping HTTPChannelHandler.Responder, idleTimeout: Duration, chunkLimit: Int) {
        self.responder = responder
        self.http1 = HTTP1Channel(responder: responder, configuration: .init(idleTimeout: .seconds(idleTimeout.components.seconds)))
        self.chunkLimit = UInt64(max(chunkLimit, 0))
    }

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        let limit = chunkLimit
        return channel.eventLoop.makeCompletedFuture {
            // First in the pipeline: they see the raw bytes before the HTTP decoder that HTTP1Channel
            // adds, and after its encoder.
            try channel.pipeline.syncOperations.addHandler(ChunkSizeGuardHandler(limit: limit))
            try channel.pipeline.syncOperations.addHandler(NotModifiedLength.Writer(mark: NotModifiedLength.Mark()))
        }.flatMap { http1.setup(channel: channel, logger: logger) }.flatMapThrowing { value in
            // On the encoder's application side; the channel is not active yet, nothing has passed.
            let operations = channel.pipeline.syncOperations
            let mark = try operations.handler(type: NotModifiedLength.Writer.self).mark
            try operations.addHandler(NotModifiedLength.Marker(mark: mark), position: .after(try operations.handler(type: HTTPResponseEncoder.self)))
            return value
        }
    }

    func handle(value asyncChannel: Value, logger: Logger) async {
        await withTaskExecutorPreference(EventLoopTaskExecutor(asyncChannel.channel.eventLoop)) {
            await handleOnItsEventLoop(value: asyncChannel, logger: logger)
        }
    }

    private func handleOnItsEventLoop(value asyncChannel: Value, logger: Logger) async {
        do {
            try await withTaskCancellationHandler {
                try await asyncChannel.executeThenClose { inbound, outbound in
                    let parts = InboundParts(inbound.makeAsyncIterator())
                    var responding = false
                    do {
                        while true {
                            guard let part = try await parts.next() else { break }
                            guard case .head(let head) = part else { break }
                            let control = ConnectionControl()
                            let request = Request(head: head, body: RequestBody(asyncSequence: RequestBodyParts(parts: parts)))
                            responding = true
                            try await ConnectionControl.$current.withValue(control) {
                                if head.method != .get && head.method != .head {
                                    // A write (and its body's parsing, hashing, SQLite) off the loop,
                                    // which keeps answering its other connections.
                                    try await writingApart {
                                        try await responder(request, ResponseWriter(outbound: outbound), asyncChannel.channel)
                                    }
                                } else if CouchHTTPChannel.answersInBulk(path: head.path ?? "") {
                                    // Built on the global pool while the loop writes what is ready.
                                    try await withTaskExecutorPreference(globalConcurrentExecutor) {
                                        try await responder(request, ResponseWriter(outbound: outbound), asyncChannel.channel)
                                    }
                                } else {
                                    try await responder(request, ResponseWriter(outbound: outbound), asyncChannel.channel)
                                }
                            }
                            responding = false
                            if control.closesConnection || head.headerFields[.connection]?.lowercased() == "close" { break }
                            // Whatever the responder left of the body is read and dropped.
                            guard try await parts.skipBody() else { break }
                        }
                    } catch where !responding && !parts.requestStarted {
                        // The parser rejected a request before its head was complete: nothing was answered yet.
                        let response = CouchHTTPChannel.parserErrorResponse(error)
                        try await outbound.write(.head(response.head))
                        try await outbound.write(.body(response.body))
                        try await outbound.write(.end(nil))
                    }
                    outbound.finish()
                    try await asyncChannel.channel.closeFuture.get()
                }
            } onCancel: {
                asyncChannel.channel.close(mode: .input, promise: nil)
            }
        } catch {
            logger.trace("Failed to read/write to channel: \(error)")
        }
    }

    /// Whether a request's answer is a batch or a feed — an endpoint below a database (`_changes`,
    /// `_all_docs`, `_bulk_get`, `_bulk_docs`, `_find`, a view, a show…) or of the server (`_all_dbs`,
    /// `_replicate`…), by its path as sent. A GET of those is answered on the global pool: the event
    /// loop of the connection then writes each part while the next is built, and a long answer does
    /// not hold up the loop's other connections. GETs of documents, attachments and the server's root
    /// stay on the loop, where a short answer costs no thread switch; every other method is a write,
    /// answered on DocStore's threads for writes (`writingApart`).
    static func answersInBulk(path: String) -> Bool {
        let segments = PathSegments(path: path)
        guard segments.count > 0 else { return false }
        let first = segments[0]
        if first.hasPrefix("_") { return segments.count > 1 || !(first == "_up" || first == "_session" || first == "_uuids") }
        guard segments.count >= 2, segments[1].hasPrefix("_") else { return false }
        switch segments[1] {
        case "_design": return segments.count >= 4 && segments[3].hasPrefix("_")  // _view, _show, _list, _update, _info
        case "_local": return false
        default: return true
        }
    }

    /// CouchDB's answer to a request the HTTP parser rejects.
    static func parserErrorResponse(_ error: any Error) -> (head: HTTPResponse, body: ByteBuffer) {
        let couch: CouchError
        switch error as? HTTPParserError {
        case .invalidMethod?:
            couch = CouchError(.methodNotAllowed, "method_not_allowed", "Only DELETE,GET,HEAD,POST,PUT,COPY allowed")
        case let parserError?:
            couch = CouchError.badRequest("Malformed HTTP request: \(parserError)")
        case nil:
            couch = CouchError.badRequest("Malformed HTTP request")
        }
        var bytes = (try? couch.body.json.serialized()) ?? []
        bytes.append(0x0A)
        let head = HTTPResponse(status: couch.status, headerFields: [
            .contentType: "application/json", .contentLength: String(bytes.count), .connection: "close",
        ])
        return (head, ByteBuffer(bytes: bytes))
    }
}

/// Lets a response close its connection once written (a refused upload whose body was not read, a
/// request the server could not frame); the request loop reads the flag after the responder.
final class ConnectionControl: @unchecked Sendable {
    // Set and read by the one task that serves the connection's current request: the responder runs
    // inside the request loop's task (task-local values do not reach detached work), and the loop reads
    // the flag only after the responder has returned.
    var closesConnection = false

    @TaskLocal static var current: ConnectionControl?

    /// Asks the connection serving the current request to close after the response.
    static func closeAfterResponse() { current?.closesConnection = true }
}

/// The request parts of one connection, shared by the request loop and the body of its current request.
///
/// `@unchecked Sendable`: NIOAsyncChannel's iterator is not Sendable, but it is only ever used by the
/// connection's one task — the loop awaits the responder, which reads the body in that same task (the
/// server never hands a request body to another task) — so no two accesses overlap.
final class InboundParts: @unchecked Sendable {
    private var iterator: NIOAsyncChannelInboundStream<HTTPRequestPart>.AsyncIterator
    /// Whether the current request's body has ended.
    private(set) var bodyEnded = true
    /// Whether a request head has been read and its request is not complete.
    private(set) var requestStarted = false

    init(_ iterator: NIOAsyncChannelInboundStream<HTTPRequestPart>.AsyncIterator) {
        self.iterator = iterator
    }

    func next() async throws -> HTTPRequestPart? {
        let part = try await iterator.next()
        switch part {
        case .head?: (bodyEnded, requestStarted) = (false, true)
        case .end?, nil: (bodyEnded, requestStarted) = (true, false)
        case .body?: break
        }
        return part
    }

    /// The next piece of the current request's body, or `nil` at its end.
    func nextBodyPart() async throws -> ByteBuffer? {
        guard !bodyEnded else { return nil }
        switch try await next() {
        case .body(let buffer)?: return buffer
        default: return nil
        }
    }

    /// Reads the rest of the current request; `false` if the connection ended.
    func skipBody() async throws -> Bool {
        while !bodyEnded {
            guard try await next() != nil else { return false }
        }
        return true
    }
}

/// The body of the request being served, read from the connection's ``InboundParts``.
struct RequestBodyParts: AsyncSequence, Sendable {
    typealias Element = ByteBuffer
    let parts: InboundParts

    struct AsyncIterator: AsyncIteratorProtocol {
        let parts: InboundParts
        mutating func next() async throws -> ByteBuffer? { try await parts.nextBodyPart() }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(parts: parts) }
}

extension HTTPServerBuilder {
    /// DocServer's HTTP/1.1 listener, for an application that embeds ``DocServer`` and wants the guards
    /// DocServer's own listener has: a declared chunk larger than any accepted body refused as soon as
    /// its size line arrives, what the HTTP parser rejects answered with CouchDB's JSON error, the
    /// connection closed after an answer that left a request body unread, and idle connections closed
    /// after ``ServerConfiguration/idleTimeout``.
    public static func docServer(_ configuration: ServerConfiguration) -> HTTPServerBuilder {
        let (idleTimeout, chunkLimit) = (configuration.idleTimeout, max(configuration.maximumBodySize, configuration.maximumAttachmentSize))
        return HTTPServerBuilder { responder in
            CouchHTTPChannel(responder: responder, idleTimeout: idleTimeout, chunkLimit: chunkLimit)
        }
    }
}

/// Runs a task's jobs on a NIO event loop: a connection's requests are answered on the thread that
/// reads and writes its socket, instead of being handed to Swift's global pool and back for each
/// request and each part of its answer (two thread switches and two wake-ups a request: the largest
/// single cost of a single-client GET). Work that may block runs elsewhere as before: DocStore's long
/// reads, writes, files and JavaScript on threads of their own (Docs/Architecture.md), and batches on the
/// global pool (``CouchHTTPChannel/answersInBulk(path:)``).
final class EventLoopTaskExecutor: TaskExecutor {
    let eventLoop: any EventLoop

    init(_ eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        eventLoop.execute { job.runSynchronously(on: executor) }
    }
}
