@testable import DocServer
import DocStore
import DocStoreJavaScript
import DocSync
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import TestSupport
import XCTest

// The PredixMobilityConfiguration page's draft view: "PredixMobilityConfiguration.appendDataViewDefinition(
// "views/get_id", version: "1.0", mapFunction: { (properties, emit) in // This emit gives us keys of the
// "_id" field" — its Swift translated to DocStore's, as Docs/Models.md shows it.

let DraftIdSuffix = "_DRAFT"

let getID = IndexDefinition(name: "views/get_id", version: "1.0", reduce: .custom { keys, values, re in
    // our return data is a an array of dictionaries
    var returnData: [JSON] = []

    // keys and values are parallel arrays, containing data from above emit
    // convert these from JSON arrays to String arrays to allow easier processing below
    let stringKeys = keys.compactMap(\.stringValue), dictValues = values.compactMap(\.stringValue)
    if stringKeys.count == keys.count, dictValues.count == values.count {
        var ndx = 0
        //loop through the arrays, identifying the first and last documents with matching ids
        while ndx < stringKeys.count {
            var skip = ndx
            while skip < stringKeys.count - 1 && stringKeys[skip] + DraftIdSuffix == stringKeys[skip + 1] {
                skip += 1
            }

            //create a dictionary with the original id, and the last draft data
            let dic: JSONObject = ["id": .string(stringKeys[ndx]), "data": .string(dictValues[skip])]
            returnData.append(.object(dic))
            ndx = skip + 1
        }
    }
    return .array(returnData)
}) { properties, emit in
    // This emit gives us keys of the "_id" field, and values of the "data" field
    emit(properties["_id"]!, properties["data"])
}

/// The examples of the PredixSDK's "PredixMobilityConfiguration" page: data views defined in Swift
/// with `appendDataViewDefinition`, queried through the SDK's local CDB service
/// (`http://pmapi/cdb/~/_design/<a>/_view/<b>`), which is DocServer's
/// `http://host:port/<database>/_design/<a>/_view/<b>`. Each map and reduce is the page's, translated
/// from its Swift to DocStore's (`properties[…] as? String` is `properties[…]?.stringValue`), and to
/// JavaScript where `docstore serve` runs it from a design document. The comment above each test
/// quotes the page and the first words of its example.
final class SeedViewExamplesTests: XCTestCase {
    // MARK: Over HTTP

    /// `GET` of `path` on the server of `url`, as `user` (`name:password`); the status and the JSON.
    private func get(_ url: URL, _ path: String, as user: String = "admin:pw") async throws -> (Int, JSON) {
        var request = URLRequest(url: URL(string: "http://127.0.0.1:\(url.port!)\(path)")!)
        request.setValue("Basic \(Data(user.utf8).base64EncodedString())", forHTTPHeaderField: "Authorization")
        let (data, response) = try await URLSession.shared.data(for: request)
        return ((response as? HTTPURLResponse)?.statusCode ?? 0, try JSON(parsing: data))
    }

    /// `PUT` of a JSON document at `path` as the administrator.
    private func put(_ url: URL, _ path: String, _ body: JSON) async throws -> Int {
        var request = URLRequest(url: URL(string: "http://127.0.0.1:\(url.port!)\(path)")!)
        request.httpMethod = "PUT"
        request.httpBody = try body.serializedData()
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.setValue("Basic \(Data("admin:pw".utf8).base64EncodedString())", forHTTPHeaderField: "Authorization")
        let (_, response) = try await URLSession.shared.data(for: request)
        return (response as? HTTPURLResponse)?.statusCode ?? 0
    }

    // MARK: documents_by_type

    /// The page's view: "PredixMobilityConfiguration.appendDataViewDefinition("myviews/documents_by_type",
    /// version: "1", mapFunction: { (properties, emit) -> () in if let type = properties["type"] as? String".
    static let documentsByType = IndexDefinition(name: "myviews/documents_by_type", version: "1") { properties, emit in
        if let type = properties["type"]?.stringValue {
            let isDeleted: Bool = properties["_deleted"]?.boolValue ?? false
            if !isDeleted {
                emit(.string(type), nil)
            }
        }
    }

