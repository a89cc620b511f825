import DocServer
import DocStore
import DocStoreJavaScript
import DocSync
import Foundation
import XCTest

/// The example of Docs/JavaScript.md, run as written there against a server on 127.0.0.1 that holds the
/// design document and its documents, as a CouchDB would; and the JavaScript parts of replication.
final class JavaScriptGuideTests: XCTestCase {
    func testGuideExample() async throws {
        let (_, serverURL, remote) = try await makeServer()
        _ = try await remote.save([
            Document(id: "_design/recipes", body: ["views": ["by_cuisine": [
                "map": "function(doc) { if (doc.cuisine) emit(doc.cuisine, 1); }", "reduce": "_sum"]]]),
            Document(id: "carbonara", body: ["cuisine": "italian"]),
            Document(id: "lasagne", body: ["cuisine": "italian"]),
            Document(id: "pad-thai", body: ["cuisine": "thai"]),
        ])
        let folder = try makeTemporaryDirectory(self)
        let couchURL = serverURL
        var printed: [String] = []
        func print(_ key: JSON, _ value: JSON) { printed.append("\(key) \(value)") }

        let db = try await Database.open(name: "recipes", directory: folder)
        db.enableJavaScript()
        try await Replicator(configuration: ReplicationConfiguration(source: .remote(couchURL), target: .local(db))).run()

        var query = IndexQuery()
        query.group = true
        let cuisines = try await db.query(designDocument: "recipes", view: "by_cuisine", query)
        for row in cuisines {
            print(row.key, row.value)           // "italian" 2, then "thai" 1
        }

        XCTAssertEqual(printed, [#""italian" 2"#, #""thai" 1"#])
        await db.close()
        try assertGuideBlocksAreIn(guide: "JavaScript.md", minimumBlocks: 1)
    }

    /// A local source replicates through a design document's filter function, with its parameters.
    func testFilteredReplicationFromALocalDatabase() async throws {
        let source = try await makeDatabase("js-source")
        source.enableJavaScript()
        _ = try await source.save([
            Document(id: "_design/app", body: ["filters": ["mine": "function(doc, req) { return doc.owner === req.query.owner; }"]]),
            Document(id: "a", body: ["owner": "ann"]), Document(id: "b", body: ["owner": "bob"]), Document(id: "c", body: ["owner": "ann"]),
        ])
        let target = try await makeDatabase("js-target")
        var configuration = ReplicationConfiguration(source: .local(source), target: .local(target))
        configuration.filterName = "app/mine"
        configuration.filterParameters = ["owner": "ann"]
        try await Replicator(configuration: configuration).run()
        let ids = try await target.changes().changes.map(\.id)
        XCTAssertEqual(ids, ["a", "c"])
    }
}
