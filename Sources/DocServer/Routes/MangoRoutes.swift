import CouchProtocol
import DocStore
import Foundation
import HTTPTypes
import Hummingbird

extension DocServer {
    /// `POST /{db}/_find` and `POST /{db}/_explain`: Mango queries. A user finds only the documents of
    /// the channels they may read.
    func mangoQueryRoute(_ db: Database, explain: Bool, _ request: CouchRequest, principal: Principal) async throws -> Response {
        guard request.method == .post else { throw CouchError.methodNotAllowed }
        do {
            try request.requireJSONContentType()
            var query = try FindRequest.query(json: try request.jsonBody())
            if !principal.isAdmin {
                query.visible = { principal.canRead($0.channels) }
            }
            if explain {
                return Response.json(FindResponse.explain(try await db.explain(query), query: query, database: db.name))
            }
            return Response.json(FindResponse.json(try await db.find(query)))
        } catch let error as DocStoreError {
            throw CouchError(error)
        }
    }

    /// `GET|POST /{db}/_index` and `DELETE /{db}/_index/{ddoc}/{json|text}/{name}` (the design document
    /// as `_design/x` or `x`): Mango json and text indexes. Creating and deleting are for admins (they write design
    /// documents); any user may list.
    func mangoIndexRoute(_ db: Database, _ rest: [String], _ request: CouchRequest, principal: Principal) async throws -> Response {
        do {
            switch (request.method, rest.count) {
            case (.get, 1):
                let indexes = try await db.mangoIndexes()
                return Response.json(IndexListResponse.json(indexes, skip: try request.int("skip") ?? 0, limit: try request.int("limit")))
            case (.post, 1):
                guard principal.isAdmin else { throw CouchError.designDocumentsNeedAdmin }
                try request.requireJSONContentType()
                let body = try CreateIndexRequest(json: try request.jsonBody())
                return Response.json(CreateIndexRequest.answer(try await body.create(in: db)))
            case (.delete, 4), (.delete, 5):
                guard principal.isAdmin else { throw CouchError.designDocumentsNeedAdmin }
                // ["_index", ddoc…, "json"|"text", name]: the design document may come as `_design/x` or `x`.
                let designDocument = rest[1..<(rest.count - 2)].joined(separator: "/")
                guard let type = MangoIndex.Kind(rawValue: rest[rest.count - 2]) else { throw CouchError.notFound() }
                do {
                    try await db.deleteIndex(designDocument: designDocument, name: rest[rest.count - 1], type: type)
                } catch let error as DocStoreError where error.code == .notFound {
                    throw CouchError.notFound()
                }
                return Response.json(["ok": true])
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
