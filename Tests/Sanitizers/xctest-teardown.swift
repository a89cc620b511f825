// XCTest on Linux keeps each test case, and whatever its teardown blocks captured, to the end of the
// process where LeakSanitizer cannot reach it: the payload below, captured by a teardown block as the
// suite's servers and databases are, is reported as an indirect leak. `lsan-proofs.sh` runs it.
import XCTest

final class Payload { let bytes = [UInt8](repeating: 7, count: 100_000) }

final class HoldingTests: XCTestCase {
    func testHolds() {
        let payload = Payload()
        addTeardownBlock { _ = payload.bytes.count }
        XCTAssertEqual(payload.bytes.count, 100_000)
    }

    static let allTests = [("testHolds", testHolds)]
}

XCTMain([testCase(HoldingTests.allTests)])
