import Foundation
import XCTest

/// No semaphore, `queue.sync`, lock held across I/O or sleep on a thread of Swift's
/// cooperative pool. Every such construct in `Sources/` must be in the allow-list below, which says
/// on which threads it runs and why it cannot block the pool; a new one fails this test until it is
/// moved off the pool (or proven not to block) and listed.
final class NoBlockingOnThePoolTests: XCTestCase {
    /// (file, construct) → why it cannot block the cooperative pool.
    static let allowed: [String: [String: String]] = [
        "Sources/DocStore/Write/DatabaseWriter.swift": [
            "NSLock": "`access` guards the writer's connection: writes take it on the writer's own executor; a point write or a point read where its caller runs only tries it (`try()`) and never waits, so the writer waits at most for one point write or single-row read in progress",
        ],
        "Sources/DocStore/Changes/CommitWatch.swift": [
            "NSCondition": "the commit watch's own thread sleeps on it between looks and while nobody waits; register, unregister and wake only signal it",
            ".wait()": "the commit watch's own thread, between looks at the watched files",
        ],
        "Sources/DocStore/Storage/Executors.swift": [
            "NSCondition": "the threads of DedicatedThreads wait on it for work; no pool thread does",
            ".wait()": "DedicatedThreads' own threads waiting for work",
        ],
        "Sources/DocStore/Storage/WALCheckpointer.swift": [
            "usleep(": "the retry of a busy checkpoint runs on the checkpointer's own queue; checkpointNow() and close() await it without holding the caller's thread",
        ],
        "Sources/DocStore/Support/HelpedMap.swift": [
            "DispatchSemaphore": "an owner waits only for an item the helper (on DedicatedThreads) has already started — CPU work of one item, never I/O or a queue: the owner does itself every item the helper has not taken",
            ".wait()": "the same wait: one started item of CPU work (owners: the index writer on its queue, the writer's body encoding, a changes page being parsed); stop() waits only for a helper that has begun, never for one queued behind other maps (HelpedMapTests)",
        ],
        "Sources/DocStoreFuzzing/InProcessServer.swift": [
            "DispatchSemaphore": "the fuzz harness waits for the server's answer on libFuzzer's thread (or a test's), which is not a pool thread; the server's work runs on the pool meanwhile",
            ".wait()": "the same wait, with a deadline: a request that does not end is reported, not waited for forever",
        ],
        "Sources/DocStoreJavaScript/JavaScriptEngine.swift": [
            ".wait()": "withContext/withContexts wait for a JavaScript job. Map functions call them on the index writer's queue, _changes filters and JavaScript reduces on BlockingWorkThreads.userCode, and validate_doc_update inside a write that then runs there too (waitingForTheLock gives it that executor preference, which the writer, a default actor, follows): PoolStaysFreeTests. Async callers use run(_:), which does not block",
            "DispatchSemaphore": "WaitedJob, the wait of withContexts above",
        ],
    ]

    /// Each construct, and the pattern that finds it in a line of code (comments removed).
    static let constructs: [(name: String, pattern: String)] = [
        ("DispatchSemaphore", #"DispatchSemaphore"#), (".sync", #"\.sync\s*[({]"#), ("Thread.sleep", #"Thread\.sleep"#),
        ("usleep(", #"usleep\("#), ("sleep(", #"(^|[^A-Za-z_.])sleep\("#), ("NSLock", #"NSLock"#), ("NSCondition", #"NSCondition"#),
        (".wait()", #"\.wait\(\)"#), ("DispatchGroup", #"DispatchGroup"#), ("pthread_mutex_lock", #"pthread_mutex_lock"#),
        ("pthread_cond_wait", #"pthread_cond_wait"#),
    ]

    func testBlockingConstructsAreOnlyWhereAllowed() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let sources = root.appendingPathComponent("Sources")
        let files = try XCTUnwrap(FileManager.default.enumerator(atPath: sources.path)).compactMap { $0 as? String }.filter { $0.hasSuffix(".swift") }
        XCTAssertGreaterThan(files.count, 100)
        let patterns = try Self.constructs.map { ($0.name, try NSRegularExpression(pattern: $0.pattern)) }
        var found: [String: Set<String>] = [:]
        for file in files {
            let text = try String(contentsOf: sources.appendingPathComponent(file), encoding: .utf8)
            for line in text.split(separator: "\n") {
                let code = line.components(separatedBy: "//").first ?? ""
                // A declaration of one's own `sleep` (an async one, or an enum case) is not a call.
                if code.contains("func sleep(") || code.contains("case sleep(") { continue }
                let range = NSRange(code.startIndex..., in: code)
                for (name, pattern) in patterns where pattern.firstMatch(in: code, range: range) != nil {
                    found["Sources/" + file, default: []].insert(name)
                }
            }
        }
        for (file, constructs) in found {
            for construct in constructs {
                XCTAssertNotNil(Self.allowed[file]?[construct],
                                "\(file) uses \(construct): move it off the cooperative pool, or list it here with why it cannot block it")
            }
        }
        for (file, constructs) in Self.allowed {
            for construct in constructs.keys {
                XCTAssertTrue(found[file]?.contains(construct) == true, "\(file) no longer uses \(construct): drop it from the allow-list")
            }
        }
    }
}
