import Dispatch
import Synchronization

/// Builds the rows of a changes page on two threads while the page is still being read.
///
/// The reading thread only steps SQLite and copies each row's raw columns (id, revision tree, body)
/// into the current chunk, one buffer per ``chunkSize`` rows. Full chunks go to a helper thread, which
/// starts with the first chunk and turns chunks into ``Change`` rows as they arrive: it decodes the
/// tree, makes the id and parses the document. When the rows are read, the reading thread builds the
/// chunks the helper has not taken yet, so both threads finish together however fast either one is,
/// instead of one waiting for the other with a fixed split. Pages of fewer than ``chunkSize`` rows
/// never start the helper.
///
/// The helper runs on Dispatch's global queue (see ``BackgroundWork``), so a reader on the Swift
/// concurrency pool may block waiting for it.
struct SharedChangeParse: ~Copyable {
    /// Rows per chunk: long enough that handing a chunk over (a lock, and a wake-up when the helper
    /// sleeps) is noise next to building it, short enough that the last chunk does not leave one
    /// thread waiting long. A row without its document takes a tenth of the time to build.
    static func chunkSize(includeDocuments: Bool) -> Int { includeDocuments ? 32 : 256 }

    /// One row: its numbers, and where its columns end in the chunk's buffer (id, tree, body, in
    /// that order, each starting where the one before ends).
    struct Row: Sendable {
        var sequence: Int64
        var created: Double
        var updated: Double
        var idEnd: Int
        var treeEnd: Int
        var bodyEnd: Int
    }

    /// The raw columns of up to ``chunkSize`` rows in one buffer, and the rows.
    struct Chunk: Sendable {
        var bytes: [UInt8] = []
        var rows: [Row] = []

        /// The rows as changes; rows whose tree is empty are left out, as the feed never shows them.
        func build(includeDocuments: Bool) throws -> [Change?] {
            try bytes.withUnsafeBytes { buffer in
                var changes: [Change?] = []
                changes.reserveCapacity(rows.count)
                var start = 0
                for row in rows {
                    defer { start = row.bodyEnd }
                    let tree = UnsafeRawBufferPointer(rebasing: buffer[row.idEnd..<row.treeEnd])
                    guard let (winner, others) = try RevisionTree.winnerAndOtherLeaves(decoding: tree) else { continue }
                    let id = String(decoding: buffer[start..<row.idEnd], as: UTF8.self)
                    var document: Document? = nil
                    if includeDocuments {
                        document = try Database.makeDocument(
                            id: id, revision: winner.revision, isDeleted: winner.isDeleted,
                            body: UnsafeRawBufferPointer(rebasing: buffer[row.treeEnd..<row.bodyEnd]),
                            sequence: row.sequence, created: row.created, updated: row.updated)
                    }
                    changes.append(Change(sequence: row.sequence, id: id, revision: winner.revision,
                                          otherLeaves: others, isDeleted: winner.isDeleted, document: document))
                }
                return changes
            }
        }
    }

    private let includeDocuments: Bool
    private let chunkSize: Int
    private var current = Chunk()
    private var queue: Queue?
    /// The rows built so far, in order. Finished chunks are moved here as the page is read, so a long
    /// page does not hold every row twice (in its chunk and here) at the end.
    private var changes: [Change] = []

    /// - Parameter expectedRows: the page's size, when known, to reserve room for its rows.
    init(includeDocuments: Bool, expectedRows: Int) {
        self.includeDocuments = includeDocuments
        chunkSize = SharedChangeParse.chunkSize(includeDocuments: includeDocuments)
        changes.reserveCapacity(expectedRows)
    }

    /// Adds a row, copying its columns.
    mutating func append(sequence: Int64, id: UnsafeRawBufferPointer, tree: UnsafeRawBufferPointer,
                         body: UnsafeRawBufferPointer, created: Double, updated: Double) {
        if current.rows.isEmpty {
            current.bytes.reserveCapacity(chunkSize * (includeDocuments ? 1024 : 64))
        }
        current.bytes.append(contentsOf: id)
        let idEnd = current.bytes.count
        current.bytes.append(contentsOf: tree)
        let treeEnd = current.bytes.count
        if includeDocuments { current.bytes.append(contentsOf: body) }
        current.rows.append(Row(sequence: sequence, created: created, updated: updated, idEnd: idEnd,
                                treeEnd: treeEnd, bodyEnd: current.bytes.count))
        if current.rows.count == chunkSize {
            if queue == nil { queue = Queue(includeDocuments: includeDocuments) }
            queue!.submit(current)
            current = Chunk()
            queue!.moveFinishedPrefix(into: &changes)
        }
    }

