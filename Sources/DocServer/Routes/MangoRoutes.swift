import CouchProtocol
import DocStore
import Foundation
import HTTPTypes
import Hummingbird

extension DocServer {
    /// `POST /{db}/_find` and `POST /{db}/_explain`: Mango queries. A user finds only the documents of
    /// the channels they may read.
    func mangoQueryRoute(_ db: Database, explain: Bool, _ request: CouchRequest, principal: Principal,
                         partition pathPartition: String? = nil) async throws -> Response {
        guard request.method == .post else { throw CouchError.methodNotAllowed }
        do {
            try request.requireJSONContentType()
            let body = try request.jsonBody()
            var query = try FindRequest.query(json: body)
            if !principal.isAdmin {
                query.visible = { principal.canRead($0) }
            }
            var partition = pathPartition
            if partition == nil, let given = body["partition"]?.stringValue, !given.isEmpty { partition = given }
            if partition != nil, !Partition.current { throw CouchError.badRequest("partition specified on non-partitioned db") }
            if Partition.current {
                // A partition's query reads its documents and its partitioned indexes; a global one the global indexes.
                let global = try await globalIndexDesigns(db)
                let wantsPartitioned = partition != nil
                query.usableIndexes = { global.contains($0.designDocument) != wantsPartitioned }
                if let partition {
                    try Partition.validate(partition: partition)
                    let prefix = partition + ":", visible = query.visible
                    query.visible = { $0.id.hasPrefix(prefix) && visible?($0) != false }
                }
            }
            if explain {
                var answer = FindResponse.explain(try await db.explain(query), query: query, database: db.name)
                answer["opts"]?["partition"] = .string(partition ?? "")
                answer["mrargs"]?["partition"] = partition.map(JSON.string) ?? .null
                return Response.json(answer)
            }
            return Response.json(FindResponse.json(try await db.find(query)))
        } catch let error as DocStoreError where error.code == .noUsableIndex && Partition.current && error.reason.hasPrefix("No index exists for this sort") {
            let kind = request.query["partition"] != nil || pathPartition != nil ? "partitioned" : "global"
            throw CouchError(.badRequest, "no_usable_index", "No \(kind) index exists for this sort, try indexing by the sort fields.")
        } catch let error as DocStoreError {
            throw CouchError(error)
        }
    }

    /// The query design documents of a partitioned database that say `"options": {"partitioned": false}`.
    private func globalIndexDesigns(_ db: Database) async throws -> Set<String> {
        var query = AllDocumentsQuery()
        query.startKey = "_design/"
        query.endKey = "_design0"
        query.includeDocuments = true
        let designs = try await db.allDocuments(query).rows.compactMap(\.document)
        return Set(designs.filter { $0["options"]?["partitioned"] == false }.map(\.id))
    }

    /// `POST /{db}/_index/_bulk_delete` (admins): `{"docids": [ddoc, …], "w"?}` → `{"success": [{"id", "ok"}],
    /// "fail": [{"id", "error": "not_found"}]}`, each design document (`_design/x` or `x`) losing its
    /// Mango indexes, as CouchDB 3.3 answers (it keeps each list newest first; it fails on a design
    /// document with several indexes, which this deletes).
    private func bulkDeleteIndexes(_ db: Database, _ request: CouchRequest, principal: Principal) async throws -> Response {
        guard principal.isDatabaseAdmin else { throw CouchError.designDocumentsNeedAdmin }
        try request.requireJSONContentType()
        let body = try request.jsonObjectBody()
        guard let given = body["docids"] else { throw CouchError(.badRequest, "missing_required_key", "Missing required key: docids") }
        guard let list = given.arrayValue, list.allSatisfy({ $0.stringValue != nil }) else {
            throw CouchError(.badRequest, "invalid_bulk_docs", "Bulk Delete requires an array of non-null docids.")
        }
        let ids = list.compactMap(\.stringValue)
        if let w = body["w"], (w.intValue ?? 0) < 1 {
            throw CouchError(.badRequest, "invalid_pos_integer", "\(w) is not an integer greater than zero")
        }
        let indexes = try await db.mangoIndexes()
        var success: [JSON] = [], failure: [JSON] = []
        for id in ids {
            let design = id.hasPrefix("_design/") ? id : "_design/" + id
            let own = indexes.filter { $0.designDocument == design }
            if own.isEmpty {
                failure.insert(["id": .string(design), "error": "not_found"], at: 0)
                continue
            }
            for index in own { try await db.deleteIndex(designDocument: design, name: index.name, type: index.type) }
            success.insert(["id": .string(design), "ok": true], at: 0)
        }
        return Response.json(["success": .array(success), "fail": .array(failure)])
    }

