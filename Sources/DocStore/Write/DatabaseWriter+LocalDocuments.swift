import Foundation

/// `_local` documents (checkpoints): not replicated, not in the changes feed, over the writer's
/// transaction primitive.
extension DatabaseWriter {
    /// Creates or updates a `_local` document; `revision` must be its current write counter (the N of
    /// `0-N`) when it exists. Returns the new counter.
    nonisolated func putLocal(id: String, body: JSONObject, revision: Int64?) throws -> Int64 {
        try plainTransaction { connection in
            let locals = LocalDocumentRecords(connection: connection)
            let current = try locals.currentRevision(id: id)
            if let current {
                guard revision == current else { throw DocStoreError.conflict() }
            }
            try DocumentValidation.validateBody(body)
            let next = (current ?? 0) + 1
            try locals.put(id: id, revision: next, body: body)
            return next
        }
    }

    /// Writes a `_local` document without a conflict check, as CouchDB 3 does: the new revision counts
    /// on from `counter` (the `N` of the `0-N` the writer gave; 0 without one). Returns it.
    nonisolated func putLocal(id: String, body: JSONObject, following counter: Int64) throws -> String {
        try DocumentValidation.validateBody(body)
        let next = counter &+ 1
        try plainTransaction { try LocalDocumentRecords(connection: $0).put(id: id, revision: next, body: body) }
        return "0-\(next)"
    }

    /// Removes a `_local` document whatever its revision; false if there was none.
    nonisolated func removeLocal(id: String) throws -> Bool {
        try plainTransaction { connection in
            let locals = LocalDocumentRecords(connection: connection)
            guard try locals.currentRevision(id: id) != nil else { return false }
            try locals.delete(id: id)
            return true
        }
    }

    /// Deletes a `_local` document at its current revision.
    nonisolated func deleteLocal(id: String, revision: Int64?) throws {
        try plainTransaction { connection in
            let locals = LocalDocumentRecords(connection: connection)
            guard let current = try locals.currentRevision(id: id) else { throw DocStoreError.notFound("missing") }
            guard revision == current else { throw DocStoreError.conflict() }
            try locals.delete(id: id)
        }
    }
}
