import Dispatch
import Foundation

/// An ordered map that a second thread helps with — DocStore's one way of keeping two cores busy
/// (JSON and MD5 on one, SQLite on the other).
///
/// The owner submits inputs in order (``submit(_:)``) and takes the outputs back in the same order
/// (``output(at:)``). A helper on a dedicated thread transforms the submitted inputs oldest first as
/// they arrive. Taking an output the helper has not started transforms it on the
/// calling thread instead, and while the helper holds the one wanted, the caller transforms a later
/// input meanwhile, so neither thread waits for work the other could do; the only wait is for the
/// helper's item when no other input is left, which is bounded by one item's CPU time and never by
/// I/O — that is why the owner may be a thread of the Swift concurrency pool.
/// How far ahead the owner submits is its choice (a bounded look-ahead, or everything at once).
///
/// The owner is one thread at a time (a reader, the writer actor, the index writer); the helper is
/// the only other thread.
final class HelpedMap<Input: Sendable, Output: Sendable>: Sendable {
    /// The places that use it, by name, for ``serialUses``.
    enum Use: String, Sendable {
        case changesPage = "changes"
        case bodyEncoding = "bodies"
        case indexPrefetch = "index"
    }

    private struct State {
        var inputs: [Int: Input] = [:]
        var outputs: [Int: Result<Output, any Error>] = [:]
        var submitted = 0
        /// The item the helper is transforming.
        var helperItem: Int?
        /// The owner waits for ``helperItem`` to finish.
        var ownerWaits = false
        /// The helper sleeps until an input is submitted (or the map stops).
        var helperWaits = false
        var stopped = false
        /// Whether the helper's job has begun on its thread (it may wait in the threads' queue while
        /// other maps hold them all).
        var helperStarted = false
    }

    private enum Next {
        case done(Result<Output, any Error>)
        case transform(Input)
        /// The helper holds the wanted item: meanwhile transform a later one.
        case transformAhead(Int, Input)
        case wait
    }

    private enum Step {
        case transform(Int, Input)
        case sleep
        case stop
    }

    private let transform: @Sendable (Input) throws -> Output
    private let state = Locked(State())
    private let helped: Bool
    private let inputAvailable = DispatchSemaphore(value: 0)
    private let itemDone = DispatchSemaphore(value: 0)
    private let helperStopped = DispatchSemaphore(value: 0)

    /// Starts the helper thread, unless `use` is named in the environment variable `DOCSTORE_SERIAL`
    /// (comma-separated: `changes,bodies,index`), which runs it on the owner's thread alone —
    /// for measuring what each helper wins (Docs/Performance.md). The owner must call ``stop()``.
    init(_ use: Use, transform: @escaping @Sendable (Input) throws -> Output) {
        self.transform = transform
        helped = !HelpedMapSettings.serialUses.contains(use.rawValue)
        guard helped else { return }
        HelpedMapSettings.helpers.submit { [self] in
            // A map stopped before its helper got a thread is left alone: the owner did its work.
            let run = state.withLock { state -> Bool in
                state.helperStarted = true
                return !state.stopped
            }
            if run { help() }
            helperStopped.signal()
        }
    }

    /// Adds the next input; returns its position.
    @discardableResult
    func submit(_ input: Input) -> Int {
        let (index, wake) = state.withLock { state -> (Int, Bool) in
            let index = state.submitted
            state.submitted += 1
            state.inputs[index] = input
            defer { state.helperWaits = false }
            return (index, state.helperWaits)
        }
        if wake { inputAvailable.signal() }
        return index
    }

    /// The number of inputs submitted so far.
    var submitted: Int { state.withLock { $0.submitted } }

    /// The output of input `index`: the helper's, or transformed here if the helper has not started
    /// it. Take each output once.
    /// - Throws: the transform's error for that input.
    func output(at index: Int) throws -> Output {
        while true {
            let next: Next = state.withLock { state in
                if let output = state.outputs.removeValue(forKey: index) { return .done(output) }
                if let input = state.inputs.removeValue(forKey: index) { return .transform(input) }
                precondition(state.helperItem == index, "HelpedMap: output \(index) taken twice or never submitted")
                if let ahead = state.inputs.keys.min() {
                    return .transformAhead(ahead, state.inputs.removeValue(forKey: ahead)!)
                }
                state.ownerWaits = true
                return .wait
            }
            switch next {
            case .done(let output): return try output.get()
            case .transform(let input): return try transform(input)
            case .transformAhead(let ahead, let input):
                let output = Result { try transform(input) }
                state.withLock { $0.outputs[ahead] = output }
            case .wait: itemDone.wait()
            }
        }
    }

    /// The output of input `index` if the helper has finished it, without waiting or transforming.
    func finishedOutput(at index: Int) -> Result<Output, any Error>? {
        state.withLock { $0.outputs.removeValue(forKey: index) }
    }

    /// Stops the helper and waits until it has left its current item; outputs not taken are dropped.
    /// A helper that has not begun (its job still queued behind other maps' helpers) is not waited
    /// for: it ends as soon as it runs, so stopping never waits for other maps.
    func stop() {
        guard helped else { return }
        let (first, wake, started) = state.withLock { state -> (Bool, Bool, Bool) in
            defer { state.stopped = true; state.helperWaits = false }
            return (!state.stopped, state.helperWaits, state.helperStarted)
        }
        guard first else { return }
        if wake { inputAvailable.signal() }
        if started { helperStopped.wait() }
    }

    /// How many helpers run at once: maps beyond that many have their owner do all the work until a
    /// helper thread is free.
    static var helperThreads: Int { HelpedMapSettings.helperThreadCount }

    private func help() {
        while true {
            // Deciding to sleep and marking it happen under the lock, so an input submitted right
            // after still wakes the helper.
            let step: Step = state.withLock { state in
                if state.stopped { return .stop }
                if let index = state.inputs.keys.min() {
                    state.helperItem = index
                    return .transform(index, state.inputs.removeValue(forKey: index)!)
                }
                state.helperWaits = true
                return .sleep
            }
            switch step {
            case .stop:
                return
            case .sleep:
                inputAvailable.wait()
            case .transform(let index, let input):
                let output = Result { try transform(input) }
                let wakeOwner = state.withLock { state -> Bool in
                    state.outputs[index] = output
                    state.helperItem = nil
                    defer { state.ownerWaits = false }
                    return state.ownerWaits
                }
                if wakeOwner { itemDone.signal() }
            }
        }
    }
}

/// `DOCSTORE_SERIAL`, read once, and the helpers' threads.
private enum HelpedMapSettings {
    /// The helpers' threads: dedicated ones, since a helper waits (on a semaphore) for its owner's next
    /// input, which must not hold a thread of the cooperative pool (Docs/Architecture.md). Owners are the
    /// writers and the readers, at most a few at once.
    static let helperThreadCount = max(2, ProcessInfo.processInfo.activeProcessorCount)
    static let helpers = DedicatedThreads(count: helperThreadCount, name: "docstore.helper")

    static let serialUses: Set<String> = Set(
        (ProcessInfo.processInfo.environment["DOCSTORE_SERIAL"] ?? "").split(separator: ",").map { String($0) })
}
