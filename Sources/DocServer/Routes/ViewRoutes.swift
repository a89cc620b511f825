import CouchProtocol
import DocStore
import DocStoreJavaScript
import Foundation
import HTTPTypes
import Hummingbird

/// Views: a natively registered index, a JavaScript design document's view or a Mango index read as a
/// view, and full-text search through `full_text`.
extension DocServer {
    /// `GET|POST /{db}/_design/{a}/_view/{b}`: the natively registered index `a/b`, else view `b` of the
    /// JavaScript design document `_design/a`; with `full_text`, a full-text search of it or of the
    /// Mango text index `b` of `_design/a`.
    func view(_ db: Database, name: String, _ request: CouchRequest, principal: Principal) async throws -> Response {
        guard request.method == .get || request.method == .post else { throw CouchError.only("GET,POST,HEAD") }
        if let fullText = request.query["full_text"] {
            return try await fullTextView(db, name: name, query: fullText, request, principal: principal)
        }
        if request.method == .post, try request.jsonObjectBody()["queries"] != nil {
            throw CouchError.badRequest("The `queries` parameter is no longer supported at this endpoint")
        }
        return Response.json(serialized: try await serializedView(db, name: name, request, principal: principal))
    }

    /// A view's answer to a request, serialized.
    func serializedView(_ db: Database, name: String, _ request: CouchRequest, principal: Principal) async throws -> [UInt8] {
        let query = try viewQuery(request)
        if let partitioned = try await partitionedView(db, name: name, request, query, principal: principal) {
            var answer = partitioned
            if query.includeDocuments { try await refineIncludedDocuments(of: &answer, db, request) }
            return try answer.serialized(nonFiniteAsNull: true)
        }
        var answer = try await viewAnswer(db, name: name, query, principal: principal)
        if query.includeDocuments { try await refineIncludedDocuments(of: &answer, db, request) }
        if request.query["sorted"] == "false" {
            // CouchDB 3.3 answers an unsorted query (mostly) without the figures of a sorted one.
            answer.totalRows = nil
            answer.offset = nil
        }
        return try answer.serialized(nonFiniteAsNull: true)
    }

    /// A view request's options, from the query string (JSON-encoded keys) and a POST body's `keys`.
    func viewQuery(_ request: CouchRequest) throws -> IndexQuery {
        let keysInBody = request.method == .post && (try? request.jsonObjectBody()["keys"]) != nil
        let request = try request.withBodyParameters()
        try request.checkViewParametersInOrder()
        var query = IndexQuery()
        query.includeOffset = true
        query.reduceFailuresAsValues = true
        query.key = try request.json("key")
        query.keys = try request.json("keys")?.arrayValue
        query.startKey = try request.lastJSON("startkey", "start_key")
        query.endKey = try request.lastJSON("endkey", "end_key")
        query.startKeyDocID = request.lastParameter(["startkey_docid", "start_key_doc_id"]).flatMap { request.query[$0] }
        query.endKeyDocID = request.lastParameter(["endkey_docid", "end_key_doc_id"]).flatMap { request.query[$0] }
        query.inclusiveEnd = try request.viewBool("inclusive_end", default: true)
        query.descending = try request.viewBool("descending")
        query.limit = try request.int("limit")
        query.skip = try request.int("skip") ?? 0
        query.includeDocuments = try request.viewBool("include_docs")
        _ = try DocumentOptions(includedDocuments: { try request.viewBool($0) })
        if request.query["reduce"] != nil { query.reduce = try request.viewBool("reduce") }
        query.group = try request.viewBool("group")
        query.groupLevel = try request.int("group_level")
        if request.query["group"] != nil, !query.group, let level = query.groupLevel, level > 0 {
            throw CouchError(.badRequest, "query_parse_error", "Can't specify group=false and group_level>0 at the same time")
        }
        query.updateSeq = try request.viewBool("update_seq")
        query.stale = try staleness(request)
        if let keys = try request.json("keys") {
            guard let array = keys.arrayValue else {
                // CouchDB words it differently for a body's member and for the query string's parameter.
                if keysInBody { throw CouchError.badRequest("`keys` member must be an array.") }
                throw CouchError(.badRequest, "query_parse_error", "`keys` must be an array of strings.")
            }
            query.keys = array
        }
        try Self.refuseKeysWithKeyOrRange(request, keys: query.keys)
        return query
    }

