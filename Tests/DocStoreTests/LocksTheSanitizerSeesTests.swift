import Foundation
import XCTest

/// Every lock in `Sources/` and `Tests/` is a `Locked`, never a bare `Mutex`: on Linux a contended
/// `Mutex` is handed over inside the kernel, where ThreadSanitizer cannot see it, so the sanitizer run
/// of `.ci/run` reports each access under it as a race (Docs/Reliability.md, "Sanitizers").
final class LocksTheSanitizerSeesTests: XCTestCase {
    func testNoBareMutexOutsideLocked() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let pattern = try NSRegularExpression(pattern: #"(^|[^A-Za-z_])Mutex\s*[<(]"#)
        var scanned = 0
        var bare: [String] = []
        for folder in ["Sources", "Tests"] {
            let base = root.appendingPathComponent(folder)
            let files = try XCTUnwrap(FileManager.default.enumerator(atPath: base.path)).compactMap { $0 as? String }.filter { $0.hasSuffix(".swift") }
            for file in files where file != "DocStore/Support/Locked.swift" {
                scanned += 1
                let text = try String(contentsOf: base.appendingPathComponent(file), encoding: .utf8)
                for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                    let code = line.components(separatedBy: "//").first ?? ""
                    if pattern.firstMatch(in: code, range: NSRange(code.startIndex..., in: code)) != nil {
                        bare.append("\(folder)/\(file):\(number + 1)")
                    }
                }
            }
        }
        XCTAssertGreaterThan(scanned, 200, "the sources and tests were found")
        XCTAssertEqual(bare, [], "use Locked (Sources/DocStore/Support/Locked.swift) instead of Mutex")
    }
}
