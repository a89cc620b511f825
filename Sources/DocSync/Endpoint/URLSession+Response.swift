import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Synchronization

extension URLSession {
    /// The response to `request`, like `data(for:)`, but built on a completion-handler data task.
    ///
    /// FoundationNetworking's async `data(for:)` can deadlock in the Swift runtime when the awaiting task
    /// is cancelled while the response completes (seen in this project's tests). Here cancellation only
    /// schedules `cancel()` of the URL task on another queue, so the continuation is never resumed from
    /// inside a cancellation handler, and a task that has completed is never cancelled (FoundationNetworking
    /// traps on that: "Trying to access a behaviour for a task that in not in the registry").
    func response(for request: URLRequest) async throws -> (Data, URLResponse) {
        try await run { completion in
            dataTask(with: request) { data, response, error in
                completion(response.map { (data ?? Data(), $0) }, error)
            }
        }
    }

    /// The response to `request` with its body written to a new file of the caller's, which memory
    /// does not hold however large the body is (FoundationNetworking writes each piece as it arrives).
    /// The caller removes the file.
    func download(for request: URLRequest) async throws -> (URL, URLResponse) {
        try await run { completion in
            downloadTask(with: request) { location, response, error in
                // The location is removed when this handler returns: keep the file under a name of ours.
                guard let location, let response else { return completion(nil, error ?? URLError(.badServerResponse)) }
                let kept = FileManager.default.temporaryDirectory.appendingPathComponent("docsync-\(UUID().uuidString).download")
                do {
                    try FileManager.default.moveItem(at: location, to: kept)
                    completion((kept, response), nil)
                } catch {
                    completion(nil, error)
                }
            }
        }
    }

    /// The response to `request` sending the file at `body` as its body, read in pieces, with its
    /// length as `Content-Length`.
    func upload(for request: URLRequest, fromFile body: URL) async throws -> (Data, URLResponse) {
        try await run { completion in
            uploadTask(with: request, fromFile: body) { data, response, error in
                completion(response.map { (data ?? Data(), $0) }, error)
            }
        }
    }

    /// Runs the task `make` creates, resuming with what its completion handler reports.
    private func run<Value: Sendable>(
        _ make: (@escaping @Sendable (Value?, (any Error)?) -> Void) -> URLSessionTask
    ) async throws -> Value {
        let holder = TaskHolder()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Value, any Error>) in
                let task = make { value, error in
                    holder.complete()
                    if let error {
                        continuation.resume(throwing: error)
                    } else if let value {
                        continuation.resume(returning: value)
                    } else {
                        continuation.resume(throwing: URLError(.badServerResponse))
                    }
                }
                holder.start(task)
            }
        } onCancel: {
            DispatchQueue.global().async { holder.cancel() }
        }
    }
}

/// The URL task of one request; a cancellation that arrives before the task exists cancels it at start,
/// one that arrives after it completed does nothing.
final class TaskHolder: Sendable {
    // URLSessionTask is thread-safe for resume/cancel; the mutex only orders start, completion and cancel.
    private let state = Mutex<(task: URLSessionTask?, cancelled: Bool, completed: Bool)>((nil, false, false))

    func start(_ task: URLSessionTask) {
        let cancelled = state.withLock { state -> Bool in
            state.task = task
            return state.cancelled
        }
        task.resume()
        if cancelled { task.cancel() }
    }

    /// Called first thing in the completion handler.
    func complete() {
        state.withLock { $0.completed = true }
    }

    func cancel() {
        let task = state.withLock { state -> URLSessionTask? in
            state.cancelled = true
            return state.completed ? nil : state.task
        }
        task?.cancel()
    }
}
