@testable import DocStore
import Foundation
import Synchronization
import XCTest

/// `DedicatedThreads`: work runs in order of submission, and finished threads end.
final class ExecutorsTests: XCTestCase {
    /// This process's threads whose name starts with `prefix` (Linux keeps 15 bytes of a name).
    private func threads(named prefix: String) -> Int {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
        return tasks.filter { task in
            ((try? String(contentsOfFile: "/proc/self/task/\(task)/comm", encoding: .utf8)) ?? "").hasPrefix(prefix)
        }.count
    }

    /// Finishing lets the work submitted before it run, then each thread runs its last closure and
    /// ends, and the last one runs the closure after all.
    func testFinishedThreadsRunWhatWasSubmittedThenEnd() async throws {
        let ran = Locked<[Int]>([])
        let lasts = Atomic<Int>(0)
        let (ended, end) = AsyncStream<Int>.makeStream()
        let threads = DedicatedThreads(count: 3, name: "test-finishing")
        #if os(Linux)
        await eventually("the three threads start, named") { self.threads(named: "test-finishing") == 3 }
        #endif
        for n in 0..<300 { threads.submit { ran.withLock { $0.append(n) } } }
        // Each last closure takes a while, so a thread that ran `afterAll` before the others' last
        // closures ended would be seen here.
        threads.finish(eachThreadLast: { Thread.sleep(forTimeInterval: 0.02); lasts.add(1, ordering: .relaxed) },
                       afterAll: { end.yield(lasts.load(ordering: .relaxed)); end.finish() })
        var iterator = ended.makeAsyncIterator()
        let lastsBeforeAfterAll = await iterator.next()
        XCTAssertEqual(lastsBeforeAfterAll, 3, "every thread's last closure ran before the one after all")
        XCTAssertEqual(ran.withLock { $0.sorted() }, Array(0..<300), "everything submitted before finishing ran, once")
        #if os(Linux)
        await eventually("the threads end") { self.threads(named: "test-finishing") == 0 }
        #endif
    }
}