    /// PredixMobilityConfiguration — "Then a subsequent query:
    /// http://pmapi/cdb/~/_design/myviews/_view/documents_by_type?key=%22test%22 would return all
    /// documents that contained a "type" field, that were not flagged for deletion, where the value of
    /// the "type" field was "test". The returned rows would contain only the id, and type field".
    func testDocumentsByType() async throws {
        let (_, url, database) = try await makeServer(indexes: { _ in [Self.documentsByType] })
        _ = try await database.save([
            ["id": "t1", "type": "test", "n": 1], ["id": "t2", "type": "test", "n": 2],
            ["id": "t3", "type": "test", "n": 3], ["id": "p1", "type": "production"], ["id": "untyped", "n": 0],
        ])
        _ = try await database.delete(documentWithID: "t3")              // flagged for deletion

        let (status, answer) = try await get(url, "/remote/_design/myviews/_view/documents_by_type?key=%22test%22")
        XCTAssertEqual(status, 200)
        XCTAssertEqual(answer["rows"], [
            ["id": "t1", "key": "test", "value": nil],
            ["id": "t2", "key": "test", "value": nil],
        ])
        // Embedded, the same view answers the same rows.
        var query = IndexQuery()
        query.key = "test"
        let rows = try await database.query("myviews/documents_by_type", query)
        XCTAssertEqual(rows.map(\.documentID), ["t1", "t2"])
        XCTAssertEqual(rows.map(\.value), [.null, .null])
    }

    // MARK: The draft/CQRS example

