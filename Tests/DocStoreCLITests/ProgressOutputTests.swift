import DocStore
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// The progress long commands show: on a terminal (a pseudo-terminal here) a line redrawn in place
/// that ends with the time taken; into a pipe nothing on standard error and the plain lines scripts
/// read; with `--quiet` nothing at all.
final class ProgressOutputTests: XCTestCase {
    /// Runs `docstore` with standard error on a new pseudo-terminal and standard output on a pipe.
    private func runOnTerminal(_ arguments: [String], in directory: URL) throws -> (status: Int32, terminal: String, stdout: String) {
        // posix_openpt, unlockpt and ptsname as glibc does them (Swift's Glibc module lacks them): the
        // multiplexer gives a master, TIOCSPTLCK unlocks its terminal, TIOCGPTN names it.
        let master = open("/dev/ptmx", O_RDWR | O_NOCTTY)
        XCTAssertGreaterThanOrEqual(master, 0)
        var unlock: Int32 = 0
        var number: UInt32 = 0
        XCTAssertEqual(ioctl(master, 0x4004_5431 /* TIOCSPTLCK */, &unlock), 0)
        XCTAssertEqual(ioctl(master, 0x8004_5430 /* TIOCGPTN */, &number), 0)
        let slave = open("/dev/pts/\(number)", O_RDWR | O_NOCTTY)
        XCTAssertGreaterThanOrEqual(slave, 0)
        let process = Process()
        process.executableURL = productsDirectory.appendingPathComponent("docstore")
        process.arguments = arguments
        process.currentDirectoryURL = directory
        let stdout = Pipe()
        process.standardOutput = stdout
        process.standardError = FileHandle(fileDescriptor: slave, closeOnDealloc: true)
        let waitForExit = try process.start()
        // The child has its own copy; once it exits, reading the master ends (EIO) after the rest.
        process.standardError = nil
        let terminal = Locked<[UInt8]>([])
        let drained = DispatchSemaphore(value: 0)
        let reader = Thread {
            defer { drained.signal() }
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = read(master, &buffer, buffer.count)
                if count <= 0 { break }
                terminal.withLock { $0 += buffer[0..<count] }
            }
        }
        reader.start()
        let out = stdout.fileHandleForReading.readDataToEndOfFile()
        waitForExit()
        drained.wait()
        close(master)
        return (process.terminationStatus, terminal.withLock { String(decoding: $0, as: UTF8.self) }, String(decoding: out, as: UTF8.self))
    }

    func testExportImportReplicateAndCompactDrawOnATerminalOnly() throws {
        let dir = try makeTemporaryDirectory(self)
        let lines = (0..<3000).map { #"{"_id":"d\#(String(format: "%05d", $0))","n":\#($0)}"# }
        try lines.joined(separator: "\n").write(to: dir.appendingPathComponent("docs.ndjson"), atomically: true, encoding: .utf8)

        let imported = try runOnTerminal(["import", "--db", "data/a", "docs.ndjson"], in: dir)
        XCTAssertEqual(imported.status, 0, imported.terminal)
        XCTAssertTrue(imported.stdout.contains(#""records":3000"#), imported.stdout)
        XCTAssertTrue(imported.terminal.contains("\r\u{1B}[2Kimport"), imported.terminal)
        XCTAssertTrue(imported.terminal.contains("import 3 000 records in 0:0"), imported.terminal)

        let exported = try runOnTerminal(["export", "--db", "data/a", "--format", "ndjson"], in: dir)
        XCTAssertEqual(exported.stdout.split(separator: "\n").count, 3000, "the data on standard output, untouched")
        XCTAssertTrue(exported.terminal.contains("/3 000 records"), "a bar with the total: \(exported.terminal)")
        XCTAssertTrue(exported.terminal.contains("export 3 000 records in"), exported.terminal)

        let replicated = try runOnTerminal(["replicate", "data/a", "data/b", "--create-target"], in: dir)
        XCTAssertEqual(replicated.status, 0, replicated.terminal)
        XCTAssertTrue(replicated.terminal.contains("replicate 3 000 changes in"), replicated.terminal)
        XCTAssertTrue(replicated.terminal.contains("3 000 written, 0 failed"), replicated.terminal)
        XCTAssertTrue(replicated.stdout.contains("progress changes=3000"), "stdout is a pipe: the plain lines, as before")

        let compacted = try runOnTerminal(["compact", "--db", "data/a"], in: dir)
        XCTAssertEqual(compacted.status, 0)
        XCTAssertTrue(compacted.terminal.contains("compact done in 0:0"), compacted.terminal)

        // Quiet: nothing on the terminal, nothing on stdout but the answer.
        let quiet = try runOnTerminal(["replicate", "data/a", "data/c", "--create-target", "--quiet"], in: dir)
        XCTAssertEqual(quiet.terminal, "")
        XCTAssertFalse(quiet.stdout.contains("progress"), quiet.stdout)
        XCTAssertTrue(quiet.stdout.contains(#""docs_written":3000"#), quiet.stdout)

        // Not a terminal: standard error stays empty.
        let piped = try runDocstore(["export", "--db", "data/a"], in: dir)
        XCTAssertEqual(piped.status, 0)
        XCTAssertEqual(piped.stderr, "")
    }
}
