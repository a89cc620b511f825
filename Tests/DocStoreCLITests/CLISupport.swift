import Foundation
@_exported import TestSupport
import XCTest

/// The folder holding the built products (the `docstore` executable sits next to the test bundle).
var productsDirectory: URL {
    #if os(macOS)
    for bundle in Bundle.allBundles where bundle.bundlePath.hasSuffix(".xctest") {
        return bundle.bundleURL.deletingLastPathComponent()
    }
    fatalError("couldn't find the products directory")
    #else
    return Bundle.main.bundleURL
    #endif
}

/// The result of running the `docstore` executable.
struct CommandResult {
    var status: Int32
    var stdout: String
    var stderr: String
    var lines: [String] { stdout.split(separator: "\n").map(String.init) }
}

/// Runs `docstore` with `arguments` in `directory`, feeding `input` to standard input.
func runDocstore(_ arguments: [String], input: String? = nil, in directory: URL) throws -> CommandResult {
    let process = Process()
    process.executableURL = productsDirectory.appendingPathComponent("docstore")
    process.arguments = arguments
    process.currentDirectoryURL = directory
    let stdout = Pipe()
    let stderr = Pipe()
    let stdin = Pipe()
    process.standardOutput = stdout
    process.standardError = stderr
    process.standardInput = stdin
    let waitForExit = try process.start()
    if let input { stdin.fileHandleForWriting.write(Data(input.utf8)) }
    try stdin.fileHandleForWriting.close()
    let out = stdout.fileHandleForReading.readDataToEndOfFile()
    let err = stderr.fileHandleForReading.readDataToEndOfFile()
    waitForExit()
    return CommandResult(status: process.terminationStatus, stdout: String(decoding: out, as: UTF8.self),
                         stderr: String(decoding: err, as: UTF8.self))
}


extension Process {
    /// Runs the process and returns a function that waits for its exit. Foundation's `waitUntilExit()`
    /// on Linux looks at the process only every 50 ms, which the suite, launching the command a
    /// hundred times, paid in full; the termination handler is called as soon as the child is reaped.
    func start() throws -> @Sendable () -> Void {
        let exited = DispatchSemaphore(value: 0)
        terminationHandler = { _ in exited.signal() }
        try run()
        return { exited.wait() }
    }
}

/// Starts `docstore serve --port 0 --admin admin:pw` in `directory` and returns the process and the URL
/// it prints (`http://127.0.0.1:PORT/`). The process is interrupted when the test ends.
func launchServe(in directory: URL, _ testCase: XCTestCase, arguments: [String] = [], environment: [String: String] = [:],
                 standardError: Any = FileHandle.nullDevice) throws -> (Process, Pipe, String) {
    let process = Process()
    process.executableURL = productsDirectory.appendingPathComponent("docstore")
    process.arguments = ["serve", "--port", "0", "--admin", "admin:pw"] + arguments
    process.currentDirectoryURL = directory
    process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
    let stdout = Pipe()
    process.standardOutput = stdout
    process.standardError = standardError
    try process.run()
    let output = readFirstLine(of: stdout)
    let held = Held(process)
    testCase.addTeardownBlock {
        if let process = held.take(), process.isRunning {
            process.interrupt()
            process.waitUntilExit()
        }
    }
    let url = output.split(separator: " ").last.map { $0.trimmingCharacters(in: .whitespacesAndNewlines) } ?? ""
    return (process, stdout, url)
}

/// What a pipe delivers up to its first newline (or its end), reading as the bytes come.
func readFirstLine(of pipe: Pipe) -> String {
    readLines(of: pipe, count: 1).first ?? ""
}

/// The first `count` lines a pipe delivers (fewer if it ends first), reading as the bytes come; what
/// came with them after the last is dropped.
func readLines(of pipe: Pipe, count: Int) -> [String] {
    var output = ""
    while output.filter({ $0 == "\n" }).count < count {
        let chunk = pipe.fileHandleForReading.availableData
        if chunk.isEmpty { break }
        output += String(decoding: chunk, as: UTF8.self)
    }
    return Array(output.split(separator: "\n", omittingEmptySubsequences: false).prefix(count).map(String.init))
}
