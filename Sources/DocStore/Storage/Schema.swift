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
    static let currentVersion: Int64 = 1

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
        """
    ]

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
    static func migrate(_ connection: SQLiteConnection, uuid: () -> String) throws {
        let version = try connection.scalarInt("PRAGMA user_version") ?? 0
        guard version < currentVersion else { return }
        if version == 0 {
            // Must precede the first table to take effect; lets compaction return pages to the OS.
            try connection.execute("PRAGMA auto_vacuum = INCREMENTAL")
        }
        try connection.transaction(immediate: true) {
            for step in Int(version)..<Int(currentVersion) {
                try connection.execute(migrations[step])
            }
            if version == 0 {
                try connection.run("INSERT INTO meta (key, value) VALUES ('uuid', ?), ('created', ?)",
                                   [.text(uuid()), .double(Date.now.timeIntervalSince1970)])
            }
            try connection.execute("PRAGMA application_id = \(applicationID)")
            try connection.execute("PRAGMA user_version = \(currentVersion)")
        }
    }
}
