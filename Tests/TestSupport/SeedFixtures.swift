import DocStore
import Foundation

/// The PredixSDK's draft/CQRS example (Tests/Fixtures/seeds/draft-example.json): its six documents as
/// the PredixMobilityConfiguration page prints them, its `views/get_id` view as a JavaScript design
/// document (the page's Swift, translated), and the answer the page prints for the view.
public enum DraftExample {
    private static let json: JSON = {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/seeds/draft-example.json")
        // The file is part of the package: a test that cannot read it cannot run, so this traps.
        return try! JSON(parsing: Data(contentsOf: url))
    }()

    /// The six documents, `_id` first, as printed.
    public static var documents: [JSON] { json["documents"]?.arrayValue ?? [] }
    /// The design document `_design/views` with the view `get_id` in JavaScript.
    public static var designDocument: JSON { json["design"] ?? .null }
    /// `GET /{db}/_design/views/_view/get_id`'s answer: one reduced row.
    public static var answer: JSON { json["answer"] ?? .null }
}