    /// The changes of every row added, in order. Waits for the helper thread, also when building a
    /// row fails, so no work outlives the call.
    consuming func finish() throws -> [Change] {
        if let queue {
            if !current.rows.isEmpty { queue.submit(current) }
            try queue.finish(discarding: false)
            queue.moveFinishedPrefix(into: &changes)
        } else {
            var built = try current.build(includeDocuments: includeDocuments)
            SharedChangeParse.move(&built, into: &changes)
        }
        return changes
    }

    /// Appends the rows of a chunk, moving them out with `take()` so that none is copied (retained
    /// and released).
    static func move(_ chunk: inout [Change?], into changes: inout [Change]) {
        for index in chunk.indices {
            if let change = chunk[index].take() { changes.append(change) }
        }
    }

    /// Stops the helper thread after an error on the reading side, discarding the work.
    consuming func abandon() {
        try? queue?.finish(discarding: true)
    }

    /// The chunks and their results, shared by the reading thread and the helper.
    private final class Queue: Sendable {
        private struct State {
            var chunks: [Chunk?] = []
            /// Each chunk's rows once built (`nil` before); emptied when moved out.
            var results: [[Change?]?] = []
            /// The chunks before this one have been moved out.
            var moved = 0
            var next = 0
            var finished = false
            var failure: (any Error)?
            /// The helper is asleep on `available` (or about to be) and must be woken for new work.
            var helperWaits = false

            /// Takes the next chunk nobody builds yet; `nil` when there is none or building has failed.
            mutating func take() -> (Int, Chunk)? {
                guard next < chunks.count, failure == nil else { return nil }
                let index = next
                next += 1
                defer { chunks[index] = nil }
                return (index, chunks[index]!)
            }

            /// Whether a sleeping helper must be woken, clearing the mark.
            mutating func wakeHelper() -> Bool {
                defer { helperWaits = false }
                return helperWaits
            }
        }

        private enum HelperStep: Sendable {
            case build(Int, Chunk)
            case sleep
            case stop
        }

        private let includeDocuments: Bool
        private let state = Mutex(State())
        /// Signalled when the helper sleeps and there is work for it (or the end); never otherwise, so
        /// a busy helper costs the reading thread no system call.
        private let available = DispatchSemaphore(value: 0)
        private let helperDone = DispatchSemaphore(value: 0)

        init(includeDocuments: Bool) {
            self.includeDocuments = includeDocuments
            DispatchQueue.global().async { [self] in
                helping: while true {
                    // Deciding to sleep and marking it happen under the lock, so a chunk submitted
                    // right after still wakes the helper.
                    let step: HelperStep = state.withLock { state in
                        if let (index, chunk) = state.take() { return .build(index, chunk) }
                        if state.finished || state.failure != nil { return .stop }
                        state.helperWaits = true
                        return .sleep
                    }
                    switch step {
                    case .build(let index, let chunk): build(chunk, into: index)
                    case .sleep: available.wait()
                    case .stop: break helping
                    }
                }
                helperDone.signal()
            }
        }

        func submit(_ chunk: Chunk) {
            let wake = state.withLock { state in
                state.chunks.append(chunk)
                state.results.append(nil)
                return state.wakeHelper()
            }
            if wake { available.signal() }
        }

        private func take() -> (Int, Chunk)? {
            state.withLock { $0.take() }
        }

        private func build(_ chunk: Chunk, into index: Int) {
            do {
                let changes = try chunk.build(includeDocuments: includeDocuments)
                state.withLock { $0.results[index] = changes }
            } catch {
                state.withLock { state in
                    if state.failure == nil { state.failure = error }
                }
            }
        }

        /// Moves the rows of the finished chunks that follow the ones already moved, in order.
        func moveFinishedPrefix(into changes: inout [Change]) {
            var ready: [[Change?]] = []
            state.withLock { state in
                while state.moved < state.results.count, let rows = state.results[state.moved] {
                    ready.append(rows)
                    state.results[state.moved] = []
                    state.moved += 1
                }
            }
            for index in ready.indices { SharedChangeParse.move(&ready[index], into: &changes) }
        }

        /// Ends the work: builds what the helper has not taken (unless `discarding`), waits for the
        /// helper, and throws the first error.
        func finish(discarding: Bool) throws {
            let wake = state.withLock { state in
                state.finished = true
                if discarding && state.failure == nil { state.failure = CancellationError() }
                return state.wakeHelper()
            }
            if wake { available.signal() }
            while let (index, chunk) = take() { build(chunk, into: index) }
            helperDone.wait()
            try state.withLock { state in
                if let failure = state.failure { throw failure }
            }
        }
    }
}
