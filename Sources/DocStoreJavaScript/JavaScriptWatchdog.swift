import CJavaScriptCore
import Foundation

/// What a context's watchdog judges the running call by: the CPU time it has taken and how far it has
/// grown the process's resident memory. JavaScriptCore's watchdog (`JSContextGroupSetExecutionTimeLimit`)
/// asks ``watchdogCallback`` every ``tick`` of CPU time of a call; the callback asks this.
///
/// Not `Sendable`, and needing no lock: it belongs to one ``JavaScriptContext``, used only on that
/// context's thread, and JavaScriptCore calls the watchdog's callback on that thread, from inside the
/// running call.
final class CallWatch {
    enum Reason {
        case time, memory
    }

    /// CPU seconds one call may take; 0 for no limit.
    let timeLimit: Double
    /// How many bytes the process's resident memory may grow while one call runs; `nil` for no bound.
    let memoryLimit: Int?
    /// How often, in CPU seconds of a call, the watchdog looks at it.
    let tick: Double
    /// Ticks of the current call.
    private var ticks = 0
    /// The resident memory at the current call's first tick.
    private var residentAtFirstTick: Int?
    /// Why the current call was stopped, once it was.
    private(set) var stopped: Reason?

    init(timeLimit: Double, memoryLimit: Int?) {
        self.timeLimit = timeLimit
        self.memoryLimit = memoryLimit
        tick = timeLimit > 0 ? min(CallWatch.period, timeLimit) : CallWatch.period
    }

    /// The watchdog's period: a call shorter than this is never looked at, so a view build's many
    /// short calls cost nothing.
    static let period = 0.05

    /// Whether the watchdog has anything to watch.
    var isActive: Bool { timeLimit > 0 || memoryLimit != nil }

    /// Starts a call.
    func reset() {
        ticks = 0
        residentAtFirstTick = nil
        stopped = nil
    }

    /// Whether to stop the running call, one more tick into it. The memory is measured from the first
    /// tick: what a call allocates in its first 50 ms of CPU is not counted, what it goes on
    /// allocating is.
    func shouldStop() -> Bool {
        ticks += 1
        if timeLimit > 0, Double(ticks) * tick >= timeLimit - tick / 2 {
            stopped = .time
            return true
        }
        if let memoryLimit, let resident = ResidentMemory.bytes() {
            if let first = residentAtFirstTick {
                if resident - first > memoryLimit {
                    stopped = .memory
                    return true
                }
            } else {
                residentAtFirstTick = resident
            }
        }
        return false
    }
}

/// JavaScriptCore's watchdog callback for a context whose `data` is its ``CallWatch``: stops the call
/// (an uncatchable termination exception) or asks to be called again a tick later — JavaScriptCore
/// looks again only when the callback sets a new limit.
func watchdogCallback(_ context: JSContextRef?, _ data: UnsafeMutableRawPointer?) -> Bool {
    guard let context, let data else { return true }
    let watch = Unmanaged<CallWatch>.fromOpaque(data).takeUnretainedValue()
    if watch.shouldStop() { return true }
    JSContextGroupSetExecutionTimeLimit(JSContextGetGroup(context), watch.tick, watchdogCallback, data)
    return false
}

/// The process's resident memory.
enum ResidentMemory {
    /// In bytes, or `nil` where it cannot be read.
    static func bytes() -> Int? {
        #if os(Linux)
        // `/proc/self/statm`: sizes in pages, the resident one second.
        let file = open("/proc/self/statm", O_RDONLY)
        guard file >= 0 else { return nil }
        defer { close(file) }
        var bytes = [UInt8](repeating: 0, count: 128)
        let count = bytes.withUnsafeMutableBytes { read(file, $0.baseAddress, $0.count) }
        guard count > 0 else { return nil }
        let fields = bytes[..<count].split(separator: UInt8(ascii: " "))
        guard fields.count > 1, let pages = Int(String(decoding: fields[1], as: UTF8.self)) else { return nil }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
        #elseif canImport(Darwin)
        var info = mach_task_basic_info()
        var count = mach_msg_type_number_t(MemoryLayout<mach_task_basic_info>.size / MemoryLayout<natural_t>.size)
        let result = withUnsafeMutablePointer(to: &info) { pointer in
            pointer.withMemoryRebound(to: integer_t.self, capacity: Int(count)) {
                task_info(mach_task_self_, task_flavor_t(MACH_TASK_BASIC_INFO), $0, &count)
            }
        }
        return result == KERN_SUCCESS ? Int(info.resident_size) : nil
        #else
        return nil
        #endif
    }
}
