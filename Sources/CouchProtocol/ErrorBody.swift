import DocStore

/// CouchDB's error answer, `{"error": name, "reason": text}`, and the same pair inside a row of a
/// bulk answer.
package struct ErrorBody: Error, Sendable, Hashable {
    /// CouchDB's error name (`not_found`, `conflict`, `missing_stub`, …).
    package var error: String
    /// The human reason.
    package var reason: String

    package init(error: String, reason: String) {
        self.error = error
        self.reason = reason
    }

    /// CouchDB's name and reason for a DocStore error.
    package init(_ error: DocStoreError) {
        self.init(error: error.couchDBError, reason: error.reason)
    }

    /// The error of an answer's body. A body that is not CouchDB's shape (a proxy's HTML page, an
    /// empty body) keeps up to 200 of its bytes as the reason, under the name `unknown_error`.
    package init(body: some Collection<UInt8>) {
        let json = try? JSON(parsing: body)
        if let decoded = json.flatMap(ErrorBody.init(json:)) {
            self = decoded
        } else {
            self.init(error: "unknown_error", reason: String(decoding: body.prefix(200), as: UTF8.self))
        }
    }

    /// Decodes `{"error", "reason"?}`; `nil` when there is no `error` name.
    package init?(json: JSON) {
        guard let error = json[Keys.error]?.stringValue else { return nil }
        self.init(error: error, reason: json[Keys.reason]?.stringValue ?? "")
    }

    package var json: JSON { .object(members) }

    /// The two members, to be merged into a row that carries more (an id, a revision).
    package var members: JSONObject { [Keys.error: .string(error), Keys.reason: .string(reason)] }

    /// `error: reason`, as the replicator reports a refused document.
    package var summary: String { reason.isEmpty ? error : "\(error): \(reason)" }

    enum Keys {
        static let error = "error"
        static let reason = "reason"
    }
}

extension JSON {
    /// A string, or `null` for none (an id or revision CouchDB writes as `null` when unknown).
    init(_ text: String?) { self = text.map(JSON.string) ?? .null }
}
