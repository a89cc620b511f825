/// Lets at most `limit` transfers run at once, the others waiting their turn in order.
///
/// An HTTP peer moves large attachments one at a time: running them side by side gains little on a
/// connection to one server, while each holds its buffers — and the allocator keeps what they freed —
/// so memory would grow with the number of lanes and the replicator's parallel batches.
actor TransferLimiter {
    private let limit: Int
    private var running = 0
    private var waiting: [CheckedContinuation<Void, Never>] = []

    init(limit: Int) {
        self.limit = max(1, limit)
    }

    /// Runs `body` once a place is free.
    func run<T: Sendable>(_ body: @Sendable () async throws -> T) async throws -> T {
        if running >= limit {
            await withCheckedContinuation { waiting.append($0) }
        } else {
            running += 1
        }
        defer {
            if waiting.isEmpty {
                running -= 1
            } else {
                // The place passes straight to the next in line.
                waiting.removeFirst().resume()
            }
        }
        return try await body()
    }
}