    /// CouchDB 3.3 answers `keys` together with `key` or a key range (any spelling) with 400
    /// `query_parse_error`, in views and in `_all_docs`.
    static func refuseKeysWithKeyOrRange(_ request: CouchRequest, keys: [JSON]?) throws {
        // An empty `keys` goes with anything (and answers no rows).
        guard let keys, !keys.isEmpty, ["key", "startkey", "start_key", "endkey", "end_key"].contains(where: { request.query[$0] != nil }) else { return }
        throw CouchError(.badRequest, "query_parse_error", "`keys` is incompatible with `key`, `start_key` and `end_key`")
    }

    /// The answer of view `name` (`a/b`) to `query`, narrowed to what `principal` may read: rows of
    /// documents outside the user's channels are left out, and reduced answers (which would mix them
    /// in) refused.
    func viewAnswer(_ db: Database, name: String, _ query: IndexQuery, principal: Principal) async throws -> ViewResponse {
        var query = query
        var name = name
        let native = try await db.indexDefinition(named: name)
        let parts = name.split(separator: "/", maxSplits: 1).map(String.init)
        // A Mango json index read as a view, as CouchDB allows (keys: the arrays of field values, values
        // null, reduce `_count`); its design document's language is `query`.
        // The design document, read once (its errors are reported below, for JavaScript views).
        var design: Result<DesignDocument, any Error>? = nil
        if native == nil, parts.count == 2 {
            do { design = .success(try await db.designDocument(named: parts[0])) } catch { design = .failure(error) }
        }
        var mango: MangoIndex? = nil
        if case .success(let design)? = design, design.language == "query" {
            mango = try await db.mangoIndexes().first { $0.type == .json && $0.designDocument == "_design/\(parts[0])" && $0.name == parts[1] }
            guard let mango else { throw CouchError.notFound("missing_named_view") }
            name = mango.indexName
        }
        let javaScript = native == nil && mango == nil && parts.count == 2 ? self.javaScript : nil
        let reduces: Bool
        if mango != nil {
            reduces = true
        } else if native != nil {
            reduces = native?.reduce != nil
        } else if javaScript != nil, let design {
            do {
                reduces = try design.get().views[parts[1]]?.reduce != nil
            } catch let error as DocStoreError where error.code == .notFound || error.code == .invalidDesignDocument {
                throw CouchError.notFound(error.code == .notFound ? error.reason : "missing_named_view")
            }
        } else {
            throw CouchError.notFound("missing_named_view")
        }
        let filtering = !principal.readsEverything
        if filtering, query.reduce != false, reduces {
            // A reduced value would mix in documents the user cannot read.
            throw CouchError.forbidden("Reduced views are only available to users who can read every document; use reduce=false.")
        }
        let requestedDocs = query.includeDocuments
        if filtering { query.includeDocuments = true }
        var result: QueryResult
        do {
            if let javaScript {
                result = try await db.query(designDocument: parts[0], view: parts[1], query, engine: javaScript)
            } else {
                result = try await db.query(name, query)
            }
        } catch let error as DocStoreError where error.code == .notFound {
            throw CouchError.notFound(javaScript == nil ? "missing_named_view" : error.reason)
        }
        var answer = ViewResponse(result, includeDocuments: requestedDocs)
        answer.updateSequence = result.updateSequence.map(CouchSequence.json)
        if javaScript != nil {
            // A group whose JavaScript reduce overflowed is an error row, as CouchDB writes it.
            for index in answer.rows.indices where answer.rows[index].id == nil {
                guard let (error, reason) = JavaScriptViews.reduceError(in: answer.rows[index].value) else { continue }
                answer.rows[index] = ViewRow(id: nil, key: .null, value: .null, error: error)
                answer.rows[index].reason = reason
            }
        }
        if filtering {
            answer.rows = try await readableRows(result.rows, answer.rows, db, principal: principal, includeDocuments: requestedDocs)
        }
        return answer
    }

