import Foundation
import XCTest

/// Fails unless every ```swift block of a guide in `Docs/` appears in the test file that runs it, so the
/// guide shows only code a test compiles and runs.
///
/// Code inside test functions is indented by 8 more spaces than in the guide, code at the top of a
/// file is not: both sides drop 8 leading spaces where they have them before comparing.
/// - Parameters:
///   - guide: the guide's file name in `Docs/`, e.g. `"JavaScript.md"`.
///   - section: only the blocks under this `## ` heading (to the next one), when given.
///   - excludingSection: not the blocks under this `## ` heading, when given (another test runs them).
///   - minimumBlocks: how many blocks the guide has at least (a guide whose blocks vanished fails).
///   - testFile: the calling test's `#filePath`.
public func assertGuideBlocksAreIn(_ testFile: String = #filePath, guide: String, section: String? = nil,
                                   excludingSection: String? = nil, minimumBlocks: Int, line: UInt = #line) throws {
    func unindented(_ text: String) -> String {
        text.split(separator: "\n", omittingEmptySubsequences: false)
            .map { $0.hasPrefix("        ") ? String($0.dropFirst(8)) : String($0) }
            .joined(separator: "\n")
    }
    let body = unindented(try String(contentsOfFile: testFile, encoding: .utf8))
    let whole = try String(contentsOf: guideURL(guide), encoding: .utf8)
    // The guide's `## ` sections, each with its heading's text.
    let sections = whole.components(separatedBy: "\n## ").map { part -> (heading: String, text: String) in
        (String(part.prefix { $0 != "\n" }), part)
    }
    if let name = section ?? excludingSection {
        XCTAssertTrue(sections.contains { $0.heading == name }, "Docs/\(guide) has no section \(name)", line: line)
    }
    let text = sections.filter { part in
        (section == nil || part.heading == section) && (excludingSection == nil || part.heading != excludingSection)
    }.map(\.text).joined(separator: "\n")
    let blocks = text.components(separatedBy: "```swift\n").dropFirst().map { unindented($0.components(separatedBy: "```")[0]) }
    XCTAssertGreaterThanOrEqual(blocks.count, minimumBlocks, "Docs/\(guide) has fewer Swift blocks than expected", line: line)
    for block in blocks {
        XCTAssertTrue(body.contains(block), "Docs/\(guide) shows code this test does not run:\n\(block)", line: line)
    }
}

/// The URL of a guide in the package's `Docs/` folder.
public func guideURL(_ guide: String) -> URL {
    URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Docs/\(guide)")
}
