import DocStore
@testable import DocStoreJavaScript
import Foundation
import XCTest

/// An engine's threads and contexts last as long as the engine: a program that makes engines (a
/// server per tenant, a test suite) does not pile up threads, JavaScriptCore contexts (some 15 MB
/// each) or thread-specific slots (a process has about a thousand).
final class JavaScriptEngineLifetimeTests: XCTestCase {
    /// A weak reference to one context, kept outside the engine's threads.
    // `@unchecked Sendable`: the one stored property is set in `init` and never reassigned; Swift's
    // weak references are read and cleared atomically by the runtime, from any thread.
    private final class WeakContext: @unchecked Sendable {
        weak var context: JavaScriptContext?
        init(_ context: JavaScriptContext) { self.context = context }
    }

    /// The contexts the engine's threads used, by identity.
    private final class Seen: Sendable { let contexts = Locked<[ObjectIdentifier: WeakContext]>([:]) }

    func testAnEngineThatGoesReleasesItsContexts() async throws {
        for round in 0..<3 {
            var engine: JavaScriptEngine? = JavaScriptEngine(timeLimit: .seconds(5), threads: 3)
            // Each thread makes its context, and runs JavaScript in it; the test keeps a weak reference
            // to each context the engine's threads used (only this engine's, whatever other tests'
            // engines do meanwhile).
            let seen = Seen()
            let sums = try await withThrowingTaskGroup(of: Int.self) { group in
                for n in 0..<12 {
                    group.addTask { [engine] in
                        try await engine!.run { context in
                            seen.contexts.withLock { $0[ObjectIdentifier(context)] = $0[ObjectIdentifier(context)] ?? WeakContext(context) }
                            return try context.json(of: context.value(json: "[\(n + 1)]")).arrayValue?.first?.intValue ?? -1
                        }
                    }
                }
                return try await group.reduce(0, +)
            }
            XCTAssertEqual(sums, (1...12).reduce(0, +))
            let contexts = seen.contexts.withLock { Array($0.values) }
            XCTAssertTrue((1...3).contains(contexts.count), "round \(round): one context per thread that ran, \(contexts.count)")
            XCTAssertTrue(contexts.allSatisfy { $0.context != nil }, "round \(round): the engine holds its contexts")
            engine = nil
            await eventually("round \(round): the engine's threads release their contexts once it goes") {
                contexts.allSatisfy { $0.context == nil }
            }
        }
    }
}
