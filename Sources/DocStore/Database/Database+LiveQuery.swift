/// A live query driven by a handler; stop it with ``remove()``.
public final class QueryObserver: Sendable {
    private let task: Task<Void, Never>

    init(task: Task<Void, Never>) { self.task = task }

    /// Stops the observer and waits until it has fully stopped; the handler is not called afterwards.
    public func remove() async {
        task.cancel()
        await task.value
    }
}

extension Database {
    /// A live query: yields the query's result now, then again after every committed change that alters
    /// it. Writes that leave the result unchanged yield nothing. The sequence ends when the database
    /// closes or the consuming task is cancelled; a slow consumer only sees the newest result.
    ///
    /// ```swift
    /// for try await result in db.observe(index: "by-status", query: openTickets) {
    ///     render(result.rows)
    /// }
    /// ```
    public func observe(index indexName: String, query: IndexQuery = IndexQuery()) -> AsyncThrowingStream<QueryResult, any Error> {
        let (stream, continuation) = AsyncThrowingStream<QueryResult, any Error>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let task = Task {
            do {
                try await runLiveQuery(indexName, query) { continuation.yield($0) }
                continuation.finish()
            } catch {
                continuation.finish(throwing: error)
            }
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }

    /// A live query that calls `handler` with each new result (or the error that ended it).
    public func addQueryObserver(index indexName: String, query: IndexQuery = IndexQuery(),
                                 handler: @escaping @Sendable (Result<QueryResult, DocStoreError>) -> Void) -> QueryObserver {
        QueryObserver(task: Task {
            do {
                try await runLiveQuery(indexName, query) { handler(.success($0)) }
            } catch {
                if !Task.isCancelled { handler(.failure(Database.storageError(error))) }
            }
        })
    }

    /// The loop behind live queries: subscribe to commits first (so none is missed), run the query,
    /// then re-run it after each committed batch and deliver it when the rows differ.
    private func runLiveQuery(_ indexName: String, _ query: IndexQuery,
                              deliver: @Sendable (QueryResult) -> Void) async throws {
        try await runLive({ try await self.query(indexName, query) }, changed: { $0.rows != $1.rows }, deliver: deliver)
    }

    /// Runs `run` now and after each committed batch, delivering its result when `changed` says it
    /// differs from the last delivered. Ends quietly when the database closes.
    func runLive<Result: Sendable>(_ run: () async throws -> Result, changed: (Result, Result) -> Bool,
                                   deliver: @Sendable (Result) -> Void) async throws {
        let commits = notifier.subscribe()
        do {
            var last = try await run()
            deliver(last)
            for await _ in commits {
                if Task.isCancelled { return }
                let next = try await run()
                if changed(last, next) {
                    last = next
                    if Task.isCancelled { return }
                    deliver(next)
                }
            }
        } catch let error as DocStoreError where error.code == .databaseClosed {
            return
        }
    }
}