    /// The rows of a view answer a user limited to channels may see: those whose emitting document is
    /// in their channels. A row's included document is that document, or one its value links to
    /// (`{"_id"}` or `{"_rev"}`, as CouchDB's linked documents); the row is judged on the emitting
    /// document's current revision all the same, read for it here, and a linked document outside the
    /// user's channels is shown as `null`, as one that does not exist.
    private func readableRows(_ rows: [QueryRow], _ answers: [ViewRow], _ db: Database, principal: Principal,
                              includeDocuments: Bool) async throws -> [ViewRow] {
        var readable: [ViewRow] = []
        for (row, answer) in zip(rows, answers) {
            guard let id = row.documentID else { continue }
            var answer = answer
            if let document = row.document, document.id.isIdentical(to: id), !Self.linksADocument(row.value) {
                guard principal.canRead(document) else { continue }
            } else {
                guard let emitting = try await db.document(withID: id), principal.canRead(emitting) else { continue }
                if includeDocuments, let linked = row.document, !principal.canRead(linked) { answer.document = .null }
            }
            readable.append(answer)
        }
        return readable
    }

    /// Whether a view row's value names the document `include_docs` shows (`{"_id"}` or `{"_rev"}`).
    private static func linksADocument(_ value: JSON) -> Bool {
        guard case .object(let object) = value else { return false }
        return object["_id"]?.stringValue != nil || object["_rev"]?.stringValue != nil
    }

    /// `…/_view/{b}?full_text="query"&snippets=true&limit=L&skip=S&include_docs=true`: a full-text
    /// search (Docs/Search.md), answered as ``SearchResponse``. A user who cannot read every document
    /// sees only the matches in their channels, counted in `total_rows` too.
    private func fullTextView(_ db: Database, name: String, query text: String, _ request: CouchRequest,
                              principal: Principal) async throws -> Response {
        do {
            var indexName = name
            if try await db.indexDefinition(named: name) == nil {
                let textIndex = try await db.mangoIndexes().first { index in
                    index.type == .text && index.designDocument.dropFirst("_design/".count) + "/" + index.name == name
                }
                guard let textIndex else { throw CouchError.notFound("missing_named_view") }
                indexName = textIndex.indexName
            }
            var search = SearchQuery(try TextQuery(try SearchResponse.query(fromParameter: text)))
            // A bare `&snippets` (no value), as the full-text URLs of PredixSync apps write it, asks for them.
            search.snippets = request.query["snippets"] == "" ? true : try request.bool("snippets")
            search.limit = try request.int("limit")
            search.skip = try request.int("skip") ?? 0
            search.includeDocuments = try request.bool("include_docs")
            search.stale = try staleness(request)
            if let limit = search.limit, limit < 0 { throw CouchError(.badRequest, "query_parse_error", "Invalid value for limit: \(limit)") }
            if search.skip < 0 { throw CouchError(.badRequest, "query_parse_error", "Invalid value for skip: \(search.skip)") }
            guard !principal.readsEverything else {
                let result = try await db.search(index: indexName, search)
                return Response.json(SearchResponse.json(result, includeDocuments: search.includeDocuments))
            }
            // Every match is read with its document, to keep those the user may read.
            var all = search
            all.limit = nil
            all.skip = 0
            all.includeDocuments = true
            let visible = try await db.search(index: indexName, all).rows.filter { row in
                row.document.map { principal.canRead($0) } ?? false
            }
            let page = visible.dropFirst(search.skip).prefix(search.limit ?? Int.max)
            return Response.json(SearchResponse.json(rows: Array(page), totalRows: visible.count, includeDocuments: search.includeDocuments))
        } catch let error as DocStoreError where error.code == .notFound {
            throw CouchError.notFound("missing_named_view")
        } catch let error as DocStoreError {
            throw CouchError(error)
        }
    }

    /// A view's `stale` (or `update`): `ok`/`false` reads the index as it is, `update_after`/`lazy`
    /// updates it afterwards; by default it is updated first.
    private func staleness(_ request: CouchRequest) throws -> IndexQuery.Staleness {
        // As CouchDB 3.3: `stale` takes `ok` and `update_after`; `update` takes `true`, `false` and `lazy`.
        if let stale = request.query["stale"] {
            switch stale {
            case "ok": return .ok
            case "update_after": return .updateAfter
            default: throw CouchError(.badRequest, "query_parse_error", "Invalid value for `stale`.")
            }
        }
        switch request.query["update"] {
        case nil, "true"?: return .updateBefore
        case "false"?: return .ok
        case "lazy"?: return .updateAfter
        default: throw CouchError(.badRequest, "query_parse_error", "Invalid value for `update`.")
        }
    }
}
