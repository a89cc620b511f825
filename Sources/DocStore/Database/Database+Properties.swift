import Foundation

/// What a server keeps about a database beside its documents, and figures over a range of ids: the
/// ground of CouchDB's partitioned databases in DocServer.
extension Database {
    /// A property the database keeps in its file (DocServer: `partitioned`), or `nil`.
    package func property(_ key: String) async throws -> String? {
        try await read { connection in
            let statement = try connection.prepare("SELECT value FROM meta WHERE key = ?")
            try statement.bind("property:" + key, at: 1)
            return try statement.step() ? statement.text(0) : nil
        }
    }

    /// Keeps `value` as the property `key`.
    package func setProperty(_ key: String, _ value: String) async throws {
        try ensureOpen()
        try await waitingForTheLock(of: writer) { try await writer.setProperty(key, value) }
    }

    /// The live and deleted documents whose ids are at or after `lower` and before `upper` (byte order),
    /// and the bytes of their stored winning bodies (CouchDB's `sizes.external`, near enough).
    package func figures(ofIDsFrom lower: String, below upper: String) async throws -> (live: Int, deleted: Int, bodyBytes: Int) {
        try await read(consistent: true) { connection in
            let statement = try connection.prepare(
                "SELECT COALESCE(SUM(deleted = 0), 0), COALESCE(SUM(deleted), 0), COALESCE(SUM(length(body)), 0) FROM docs WHERE id >= ? AND id < ?")
            try statement.bind(lower, at: 1)
            try statement.bind(upper, at: 2)
            guard try statement.step() else { return (0, 0, 0) }
            return (Int(statement.int64(0)), Int(statement.int64(1)), Int(statement.int64(2)))
        }
    }
}
