import CouchProtocol
import DocStore
import Foundation
import HTTPTypes
import Hummingbird

extension DocServer {
    /// `GET|POST /{db}/_index` and `DELETE /{db}/_index/{ddoc}/json/{name}` (the design document as
    /// `_design/x` or `x`): Mango json indexes. Creating and deleting are for admins (they write design
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
                let creation = try await db.createIndex(fields: body.fields, name: body.name, designDocument: body.designDocument,
                                                        partialFilter: body.partialFilter)
                return Response.json(CreateIndexRequest.answer(creation))
            case (.delete, 4), (.delete, 5):
                guard principal.isAdmin else { throw CouchError.designDocumentsNeedAdmin }
                // ["_index", ddoc…, "json", name]: the design document may come as `_design/x` or `x`.
                let designDocument = rest[1..<(rest.count - 2)].joined(separator: "/")
                guard rest[rest.count - 2] == "json" else { throw CouchError.notFound() }
                do {
                    try await db.deleteIndex(designDocument: designDocument, name: rest[rest.count - 1])
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
