import ArgumentParser
import DocServer
import DocStore
import DocStoreJavaScript
import DocSync
import Foundation
import Logging
#if canImport(Glibc)
import Glibc
#endif

/// `docstore-bench`: each operation through DocStore and as raw SQLite C API work on a minimal schema,
/// interleaved in one process, repeated; the median of each is reported with their ratio.
@main
struct Benchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "docstore-bench",
        abstract: "Measure DocStore against a raw-SQLite baseline doing the same storage work.")

    @Option(help: "Documents in the corpus.")
    var n: Int = 100_000

    @Option(help: "Comma-separated operations to run (default: all).")
    var only: String?

    @Option(help: "Repetitions; the median is reported.")
    var repetitions: Int = 3

    static let allOperations = ["insert_bulk", "insert_single", "get", "update", "scan", "changes",
                                "index_build", "js_index_build", "index_build_mango", "find_indexed", "find_scan", "range_query", "reduce_sum", "replicate_local", "replicate_http",
                                "replicate_attachments", "attachment_stream", "fts_build", "fts_update", "fts_query"]

    @Option(help: "Megabytes of attachments for attachment_stream.")
    var attachmentMB: Int = 256

    @Flag(help: "Print the resident memory and its high-water mark after each operation (to standard error).")
    var memoryTrace = false

    @Flag(help: "Leave glibc's malloc as it starts, instead of the setting `docstore serve` makes (MemoryAllocator).")
    var defaultAllocator = false

    func validate() throws {
        guard n >= 100 else { throw ValidationError("--n must be at least 100") }
        guard repetitions >= 1 else { throw ValidationError("--repetitions must be at least 1") }
        if let only {
            for op in only.split(separator: ",") where !Benchmark.allOperations.contains(String(op)) {
                throw ValidationError("unknown operation \(op); known: \(Benchmark.allOperations.joined(separator: ","))")
            }
        }
    }

    func run() async throws {
        // The process runs as `docstore serve` does; the line says which way, as the peak RSS depends on it.
        let fixedThreshold = !defaultAllocator && MemoryAllocator.fixLargeBlockThreshold()
        print("allocator=\(fixedThreshold ? "large_block_threshold_\(MemoryAllocator.defaultLargeBlockThreshold)" : "default")")
        // DocStore's process-wide SQLite settings, made before the raw baseline opens SQLite (which would
        // otherwise initialize it first whenever `attachment_stream`, whose DocStore databases open
        // first, is not run, and leave SQLite's memory statistics and their global mutex on for
        // DocStore's threads too): both sides run as they do in `docstore serve`.
        print("sqlite_settings=\(SQLiteSettings.apply() ? "docstore" : "sqlite_default")")
        let selected = only.map { Set($0.split(separator: ",").map(String.init)) } ?? Set(Benchmark.allOperations)
        let corpus = Corpus(count: n)
        var generator = SplitMix64(seed: 99)
        let randomIDs = (0..<n).map { _ in corpus.ids[Int(generator.next() % UInt64(n))] }
        let updateIDs = Array(randomIDs.prefix(n / 10))
        let ranges = (0..<1000).map { _ -> (Int, Int) in
            let low = Int(generator.next() % UInt64(1_000_000 - 1000 * 100_000 / n))
            return (low, low + 1000 * 100_000 / n - 1)
        }
        var timings: [String: (ours: [Double], baseline: [Double], count: Int)] = [:]
        var cpuTimes: [String: [Double]] = [:]
        var attachmentGrowth: [Double] = []
        var pullGrowth: [Double] = []
        // attachment_stream restarts the kernel's high-water mark; the peaks before each restart.
        var earlierPeaks: [Double] = []
        func record(_ op: String, count: Int, ours: Double, baseline: Double) {
            var entry = timings[op] ?? ([], [], count)
            entry.ours.append(ours)
            entry.baseline.append(baseline)
            timings[op] = entry
            // The CPU time of the section whose wall time is the op's own (``timeAsync(_:)``).
            if let cpu = timedSections.withLock({ sections in
                defer { sections.removeAll() }
                return sections.last(where: { $0.wall == ours })?.cpu
            }) {
                cpuTimes[op, default: []].append(cpu)
            }
            traceMemory(after: op)
        }
        func traceMemory(after step: String) {
            guard memoryTrace else { return }
            // Anonymous memory is the heap and the stacks; file memory, the pages of mapped files
            // (libraries, and the database files SQLite's readers map).
            let line = "memory after=\(step) rss_mb=\(format(residentMegabytes(), digits: 1)) peak_mb=\(format(peakResidentMegabytes(), digits: 1))"
                + " anon_mb=\(format(statusMegabytes("RssAnon:"), digits: 1)) file_mb=\(format(statusMegabytes("RssFile:"), digits: 1))\n"
            FileHandle.standardError.write(Data(line.utf8))
        }

        for _ in 0..<repetitions {
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent("docstore-bench-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: folder) }
            // First, while no document database is open: its memory growth is then its own.
            if selected.contains("attachment_stream") {
                let result = try await AttachmentStream(megabytes: attachmentMB, folder: folder).run()
                record("attachment_stream", count: attachmentMB, ours: result.ours, baseline: result.baseline)
                attachmentGrowth.append(result.rssGrowthMB)
                earlierPeaks.append(result.peakBeforeMB)
                releaseFreeMemory()
            }
            let raw = RawSQLiteBaseline(path: folder.appendingPathComponent("raw.sqlite").path)
            let db = try await Database.open(name: "bench", directory: folder)

            let baselineInsert = time { raw.insertBulk(ids: corpus.ids, bodies: corpus.bodies) }
            traceMemory(after: "corpus")
            var documents = corpus.documents(count: n)
            traceMemory(after: "parsed_documents")
            let oursInsert = try await timeAsync { _ = try await db.save(documents) }
            documents = []
            releaseFreeMemory()
            // DocStore copies its write-ahead log back on another thread; let that finish before the
            // next measurement, so that it slows neither the baseline nor us there.
            try await db.flushWriteAheadLog()
            if selected.contains("insert_bulk") { record("insert_bulk", count: n, ours: oursInsert, baseline: baselineInsert) }

            if selected.contains("get") {
                let baseline = time { _ = raw.get(ids: randomIDs) }
                let ours = try await timeAsync {
                    for id in randomIDs { _ = try await db.document(withID: id) }
                }
                record("get", count: n, ours: ours, baseline: baseline)
            }
            if selected.contains("scan") {
                let baseline = time { _ = raw.scan() }
                let ours = try await timeAsync {
                    var since: Int64 = 0
                    while true {
                        let page = try await db.changes(since: since, limit: 1000, includeDocuments: true)
                        if page.changes.isEmpty { break }
                        since = page.lastSequence
                    }
                }
                record("scan", count: n, ours: ours, baseline: baseline)
            }
            if selected.contains("changes") {
                let baseline = time { _ = raw.changes() }
                let ours = try await timeAsync { _ = try await db.changes(since: 0) }
                record("changes", count: n, ours: ours, baseline: baseline)
            }
            if selected.contains("index_build") || selected.contains("range_query") || selected.contains("reduce_sum") {
                let baseline = time { raw.buildIndex() }
                let byScore = IndexDefinition(name: "by-score", version: "1") { doc, emit in
                    if let score = doc["score"] { emit(score, doc["name"]) }
                }
                let ours = try await timeAsync {
                    try await db.register(byScore)
                    var query = IndexQuery()
                    query.limit = 0
                    _ = try await db.query("by-score", query)
                }
                if selected.contains("index_build") { record("index_build", count: n, ours: ours, baseline: baseline) }
                try await db.flushWriteAheadLog()
            }
            if selected.contains("js_index_build") {
                // The same view as index_build's, as a CouchDB design document: JavaScript in JavaScriptCore.
                let baseline = time { raw.buildIndex() }
                let swiftMap = IndexDefinition(name: "by-score-swift", version: "1") { doc, emit in
                    if let score = doc["score"] { emit(score, doc["name"]) }
                }
                let swift = try await timeAsync {
                    try await db.register(swiftMap)
                    var query = IndexQuery()
                    query.limit = 0
                    _ = try await db.query("by-score-swift", query)
                }
                try await db.deleteIndex(named: "by-score-swift")
                if try await db.document(withID: "_design/js-bench") == nil {
                    _ = try await db.save(Document(id: "_design/js-bench", body: ["views": ["by_score": [
                        "map": "function(doc) { if (doc.score !== undefined) emit(doc.score, doc.name); }"]]]))
                }
                let ours = try await timeAsync {
                    var query = IndexQuery()
                    query.limit = 0
                    _ = try await db.query(designDocument: "js-bench", view: "by_score", query)
                }
                try await db.deleteIndex(named: "javascript:js-bench/by_score")
                // The corpus stays as the other operations count it.
                _ = try await db.purge(documentIDs: ["_design/js-bench"])
                record("js_index_build", count: n, ours: ours, baseline: baseline)
                print("info js_index_build_vs_swift_map ratio=\(String(format: "%.2f", swift / ours)) (JavaScript view build rate / the same map in Swift)")
            }
            if selected.contains("index_build_mango") {
                let baseline = time { raw.buildTwoFieldIndex() }
                let ours = try await timeAsync {
                    let creation = try await db.createIndex(fields: [SortField("type"), SortField("score")], name: "type-score",
                                                            designDocument: "bench")
                    var query = IndexQuery()
                    query.limit = 0
                    let index = try await db.mangoIndexes().first { $0.name == creation.name }!
                    _ = try await db.query(index.indexName, query)
                    try await db.deleteIndex(designDocument: "bench", name: "type-score")
                }
                record("index_build_mango", count: n, ours: ours, baseline: baseline)
            }
            if selected.contains("find_indexed") {
                // The raw side reads through the score index that index_build made.
                if !selected.contains("index_build") { raw.buildIndex() }
                try await db.createIndex(fields: [SortField("score")], name: "score", designDocument: "bench-find")
                var warm = FindQuery(selector: try MangoSelector(["score": ["$gte": 0]]))
                warm.limit = 1
                _ = try await db.find(warm)
                let baseline = time { _ = raw.findByScore(ranges) }
                let ours = try await timeAsync {
                    for (low, high) in ranges {
                        _ = try await db.find(FindQuery(selector: try MangoSelector(["score": ["$gte": .integer(low), "$lte": .integer(high)]])))
                    }
                }
                record("find_indexed", count: ranges.count, ours: ours, baseline: baseline)
                try await db.deleteIndex(designDocument: "bench-find", name: "score")
            }
            if selected.contains("find_scan") {
                let baseline = time { _ = raw.scanForCity("Oslo") }
                let ours = try await timeAsync {
                    _ = try await db.find(FindQuery(selector: try MangoSelector(["address.city": "Oslo"])))
                }
                record("find_scan", count: n, ours: ours, baseline: baseline)
            }
            if selected.contains("range_query") {
                let baseline = time { _ = raw.rangeQueries(ranges) }
                let ours = try await timeAsync {
                    for (low, high) in ranges {
                        var query = IndexQuery()
                        query.startKey = .integer(low)
                        query.endKey = .integer(high)
                        _ = try await db.query("by-score", query)
                    }
                }
                record("range_query", count: ranges.count, ours: ours, baseline: baseline)
            }
            if selected.contains("reduce_sum") {
                let sums = IndexDefinition(name: "score-sum", version: "1", reduce: .sum) { doc, emit in
                    if let score = doc["score"] { emit(score, score) }
                }
                try await db.register(sums)
                _ = try await db.query("score-sum")
                let baseline = time { _ = raw.sum() }
                let ours = try await timeAsync { _ = try await db.query("score-sum") }
                record("reduce_sum", count: n, ours: ours, baseline: baseline)
            }
            if selected.contains("update") {
                let baseline = time { raw.update(ids: updateIDs) }
                let ours = try await timeAsync {
                    for id in updateIDs {
                        guard var doc = try await db.document(withID: id) else { continue }
                        doc["age"] = .integer((doc.int(forKey: "age") ?? 0) + 1)
                        _ = try await db.save(doc)
                    }
                }
                record("update", count: updateIDs.count, ours: ours, baseline: baseline)
                try await db.flushWriteAheadLog()
            }
            if selected.contains("replicate_local") {
                let baseline = time { _ = raw.copy(to: folder.appendingPathComponent("raw-copy.sqlite").path) }
                let copy = try await Database.open(name: "copy", directory: folder)
                var configuration = ReplicationConfiguration(source: .local(db), target: .local(copy))
                configuration.batchSize = 500
                let ours = try await timeAsync { try await Replicator(configuration: configuration).run() }
                record("replicate_local", count: n, ours: ours, baseline: baseline)
                await copy.close()
            }
            if selected.contains("replicate_http") {
                let baseline = time { _ = raw.copy(to: folder.appendingPathComponent("raw-copy2.sqlite").path) }
                // The server opens the file with its own settings (it keeps ancestor bodies), which an
                // open database of other settings would refuse: this is the last use of `db`.
                await db.close()
                let (server, port) = try await startBenchServer(dataDirectory: folder, label: "server")
                let pulled = try await Database.open(name: "pulled", directory: folder.appendingPathComponent("client"))
                var configuration = ReplicationConfiguration(source: .remote(URL(string: "http://127.0.0.1:\(port)/bench")!),
                                                             target: .local(pulled))
                configuration.batchSize = 500
                // The pull holds one batch at a time, not the database: the resident memory it adds
                // is sampled while it runs.
                let sampler = ResidentMemorySampler()
                let ours = try await timeAsync { try await Replicator(configuration: configuration).run() }
                pullGrowth.append(await sampler.stop())
                let pulledCount = try await pulled.info().documentCount
                guard pulledCount == n else { throw ValidationError("replicate_http pulled \(pulledCount) of \(n) documents") }
                record("replicate_http", count: n, ours: ours, baseline: baseline)
                await pulled.close()
                await server.stop()
            }
            if selected.contains("replicate_attachments") {
                let count = n / 20
                let baseline = time {
                    _ = raw.copy(to: folder.appendingPathComponent("raw-copy3.sqlite").path, limit: count)
                    _ = raw.copy(to: folder.appendingPathComponent("raw-copy4.sqlite").path, limit: count)
                }
                let ours = try await ReplicatedAttachments(count: count, folder: folder).run()
                record("replicate_attachments", count: count, ours: ours, baseline: baseline)
            }
            await db.close()
            releaseFreeMemory()

            if selected.contains("insert_single") {
                let count = n / 10
                let raw2 = RawSQLiteBaseline(path: folder.appendingPathComponent("raw2.sqlite").path)
                let db2 = try await Database.open(name: "bench2", directory: folder)
                let baseline = time { raw2.insertSingle(ids: Array(corpus.ids.prefix(count)), bodies: Array(corpus.bodies.prefix(count))) }
                let singles = corpus.documents(count: count)
                let ours = try await timeAsync {
                    for document in singles { _ = try await db2.save(document) }
                }
                record("insert_single", count: count, ours: ours, baseline: baseline)
                await db2.close()
            }
            if selected.contains("fts_build") || selected.contains("fts_update") || selected.contains("fts_query") {
                // Generated again in each repetition (the same texts: it is seeded), so that its 100 000
                // texts do not stay in the heap that the next repetition's insert_bulk peaks on.
                let bench = FullTextBench(count: n)
                let result = try await bench.run(folder: folder, selected: selected)
                for op in ["fts_build", "fts_update", "fts_query"] where selected.contains(op) {
                    guard let timing = result[op] else { continue }
                    let count = op == "fts_query" ? bench.queries.count : op == "fts_update" ? (n + 9) / 10 : n
                    record(op, count: count, ours: timing.ours, baseline: timing.baseline)
                }
                releaseFreeMemory()
            }
        }

        for op in Benchmark.allOperations {
            guard let entry = timings[op] else { continue }
            let ours = median(entry.ours), baseline = median(entry.baseline)
            let oursRate = Double(entry.count) / ours, baselineRate = Double(entry.count) / baseline
            print("op=\(op) n=\(entry.count) secs=\(format(ours)) ops_per_sec=\(format(oursRate, digits: 0)) "
                  + "baseline_ops_per_sec=\(format(baselineRate, digits: 0)) ratio=\(format(oursRate / baselineRate))")
        }
        for op in Benchmark.allOperations {
            guard let entry = timings[op], let cpu = cpuTimes[op], cpu.count == entry.ours.count else { continue }
            print("info cpu op=\(op) cpu_secs=\(format(median(cpu))) cores=\(format(median(cpu) / median(entry.ours), digits: 2))")
        }
        print("peak_rss_mb=\(format(max(peakResidentMegabytes(), earlierPeaks.max() ?? 0), digits: 1))")
        if !pullGrowth.isEmpty {
            print("replicate_http_rss_growth_mb=\(format(pullGrowth.max()!, digits: 1)) "
                  + "replicate_http_data_mb=\(format(Double(corpus.bodies.reduce(0) { $0 + $1.count }) / 1_048_576, digits: 1))")
        }
        if !attachmentGrowth.isEmpty {
            print("attachment_stream_rss_growth_mb=\(format(attachmentGrowth.max()!, digits: 1))")
        }
    }
}

