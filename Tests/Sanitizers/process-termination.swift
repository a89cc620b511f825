// Foundation's Process on Linux, given a termination handler (as the CLI tests' `Process.start()` does,
// to learn of the exit at once), is never freed, with its pipes: LeakSanitizer's reports grow with the
// number of processes. `lsan-proofs.sh` runs it with 2 and 20 processes.
import Foundation

let count = Int(CommandLine.arguments[1])!
for _ in 0..<count {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/bin/true")
    let output = Pipe()
    process.standardOutput = output
    let exited = DispatchSemaphore(value: 0)
    process.terminationHandler = { _ in exited.signal() }
    try process.run()
    exited.wait()
    _ = output.fileHandleForReading.readDataToEndOfFile()
}
// Written unbuffered: LeakSanitizer ends the process before a buffered standard output is flushed.
FileHandle.standardOutput.write(Data("\(count) processes\n".utf8))
