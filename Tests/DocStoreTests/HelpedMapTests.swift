@testable import DocStore
import Dispatch
import Foundation
import XCTest

/// The one primitive that shares CPU work with a helper thread: order, errors, work taken by the
/// owner, and stopping.
final class HelpedMapTests: XCTestCase {
    private struct Failure: Error, Equatable { let input: Int }

    /// Every input is transformed exactly once and the outputs come back in order, whichever thread
    /// transformed them.
    func testOutputsComeInOrderAndEachInputIsTransformedOnce() throws {
        let counts = Locked([Int: Int]())
        let map = HelpedMap<Int, Int>(.changesPage) { input in
            counts.withLock { $0[input, default: 0] += 1 }
            return input * input
        }
        defer { map.stop() }
        var outputs: [Int] = []
        var next = 0
        for input in 0..<2000 {
            map.submit(input)
            // Take outputs in bursts, as the owners do: sometimes behind, sometimes right behind.
            if input % 7 == 0 {
                while next <= input - 3 {
                    outputs.append(try map.output(at: next))
                    next += 1
                }
            }
        }
        while next < map.submitted {
            outputs.append(try map.output(at: next))
            next += 1
        }
        XCTAssertEqual(outputs, (0..<2000).map { $0 * $0 })
        XCTAssertEqual(counts.withLock { $0 }.count, 2000)
        XCTAssertTrue(counts.withLock { $0 }.values.allSatisfy { $0 == 1 })
    }

    /// With every helper thread held by other maps, a new map's owner does all its work and stops at
    /// once: it never waits for the other maps to end (an owner may be a thread of the pool).
    func testStoppingDoesNotWaitForAHelperThatNeverGotAThread() throws {
        let started = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let busy = (0..<HelpedMap<Int, Int>.helperThreads).map { _ in
            HelpedMap<Int, Int>(.changesPage) { input in
                started.signal()
                release.wait()
                return input
            }
        }
        for map in busy { map.submit(0) }
        for _ in busy { XCTAssertEqual(started.wait(timeout: .now() + 30), .success, "every helper thread holds an item") }

        let done = DispatchSemaphore(value: 0)
        let outputs = Locked([Int]())
        Thread.detachNewThread {
            let map = HelpedMap<Int, Int>(.bodyEncoding) { $0 * 2 }
            for input in 0..<10 { map.submit(input) }
            let all = (0..<10).map { try? map.output(at: $0) }
            map.stop()
            outputs.withLock { $0 = all.compactMap { $0 } }
            done.signal()
        }
        let stopped = done.wait(timeout: .now() + 10)
        for _ in busy { release.signal() }
        for map in busy { map.stop() }
        XCTAssertEqual(stopped, .success, "stop() waited for the other maps' helpers")
        if stopped == .timedOut { done.wait() }
        XCTAssertEqual(outputs.withLock { $0 }, (0..<10).map { $0 * 2 })
    }

    /// While the helper is busy, the owner transforms the next input itself; it waits only for the
    /// item the helper holds.
    func testTheOwnerTransformsWhatTheHelperHasNotStarted() throws {
        let started = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let transformedBy = Locked([Int: Bool]())  // input → on the owner's thread
        let owner = pthread_self()
        let map = HelpedMap<Int, String>(.indexPrefetch) { input in
            transformedBy.withLock { $0[input] = pthread_equal(pthread_self(), owner) != 0 }
            if input == 0 {
                started.signal()
                release.wait()
            }
            return "#\(input)"
        }
        defer { map.stop() }
        map.submit(0)
        started.wait()  // the helper holds input 0
        map.submit(1)
        map.submit(2)
        XCTAssertNil(map.finishedOutput(at: 0), "not finished yet")
        XCTAssertEqual(try map.output(at: 1), "#1", "taken while the helper holds input 0")
        release.signal()
        XCTAssertEqual(try map.output(at: 0), "#0", "waits for the helper")
        XCTAssertEqual(try map.output(at: 2), "#2")
        XCTAssertEqual(transformedBy.withLock { $0[0] }, false, "the helper transformed input 0")
        XCTAssertEqual(transformedBy.withLock { $0[1] }, true, "the owner transformed input 1 while the helper was busy")
    }

    /// An error belongs to its input: it is thrown when that output is taken, and the others are not
    /// affected.
    func testAnErrorIsThrownAtItsPosition() throws {
        let map = HelpedMap<Int, Int>(.bodyEncoding) { input in
            if input == 3 { throw Failure(input: input) }
            return input + 100
        }
        defer { map.stop() }
        for input in 0..<6 { map.submit(input) }
        for index in 0..<3 { XCTAssertEqual(try map.output(at: index), index + 100) }
        XCTAssertThrowsError(try map.output(at: 3)) { XCTAssertEqual($0 as? Failure, Failure(input: 3)) }
        XCTAssertEqual(try map.output(at: 4), 104)
        XCTAssertEqual(try map.output(at: 5), 105)
    }

    /// Stopping with inputs left returns once the helper has left its item; stopping twice is harmless.
    func testStoppingDropsWhatIsLeft() {
        let transformed = Locked(0)
        let map = HelpedMap<Int, Int>(.changesPage) { input in
            transformed.withLock { $0 += 1 }
            return input
        }
        for input in 0..<10_000 { map.submit(input) }
        map.stop()
        let count = transformed.withLock { $0 }
        XCTAssertLessThan(count, 10_000, "the helper stopped before the end")
        map.stop()
        XCTAssertEqual(transformed.withLock { $0 }, count, "nothing runs after stop")
    }
}
