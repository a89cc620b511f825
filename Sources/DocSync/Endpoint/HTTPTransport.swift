import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import DocStore

/// The URL session of one HTTP peer: sends requests, downloads and uploads, and streams change feeds,
/// failing any of them that goes `idleLimit` without a byte sent or received, measured on the
/// replicator's clock (so a test clock makes timeouts happen in virtual time).
///
/// One watchdog task per transport sleeps until the earliest deadline among the exchanges in flight
/// (last activity + `idleLimit`), times out those past it, and sleeps again; it ends when none is left.
/// Every exchange has the same limit, so one that starts later never has an earlier deadline and
/// never needs to wake the watchdog.
///
/// Every task is driven by this object as the session's delegate, dispatching by task identifier:
/// FoundationNetworking reports neither progress nor per-task delegates for tasks with completion
/// handlers, and progress is what tells a slow large transfer from a stalled one.
///
/// Cancellation is guarded as FoundationNetworking needs, as it traps ("Trying to access a behaviour for
/// a task that in not in the registry") when a cancel reaches a task that has left the session's
/// registry:
/// - a task that has completed (and so has left the table of exchanges) is never cancelled, and a task
///   is cancelled under the table's lock, so its completion cannot come between the check and the
///   cancel (``cancel(_:)``, which the watchdog's timeouts go through too);
/// - nor is a task cancelled while `resume()` runs: a cancel that completes the task before `resume()`
///   has queued its start makes that start trap the same way; once it returns, a cancel queues behind
///   the start. So a cancel asked for meanwhile is sent when `resume()` returns;
/// - a cancel is sent from another queue, so no continuation is resumed from inside a cancellation
///   handler.
final class HTTPTransport: NSObject, URLSessionDataDelegate, URLSessionDownloadDelegate, Sendable {
    /// Receives a streamed response (a continuous change feed) as it arrives.
    protocol StreamReceiver: Sendable {
        /// A piece of the body; `status` is the response's HTTP status.
        func received(_ data: Data, status: Int)
        /// The response ended: cleanly (`error` nil), broken, timed out or cancelled.
        func ended(status: Int, error: (any Error)?)
    }

    /// A request that went too long without a byte sent or received.
    struct TimedOut: LocalizedError, CustomStringConvertible {
        let limit: Duration
        var description: String { "timed out: nothing sent or received for \(limit)" }
        var errorDescription: String? { description }
    }

    private enum Delivery {
        case data(CheckedContinuation<(Data, URLResponse), any Error>)
        case file(CheckedContinuation<(URL, URLResponse), any Error>)
        case stream(any StreamReceiver)
    }

    private struct Exchange {
        let task: URLSessionTask
        let delivery: Delivery
        var lastActivity: Duration
        var body = Data()
        var file: URL?
        var fileError: (any Error)?
        var timedOut = false
        /// Whether `resume()` has returned, so that the task may be cancelled.
        var resumed = false
        /// A cancel asked for before, sent when it has.
        var cancelRequested = false
    }

    let idleLimit: Duration
    private let clock: ElapsedClock
    private let exchanges = Locked<[Int: Exchange]>([:])
    /// The watchdog task, while it runs.
    private let watchdog = Locked<Task<Void, Never>?>(nil)
    /// Set once, right after `init` (the session needs `self` as its delegate).
    private let session = Locked<URLSession?>(nil)

    /// The session settings DocSync's requests use: ephemeral, without cookies of the session's own
    /// (the session cookie is the replication's: `sessionCookie`, or the one `SessionLogin` keeps; accepting none also
    /// spares FoundationNetworking parsing every answer's header lines for cookies to store), and
    /// without a response cache (replication never reuses a response, and FoundationNetworking's cache
    /// lookup runs on a queue of its own, which lets a cancel race the task's completion and trap:
    /// "Trying to access a behaviour for a task that in not in the registry").
    static func sessionConfiguration() -> URLSessionConfiguration {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpShouldSetCookies = false
        configuration.httpCookieAcceptPolicy = .never
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        return configuration
    }

    /// A session with `configuration` whose requests fail after `idleLimit` without progress on `clock`.
    init(configuration: URLSessionConfiguration, idleLimit: Duration, clock: some Clock<Duration>) {
        self.idleLimit = idleLimit
        self.clock = ElapsedClock(clock)
        super.init()
        // The clock decides; the session's own (real-time) idle timer is only a far backstop.
        configuration.timeoutIntervalForRequest = 7 * 24 * 3600
        session.withLock { $0 = URLSession(configuration: configuration, delegate: self, delegateQueue: nil) }
    }

