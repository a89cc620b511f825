import HTTPTypes

@_spi(Fuzzing)
extension DocServer {
    /// The parameters of a raw (percent-encoded) query string as DocServer's routes read them: `+` a
    /// space, the last of repeated names winning. For the query-string fuzz target (Docs/Reliability.md),
    /// which checks that what this reads encodes back to the same parameters.
    /// - Throws: ``CouchError`` 400 `bad_request` for percent-encoding that is not UTF-8.
    public static func queryParameters(_ rawQuery: String) throws -> [String: String] {
        try CouchRequest(method: .get, path: "/", rawQuery: rawQuery, headers: [:], body: []).query
    }
}
