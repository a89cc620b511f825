import CSQLite
import Foundation

/// The versioned SQLite schema of a DocStore database file.
///
/// `PRAGMA application_id` marks the file as DocStore's, `PRAGMA user_version` holds the schema
/// version. Opening runs each missing migration step in one transaction; a file with another
/// application id, or a newer version, is refused with a clear error.
enum Schema {
    /// 'DocS' in ASCII.
    static let applicationID: Int64 = 0x446F_6353
    static let currentVersion: Int64 = 3

    /// Migration steps; step `k` takes the schema from version `k` to `k + 1`.
    static let migrations: [String] = [
        // Version 1: documents, revisions, attachments, local documents, purge log.
        """
        CREATE TABLE meta (
            key TEXT PRIMARY KEY,
            value ANY
        ) STRICT, WITHOUT ROWID;

        -- One row per document: its latest sequence is the rowid, so the changes feed is a rowid
        -- range scan that lists each document once. The winning revision's body lives here.
        CREATE TABLE docs (
            seq INTEGER PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            rev TEXT NOT NULL,
            deleted INTEGER NOT NULL,
            body BLOB NOT NULL,
            tree BLOB NOT NULL,
            created REAL NOT NULL,
            updated REAL NOT NULL
        ) STRICT;

        -- Bodies of the other revisions that still have one: conflicting leaves, and ancestors
        -- until compaction.
        CREATE TABLE revs (
            id TEXT NOT NULL,
            rev TEXT NOT NULL,
            deleted INTEGER NOT NULL,
            body BLOB NOT NULL,
            PRIMARY KEY (id, rev)
        ) STRICT, WITHOUT ROWID;

        -- Attachment contents, stored once per digest.
        CREATE TABLE attachments (
            digest TEXT PRIMARY KEY,
            length INTEGER NOT NULL,
            data BLOB NOT NULL
        ) STRICT;

        -- Which stored revision bodies use which attachment contents.
        CREATE TABLE attachment_refs (
            id TEXT NOT NULL,
            rev TEXT NOT NULL,
            digest TEXT NOT NULL,
            PRIMARY KEY (id, rev, digest)
        ) STRICT, WITHOUT ROWID;
        CREATE INDEX attachment_refs_by_digest ON attachment_refs (digest);

        -- _local documents: not replicated, not in the changes feed, revision is a counter.
        CREATE TABLE local_docs (
            id TEXT PRIMARY KEY,
            rev INTEGER NOT NULL,
            body BLOB NOT NULL
        ) STRICT, WITHOUT ROWID;

        -- Purged documents, each at a sequence of its own, so that indexes can drop their rows.
        CREATE TABLE purges (
            seq INTEGER PRIMARY KEY,
            id TEXT NOT NULL
        ) STRICT;
        """,
        // Version 2: a document's row stays in place for its whole life, and the changes feed reads a
        // log. Version 1 moved the row to a new rowid (its sequence) on every update, which rewrote
        // the id index and two table pages; now an update rewrites the row's page and appends one
        // small log entry.
        """
        -- `doc` is the sequence of the document's first write; `seq` its latest sequence.
        CREATE TABLE docs_v2 (
            doc INTEGER PRIMARY KEY,
            seq INTEGER NOT NULL,
            id TEXT NOT NULL UNIQUE,
            rev TEXT NOT NULL,
            deleted INTEGER NOT NULL,
            body BLOB NOT NULL,
            tree BLOB NOT NULL,
            created REAL NOT NULL,
            updated REAL NOT NULL
        ) STRICT;
        INSERT INTO docs_v2 (doc, seq, id, rev, deleted, body, tree, created, updated)
            SELECT seq, seq, id, rev, deleted, body, tree, created, updated FROM docs ORDER BY seq;
        DROP TABLE docs;
        ALTER TABLE docs_v2 RENAME TO docs;

        -- One entry per write, in sequence order: the changes feed is a range scan of this log joined
        -- to the documents still at that sequence, so superseded entries drop out. `prev` is the
        -- sequence the write superseded (NULL for a document's first write); a document changed
        -- after `since` has exactly one entry with `seq > since` and `prev <= since` (or NULL), which
        -- makes CouchDB's `pending` a count over the log alone. Compaction deletes superseded entries
        -- and sets `prev` of the rest to NULL.
        CREATE TABLE changes (
            seq INTEGER PRIMARY KEY,
            doc INTEGER NOT NULL,
            prev INTEGER
        ) STRICT;
        INSERT INTO changes (seq, doc, prev) SELECT seq, doc, NULL FROM docs ORDER BY seq;
        """,
        // Version 3: attachment contents keep their encoding (CouchDB sends compressible types gzip-encoded,
        // and the digest is the MD5 of those stored bytes), and large contents are stored in chunks, so
        // that they are written and read in bounded pieces.
        """
        -- One row per stored content. `digest` is the MD5 of the stored bytes (`md5-<base64>`), unique
        -- with the encoding; `length` is the decoded length, `stored_length` the number of stored bytes.
        -- A content of at most one chunk is in `data`; a larger one has `data` NULL and its bytes in
        -- `attachment_chunks`. While a content is streamed in, its digest is 'staging:<uuid>' until the
        -- document write that uses it adopts it (opening the database deletes leftovers).
        CREATE TABLE attachments_v3 (
            content INTEGER PRIMARY KEY,
            digest TEXT NOT NULL,
            encoding TEXT NOT NULL,
            length INTEGER NOT NULL,
            stored_length INTEGER NOT NULL,
            data BLOB,
            UNIQUE (digest, encoding)
        ) STRICT;
        INSERT INTO attachments_v3 (digest, encoding, length, stored_length, data)
            SELECT digest, 'identity', length, length(data), data FROM attachments;
        DROP TABLE attachments;
        ALTER TABLE attachments_v3 RENAME TO attachments;

        -- The bytes of large contents, in order.
        CREATE TABLE attachment_chunks (
            content INTEGER NOT NULL,
            position INTEGER NOT NULL,
            data BLOB NOT NULL,
            PRIMARY KEY (content, position)
        ) STRICT;
        """,
    ]

