import DocStore
import Foundation
import XCTest


/// Opens a fresh database in a temporary folder; it is closed and removed when the test ends.
public func makeDatabase(_ testCase: XCTestCase, name: String = "test",
                  configure: (inout DatabaseConfiguration) -> Void = { _ in }) async throws -> Database {
    let directory = try makeTemporaryDirectory(testCase)
    var configuration = DatabaseConfiguration(name: name, directory: directory)
    configure(&configuration)
    let database = try await Database.open(configuration)
    // Weakly: XCTest keeps each test case, and what its teardown blocks hold, to the end of the run.
    testCase.addTeardownBlock { [weak database] in
        await database?.close()
    }
    return database
}

/// Asserts that `body` throws a `DocStoreError` with `code`, and returns it.
@discardableResult
public func assertThrowsDocStoreError<T>(_ code: DocStoreError.Code, file: StaticString = #filePath, line: UInt = #line,
                                         _ body: () async throws -> T) async -> DocStoreError? {
    do {
        _ = try await body()
        return checkThrown(nil, code, file: file, line: line)
    } catch {
        return checkThrown(error, code, file: file, line: line)
    }
}

/// Synchronous variant for non-async code.
@discardableResult
public func assertThrowsDocStoreErrorSync<T>(_ code: DocStoreError.Code, file: StaticString = #filePath, line: UInt = #line,
                                             _ body: () throws -> T) -> DocStoreError? {
    do {
        _ = try body()
        return checkThrown(nil, code, file: file, line: line)
    } catch {
        return checkThrown(error, code, file: file, line: line)
    }
}

/// What the two assertions check of what was thrown (`nil`: nothing).
private func checkThrown(_ thrown: (any Error)?, _ code: DocStoreError.Code, file: StaticString, line: UInt) -> DocStoreError? {
    guard let thrown else {
        XCTFail("expected \(code) error, but nothing was thrown", file: file, line: line)
        return nil
    }
    guard let error = thrown as? DocStoreError else {
        XCTFail("expected DocStoreError \(code), got \(thrown)", file: file, line: line)
        return nil
    }
    XCTAssertEqual(error.code, code, "unexpected error: \(error)", file: file, line: line)
    return error
}

/// What a replication does for one document: every leaf of `source`, with its history, inserted into
/// `target` as is.
public func replicateDocument(_ id: String, from source: Database, to target: Database) async throws {
    let tree = try await source.revisionTree(ofDocumentWithID: id)!
    let documents = try await source.documentsWithHistory(tree.leaves.map { (id: id, revision: $0.revision) })
    let results = try await target.insertRevisions(documents.compactMap { $0 })
    XCTAssertTrue(results.allSatisfy(\.isSuccess))
}

/// Something a teardown block stops or closes, let go once it has: XCTest keeps each test case and its
/// teardown blocks to the end of the run, and with them whatever the blocks hold
/// (Tests/Sanitizers/xctest-teardown.swift).
///
/// ```swift
/// let held = Held(proxy)
/// addTeardownBlock { await held.take()?.stop() }
/// ```
public final class Held<Object: AnyObject & Sendable>: Sendable {
    private let object: Locked<Object?>

    public init(_ object: Object) { self.object = Locked(object) }

    /// The object, the first time; `nil` after.
    public func take() -> Object? {
        object.withLock { held in
            defer { held = nil }
            return held
        }
    }
}