/// A DocServer on 127.0.0.1 (a free port, anonymous access) over `dataDirectory`, logging warnings
/// only: a line per request to the terminal would measure the terminal.
func startBenchServer(dataDirectory: URL, label: String) async throws -> (DocServer, Int) {
    var configuration = ServerConfiguration(dataDirectory: dataDirectory)
    configuration.port = 0
    configuration.allowAnonymous = true
    var logger = Logger(label: "docstore-bench.\(label)")
    logger.logLevel = .warning
    let server = try await DocServer(configuration: configuration, logger: logger)
    return (server, try await server.start())
}

func time(_ body: () -> Void) -> Double {
    let start = ContinuousClock.now
    body()
    return (ContinuousClock.now - start).seconds
}

/// Runs `body` and returns its wall time; the process's CPU time over it (every thread: a
/// replication's server and client both) is kept in ``timedSections`` for the op that reports it.
func timeAsync(_ body: () async throws -> Void) async throws -> Double {
    let cpuStart = processCPUSeconds()
    let start = ContinuousClock.now
    try await body()
    let wall = (ContinuousClock.now - start).seconds
    let cpu = processCPUSeconds() - cpuStart
    timedSections.withLock { $0.append((wall, cpu)) }
    return wall
}

/// The wall and CPU times of the sections ``timeAsync(_:)`` measured since an op was last recorded.
let timedSections = Locked<[(wall: Double, cpu: Double)]>([])

