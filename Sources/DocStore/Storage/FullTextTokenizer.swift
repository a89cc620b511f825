import CSQLite

/// ``TextTokenizer`` as an FTS5 tokenizer named `docstore`, registered on each connection that reads
/// or writes full-text tables (FTS5 tokenizers are per connection). FTS5's own `porter` tokenizer
/// wraps it for English stemming (`tokenize = 'porter docstore'`).
enum FullTextTokenizer {
    /// The tokenizer's name in `CREATE VIRTUAL TABLE … USING fts5(…, tokenize = '…')`.
    static let name = "docstore"

    /// The `tokenize` option of a full-text table, with or without English stemming.
    static func option(stemming: FullTextSearch.Stemming) -> String {
        switch stemming {
        case .none: name
        case .english: "porter \(name)"
        }
    }

    /// The pointer type FTS5 hands its API under (`SELECT fts5(?1)`), as a C string that outlives the
    /// statement: SQLite keeps the pointer given to `sqlite3_bind_pointer`, and a Swift string literal
    /// lives in the binary, NUL-terminated.
    private static let apiPointerType: StaticString = "fts5_api_ptr"

    /// Registers the tokenizer on `connection`.
    /// - Throws: ``DocStoreError/Code/fullTextUnavailable`` when this SQLite has no FTS5.
    static func register(on connection: SQLiteConnection) throws {
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(connection.handle, "SELECT fts5(?1)", -1, &statement, nil) == SQLITE_OK, let statement else {
            sqlite3_finalize(statement)
            throw DocStoreError(.fullTextUnavailable,
                                "This SQLite library (\(String(cString: sqlite3_libversion()))) was built without FTS5, which full-text search needs")
        }
        defer { sqlite3_finalize(statement) }
        var api: UnsafeMutablePointer<fts5_api>?
        let type = UnsafeRawPointer(apiPointerType.utf8Start).assumingMemoryBound(to: CChar.self)
        try withUnsafeMutablePointer(to: &api) { pointer in
            sqlite3_bind_pointer(statement, 1, pointer, type, nil)
            let rc = sqlite3_step(statement)
            guard rc == SQLITE_ROW || rc == SQLITE_DONE else { throw connection.error(rc, sql: "SELECT fts5(?1)") }
        }
        guard let api, let create = api.pointee.xCreateTokenizer else {
            throw DocStoreError(.fullTextUnavailable, "SQLite's FTS5 did not hand out its API")
        }
        var tokenizer = fts5_tokenizer(xCreate: createTokenizer, xDelete: deleteTokenizer, xTokenize: tokenize)
        let rc = create(api, name, nil, &tokenizer, nil)
        guard rc == SQLITE_OK else { throw connection.error(rc, sql: nil) }
    }

    /// The one instance FTS5 is handed: the tokenizer keeps no state, so any non-null pointer does.
    private nonisolated(unsafe) static let instance = UnsafeMutableRawPointer.allocate(byteCount: 1, alignment: 1)

    private static let createTokenizer: @convention(c) (UnsafeMutableRawPointer?, UnsafeMutablePointer<UnsafePointer<CChar>?>?, Int32,
                                                        UnsafeMutablePointer<OpaquePointer?>?) -> Int32 = { _, _, argumentCount, result in
        // `docstore` takes no arguments.
        guard argumentCount == 0 else { return SQLITE_ERROR }
        result?.pointee = OpaquePointer(FullTextTokenizer.instance)
        return SQLITE_OK
    }

    private static let deleteTokenizer: @convention(c) (OpaquePointer?) -> Void = { _ in }

    private static let tokenize: @convention(c) (OpaquePointer?, UnsafeMutableRawPointer?, Int32, UnsafePointer<CChar>?, Int32,
                                                 (@convention(c) (UnsafeMutableRawPointer?, Int32, UnsafePointer<CChar>?, Int32, Int32, Int32) -> Int32)?) -> Int32 = {
        _, context, _, text, length, emit in
        guard let emit else { return SQLITE_ERROR }
        guard let text, length > 0 else { return SQLITE_OK }
        var rc = SQLITE_OK
        text.withMemoryRebound(to: UInt8.self, capacity: Int(length)) { bytes in
            TextTokenizer.forEachToken(in: UnsafeBufferPointer(start: bytes, count: Int(length))) { token, start, end in
                token.withMemoryRebound(to: CChar.self) { token in
                    rc = emit(context, 0, token.baseAddress, Int32(token.count), Int32(start), Int32(end))
                }
                return rc == SQLITE_OK
            }
        }
        return rc
    }
}
