/// Builds the rows of a changes page on two threads while the page is still being read.
///
/// The reading thread only steps SQLite and copies each row's raw columns (id, revision tree, body)
/// into the current chunk, one buffer per ``chunkSize`` rows. Full chunks go to a ``HelpedMap``, whose
/// helper turns them into ``ChangesFeedRow`` rows as they arrive: it decodes the tree, makes the id and parses
/// the document. When the rows are read, the reading thread builds the chunks the helper has not
/// started, so both threads finish together however fast either one is. Pages of fewer than
/// ``chunkSize`` rows never start the helper, nor does a half of a long feed read beside its other
/// half: two threads are already busy, so each half builds every row as it reads it, straight from
/// SQLite's columns, without copying them into a chunk first.
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
        func build(includeDocuments: Bool) throws -> [ChangesFeedRow?] {
            try bytes.withUnsafeBytes { buffer in
                var changes: [ChangesFeedRow?] = []
                changes.reserveCapacity(rows.count)
                var start = 0
                for row in rows {
                    defer { start = row.bodyEnd }
                    let raw = DocumentRecords.RawChange(
                        sequence: row.sequence, id: UnsafeRawBufferPointer(rebasing: buffer[start..<row.idEnd]),
                        tree: UnsafeRawBufferPointer(rebasing: buffer[row.idEnd..<row.treeEnd]),
                        body: UnsafeRawBufferPointer(rebasing: buffer[row.treeEnd..<row.bodyEnd]),
                        created: row.created, updated: row.updated)
                    if let change = try SharedChangeParse.row(raw, includeDocuments: includeDocuments) { changes.append(change) }
                }
                return changes
            }
        }
    }

    /// The feed row of one raw change, or `nil` for a change whose tree is empty (the feed never shows
    /// those). Copies what it keeps: `change`'s buffers may be SQLite's, valid only until its next step.
    static func row(_ change: DocumentRecords.RawChange, includeDocuments: Bool) throws -> ChangesFeedRow? {
        guard let (winner, others) = try RevisionTree.winnerAndOtherLeaves(decoding: change.tree) else { return nil }
        let id = String(decoding: change.id, as: UTF8.self)
        var document: Document? = nil
        if includeDocuments {
            document = try Database.makeDocument(
                id: id, revision: winner.revision, isDeleted: winner.isDeleted, body: change.body,
                sequence: change.sequence, created: change.created, updated: change.updated)
        }
        return ChangesFeedRow(sequence: change.sequence, id: id, revision: winner.revision, otherLeaves: others,
                              isDeleted: winner.isDeleted, document: document)
    }

    private let includeDocuments: Bool
    /// Whether full chunks go to a helper; if not, each row is built here as it is read.
    private let helped: Bool
    private let chunkSize: Int
    private var current = Chunk()
    /// Builds the full chunks; started with the second chunk (a page of one chunk is built here).
    private var map: HelpedMap<Chunk, [ChangesFeedRow?]>?
    /// The chunks whose rows are in ``changes``.
    private var moved = 0
    /// The first error met while moving finished chunks, thrown by ``finish()``.
    private var failure: (any Error)?
    /// The rows built so far, in order. Finished chunks are moved here as the page is read, so a long
    /// page does not hold every row twice (in its chunk and here) at the end.
    private var changes: [ChangesFeedRow] = []

    /// - Parameters:
    ///   - expectedRows: the page's size, when known, to reserve room for its rows.
    ///   - helped: whether a helper thread builds rows beside the reading thread (not when another read
    ///     already runs beside this one, as the halves of a long feed do).
    init(includeDocuments: Bool, expectedRows: Int, helped: Bool = true) {
        self.includeDocuments = includeDocuments
        self.helped = helped
        chunkSize = SharedChangeParse.chunkSize(includeDocuments: includeDocuments)
        changes.reserveCapacity(expectedRows)
    }

    /// Adds a row, copying its columns.
    mutating func append(_ change: DocumentRecords.RawChange) {
        if !helped {
            // No helper: the row is built here at once, straight from SQLite's columns.
            guard failure == nil else { return }
            do {
                if let row = try SharedChangeParse.row(change, includeDocuments: includeDocuments) { changes.append(row) }
            } catch {
                failure = error
            }
            return
        }
        if current.rows.isEmpty {
            current.bytes.reserveCapacity(chunkSize * (includeDocuments ? 1024 : 64))
        }
        current.bytes.append(contentsOf: change.id)
        let idEnd = current.bytes.count
        current.bytes.append(contentsOf: change.tree)
        let treeEnd = current.bytes.count
        if includeDocuments { current.bytes.append(contentsOf: change.body) }
        current.rows.append(Row(sequence: change.sequence, created: change.created, updated: change.updated, idEnd: idEnd,
                                treeEnd: treeEnd, bodyEnd: current.bytes.count))
        if current.rows.count == chunkSize {
            if map == nil {
                let includeDocuments = self.includeDocuments
                map = HelpedMap(.changesPage) { try $0.build(includeDocuments: includeDocuments) }
            }
            map!.submit(current)
            current = Chunk()
            moveFinishedChunks()
        }
    }

    /// Builds the current chunk's rows on this thread and appends them.
    private mutating func buildCurrentChunkHere() throws {
        var built = try current.build(includeDocuments: includeDocuments)
        SharedChangeParse.move(&built, into: &changes)
    }

    /// Moves the rows of the chunks the helper has finished, in order, up to the first unfinished one.
    private mutating func moveFinishedChunks() {
        guard let map, failure == nil else { return }
        while moved < map.submitted, let result = map.finishedOutput(at: moved) {
            moved += 1
            switch result {
            case .success(var rows): SharedChangeParse.move(&rows, into: &changes)
            case .failure(let error):
                failure = error
                return
            }
        }
    }

    /// The changes of every row added, in order: the chunks the helper has not started are built on
    /// this thread. Stops the helper, also when building a row fails, so no work outlives the call.
    consuming func finish() throws -> [ChangesFeedRow] {
        guard let map else {
            if let failure { throw failure }
            try buildCurrentChunkHere()
            return changes
        }
        defer { map.stop() }
        if let failure { throw failure }
        if !current.rows.isEmpty { map.submit(current) }
        while moved < map.submitted {
            var rows = try map.output(at: moved)
            moved += 1
            SharedChangeParse.move(&rows, into: &changes)
        }
        return changes
    }

    /// Appends the rows of a chunk, moving them out with `take()` so that none is copied (retained
    /// and released).
    static func move(_ chunk: inout [ChangesFeedRow?], into changes: inout [ChangesFeedRow]) {
        for index in chunk.indices {
            if let change = chunk[index].take() { changes.append(change) }
        }
    }

    /// Stops the helper thread after an error on the reading side, discarding the work.
    consuming func abandon() {
        map?.stop()
    }
}
