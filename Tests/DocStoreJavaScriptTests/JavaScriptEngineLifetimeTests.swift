import DocStore
@testable import DocStoreJavaScript
import Foundation
import XCTest

/// An engine's threads and contexts last as long as the engine: a program that makes engines (a
/// server per tenant, a test suite) does not pile up threads, JavaScriptCore contexts (some 15 MB
/// each) or thread-specific slots (a process has about a thousand).
final class JavaScriptEngineLifetimeTests: XCTestCase {
    func testAnEngineThatGoesReleasesItsContexts() async throws {
        let before = JavaScriptContext.live.load(ordering: .relaxed)
        for round in 0..<3 {
            var engine: JavaScriptEngine? = JavaScriptEngine(timeLimit: .seconds(5), threads: 3)
            // Each thread makes its context, and runs JavaScript in it.
            let sums = try await withThrowingTaskGroup(of: Int.self) { group in
                for n in 0..<12 {
                    group.addTask { [engine] in
                        try await engine!.run { context in
                            try context.json(of: context.value(json: "[\(n + 1)]")).arrayValue?.first?.intValue ?? -1
                        }
                    }
                }
                return try await group.reduce(0, +)
            }
            XCTAssertEqual(sums, (1...12).reduce(0, +))
            XCTAssertGreaterThan(JavaScriptContext.live.load(ordering: .relaxed), before, "round \(round): contexts were made")
            engine = nil
            await eventually("round \(round): the engine's threads release their contexts once it goes") {
                JavaScriptContext.live.load(ordering: .relaxed) == before
            }
        }
    }
}
