import DocStore
import Foundation
import XCTest

/// `MangoSelector` against Apache CouchDB 3.3.3's own answers: `Tests/Interop/mango_selector_record.py`
/// asked a real CouchDB `_find` (no index, so its matcher decides) each selector of a set over a small
/// corpus and recorded the ids it returned or the error it answered, in
/// `Tests/Fixtures/mango/selectors.json`. Every case must come out the same here.
final class MangoSelectorTests: XCTestCase {
    private struct Recording {
        let corpus: [JSON]
        let cases: [(selector: JSON, ids: [String]?, error: String?)]
    }

    private func recording() throws -> Recording {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/mango/selectors.json")
        let json = try JSON(parsing: Data(contentsOf: url))
        let corpus = try XCTUnwrap(json["corpus"]?.arrayValue)
        let cases = try XCTUnwrap(json["cases"]?.arrayValue).map { item in
            (selector: item["selector"] ?? .null, ids: item["ids"]?.arrayValue?.compactMap(\.stringValue), error: item["error"]?.stringValue)
        }
        return Recording(corpus: corpus, cases: cases)
    }

    func testEveryRecordedSelectorMatchesWhatCouchDBMatched() throws {
        let recording = try recording()
        XCTAssertGreaterThan(recording.cases.count, 100)
        var matchedCases = 0
        for (selector, expected, _) in recording.cases {
            guard let expected else { continue }
            matchedCases += 1
            do {
                let parsed = try MangoSelector(selector)
                let ids = recording.corpus.filter(parsed.matches).compactMap { $0["_id"]?.stringValue }.sorted()
                XCTAssertEqual(ids, expected, "\(selector)")
            } catch {
                XCTFail("\(selector) threw \(error); CouchDB matched \(expected)")
            }
        }
        XCTAssertGreaterThan(matchedCases, 80)
    }

    func testEveryRecordedMalformedSelectorGetsCouchDBsError() throws {
        let recording = try recording()
        var errorCases = 0
        for (selector, _, expectedError) in recording.cases {
            guard let expectedError else { continue }
            errorCases += 1
            XCTAssertThrowsError(try MangoSelector(selector), "\(selector)") { error in
                let error = error as? DocStoreError
                XCTAssertEqual(error?.couchDBError, expectedError, "\(selector): \(String(describing: error))")
                XCTAssertEqual(error?.httpStatus, 400, "\(selector)")
            }
        }
        XCTAssertGreaterThan(errorCases, 20)
    }

    /// Where CouchDB fails with a 500, DocStore answers a 400 of the same kind.
    func testWhatCouchDBCrashesOnIsABadRequest() {
        for (selector, code) in [(["v": ["$mod": [0, 1]]] as JSON, DocStoreError.Code.badArgument),
                                 (["a..b": 1], .invalidFieldName), (["a.": 1], .invalidFieldName)] {
            XCTAssertThrowsError(try MangoSelector(selector), "\(selector)") { error in
                XCTAssertEqual((error as? DocStoreError)?.code, code, "\(selector)")
            }
        }
        // Recorded from CouchDB 3.3.3 with curl: `$text` on a field is a `bad_field`, negated a `bad_arg`.
        XCTAssertThrowsError(try MangoSelector(["v": ["$text": "x"]])) { error in
            XCTAssertEqual((error as? DocStoreError)?.couchDBError, "bad_field")
        }
        XCTAssertThrowsError(try MangoSelector(["$nor": [["$text": "x"]]])) { error in
            XCTAssertEqual((error as? DocStoreError)?.couchDBError, "bad_arg")
        }
    }

    func testPathsEscapeDotsAndEnterArrays() throws {
        XCTAssertEqual(try FieldPath("a\\.b.c").components, ["a.b", "c"])
        XCTAssertEqual(try FieldPath("items.0.name").components, ["items", "0", "name"])
        let document: JSON = ["items": [["name": "x"]], "a.b": ["c": 1]]
        XCTAssertTrue(try MangoSelector(["items.0.name": "x"]).matches(document))
        XCTAssertTrue(try MangoSelector(["a\\.b.c": 1]).matches(document))
        XCTAssertFalse(try MangoSelector(["items.1.name": ["$exists": false]]).matches(document), "out of range is not missing")
        XCTAssertFalse(try MangoSelector(["items.0.name.x": ["$exists": false]]).matches(document), "through a scalar is not missing")
    }

    func testModuloOfTheSmallestIntegerDoesNotTrap() throws {
        XCTAssertTrue(try MangoSelector(["v": ["$mod": [-1, 0]]]).matches(JSON.object(["v": .integer(Int.min)])))
    }

    func testASelectorMatchesADocumentByItsJSON() async throws {
        let db = try await makeDatabase(self)
        let saved = try await db.save(Document(id: "p1", body: ["type": "person", "age": 30]))
        let adults = try MangoSelector(["type": "person", "age": ["$gte": 18]])
        XCTAssertTrue(adults.matches(saved))
        XCTAssertTrue(try MangoSelector(["_id": "p1", "_rev": ["$exists": true]]).matches(saved))
        XCTAssertFalse(try MangoSelector(["age": ["$lt": 18]]).matches(saved))
    }
}