    /// `GET|POST /{db}/_index` and `DELETE /{db}/_index/{ddoc}/{json|text}/{name}` (the design document
    /// as `_design/x` or `x`): Mango json and text indexes. Creating and deleting are for admins (they write design
    /// documents); any user may list.
    func mangoIndexRoute(_ db: Database, _ rest: [String], _ request: CouchRequest, principal: Principal) async throws -> Response {
        do {
            switch (request.method, rest.count) {
            case (.get, 1):
                let indexes = try await db.mangoIndexes()
                var listing = IndexListResponse.json(indexes, skip: try request.int("skip") ?? 0, limit: try request.int("limit"))
                if Partition.current, case .array(var entries)? = listing["indexes"] {
                    // In a partitioned database, indexes are partitioned unless their design document says otherwise.
                    let global = try await globalIndexDesigns(db)
                    for index in entries.indices where entries[index]["partitioned"] != nil {
                        entries[index]["partitioned"] = .bool(!global.contains(entries[index]["ddoc"]?.stringValue ?? ""))
                    }
                    listing["indexes"] = .array(entries)
                }
                return Response.json(listing)
            case (.post, 2) where rest[1] == "_bulk_delete":
                return try await bulkDeleteIndexes(db, request, principal: principal)
            case (_, 2) where rest[1] == "_bulk_delete":
                throw CouchError.only("POST")
            case (.post, 1):
                guard principal.isDatabaseAdmin else { throw CouchError.designDocumentsNeedAdmin }
                try request.requireJSONContentType()
                let body = try CreateIndexRequest(json: try request.jsonBody())
                let creation = try await body.create(in: db)
                if let partitioned = body.partitioned, creation.created, var design = try await db.document(withID: creation.designDocument) {
                    // As CouchDB, an index that says whether it is partitioned says it in its design document.
                    var options = design["options"]?.objectValue ?? [:]
                    options["partitioned"] = .bool(partitioned)
                    design["options"] = .object(options)
                    _ = try await db.put(design)
                }
                return Response.json(CreateIndexRequest.answer(creation))
            case (.delete, 4), (.delete, 5):
                guard principal.isDatabaseAdmin else { throw CouchError.designDocumentsNeedAdmin }
                // ["_index", ddoc…, "json"|"text", name]: the design document may come as `_design/x` or `x`.
                let designDocument = rest[1..<(rest.count - 2)].joined(separator: "/")
                guard let type = MangoIndex.Kind(rawValue: rest[rest.count - 2]) else { throw CouchError.notFound() }
                do {
                    try await db.deleteIndex(designDocument: designDocument, name: rest[rest.count - 1], type: type)
                } catch let error as DocStoreError where error.code == .notFound {
                    throw CouchError.notFound()
                }
                return Response.json(["ok": true])
            case (_, 1):
                throw CouchError.only("GET,POST")
            case (.get, _), (.post, _), (.delete, _):
                throw CouchError.notFound()
            default:
                throw CouchError.methodNotAllowed
            }
        } catch let error as DocStoreError {
            throw CouchError(error)
        }
    }
}
