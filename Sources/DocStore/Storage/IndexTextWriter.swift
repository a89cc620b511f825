import Foundation

/// Writes one window's fields to an index's full-text tables (``IndexSchema/createTextTables(_:tokenizer:)``),
/// keeping the FTS5 index in step with single-row statements only (see there why).
final class IndexTextWriter {
    private let connection: SQLiteConnection
    private let select, deleteText, insertText, indexText, unindexText: SQLiteStatement
    /// The next field's row: one past the largest when the window began.
    private var nextRow: Int64

    init(connection: SQLiteConnection, state: IndexState) throws {
        let text = state.textTable, fts = state.fullTextTable
        self.connection = connection
        select = try connection.prepare("SELECT row, text FROM \(text) WHERE doc_id = ?")
        deleteText = try connection.prepare("DELETE FROM \(text) WHERE row = ?")
        insertText = try connection.prepare("INSERT INTO \(text) (row, doc_id, doc_row, field, text, value_json) VALUES (?, ?, ?, ?, ?, ?)")
        indexText = try connection.prepare("INSERT INTO \(fts) (rowid, text) VALUES (?, ?)")
        unindexText = try connection.prepare("INSERT INTO \(fts) (\(fts), rowid, text) VALUES ('delete', ?, ?)")
        nextRow = (try connection.scalarInt("SELECT coalesce(max(row), 0) FROM \(text)") ?? 0) + 1
    }

    /// Removes the fields of the documents `documentIDs`, from the FTS5 index (which needs their text)
    /// and the text table, in the order of their rows. FTS5 keeps pending changes in rowid order and
    /// writes them out as a segment whenever a change comes for a lower rowid than the last: removing
    /// each document's old fields just before inserting its new ones (at the end) did that once per
    /// document, and updating an index was ten times slower than building it. The ids are exact
    /// strings: two that differ only in their Unicode normalization are two documents.
    func remove(documentIDs: Set<ExactString>) throws {
        var fields: [(row: Int64, text: String)] = []
        for documentID in documentIDs {
            select.reset()
            try select.bind(documentID.value, at: 1)
            while try select.step() { fields.append((select.int64(0), select.text(1))) }
        }
        select.reset()
        fields.sort { $0.row < $1.row }
        for field in fields {
            unindexText.reset()
            try unindexText.bind(field.row, at: 1)
            try unindexText.bind(field.text, at: 2)
            _ = try unindexText.step()
            deleteText.reset()
            try deleteText.bind(field.row, at: 1)
            _ = try deleteText.step()
        }
    }

    func insert(documentID: String, documentRow: Int64, field: Int, text: String, valueJSON: [UInt8]) throws {
        let row = nextRow
        nextRow += 1
        insertText.reset()
        try insertText.bind(row, at: 1)
        try insertText.bind(documentID, at: 2)
        try insertText.bind(documentRow, at: 3)
        try insertText.bind(field, at: 4)
        try insertText.bind(text, at: 5)
        try insertText.bind(blob: valueJSON, at: 6)
        _ = try insertText.step()
        indexText.reset()
        try indexText.bind(row, at: 1)
        try indexText.bind(text, at: 2)
        _ = try indexText.step()
    }
}