    /// The UUID made when the file was created (`meta.uuid`).
    static func uuid(_ connection: SQLiteConnection) throws -> String {
        let statement = try connection.prepare("SELECT value FROM meta WHERE key = 'uuid'")
        return try statement.step() ? statement.text(0) : ""
    }

    /// The revision limit set with `Database.setRevisionsLimit(_:)` (`meta.revs_limit`), if any.
    static func storedRevisionsLimit(_ connection: SQLiteConnection) throws -> Int? {
        let statement = try connection.prepare("SELECT value FROM meta WHERE key = 'revs_limit'")
        return try statement.step() ? Int(statement.int64(0)) : nil
    }

    /// Keeps a database's revision limit (CouchDB `PUT /db/_revs_limit`).
    static func storeRevisionsLimit(_ connection: SQLiteConnection, _ limit: Int) throws {
        try connection.run("INSERT OR REPLACE INTO meta (key, value) VALUES ('revs_limit', ?)", [.integer(Int64(limit))])
    }

    /// The purge-record limit set with `Database.setPurgedInfosLimit(_:)` (`meta.purged_infos_limit`), if any.
    static func storedPurgedInfosLimit(_ connection: SQLiteConnection) throws -> Int? {
        let statement = try connection.prepare("SELECT value FROM meta WHERE key = 'purged_infos_limit'")
        return try statement.step() ? Int(statement.int64(0)) : nil
    }

    /// Keeps a database's purge-record limit (CouchDB `PUT /db/_purged_infos_limit`).
    static func storePurgedInfosLimit(_ connection: SQLiteConnection, _ limit: Int) throws {
        try connection.run("INSERT OR REPLACE INTO meta (key, value) VALUES ('purged_infos_limit', ?)", [.integer(Int64(limit))])
    }

    /// How many purge records compaction dropped, and the sequence of the newest of them
    /// (`meta.purges_trimmed`, `meta.purges_trimmed_through`); `(0, 0)` when none.
    static func trimmedPurges(_ connection: SQLiteConnection) throws -> (count: Int, through: Int64) {
        let statement = try connection.prepare("SELECT key, value FROM meta WHERE key IN ('purges_trimmed', 'purges_trimmed_through')")
        var trimmed = (count: 0, through: Int64(0))
        while try statement.step() {
            if statement.text(0) == "purges_trimmed" { trimmed.count = Int(statement.int64(1)) } else { trimmed.through = statement.int64(1) }
        }
        return trimmed
    }

    /// Keeps what ``trimmedPurges(_:)`` reads, after compaction dropped purge records.
    static func storeTrimmedPurges(_ connection: SQLiteConnection, count: Int, through: Int64) throws {
        try connection.run("INSERT OR REPLACE INTO meta (key, value) VALUES ('purges_trimmed', ?), ('purges_trimmed_through', ?)",
                           [.integer(Int64(count)), .integer(through)])
    }

    /// The security object set with `Database.setSecurityObject(_:)` (`meta.security`), if any.
    static func storedSecurity(_ connection: SQLiteConnection) throws -> String? {
        let statement = try connection.prepare("SELECT value FROM meta WHERE key = 'security'")
        return try statement.step() ? statement.text(0) : nil
    }

    /// Keeps a database's security object (CouchDB `PUT /db/_security`) as JSON text.
    static func storeSecurity(_ connection: SQLiteConnection, _ json: String) throws {
        try connection.run("INSERT OR REPLACE INTO meta (key, value) VALUES ('security', ?)", [.text(json)])
    }

