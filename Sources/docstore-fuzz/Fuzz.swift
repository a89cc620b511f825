import DocStoreFuzzing
import Foundation

#if FUZZING
/// libFuzzer's entry point (`swift build --sanitize=fuzzer -Xswiftc -DFUZZING`, as
/// `Tests/Fuzz/run.sh` builds it): one input for the target `DOCSTORE_FUZZ_TARGET` names.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    FuzzTarget.current.check(size == 0 ? [] : Array(UnsafeBufferPointer(start: data, count: size)))
    return 0
}
#else
/// Without libFuzzer: replays files through a target's checks —
/// `docstore-fuzz <target> <file or folder>…` — and says how many held.
@main
struct ReplayCorpus {
    static func main() throws {
        let arguments = CommandLine.arguments.dropFirst()
        guard let name = arguments.first, let target = FuzzTarget(rawValue: name) else {
            print("usage: docstore-fuzz <\(FuzzTarget.allCases.map(\.rawValue).joined(separator: "|"))> <file or folder>…")
            exit(2)
        }
        var files: [URL] = []
        for path in arguments.dropFirst() {
            let url = URL(fileURLWithPath: path)
            var isFolder: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isFolder) else { continue }
            if isFolder.boolValue {
                files += try FileManager.default.contentsOfDirectory(at: url, includingPropertiesForKeys: nil).sorted { $0.path < $1.path }
            } else {
                files.append(url)
            }
        }
        var failed = 0
        for file in files {
            if let failure = target.failure(Array(try Data(contentsOf: file))) {
                print("\(file.path): \(failure)")
                failed += 1
            }
        }
        print("\(target.rawValue): \(files.count - failed) of \(files.count) inputs hold")
        if failed > 0 { exit(1) }
    }
}
#endif
