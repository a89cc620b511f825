import Foundation

/// The SQLite file that holds a database's index rows: `<name>.sqlite-idx` beside the database.
///
/// Index rows live in a file of their own so that index updates take that file's write lock, never the
/// document writer's: saving documents and updating indexes do not wait for each other.
enum IndexSchema {
    /// 'DocI' in ASCII.
    static let applicationID: Int64 = 0x446F_6349
    static let currentVersion: Int64 = 4

    static func fileURL(for databaseFile: URL) -> URL {
        URL(fileURLWithPath: databaseFile.path + "-idx")
    }

    static let migrations: [String] = [
        """
        CREATE TABLE indexes (
            id INTEGER PRIMARY KEY,
            name TEXT NOT NULL UNIQUE,
            version TEXT NOT NULL,
            collation TEXT NOT NULL,
            collator_version TEXT NOT NULL,
            last_seq INTEGER NOT NULL,
            row_count INTEGER NOT NULL
        ) STRICT;

        -- Documents whose map function failed, with the reason, per index.
        CREATE TABLE map_errors (
            index_id INTEGER NOT NULL,
            doc_id TEXT NOT NULL,
            message TEXT NOT NULL,
            PRIMARY KEY (index_id, doc_id)
        ) STRICT, WITHOUT ROWID;
        """,
        // Version 2: whole-index aggregates kept up to date by every index write, so that a `.sum` or
        // `.count` over the whole index reads one row. NULL means not known (computed at registration).
        """
        ALTER TABLE indexes ADD COLUMN int_sum INTEGER;
        ALTER TABLE indexes ADD COLUMN other_values INTEGER;
        """,
        // Version 3: rows carry the emitting document's row in the database file (`doc_row`), so a query
        // joins them to their documents by rowid. Every index is rebuilt, with the new column, when it
        // is next registered (a collator version that matches nothing forces that).
        """
        UPDATE indexes SET collator_version = 'rebuild: index schema 3';
        """,
        // Version 4: full-text search. `tokenizer` is the FTS5 tokenizer an index's full-text tables
        // use (a change rebuilds the index); `has_text` whether they exist, which they do from the
        // first full-text key the map function emits.
        """
        ALTER TABLE indexes ADD COLUMN tokenizer TEXT NOT NULL DEFAULT 'docstore';
        ALTER TABLE indexes ADD COLUMN has_text INTEGER NOT NULL DEFAULT 0;
        """,
    ]

    /// The map function's failures recorded for index `indexID`, by document id.
    static func mapErrors(_ connection: SQLiteConnection, indexID: Int64) throws -> [QueryResult.MapError] {
        let statement = try connection.prepare("SELECT doc_id, message FROM map_errors WHERE index_id = ? ORDER BY doc_id")
        try statement.bind(indexID, at: 1)
        var errors: [QueryResult.MapError] = []
        while try statement.step() { errors.append(QueryResult.MapError(documentID: statement.text(0), reason: statement.text(1))) }
        return errors
    }

    static func rowsTable(_ id: Int64) -> String { "rows_\(id)" }

    /// The rows table of index `id`: ordered by the collation-encoded key, then the encoded document
    /// id, then the emit counter (a document may emit the same key more than once). `doc_row` is the
    /// document's `docs.doc` in the database file, stable for the document's life (a purge deletes
    /// it); a migration that renumbers `docs.doc` must also raise ``currentVersion`` to rebuild indexes.
    static func createRowsTable(_ id: Int64) -> String {
        let table = rowsTable(id)
        return """
            CREATE TABLE \(table) (
                key BLOB NOT NULL,
                doc_key BLOB NOT NULL,
                emit INTEGER NOT NULL,
                doc_id TEXT NOT NULL,
                doc_row INTEGER NOT NULL,
                key_json BLOB NOT NULL,
                value_json BLOB NOT NULL,
                value_num REAL,
                value_is_int INTEGER NOT NULL,
                PRIMARY KEY (key, doc_key, emit)
            ) STRICT, WITHOUT ROWID;
            CREATE INDEX \(table)_by_doc ON \(table) (doc_id);
            """
    }

    static func textTable(_ id: Int64) -> String { "text_\(id)" }
    static func fullTextTable(_ id: Int64) -> String { "fts_\(id)" }

    /// The full-text tables of index `id`, made when its map function first emits a full-text key:
    /// `text_<id>` holds one row per emitted full-text key — a field of a document, with its text and
    /// the emitted value — and `fts_<id>` is an FTS5 index over that text (external content),
    /// tokenized by ``TextTokenizer`` (`tokenizer`: see ``FullTextTokenizer``). `field` numbers a
    /// document's fields from 0, so an index some document emits two fields in has a row with
    /// `field > 0` (found through a partial index): phrases and `NEAR` then need matching field by
    /// field and combining by document.
    ///
    /// The index writer keeps `fts_<id>` in step itself, one single-row statement at a time, rather
    /// than with triggers: a statement that may write several rows opens a statement savepoint, and
    /// FTS5 writes its pending terms out as a new segment at every savepoint — a segment per document,
    /// which made building an index three times slower.
    static func createTextTables(_ id: Int64, tokenizer: String) -> String {
        let text = textTable(id), fts = fullTextTable(id)
        return """
            CREATE TABLE \(text) (
                row INTEGER PRIMARY KEY,
                doc_id TEXT NOT NULL,
                doc_row INTEGER NOT NULL,
                field INTEGER NOT NULL,
                text TEXT NOT NULL,
                value_json BLOB NOT NULL
            ) STRICT;
            CREATE INDEX \(text)_by_doc ON \(text) (doc_id);
            CREATE INDEX \(text)_later_fields ON \(text) (field) WHERE field > 0;
            CREATE VIRTUAL TABLE \(fts) USING fts5 (text, content = '\(text)', content_rowid = 'row', tokenize = '\(tokenizer)');
            """
    }

    /// Drops the full-text tables of index `id`, if it has them.
    static func dropTextTables(_ id: Int64) -> String {
        "DROP TABLE IF EXISTS \(fullTextTable(id)); DROP TABLE IF EXISTS \(textTable(id));"
    }

    static func prepare(_ connection: SQLiteConnection) throws {
        let tables = try connection.scalarInt("SELECT count(*) FROM sqlite_master") ?? 0
        let fileApplicationID = try connection.scalarInt("PRAGMA application_id") ?? 0
        let version = try connection.scalarInt("PRAGMA user_version") ?? 0
        guard tables == 0 || fileApplicationID == IndexSchema.applicationID else {
            throw DocStoreError(.notADocStoreDatabase, "\(connection.path) is not a DocStore index file")
        }
        guard version <= currentVersion else {
            throw DocStoreError(.incompatibleVersion,
                                "\(connection.path) has index schema version \(version), newer than this DocStore supports")
        }
        guard version < currentVersion else { return }
        try connection.transaction(immediate: true) {
            for step in Int(version)..<Int(currentVersion) { try connection.execute(migrations[step]) }
            try connection.execute("PRAGMA application_id = \(IndexSchema.applicationID)")
            try connection.execute("PRAGMA user_version = \(currentVersion)")
        }
    }
}