    /// PredixMobilityConfiguration — "Using Map/Reduce to return draft documents when they exist": the
    /// page's documents ("So, using this pattern, you will have data that looks like this:", exactly as
    /// printed, in `DraftExample`) and view give the page's one row ("This query definition will result
    /// in a returned JSON object like:"), embedded and over HTTP (the view registered
    /// in Swift, and the same view in a design document); the drafts, in the user's private channel
    /// (`channel`, read through `ServerConfiguration.channelsField`), "will replicate to the server, [but]
    /// they will not be distributed to any other users": a colleague's copy shows the documents as
    /// they are.
    func testTheDraftExample() async throws {
        let (server, url, _) = try await makeServer(indexes: { name in name == "remote" ? [getID] : [] }) {
            $0.channelsField = "channel"
        }
        try await server.users.setUser(name: "user", password: "u-secret", readChannels: ["everyone", "user"],
                                       writeChannels: ["everyone", "user"])
        try await server.users.setUser(name: "colleague", password: "c-secret", readChannels: ["everyone"])

        // The user's device: the documents, and the view answering the page's row.
        let deviceFolder = try makeTemporaryDirectory(self)
        var deviceConfiguration = DatabaseConfiguration(name: "device", directory: deviceFolder)
        deviceConfiguration.indexes = [getID]
        let device = try await Database.open(deviceConfiguration)
        addTeardownBlock { [weak device] in await device?.close() }
        _ = try await device.save(try DraftExample.documents.map { try Document(json: $0) })
        let embedded = try await device.query("views/get_id")
        XCTAssertEqual(embedded.map(\.key), [.null])
        XCTAssertEqual(embedded.first?.value, DraftExample.answer["rows"]?[0]?["value"])

        // The drafts replicate to the server as the user.
        var userURL = URLComponents(url: url, resolvingAgainstBaseURL: false)!
        (userURL.user, userURL.password) = ("user", "u-secret")
        var push = ReplicationConfiguration(source: .local(device), target: .remote(userURL.url!))
        push.direction = .push
        try await Replicator(configuration: push).run()

        // Over HTTP, in the page's URL shape, the server's view answers the page's row.
        let (status, answer) = try await get(url, "/remote/_design/views/_view/get_id")
        XCTAssertEqual(status, 200)
        XCTAssertEqual(answer, DraftExample.answer)

        // The same view as JavaScript, in a design document as `docstore serve` runs it.
        let javaScript = try await server.registry.open("javascript")
        _ = try await javaScript.save(try DraftExample.documents.map { try Document(json: $0) })
        await XCTAssertEqualAsync(try await put(url, "/javascript/_design/views", DraftExample.designDocument), 201)
        let (jsStatus, jsAnswer) = try await get(url, "/javascript/_design/views/_view/get_id")
        XCTAssertEqual(jsStatus, 200)
        XCTAssertEqual(jsAnswer, DraftExample.answer)

        // A colleague pulls everything they may see: no draft, so the originals' data.
        var colleagueURL = userURL
        (colleagueURL.user, colleagueURL.password) = ("colleague", "c-secret")
        let colleagueFolder = try makeTemporaryDirectory(self)
        var colleagueConfiguration = DatabaseConfiguration(name: "colleague", directory: colleagueFolder)
        colleagueConfiguration.indexes = [getID]
        let colleague = try await Database.open(colleagueConfiguration)
        addTeardownBlock { [weak colleague] in await colleague?.close() }
        var pull = ReplicationConfiguration.oneTimeServerToClient(with: colleagueURL.url!, database: colleague)
        pull.limitToChannels = []
        try await Replicator(configuration: pull).run()
        await XCTAssertEqualAsync(try await colleague.changes().changes.map(\.id).sorted(), ["doc_color", "doc_fruit", "doc_furniture"])
        await XCTAssertEqualAsync(try await colleague.query("views/get_id").first?.value, [
            ["id": "doc_color", "data": "blue"], ["id": "doc_fruit", "data": "apple"], ["id": "doc_furniture", "data": "chair"],
        ])
        // Over HTTP the colleague cannot read a draft either, nor write into the user's channel.
        let (draftStatus, _) = try await get(url, "/remote/doc_fruit_DRAFT", as: "colleague:c-secret")
        XCTAssertEqual(draftStatus, 403)
        let (bychannel, changes) = try await get(url, "/remote/_changes?filter=sync_gateway/bychannel&channels=user")
        XCTAssertEqual(bychannel, 200)
        XCTAssertEqual(changes["results"]?.arrayValue?.compactMap { $0["id"]?.stringValue }.sorted(),
                       ["doc_fruit_DRAFT", "doc_fruit_DRAFT_DRAFT", "doc_furniture_DRAFT"], "the bychannel filter reads `channel` too")

        // Docs/Models.md shows this view and these documents, and this answer.
        try assertGuideBlocksAreIn(guide: "Models.md", section: "The draft/CQRS pattern", minimumBlocks: 1)
        let guide = try String(contentsOf: guideURL("Models.md"), encoding: .utf8)
        let section = try XCTUnwrap(guide.components(separatedBy: "## The draft/CQRS pattern").dropFirst().first)
        let jsonBlocks = section.components(separatedBy: "```json\n").dropFirst().map { $0.components(separatedBy: "```")[0] }
        XCTAssertEqual(jsonBlocks.count, 2)
        let guideDocuments = try jsonBlocks[0].split(separator: "\n").map { try JSON(parsing: String($0)) }
        XCTAssertEqual(guideDocuments, DraftExample.documents)
        XCTAssertEqual(try JSON(parsing: jsonBlocks[1]), answer)
    }

    // MARK: Full-text search

    /// The page's full-text view: "PredixMobilityConfiguration.appendDataViewDefinition(
    /// "myviews/search_large_text", version: "1", mapFunction: { (properties, emit) -> () in if let
    /// largeText = properties["largeText"] as? String".
    static let searchLargeText = IndexDefinition(name: "myviews/search_large_text", version: "1") { properties, emit in
        if let largeText = properties["largeText"]?.stringValue {
            let textKey = FullTextSearch.createKey(largeText)
            emit(textKey, nil)
        }
    }

