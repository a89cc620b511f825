import DocStore

/// `POST /db/_bulk_get`: `{"docs":[{"id","rev"?,"atts_since"?}]}` → `{"results":[{"id","docs":[{"ok":doc}|{"error":{…}}]}]}`.
package enum BulkGet {
    /// The revisions asked for.
    package struct Request: Sendable, Hashable {
        package var items: [Item]

        package struct Item: Sendable, Hashable {
            /// `nil` for an entry without a string `id` (answered with a ``refusal``).
            package var id: String?
            /// The revision as sent; `nil` for every leaf (CouchDB's `open_revs=all`).
            package var revision: String?
            /// Revisions the client has: attachments no newer than the newest of them on the
            /// document's history come as stubs, the others with their content.
            package var attachmentsSince: [RevisionID]
            /// Why CouchDB 3.3 answers this entry with an error row without reading anything: an
            /// entry that is no object, has no valid `id`, or a malformed `rev` or `atts_since`.
            package var refusal: Failure?

            package init(id: String?, revision: String? = nil, attachmentsSince: [RevisionID] = [], refusal: Failure? = nil) {
                self.id = id
                self.revision = revision
                self.attachmentsSince = attachmentsSince
                self.refusal = refusal
            }

            /// An entry of a request body, checked as CouchDB 3.3 checks it: the id (as a document id
            /// to write; `_local/` ids pass), then `rev`, then `atts_since`; the first fault becomes
            /// the entry's ``refusal``, whose `rev` is the faulty value (`null` for the id's faults).
            /// A revision is kept as CouchDB writes it back (`+2-a` as `2-a`); one CouchDB reads but no
            /// database holds (`0-a`) as text (it is missing); such an `atts_since` revision is left out.
            static func parse(_ entry: JSON) -> Item {
                func refused(_ id: String?, _ revision: JSON, _ error: String, _ reason: String) -> Item {
                    Item(id: id, refusal: Failure(id: id, revision: revision.stringValue, error: ErrorBody(error: error, reason: reason)))
                }
                guard case .object(let spec) = entry, !spec.isEmpty else {
                    return refused(nil, .null, "bad_request", "document must be a JSON object")
                }
                guard let idValue = spec[Keys.id] else { return refused(nil, .null, "bad_request", "document id missed") }
                guard let id = idValue.stringValue else { return refused(nil, .null, "illegal_docid", "Document id must be a string") }
                if let reason = Item.idFault(id) { return refused(id, .null, "illegal_docid", reason) }
                var item = Item(id: id)
                if let rev = spec[Keys.rev] {
                    guard let text = rev.stringValue else { return refused(id, rev, "bad_request", "Invalid rev format") }
                    if let read = RevisionID.readAsCouchDB(text) {
                        // The text itself unless CouchDB writes it otherwise (a sign, leading zeros).
                        let first = text.utf8.first
                        item.revision = first == UInt8(ascii: "0") || first == UInt8(ascii: "+") ? read.description : text
                    } else {
                        guard RevisionID.isReadableByCouchDB(text) else { return refused(id, rev, "bad_request", "Invalid rev format") }
                        item.revision = text
                    }
                }
                switch spec[Keys.attsSince] {
                case nil, .array([])?:
                    break
                case .array(let list)?:
                    for value in list {
                        guard let text = value.stringValue, RevisionID.isReadableByCouchDB(text) else {
                            return refused(id, value, "bad_request", "Invalid rev format")
                        }
                        if let since = RevisionID.readAsCouchDB(text) { item.attachmentsSince.append(since) }
                    }
                case let other?:
                    return refused(id, other, "bad_request", "att_since value must be array of revs.")
                }
                return item
            }

            /// CouchDB's reason for refusing `id` as a document id, or `nil`.
            static func idFault(_ id: String) -> String? {
                switch id {
                case "": return "Document id must not be empty"
                case "_design/", "_local/": return "Illegal document id `\(id)`"
                default:
                    guard id.utf8.first == UInt8(ascii: "_"), !id.hasPrefix("_design/"), !id.hasPrefix("_local/") else { return nil }
                    return "Only reserved document ids may start with underscore."
                }
            }
        }

        package init(_ items: [Item]) { self.items = items }

        package init(json: JSON) throws {
            guard case .array(let entries)? = json[Keys.docs] else { throw DocStoreError(.badRequest, "Missing JSON list of 'docs'.") }
            items = entries.map(Item.parse)
        }

        package var json: JSON {
            [Keys.docs: .array(items.map { item in
                var object: JSONObject = [Keys.id: JSON(item.id)]
                if let revision = item.revision { object[Keys.rev] = .string(revision) }
                if !item.attachmentsSince.isEmpty { object[Keys.attsSince] = JSON(item.attachmentsSince.map(\.description)) }
                return .object(object)
            })]
        }
    }

    /// A revision that could not be read, as CouchDB reports it: `{"id","rev","error","reason"}`.
    package struct Failure: Sendable, Hashable {
        package var id: String?
        package var revision: String?
        package var error: ErrorBody

        package init(id: String?, revision: String?, error: ErrorBody) {
            self.id = id
            self.revision = revision
            self.error = error
        }

        package init(json: JSON) throws {
            guard let error = ErrorBody(json: json) else { throw DocStoreError(.badRequest, "A _bulk_get error needs \"error\"") }
            self.init(id: json[Keys.id]?.stringValue, revision: json[Keys.rev]?.stringValue, error: error)
        }

        /// In CouchDB 3.3's member order: `rev`, `reason`, `id`, `error`.
        package var json: JSON {
            [Keys.rev: JSON(revision), ErrorBody.Keys.reason: .string(error.reason), Keys.id: JSON(id),
             ErrorBody.Keys.error: .string(error.error)]
        }
    }

    /// One revision's outcome.
    package enum Entry: Sendable, Hashable {
        case ok(JSON)
        case failure(Failure)

        package init(json: JSON) throws {
            if let document = json[Keys.ok] {
                self = .ok(document)
            } else if let error = json[Keys.error] {
                self = .failure(try Failure(json: error))
            } else {
                throw DocStoreError(.badRequest, "A _bulk_get entry needs \"ok\" or \"error\"")
            }
        }

        package var json: JSON {
            switch self {
            case .ok(let document): return [Keys.ok: document]
            case .failure(let failure): return [Keys.error: failure.json]
            }
        }
    }

    /// The answer, one result per requested item in the request's order.
    package struct Response: Sendable, Hashable {
        package var results: [Result]

        package struct Result: Sendable, Hashable {
            package var id: String?
            package var entries: [Entry]

            package init(id: String?, entries: [Entry]) {
                self.id = id
                self.entries = entries
            }
        }

        package init(_ results: [Result]) { self.results = results }

        package init(json: JSON) throws {
            guard let results = json[Keys.results]?.arrayValue else {
                throw DocStoreError(.badRequest, "_bulk_get answered without results: \(json.description.prefix(200))")
            }
            self.results = try results.map { result in
                Result(id: result[Keys.id]?.stringValue, entries: try (result[Keys.docs]?.arrayValue ?? []).map(Entry.init(json:)))
            }
        }

        package var json: JSON {
            [Keys.results: .array(results.map { [Keys.id: JSON($0.id), Keys.docs: .array($0.entries.map(\.json))] })]
        }

        /// The answer as ``json`` serializes, without building its envelope (``Writer``); with
        /// `nonFiniteAsNull`, a NaN or infinite number is written as `null` instead of throwing.
        package func serialized(nonFiniteAsNull: Bool = false) throws -> [UInt8] {
            var writer = Writer(nonFiniteAsNull: nonFiniteAsNull, capacity: 64 + results.count * 256)
            for result in results {
                writer.beginResult(id: result.id)
                for entry in result.entries {
                    switch entry {
                    case .ok(let document): try writer.appendDocument { try $0.write(document) }
                    case .failure(let failure): try writer.appendFailure(failure)
                    }
                }
                writer.endResult()
            }
            return writer.finish()
        }
    }

    /// Writes an answer as it is made, result by result, each document written by the caller (its
    /// stored bytes spliced, ``DocStore/JSONWriter/writeDocument(_:revisions:)``), instead of building
    /// a ``Response``.
    package struct Writer {
        private var writer: JSONWriter
        private var results = 0
        private var entries = 0

        package init(nonFiniteAsNull: Bool = false, capacity: Int = 256) {
            writer = JSONWriter(nonFiniteAsNull: nonFiniteAsNull, capacity: capacity)
            writer.append("{\"results\":[")
        }

        /// Opens the result of one requested item.
        package mutating func beginResult(id: String?) {
            writer.append(results == 0 ? "{\"id\":" : ",{\"id\":")
            if let id { writer.writeString(id) } else { writer.append("null") }
            writer.append(",\"docs\":[")
            results += 1
            entries = 0
        }

        /// Adds `{"ok": document}` to the open result, the document written by `write`.
        package mutating func appendDocument(_ write: (inout JSONWriter) throws -> Void) throws {
            writer.append(entries == 0 ? "{\"ok\":" : ",{\"ok\":")
            entries += 1
            try write(&writer)
            writer.append("}")
        }

        /// Adds `{"error": …}` to the open result.
        package mutating func appendFailure(_ failure: Failure) throws {
            writer.append(entries == 0 ? "{\"error\":" : ",{\"error\":")
            entries += 1
            try writer.write(failure.json)
            writer.append("}")
        }

        /// Closes the open result.
        package mutating func endResult() {
            writer.append("]}")
        }

        /// The answer's bytes.
        package consuming func finish() -> [UInt8] {
            writer.append("]}")
            return writer.bytes
        }
    }

    enum Keys {
        static let docs = "docs"
        static let id = "id"
        static let rev = "rev"
        static let attsSince = "atts_since"
        static let results = "results"
        static let ok = "ok"
        static let error = "error"
    }
}

/// An entry of a `GET /db/id?open_revs=…` answer in JSON: `{"ok":doc}` or `{"missing":"rev"}`.
package enum OpenRevsEntry: Sendable, Hashable {
    case ok(JSON)
    case missing(String)

    package init(json: JSON) throws {
        switch (json[Keys.ok], json[Keys.missing]?.stringValue) {
        case (let document?, _): self = .ok(document)
        case (nil, let revision?): self = .missing(revision)
        case (nil, nil): throw DocStoreError(.badRequest, "An open_revs entry needs \"ok\" or \"missing\"")
        }
    }

    package var json: JSON {
        switch self {
        case .ok(let document): return [Keys.ok: document]
        case .missing(let revision): return [Keys.missing: .string(revision)]
        }
    }

    /// Decodes a whole answer.
    package static func decode(_ json: JSON) throws -> [OpenRevsEntry] {
        guard let entries = json.arrayValue else { throw DocStoreError(.badRequest, "open_revs answered \(json.description.prefix(200))") }
        return try entries.map(OpenRevsEntry.init(json:))
    }

    enum Keys {
        static let ok = "ok"
        static let missing = "missing"
    }
}