    /// A property a server keeps in the database (`meta.property:<key>`), if set.
    static func property(_ connection: SQLiteConnection, _ key: String) throws -> String? {
        let statement = try connection.prepare("SELECT value FROM meta WHERE key = ?")
        try statement.bind("property:" + key, at: 1)
        return try statement.step() ? statement.text(0) : nil
    }

    /// Keeps a property (``property(_:_:)``).
    static func storeProperty(_ connection: SQLiteConnection, _ key: String, _ value: String) throws {
        try connection.run("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", [.text("property:" + key), .text(value)])
    }

    /// The schema version of the file (`PRAGMA user_version`; 0 for a new file).
    static func version(_ connection: SQLiteConnection) throws -> Int64 {
        try connection.scalarInt("PRAGMA user_version") ?? 0
    }

    /// Whether the file's write lock can be taken within the connection's busy timeout: takes it
    /// (`BEGIN IMMEDIATE`) and gives it back at once.
    static func writeLockIsFree(_ connection: SQLiteConnection) throws -> Bool {
        do {
            try connection.execute("BEGIN IMMEDIATE")
            try connection.execute("ROLLBACK")
            return true
        } catch let error as SQLiteError where error.isBusy {
            return false
        }
    }

    /// Puts the writer's connection in WAL mode with the given `synchronous` level.
    static func configureWriter(_ connection: SQLiteConnection, synchronous: String) throws {
        let mode = try connection.prepare("PRAGMA journal_mode = WAL")
        guard try mode.step(), mode.text(0).lowercased() == "wal" else {
            throw DocStoreError(.storage, "Could not switch \(connection.path) to WAL mode")
        }
        connection.resetActiveStatements()
        try connection.execute("PRAGMA synchronous = \(synchronous)")
    }

    /// Lets SQLite refresh its query planner's statistics, as it advises before closing.
    static func optimize(_ connection: SQLiteConnection) throws {
        try connection.execute("PRAGMA optimize")
    }

    /// Returns the file's free pages to the file system and empties the WAL (after a compaction).
    static func returnFreePages(_ connection: SQLiteConnection) throws {
        try connection.execute("PRAGMA incremental_vacuum")
        try connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    }

    /// Checks that the file is a DocStore database (or empty) of a version this code can open.
    ///
    /// - Throws: ``DocStoreError/Code/notADocStoreDatabase`` for a file that is not SQLite or belongs
    ///   to another application; ``DocStoreError/Code/incompatibleVersion`` for a newer DocStore file.
    static func checkIdentity(_ connection: SQLiteConnection) throws {
        let tableCount: Int64
        do {
            // The first read of the file: fails with SQLITE_NOTADB if it is not a database.
            tableCount = try connection.scalarInt("SELECT count(*) FROM sqlite_master") ?? 0
        } catch let error as SQLiteError {
            throw DocStoreError(.notADocStoreDatabase,
                                "\(connection.path) is not a DocStore database (not an SQLite file)", cause: error)
        }
        let applicationID = try connection.scalarInt("PRAGMA application_id") ?? 0
        let version = try connection.scalarInt("PRAGMA user_version") ?? 0
        if tableCount > 0 && applicationID != Schema.applicationID {
            throw DocStoreError(.notADocStoreDatabase,
                                "\(connection.path) is an SQLite database of another application, not a DocStore database")
        }
        if version > currentVersion {
            throw DocStoreError(.incompatibleVersion,
                                "\(connection.path) has schema version \(version), newer than this DocStore supports (\(currentVersion)); upgrade DocStore to open it")
        }
    }

    /// Creates the schema in an empty file, or runs the missing migration steps, in one transaction.
    /// - Parameter target: the version to reach; only tests ask for an older one.
    static func migrate(_ connection: SQLiteConnection, uuid: () -> String, to target: Int64 = currentVersion) throws {
        let version = try connection.scalarInt("PRAGMA user_version") ?? 0
        guard version < target else { return }
        if version == 0 {
            // Must precede the first table to take effect; lets compaction return pages to the OS.
            try connection.execute("PRAGMA auto_vacuum = INCREMENTAL")
        }
        try connection.transaction(immediate: true) {
            for step in Int(version)..<Int(target) {
                try connection.execute(migrations[step])
            }
            if version == 0 {
                try connection.run("INSERT INTO meta (key, value) VALUES ('uuid', ?), ('created', ?)",
                                   [.text(uuid()), .double(Date.now.timeIntervalSince1970)])
            }
            try connection.execute("PRAGMA application_id = \(applicationID)")
            try connection.execute("PRAGMA user_version = \(target)")
        }
    }
}
