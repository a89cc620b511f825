import DocStore
import Foundation

/// What a long command shows while it works, on one line of standard error when that is a terminal:
/// a bar with the share done, the rate and the time left when the total is known, a spinner with the
/// count and the rate when it is not. Redrawn at most ten times a second; the last drawing stays, with
/// the time the work took. Nothing is drawn when standard error is not a terminal or with `--quiet`
/// (the commands' plain output, meant for scripts, is unchanged either way).
final class TerminalProgress: Sendable {
    /// What is counted, singular and plural (`document`, `documents`); `nil` when nothing is (the
    /// line then shows the time only).
    let unit: (one: String, many: String)?
    private let label: String
    /// Whether anything is drawn.
    let isShown: Bool
    private let started = ContinuousClock.now
    /// When the first drawing may appear: work that ends sooner shows nothing.
    private let delay: Duration
    private let state = Locked<(done: Int, total: Int?, note: String, drawn: ContinuousClock.Instant?, frame: Int, finished: Bool)>((0, nil, "", nil, 0, false))

    /// - Parameters:
    ///   - enabled: `false` for `--quiet`; also off when standard error is not a terminal.
    ///   - delay: how long the work must have run before anything is drawn (index builds draw only
    ///     when they take longer than a second).
    init(_ label: String, unit: (one: String, many: String)?, total: Int? = nil, enabled: Bool = true,
         delay: Duration = .zero) {
        self.label = label
        self.unit = unit
        self.delay = delay
        isShown = enabled && isatty(STDERR_FILENO) != 0
        state.withLock { $0.total = total }
        if delay == .zero { draw(force: true) }
    }


    /// `done` of the work is done (of `total`, when it becomes known or changes); `note` (figures
    /// of the work's own, `12 written, 0 failed`) ends the line.
    func update(_ done: Int, total: Int? = nil, note: String? = nil) {
        state.withLock {
            $0.done = done
            if let total { $0.total = total }
            if let note { $0.note = note }
        }
        draw(force: false)
    }

    /// The work is over: the line is drawn a last time, complete, with the time taken, and ended.
    func finish() {
        guard isShown else { return }
        let line: String? = state.withLock { state in
            guard !state.finished else { return nil }
            state.finished = true
            // Nothing was drawn within the delay: the work was quick, and stays quiet.
            guard state.drawn != nil else { return nil }
            if let total = state.total { state.done = max(state.done, total) }
            return render(state.done, state.total, state.note, frame: state.frame, final: true)
        }
        if let line { write("\r\u{1B}[2K" + line + "\n") }
    }

    /// The work stopped short: the line is ended where it stands, so that an error follows on a line
    /// of its own.
    func abandon() {
        guard isShown else { return }
        let drawn = state.withLock { state in
            defer { state.finished = true }
            return !state.finished && state.drawn != nil
        }
        if drawn { write("\n") }
    }

    /// Runs `work`, which says nothing while it works (a compaction, an index build), with the line
    /// redrawn ten times a second so that its spinner and clock turn; ended as ``around(_:)`` ends it.
    /// `figures`, when given, is read at each drawing: the work's done and total counts once it has
    /// them (the database's ``ActiveTask`` for that work).
    func ticking<T>(following figures: (@Sendable () -> (done: Int, total: Int)?)? = nil,
                    _ work: () async throws -> T) async rethrows -> T {
        let ticks = Task { [self] in
            while !Task.isCancelled {
                if let (done, total) = figures?() { update(done, total: total) } else { draw(force: false) }
                try? await Task.sleep(for: .milliseconds(100))
            }
        }
        defer { ticks.cancel() }
        return try await around(work)
    }

    /// Runs `work`, the line ended (complete, or where it stands when `work` throws) after it.
    func around<T>(_ work: () async throws -> T) async rethrows -> T {
        do {
            let value = try await work()
            finish()
            return value
        } catch {
            abandon()
            throw error
        }
    }

    private func draw(force: Bool) {
        guard isShown else { return }
        let now = ContinuousClock.now
        let line: String? = state.withLock { state in
            guard !state.finished, now - started >= delay else { return nil }
            if !force, let drawn = state.drawn, now - drawn < .milliseconds(100) { return nil }
            state.drawn = now
            state.frame += 1
            return render(state.done, state.total, state.note, frame: state.frame, final: false)
        }
        if let line { write("\r\u{1B}[2K" + line) }
    }

