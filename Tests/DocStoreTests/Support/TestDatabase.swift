import DocStore
import Foundation
import XCTest

/// A temporary folder removed when the test ends.
func makeTemporaryDirectory(_ testCase: XCTestCase) throws -> URL {
    let url = FileManager.default.temporaryDirectory
        .appendingPathComponent("docstore-tests-\(UUID().uuidString)", isDirectory: true)
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    testCase.addTeardownBlock {
        try? FileManager.default.removeItem(at: url)
    }
    return url
}

/// Opens a fresh database in a temporary folder; it is closed and removed when the test ends.
func makeDatabase(_ testCase: XCTestCase, name: String = "test",
                  configure: (inout DatabaseConfiguration) -> Void = { _ in }) async throws -> Database {
    let directory = try makeTemporaryDirectory(testCase)
    var configuration = DatabaseConfiguration(name: name, directory: directory)
    configure(&configuration)
    let database = try await Database.open(configuration)
    testCase.addTeardownBlock {
        await database.close()
    }
    return database
}

/// Asserts that `body` throws a `DocStoreError` with `code`, and returns it.
@discardableResult
func assertThrowsDocStoreError<T>(_ code: DocStoreError.Code, file: StaticString = #filePath, line: UInt = #line,
                                  _ body: () async throws -> T) async -> DocStoreError? {
    do {
        _ = try await body()
        XCTFail("expected \(code) error, but nothing was thrown", file: file, line: line)
        return nil
    } catch let error as DocStoreError {
        XCTAssertEqual(error.code, code, "unexpected error: \(error)", file: file, line: line)
        return error
    } catch {
        XCTFail("expected DocStoreError \(code), got \(error)", file: file, line: line)
        return nil
    }
}

/// Synchronous variant for non-async code.
@discardableResult
func assertThrowsDocStoreErrorSync<T>(_ code: DocStoreError.Code, file: StaticString = #filePath, line: UInt = #line,
                                      _ body: () throws -> T) -> DocStoreError? {
    do {
        _ = try body()
        XCTFail("expected \(code) error, but nothing was thrown", file: file, line: line)
        return nil
    } catch let error as DocStoreError {
        XCTAssertEqual(error.code, code, "unexpected error: \(error)", file: file, line: line)
        return error
    } catch {
        XCTFail("expected DocStoreError \(code), got \(error)", file: file, line: line)
        return nil
    }
}

/// `XCTAssertEqual` for expressions that `await`.
func XCTAssertEqualAsync<T: Equatable>(_ expression: @autoclosure () async throws -> T,
                                       _ expected: @autoclosure () async throws -> T, _ message: String = "",
                                       file: StaticString = #filePath, line: UInt = #line) async {
    do {
        let (value, expectedValue) = (try await expression(), try await expected())
        XCTAssertEqual(value, expectedValue, message, file: file, line: line)
    } catch {
        XCTFail("threw \(error) \(message)", file: file, line: line)
    }
}
