import DocStore
import Foundation
import XCTest

/// Compiles and runs README.md's usage example, and checks that README still shows exactly this code.
final class ReadmeExampleTests: XCTestCase {
    func testReadmeExampleRunsAndMatchesReadme() async throws {
        let folder = try makeTemporaryDirectory(self)
        var printed: [String] = []
        func print(_ items: Any...) { printed.append(items.map { "\($0)" }.joined(separator: " ")) }

        // README-BEGIN
        let db = try await Database.open(name: "notes", directory: folder)

        var note: Document = ["title": "Groceries", "items": ["milk", "eggs"]]
        note = try await db.save(note)                        // revision 1-…
        note["items"] = ["milk", "eggs", "bread"]
        note = try await db.save(note)                        // revision 2-…

        let fetched = try await db.document(withID: note.id)
        print(fetched?["items"] ?? "missing")                 // ["milk","eggs","bread"]

        for change in try await db.changes(since: 0).changes {
            print(change.sequence, change.id, change.revision)
        }
        await db.close()
        // README-END

        XCTAssertEqual(printed.first, #"["milk","eggs","bread"]"#)
        XCTAssertEqual(printed.count, 2)
        XCTAssertTrue(printed[1].hasPrefix("2 \(note.id) 2-"), printed[1])

        let source = try String(contentsOfFile: #filePath, encoding: .utf8)
        let begin = source.range(of: "// README-" + "BEGIN\n")!.upperBound
        let end = source.range(of: "        // README-" + "END")!.lowerBound
        let example = source[begin..<end].split(separator: "\n", omittingEmptySubsequences: false)
            .map { $0.hasPrefix("        ") ? String($0.dropFirst(8)) : String($0) }
            .joined(separator: "\n")
        let readmeURL = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("README.md")
        let readme = try String(contentsOf: readmeURL, encoding: .utf8)
        XCTAssertTrue(readme.contains(example), "README.md must show the example exactly as tested:\n\(example)")
    }
}