    /// PredixMobilityConfiguration — "Querying a full-text view can then be done using the CDB service:
    /// http://pmapi/cdb/~/_design/myviews/_view/search_large_text?full_text=%22searchterm%22" and
    /// "…?full_text=%22searchterm%22&snippets": a bare `snippets` asks for snippets.
    func testFullTextSearchView() async throws {
        let (_, url, database) = try await makeServer(indexes: { _ in [Self.searchLargeText] })
        _ = try await database.save([
            ["id": "manual", "largeText": "Open the valve, then find the searchterm in the pump's log."],
            ["id": "notes", "largeText": "Nothing to see here."],
            ["id": "short", "title": "no large text"],
        ])
        let (status, plain) = try await get(url, "/remote/_design/myviews/_view/search_large_text?full_text=%22searchterm%22")
        XCTAssertEqual(status, 200)
        XCTAssertEqual(plain["total_rows"], 1)
        XCTAssertEqual(plain["rows"]?[0]?["id"], "manual")
        XCTAssertNil(plain["rows"]?[0]?["snippet"], "no snippet unless asked for")

        let (snippetStatus, withSnippets) = try await get(url, "/remote/_design/myviews/_view/search_large_text?full_text=%22searchterm%22&snippets")
        XCTAssertEqual(snippetStatus, 200)
        XCTAssertEqual(withSnippets["rows"]?[0]?["id"], "manual")
        let snippet = try XCTUnwrap(withSnippets["rows"]?[0]?["snippet"]?.stringValue)
        XCTAssertTrue(snippet.contains("[searchterm]"), snippet)
        let (falseStatus, withoutSnippets) = try await get(url, "/remote/_design/myviews/_view/search_large_text?full_text=%22searchterm%22&snippets=false")
        XCTAssertEqual(falseStatus, 200)
        XCTAssertNil(withoutSnippets["rows"]?[0]?["snippet"])
    }

    /// PredixMobilityConfiguration — "The full_text parameter can include:" each form it lists: words,
    /// a phrase, a prefix `*`, implicit AND, `AND`/`OR`, `NOT`, `NEAR`, `NEAR/3`, parentheses.
    func testTheFullTextSyntaxItLists() async throws {
        var config = DatabaseConfiguration(name: "texts", directory: try makeTemporaryDirectory(self))
        config.indexes = [Self.searchLargeText]
        let database = try await Database.open(config)
        addTeardownBlock { [weak database] in await database?.close() }
        _ = try await database.save([
            ["id": "a", "largeText": "the pump pressure dropped after the valve closed"],
            ["id": "b", "largeText": "valve inspection passed; pump not checked"],
            ["id": "c", "largeText": "pumping station offline"],
        ])
        func ids(_ query: String) async throws -> [String] {
            try await database.search(index: "myviews/search_large_text", SearchQuery(try TextQuery(query))).rows.map(\.documentID).sorted()
        }
        await XCTAssertEqualAsync(try await ids("valve"), ["a", "b"])
        await XCTAssertEqualAsync(try await ids("\"pump pressure\""), ["a"])
        await XCTAssertEqualAsync(try await ids("pump*"), ["a", "b", "c"])
        await XCTAssertEqualAsync(try await ids("pump valve"), ["a", "b"])
        await XCTAssertEqualAsync(try await ids("station OR inspection"), ["b", "c"])
        await XCTAssertEqualAsync(try await ids("pump NOT checked"), ["a"])
        await XCTAssertEqualAsync(try await ids("pump NEAR closed"), ["a"])
        await XCTAssertEqualAsync(try await ids("pump NEAR/3 closed"), [])
        await XCTAssertEqualAsync(try await ids("(station OR pressure) AND pump*"), ["a", "c"])
    }
}
