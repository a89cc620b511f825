import Foundation

// Memory that is live at exit, reachable from globals, which LeakSanitizer still reports as leaked on
// Linux x86_64: `lsan-proofs.sh` builds this with AddressSanitizer and shows each report. Every value
// below is still referenced when the process exits.

/// A reference in a multi-payload enum whose payloads are all references: Swift keeps the case in the
/// pointer's spare high bits, so the word in memory is no address LeakSanitizer recognises
/// (`JSONObject.Storage.stored`, `Data`'s representation).
final class TaggedPayload { let values = [1, 2, 3] }
enum TwoReferences {
    case first([Int])
    case second(TaggedPayload)
}
var keptInEnum: [TwoReferences] = (0..<10).map { _ in .second(TaggedPayload()) }

/// The boxes of an indirect enum, referenced the same way (MangoSelector's `Condition`).
indirect enum Tree {
    case leaf(Int)
    case node(Tree, Tree)
}
var keptTrees: [Tree] = (0..<10).map { .node(.leaf($0), .leaf($0 + 1)) }

/// `Data` keeps its case in the same way: the storage of a live `Data` of more than 14 bytes (the
/// recorded bodies `TestSupport` keeps, a file read whole).
var keptData: [Data] = (0..<10).map { Data(repeating: UInt8($0), count: 100) }

/// An object that has had a weak reference keeps a side table for the rest of its life, which its
/// header points to in an encoded form (a database's `ChangeNotifier`, weakly referenced by its streams).
final class OnceWeaklyReferenced {}
var onceWatched: [OnceWeaklyReferenced] = (0..<10).map { _ in OnceWeaklyReferenced() }
for object in onceWatched {
    weak var glance = object
    _ = glance
}

// Written unbuffered: LeakSanitizer ends the process before a buffered standard output is flushed.
FileHandle.standardOutput.write(Data("live at exit: \(keptInEnum.count) enum payloads, \(keptTrees.count) trees, \(keptData.count) data, \(onceWatched.count) objects once weakly referenced\n".utf8))
