import Foundation
import XCTest

/// `XCTAssertEqual` for expressions that `await`.
public func XCTAssertEqualAsync<T: Equatable>(_ expression: @autoclosure () async throws -> T,
                                              _ expected: @autoclosure () async throws -> T, _ message: String = "",
                                              file: StaticString = #filePath, line: UInt = #line) async {
    do {
        let (value, expectedValue) = (try await expression(), try await expected())
        XCTAssertEqual(value, expectedValue, message, file: file, line: line)
    } catch {
        XCTFail("threw \(error) \(message)", file: file, line: line)
    }
}

/// A temporary folder removed when the test ends.
public func makeTemporaryDirectory(_ testCase: XCTestCase) throws -> URL {
    let url = FileManager.default.temporaryDirectory
        .appendingPathComponent("docstore-tests-\(UUID().uuidString)", isDirectory: true)
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    testCase.addTeardownBlock {
        try? FileManager.default.removeItem(at: url)
    }
    return url
}