    private func write(_ text: String) {
        FileHandle.standardError.write(Data(text.utf8))
    }

    /// The terminal's width in columns (80 when it does not say).
    private var columns: Int {
        var size = winsize()
        guard ioctl(STDERR_FILENO, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 else { return 80 }
        return Int(size.ws_col)
    }

    private func render(_ done: Int, _ total: Int?, _ note: String, frame: Int, final: Bool) -> String {
        let columns = self.columns
        var line = TerminalProgress.line(label: label, unit: unit, done: done, total: total, elapsed: ContinuousClock.now - started,
                                         frame: frame, final: final, columns: columns - (note.isEmpty ? 0 : note.count + 2))
        if !note.isEmpty { line += "  " + note }
        // A line longer than the terminal would wrap, and the next drawing would not replace it.
        return String(line.prefix(max(columns - 1, 20)))
    }

    /// One drawing of the line, fitted to `columns`: for example
    /// `export ━━━━━━━━━━━────────  54%  54 000/100 000 documents  21 400/s  0:02 left`, or, without a
    /// total, `import ⠹ 54 000 documents  21 400/s  0:02`.
    static func line(label: String, unit: (one: String, many: String)?, done: Int, total: Int?, elapsed: Duration,
                     frame: Int, final: Bool, columns: Int) -> String {
        let seconds = max(Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18, 0.001)
        let rate = Double(done) / seconds
        // Work that counted nothing (an index already current, a compaction with nothing to drop) says
        // how long it took, not "0 documents".
        guard let unit, !(final && done == 0 && (total ?? 0) == 0) else {
            let spinner = Array("⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏")
            return final ? "\(label) done in \(clock(seconds))" : "\(label) \(spinner[frame % spinner.count]) \(clock(seconds))"
        }
        let count = total.map { "\(grouped(done))/\(grouped($0)) \($0 == 1 ? unit.one : unit.many)" }
            ?? "\(grouped(done)) \(done == 1 ? unit.one : unit.many)"
        let rateText = done > 0 && seconds >= 0.05 ? "  \(grouped(Int(rate.rounded())))/s" : ""
        if final {
            return "\(label) \(grouped(done)) \(done == 1 ? unit.one : unit.many) in \(clock(seconds))\(rateText)"
        }
        guard let total, total > 0 else {
            let spinner = Array("⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏")
            return "\(label) \(spinner[frame % spinner.count]) \(count)\(rateText)  \(clock(seconds))"
        }
        let share = min(1, Double(done) / Double(total))
        let left = done > 0 && done < total ? "  \(clock(Double(total - done) / max(rate, 0.001))) left" : ""
        let tail = "  \(Int((share * 100).rounded(.down)))%  \(count)\(rateText)\(left)"
        let width = max(10, min(30, columns - 1 - label.count - 1 - tail.count))
        let filled = Int((share * Double(width)).rounded(.down))
        let bar = String(repeating: "━", count: filled) + String(repeating: "─", count: width - filled)
        return "\(label) \(bar)\(tail)"
    }

    /// `1234567` as `1 234 567`.
    static func grouped(_ number: Int) -> String {
        let digits = Array(String(number.magnitude))
        var text = ""
        for (index, digit) in digits.enumerated() {
            if index > 0, (digits.count - index) % 3 == 0 { text.append(" ") }
            text.append(digit)
        }
        return number < 0 ? "-" + text : text
    }

    /// Seconds as `m:ss` (`h:mm:ss` from an hour).
    static func clock(_ seconds: Double) -> String {
        let total = Int(seconds.rounded())
        let (hours, minutes, rest) = (total / 3600, total / 60 % 60, total % 60)
        return hours > 0 ? String(format: "%d:%02d:%02d", hours, minutes, rest) : String(format: "%d:%02d", minutes, rest)
    }
}

extension Database {
    /// The done and total counts of this database's running task of `kind`, for a progress line.
    func progress(of kind: ActiveTask.Kind) -> (done: Int, total: Int)? {
        activeTasks.last { $0.kind == kind }.map { ($0.changesDone, $0.totalChanges) }
    }
}
