/// The SQL of `local_docs`: `_local` documents (replication checkpoints and the like), never replicated,
/// with no history — a counter `rev` (shown as `0-N`) and a JSON body.
struct LocalDocumentRecords {
    let connection: SQLiteConnection

    /// One stored `_local` document.
    struct Record {
        /// The counter `N` of revision `0-N`.
        let revision: Int64
        let body: JSONObject
    }

    func fetch(id: String) throws -> Record? {
        let statement = try connection.prepare("SELECT rev AS revision, body FROM local_docs WHERE id = ?")
        try statement.bind(id, at: 1)
        guard try statement.step() else { return nil }
        let revision = statement.int64(Columns.revision)
        guard case .object(let body) = try statement.withBlob(Columns.body, { try JSON(parsing: $0.bindMemory(to: UInt8.self)) }) else {
            throw DocStoreError(.storage, "Corrupt local document \(id)")
        }
        return Record(revision: revision, body: body)
    }

    /// Every `_local` document, by id (the bare id, its revision counter, its body), in id order.
    func all() throws -> [(id: String, record: Record)] {
        let statement = try connection.prepare("SELECT rev AS revision, body, id FROM local_docs ORDER BY id")
        var result: [(id: String, record: Record)] = []
        while try statement.step() {
            let id = statement.text(Columns.id)
            guard case .object(let body) = try statement.withBlob(Columns.body, { try JSON(parsing: $0.bindMemory(to: UInt8.self)) }) else {
                throw DocStoreError(.storage, "Corrupt local document \(id)")
            }
            result.append((id, Record(revision: statement.int64(Columns.revision), body: body)))
        }
        return result
    }

    /// The counter of the current revision, or `nil` when there is no such document.
    func currentRevision(id: String) throws -> Int64? {
        try connection.scalarInt("SELECT rev FROM local_docs WHERE id = ?", [.text(id)])
    }

    func put(id: String, revision: Int64, body: JSONObject) throws {
        try connection.run("INSERT OR REPLACE INTO local_docs (id, rev, body) VALUES (?, ?, ?)",
                           [.text(id), .integer(revision), .blob(try JSON.object(body).serialized())])
    }

    func delete(id: String) throws {
        try connection.run("DELETE FROM local_docs WHERE id = ?", [.text(id)])
    }

    private enum Columns {
        static let revision: Int32 = 0
        static let body: Int32 = 1
        static let id: Int32 = 2
    }
}