/// The CPU time (user and system) the process has used, in seconds.
func processCPUSeconds() -> Double {
    var usage = rusage()
    #if canImport(Glibc)
    getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
    #else
    getrusage(RUSAGE_SELF, &usage)
    #endif
    func seconds(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1e6 }
    return seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

extension Duration {
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}

func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    return sorted[sorted.count / 2]
}

func format(_ value: Double, digits: Int = 3) -> String {
    String(format: "%.\(digits)f", value)
}

/// The high-water mark of resident memory (Linux `VmHWM`), in MB.
func peakResidentMegabytes() -> Double { statusMegabytes("VmHWM:") }

/// The resident memory now (Linux `VmRSS`), in MB.
func residentMegabytes() -> Double { statusMegabytes("VmRSS:") }

/// A memory figure of `/proc/self/status` (`VmRSS:`, `RssAnon:`…), in MB; 0 where there is none.
func statusMegabytes(_ field: String) -> Double {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
        let line = status.split(separator: "\n").first(where: { $0.hasPrefix(field) })
    else { return 0 }
    let kilobytes = Double(line.split(separator: " ").dropFirst().first ?? "0") ?? 0
    return kilobytes / 1024
}

/// Starts a new high-water mark of resident memory from the current resident size (Linux
/// `/proc/self/clear_refs`, value 5), so that a peak measured afterwards belongs to what follows;
/// returns the high-water mark it ends, in MB (which the process's peak must still count).
func resetPeakResidentMemory() -> Double {
    let peak = peakResidentMegabytes()
    try? "5".write(toFile: "/proc/self/clear_refs", atomically: false, encoding: .utf8)
    return peak
}

/// Hands the heap's free pages back to the system (glibc keeps them in its per-thread arenas), so
/// that memory the harness itself has finished with — the parsed corpus — does not count again in
/// the next repetition's peak.
func releaseFreeMemory() {
    #if canImport(Glibc)
    // malloc_trim is not in Swift's Glibc module; look it up in the C library.
    typealias MallocTrim = @convention(c) (Int) -> Int32
    if let handle = dlopen(nil, RTLD_NOW), let symbol = dlsym(handle, "malloc_trim") {
        _ = unsafeBitCast(symbol, to: MallocTrim.self)(0)
    }
    #endif
}

