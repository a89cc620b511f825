import Foundation

/// What a server keeps about a database beside its documents, and figures over a range of ids: the
/// ground of CouchDB's partitioned databases in DocServer.
extension Database {
    /// A property the database keeps in its file (DocServer: `partitioned`), or `nil`.
    package func property(_ key: String) async throws -> String? {
        try await readByKey { connection in try Schema.property(connection, key) }
    }

    /// Keeps `value` as the property `key`.
    package func setProperty(_ key: String, _ value: String) async throws {
        try ensureOpen()
        try await waitingForTheLock(of: writer, pointWrite: true) { try writer.setProperty(key, value) }
    }

    /// The live and deleted documents whose ids are at or after `lower` and before `upper` (byte order),
    /// and the bytes of their stored winning bodies (CouchDB's `sizes.external`, near enough).
    package func figures(ofIDsFrom lower: String, below upper: String) async throws -> (live: Int, deleted: Int, bodyBytes: Int) {
        try await readApart(consistent: true) { connection in
            try DocumentRecords(connection: connection).figures(ofIDsFrom: lower, below: upper)
        }
    }
}