    /// Lets running tasks finish, then frees the session (which holds this delegate until then), and
    /// stops the watchdog.
    func close() {
        let session = session.withLock { session in
            defer { session = nil }
            return session
        }
        session?.finishTasksAndInvalidate()
        watchdog.withLock { $0 }?.cancel()
    }

    // MARK: Requests

    /// The response to `request` with its body in memory.
    func data(for request: URLRequest) async throws -> (Data, URLResponse) {
        try await perform({ $0.dataTask(with: request) }, Delivery.data)
    }

    /// The response to `request` sending the file at `body` as its body, read in pieces.
    func upload(for request: URLRequest, fromFile body: URL) async throws -> (Data, URLResponse) {
        try await perform({ $0.uploadTask(with: request, fromFile: body) }, Delivery.data)
    }

    /// The response to `request` with its body written to a new file of the caller's, which memory
    /// does not hold however large the body is. The caller removes the file.
    func download(for request: URLRequest) async throws -> (URL, URLResponse) {
        try await perform({ $0.downloadTask(with: request) }, Delivery.file)
    }

    /// Runs the task `make` creates until its delegate calls deliver the value; cancelling the caller
    /// cancels the task.
    private func perform<Value>(_ make: (URLSession) -> URLSessionTask,
                                _ delivery: (CheckedContinuation<Value, any Error>) -> Delivery) async throws -> Value {
        let task = try makeTask(make)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { start(task, delivery($0)) }
        } onCancel: {
            self.cancel(task.taskIdentifier)
        }
    }

    /// Starts streaming the response to `request` into `receiver`, which may wait `idleLimit` between
    /// two pieces; returns the handle that stops it.
    func stream(_ request: URLRequest, into receiver: some StreamReceiver) throws -> Int {
        let task = try makeTask { $0.dataTask(with: request) }
        start(task, .stream(receiver))
        return task.taskIdentifier
    }

    /// Stops the request `identifier` names, unless it has completed; one still being resumed is
    /// stopped once it is.
    ///
    /// The task is cancelled under the table's lock. FoundationNetworking traps when a cancel's failure
    /// report reaches the session after the task left its registry. The task leaves it in a block that
    /// its completion queues on the session's work queue right after calling
    /// `urlSession(_:task:didCompleteWithError:)`. `cancel()` queues its report on the same queue, but
    /// only as it leaves that queue, and a completion running meanwhile on the delegate queue can get
    /// its block in first (a fresh clone's `swift test` trapped so once, in `ContinuousFeedTests`).
    /// Under the lock, the two are ordered: the completion's delegate call waits for the lock, because
    /// it takes the exchange out of the table, so the registry removal is queued after the cancel's
    /// report; and a task whose completion took the lock first is no longer in the table, so it is never
    /// cancelled. `cancel()` waits only for the session's work queue, whose blocks never wait for this
    /// lock: they reach the delegate asynchronously, through the delegate queue.
    func cancel(_ identifier: Int) {
        DispatchQueue.global().async { [self] in
            exchanges.withLock { exchanges in
                guard let exchange = exchanges[identifier] else { return }
                guard exchange.resumed else {
                    exchanges[identifier]?.cancelRequested = true
                    return
                }
                exchange.task.cancel()
            }
        }
    }

    private func makeTask(_ make: (URLSession) -> URLSessionTask) throws -> URLSessionTask {
        guard let session = session.withLock({ $0 }) else { throw URLError(.cancelled) }
        return make(session)
    }

    /// Registers and resumes `task`, starting the watchdog unless it runs; a caller cancelled already
    /// cancels the task at once.
    private func start(_ task: URLSessionTask, _ delivery: Delivery) {
        let identifier = task.taskIdentifier
        exchanges.withLock { $0[identifier] = Exchange(task: task, delivery: delivery, lastActivity: clock.now()) }
        watchdog.withLock { watchdog in
            if watchdog == nil { watchdog = Task { [self] in await watch() } }
        }
        task.resume()
        let cancelAsked = exchanges.withLock { exchanges -> Bool in
            exchanges[identifier]?.resumed = true
            return exchanges[identifier]?.cancelRequested ?? false
        }
        if cancelAsked || Task.isCancelled { cancel(identifier) }
    }

    /// Sleeps on the clock until the earliest deadline in flight and times out the exchanges past it,
    /// until none is in flight.
    private func watch() async {
        while true {
            // Decided under the table's lock, so an exchange registered meanwhile finds the watchdog
            // running only while this loop will still see it.
            let deadline = exchanges.withLock { exchanges -> Duration? in
                guard let oldest = exchanges.values.lazy.filter({ !$0.timedOut }).map(\.lastActivity).min() else {
                    watchdog.withLock { $0 = nil }
                    return nil
                }
                return oldest + idleLimit
            }
            guard let deadline else { return }
            do {
                try await clock.sleep(until: deadline)
            } catch {
                return   // closed
            }
            let now = clock.now()
            let expired = exchanges.withLock { exchanges -> [Int] in
                var expired: [Int] = []
                for (identifier, exchange) in exchanges
                where !exchange.timedOut && exchange.resumed && exchange.lastActivity + idleLimit <= now {
                    exchanges[identifier]?.timedOut = true
                    expired.append(identifier)
                }
                return expired
            }
            // Through `cancel(_:)`: off the pool, and only if each is still in flight by then.
            expired.forEach(cancel)
        }
    }

    private func touch(_ task: URLSessionTask) {
        let now = clock.now()
        exchanges.withLock { $0[task.taskIdentifier]?.lastActivity = now }
    }

    // MARK: URLSessionDataDelegate, URLSessionDownloadDelegate

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
                    completionHandler: @escaping (URLSession.ResponseDisposition) -> Void) {
        touch(dataTask)
        completionHandler(.allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        let now = clock.now()
        let receiver = exchanges.withLock { exchanges -> (any StreamReceiver)? in
            exchanges[dataTask.taskIdentifier]?.lastActivity = now
            if case .stream(let receiver)? = exchanges[dataTask.taskIdentifier]?.delivery { return receiver }
            exchanges[dataTask.taskIdentifier]?.body.append(data)
            return nil
        }
        receiver?.received(data, status: (dataTask.response as? HTTPURLResponse)?.statusCode ?? 0)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didSendBodyData bytesSent: Int64, totalBytesSent: Int64,
                    totalBytesExpectedToSend: Int64) {
        touch(task)
    }

    func urlSession(_ session: URLSession, downloadTask: URLSessionDownloadTask, didWriteData bytesWritten: Int64,
                    totalBytesWritten: Int64, totalBytesExpectedToWrite: Int64) {
        touch(downloadTask)
    }

    func urlSession(_ session: URLSession, downloadTask: URLSessionDownloadTask, didFinishDownloadingTo location: URL) {
        // The location is removed when this returns: keep the file under a name of ours.
        let kept = FileManager.default.temporaryDirectory.appendingPathComponent("docsync-\(UUID().uuidString).download")
        let outcome = Result { try FileManager.default.moveItem(at: location, to: kept) }
        exchanges.withLock { exchanges in
            switch outcome {
            case .success: exchanges[downloadTask.taskIdentifier]?.file = kept
            case .failure(let error): exchanges[downloadTask.taskIdentifier]?.fileError = error
            }
        }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        let exchange = exchanges.withLock { $0.removeValue(forKey: task.taskIdentifier) }
        guard let exchange else { return }
        let failure: (any Error)? = if exchange.timedOut {
            TimedOut(limit: idleLimit)
        } else if let error {
            error
        } else if task.response == nil {
            URLError(.badServerResponse)
        } else {
            exchange.fileError
        }
        switch exchange.delivery {
        case .data(let continuation):
            if let failure { continuation.resume(throwing: failure) } else { continuation.resume(returning: (exchange.body, task.response!)) }
        case .file(let continuation):
            if let failure {
                if let file = exchange.file { try? FileManager.default.removeItem(at: file) }
                continuation.resume(throwing: failure)
            } else if let file = exchange.file {
                continuation.resume(returning: (file, task.response!))
            } else {
                continuation.resume(throwing: URLError(.cannotCreateFile))
            }
        case .stream(let receiver):
            receiver.ended(status: (task.response as? HTTPURLResponse)?.statusCode ?? 0, error: failure)
        }
    }
}
