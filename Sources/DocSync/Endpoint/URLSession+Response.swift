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
        let holder = DataTaskHolder()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<(Data, URLResponse), any Error>) in
                let task = dataTask(with: request) { data, response, error in
                    holder.complete()
                    if let error {
                        continuation.resume(throwing: error)
                    } else if let response {
                        continuation.resume(returning: (data ?? Data(), response))
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

/// The data task of one request; a cancellation that arrives before the task exists cancels it at start,
/// one that arrives after it completed does nothing.
final class DataTaskHolder: Sendable {
    // URLSessionDataTask is thread-safe for resume/cancel; the mutex only orders start, completion and cancel.
    private let state = Mutex<(task: URLSessionDataTask?, cancelled: Bool, completed: Bool)>((nil, false, false))

    func start(_ task: URLSessionDataTask) {
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
        let task = state.withLock { state -> URLSessionDataTask? in
            state.cancelled = true
            return state.completed ? nil : state.task
        }
        task?.cancel()
    }
}
