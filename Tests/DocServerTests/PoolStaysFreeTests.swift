@testable import DocServer
import DocStore
import Foundation
import XCTest

/// DESIGN.md §6: the app's map functions run on the index writer's own queue, never on Swift's
/// cooperative pool: while a view's map function runs for seconds, the server answers everything else
/// at once. (Without that queue the slowest answer here took 3.0 s.)
final class PoolStaysFreeTests: XCTestCase {
    func testTheServerAnswersWhileAMapFunctionRuns() async throws {
        let server = try await TestServer(self)
        for name in ["slow", "other"] { await XCTAssertEqualAsync(try await server.request("PUT", "/\(name)").status, 201) }
        await XCTAssertEqualAsync(try await server.request("PUT", "/other/d", json: ["n": 1]).status, 201)
        await XCTAssertEqualAsync(try await server.request("PUT", "/slow/_design/app", json: ["views": ["v": ["map": """
            function(doc) { var until = Date.now() + 3000; while (Date.now() < until) {} emit(doc._id, 1); }
            """]]]).status, 201)
        await XCTAssertEqualAsync(try await server.request("PUT", "/slow/one", json: ["n": 1]).status, 201)

        let clock = ContinuousClock()
        let start = clock.now
        let view = Task { try await server.request("GET", "/slow/_design/app/_view/v").status }

        // For 4 s (the map function runs 3 s), everything else answers at once.
        var slowest: Duration = .zero
        var probes = 0
        while clock.now - start < .seconds(4) {
            for path in ["/", "/other/d", "/other/_changes"] {
                let began = clock.now
                let response = try await server.request("GET", path)
                XCTAssertEqual(response.status, 200, path)
                slowest = max(slowest, clock.now - began)
                probes += 1
            }
        }
        XCTAssertLessThan(slowest, .milliseconds(200), "the slowest of \(probes) answers")
        XCTAssertGreaterThan(probes, 30)
        await XCTAssertEqualAsync(try await view.value, 200)
    }
}
