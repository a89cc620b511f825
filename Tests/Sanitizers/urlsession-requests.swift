// HTTP requests through Foundation's URLSession (libcurl underneath on Linux), each session invalidated
// as DocSync's HTTPTransport does: LeakSanitizer reports libcurl's allocations growing with the number of
// requests. `lsan-proofs.sh` runs it with 3 and 30 requests against a local server.
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

let requests = Int(CommandLine.arguments[1])!
let url = URL(string: CommandLine.arguments[2])!
let done = DispatchSemaphore(value: 0)
Task {
    let session = URLSession(configuration: .ephemeral)
    for _ in 0..<requests { _ = try? await session.data(from: url) }
    session.finishTasksAndInvalidate()
    done.signal()
}
done.wait()
print("\(requests) requests")
