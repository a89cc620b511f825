import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import DocStore

/// A Hummingbird server on 127.0.0.1 (port 0) that answers every request with a handler — the
/// listener under the DocSync tests' stand-in servers (``FaultProxy``, ``RecordedCouchDBSource``).
final class LoopbackServer: Sendable {
    private let task = Locked<Task<Void, any Error>?>(nil)

    /// Starts listening, answering with `handler` until ``stop()``; returns the port.
    func start(_ handler: @escaping @Sendable (Request) async throws -> Response) async throws -> Int {
        let (ports, continuation) = AsyncStream<Int>.makeStream()
        let app = Application(
            responder: CallbackResponder<BasicRequestContext> { request, _ in try await handler(request) },
            configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in continuation.yield(channel.localAddress?.port ?? 0) })
        task.withLock { $0 = Task { try await app.run() } }
        var iterator = ports.makeAsyncIterator()
        return await iterator.next() ?? 0
    }

    /// Stops the server and waits for it.
    func stop() async {
        let running = task.withLock { $0 }
        running?.cancel()
        _ = try? await running?.value
    }
}
