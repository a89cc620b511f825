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

/// Waits until `condition` holds, checking it again every few milliseconds, for at most `timeout`;
/// fails the test (and returns `false`) if it never does.
///
/// For outcomes of background work that offers no event to await (an index updated after a query,
/// a delegate called from a delivery task). It is not a sleep: it returns as soon as the condition
/// holds, and `timeout` only bounds a broken implementation.
@discardableResult
public func eventually(timeout: Duration = .seconds(20), _ message: @autoclosure () -> String = "",
                       file: StaticString = #filePath, line: UInt = #line,
                       _ condition: () async throws -> Bool) async rethrows -> Bool {
    let clock = ContinuousClock()
    let deadline = clock.now.advanced(by: timeout)
    while true {
        if try await condition() { return true }
        if clock.now >= deadline {
            XCTFail("condition not met within \(timeout) \(message())", file: file, line: line)
            return false
        }
        try? await Task.sleep(for: .milliseconds(5))
    }
}
