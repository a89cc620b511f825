import DocStore
import DocStoreFuzzing
import Foundation
import XCTest

/// Every fuzz target's seeds, and every input a fuzzer once broke (`regression-*`), hold the target's
/// properties (`Tests/Fixtures/fuzz/<target>/`, Docs/Reliability.md): the corpora stay meaningful and
/// a fixed crash stays fixed.
final class FuzzCorpusTests: XCTestCase {
    private static let corpora = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/fuzz")

    func testEveryTargetsCorpusHoldsItsProperties() throws {
        for target in FuzzTarget.allCases {
            let folder = FuzzCorpusTests.corpora.appendingPathComponent(target.rawValue)
            let files = try FileManager.default.contentsOfDirectory(at: folder, includingPropertiesForKeys: nil)
            XCTAssertGreaterThanOrEqual(files.count, 10, "\(target.rawValue) has a corpus")
            for file in files {
                XCTAssertNil(target.failure(Array(try Data(contentsOf: file))), "\(target.rawValue)/\(file.lastPathComponent)")
            }
        }
    }
}
