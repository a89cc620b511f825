import CouchProtocol
import DocStore
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A continuous `_changes` feed read as it arrives: the peer's transport streams the response into it,
/// it splits it into lines (rows, empty heartbeat lines, a final `last_seq`), and ``next(maximum:)``
/// hands out the rows received so far, waiting when there are none. A feed silent for longer than the
/// transport's idle limit (the request timeout plus a heartbeat) fails with a network error.
final class ChangeFeed: HTTPTransport.StreamReceiver {
    private struct State {
        var buffer: [UInt8] = []
        var rows: [ChangesRow] = []
        var ended = false
        var failure: ReplicationError?
        var waiter: CheckedContinuation<Void, Never>?
        var errorBody: [UInt8] = []
    }

    private let state = Locked(State())
    private let transport: HTTPTransport
    private let request = Locked<Int?>(nil)

    /// Starts the request on `transport`; the feed fills as the server writes.
    init(_ request: URLRequest, on transport: HTTPTransport) throws {
        self.transport = transport
        let identifier = try transport.stream(request, into: self)
        self.request.withLock { $0 = identifier }
    }

    /// Stops reading.
    func close() {
        if let identifier = request.withLock({ $0 }) { transport.cancel(identifier) }
        finish(nil)
    }

    /// Up to `maximum` rows; waits until at least one arrived. `nil` when the feed has ended.
    /// - Throws: the error that broke the feed.
    func next(maximum: Int) async throws -> [ChangesRow]? {
        while true {
            if Task.isCancelled {
                close()
                throw CancellationError()
            }
            let (rows, ended, failure): ([ChangesRow], Bool, ReplicationError?) = state.withLock { state in
                let taken = Array(state.rows.prefix(maximum))
                state.rows.removeFirst(taken.count)
                return (taken, state.ended && state.rows.isEmpty, state.failure)
            }
            if !rows.isEmpty { return rows }
            if let failure { throw failure }
            if ended { return nil }
            await withTaskCancellationHandler {
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    let resumeNow = state.withLock { state -> Bool in
                        if !state.rows.isEmpty || state.ended { return true }
                        state.waiter = continuation
                        return false
                    }
                    if resumeNow { continuation.resume() }
                }
            } onCancel: {
                self.wake()
            }
        }
    }

    private func wake() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    private func finish(_ failure: ReplicationError?) {
        state.withLock { state in
            if state.failure == nil { state.failure = failure }
            state.ended = true
        }
        wake()
    }

    // MARK: HTTPTransport.StreamReceiver

    func received(_ data: Data, status: Int) {
        if status >= 400 {
            state.withLock { $0.errorBody.append(contentsOf: data.prefix(4096)) }
            return
        }
        var parsed: [ChangesRow] = []
        var malformed: String?
        state.withLock { state in
            guard state.failure == nil else { return }
            state.buffer.append(contentsOf: data)
            while malformed == nil, let newline = state.buffer.firstIndex(of: 0x0A) {
                let line = state.buffer[..<newline]
                defer { state.buffer.removeSubrange(...newline) }
                do {
                    // The final `last_seq` line needs nothing: the server closes the feed after it.
                    if case .row(let row) = try ChangesFeedLine(line: line) { parsed.append(row) }
                } catch {
                    malformed = String(decoding: line.prefix(200), as: UTF8.self)
                }
            }
            state.rows += parsed
        }
        if let malformed {
            // A change that cannot be read must not be skipped: the feed fails here, and nothing
            // after it is read; the replicator opens it again from its checkpoint.
            finish(ReplicationError(.badResponse, "continuous _changes sent a malformed line: \(malformed)"))
            return
        }
        if !parsed.isEmpty { wake() }
    }

    func ended(status: Int, error: (any Error)?) {
        let body = state.withLock { $0.errorBody }
        if status >= 400 {
            finish(ReplicationError(status: status, body: body, context: "continuous _changes"))
        } else if let error {
            finish(ReplicationError(.network, "continuous _changes: \(error.localizedDescription)", cause: error))
        } else {
            finish(nil)
        }
    }
}
