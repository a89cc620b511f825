import DocStore
import Hummingbird

/// Several queries of one list in a request, as CouchDB 2.2 and later answer them:
/// `POST /{db}/_all_docs/queries`, `/{db}/_design_docs/queries`, `/{db}/_local_docs/queries` and
/// `/{db}/_design/{d}/_view/{v}/queries`.
extension DocServer {
    /// `{"queries": [{…}, …]}` → `{"results": [answer, …]}`: each query's members (JSON, as a POST body
    /// gives them) over the query string's parameters, answered by `answer` as the GET they stand for.
    /// Every query is checked and answered before anything is sent, so a faulty one fails the request.
    func multiQuery(_ request: CouchRequest, _ answer: (CouchRequest) async throws -> [UInt8]) async throws -> Response {
        guard request.method == .post else { throw CouchError.only("POST") }
        try request.requireJSONContentType()
        guard let queries = try request.jsonObjectBody()["queries"] else {
            throw CouchError.badRequest("POST body must include `queries` parameter.")
        }
        guard case .array(let list) = queries else { throw CouchError.badRequest("`queries` must be an array of objects.") }
        var bytes = Array("{\"results\":[".utf8)
        for (index, query) in list.enumerated() {
            guard case .object(let members) = query else { throw CouchError.badRequest("`queries` must be an array of objects.") }
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            bytes += try await answer(try request.withParameters(members))
        }
        bytes += Array("]}".utf8)
        return Response.json(serialized: bytes)
    }
}
