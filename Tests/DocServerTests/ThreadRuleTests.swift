@testable import DocServer
@testable import DocStore
import Foundation
import NIOCore
import NIOPosix
import TestSupport
import XCTest

#if DEBUG
/// The debug check of where SQLite runs (`ThreadRule`) is on for every test; these show that it
/// catches a write moved back onto an event loop or the cooperative pool, and that DocStore's own
/// paths — a point write inline, any other write on the writer's executor — pass it.
final class ThreadRuleTests: XCTestCase {
    private func onEventLoop<T: Sendable>(_ body: @Sendable () async throws -> T) async throws -> T {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        do {
            let result = try await withTaskExecutorPreference(EventLoopTaskExecutor(group.next())) { try await body() }
            try await group.shutdownGracefully()
            return result
        } catch {
            try? await group.shutdownGracefully()
            throw error
        }
    }

    func testAWriteRunOnAnEventLoopIsCaught() async throws {
        let db = try await makeDatabase(self)
        let breaches = try await ThreadRule.recordingBreaches {
            _ = try await onEventLoop {
                // The writer's own operation, called where the request is read instead of through
                // the writer's executor: what a write moved back onto the loop does.
                try db.writer.write([Document(id: "moved", body: ["n": 1])], policy: .put, newEdits: true, source: .local)
            }
        }
        XCTAssertFalse(breaches.isEmpty, "a write on an event loop must be caught")
        XCTAssertTrue(breaches.allSatisfy { $0.contains("NIO-ELT") }, "\(breaches)")
        XCTAssertTrue(breaches.contains { $0.contains("BEGIN IMMEDIATE") }, "\(breaches)")
    }

    func testAWriteRunOnThePoolIsCaught() async throws {
        let db = try await makeDatabase(self)
        let breaches = try await ThreadRule.recordingBreaches {
            _ = try await Task.detached {
                try db.writer.write([Document(id: "pool", body: ["n": 1])], policy: .put, newEdits: true, source: .local)
            }.value
        }
        XCTAssertTrue(breaches.contains { $0.contains("INSERT INTO docs") }, "\(breaches)")
    }

    func testDocStoresWritesFromAnEventLoopPass() async throws {
        let db = try await makeDatabase(self)
        let large = (0..<200).map { Document(id: "d\($0)", body: ["text": .string(String(repeating: "x", count: 200))]) }
        let big = Document(id: "big", body: ["text": .string(String(repeating: "y", count: 64 * 1024))])
        let breaches = try await ThreadRule.recordingBreaches {
            try await onEventLoop {
                try await db.save(Document(id: "point", body: ["n": 1]))   // a point write, inline
                try await db.save(large)                                   // a batch, on the writer's executor
                try await db.save(big)                                     // one large body, there too
                _ = try await db.document(withID: "point")                 // a point read, inline
                _ = try await db.allDocuments()                            // a long read, on its threads
            }
        }
        XCTAssertEqual(breaches, [])
        await XCTAssertEqualAsync(try await db.info().documentCount, 202)
    }
}
#endif
