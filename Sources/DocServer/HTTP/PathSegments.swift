/// The first few segments of a request path, found without allocating: two checks run on every
/// request by their path as sent (which thread answers it, and its route in the metrics).
///
/// Empty segments are skipped, as `split(separator: "/")` does, and the query (after `?`) is not
/// part of the path. Segments are not percent-decoded: a caller that needs decoded segments checks
/// ``needsDecoding`` first.
struct PathSegments {
    /// How many segments are kept.
    static let kept = 5

    private var segments: (Substring, Substring, Substring, Substring, Substring) = ("", "", "", "", "")
    /// The number of segments, counted up to ``kept`` + 1 (more are not counted).
    private(set) var count = 0
    /// Whether a kept segment has a `%` (its decoded form may differ).
    private(set) var needsDecoding = false

    init(path: String) {
        let bytes = path.utf8
        let end = bytes.firstIndex(of: UInt8(ascii: "?")) ?? bytes.endIndex
        var start = bytes.startIndex
        while start < end && count <= PathSegments.kept {
            let stop = bytes[start..<end].firstIndex(of: UInt8(ascii: "/")) ?? end
            if stop > start {
                if count < PathSegments.kept {
                    let segment = path[start..<stop]
                    if segment.utf8.contains(UInt8(ascii: "%")) { needsDecoding = true }
                    set(count, segment)
                }
                count += 1
            }
            start = stop < end ? bytes.index(after: stop) : end
        }
    }

    /// Segments already split and decoded, as ``CouchRequest/segments(ofPath:)`` makes them.
    init(decoded: [String]) {
        for (index, segment) in decoded.prefix(PathSegments.kept).enumerated() { set(index, Substring(segment)) }
        count = min(decoded.count, PathSegments.kept + 1)
    }

    private mutating func set(_ index: Int, _ segment: Substring) {
        switch index {
        case 0: segments.0 = segment
        case 1: segments.1 = segment
        case 2: segments.2 = segment
        case 3: segments.3 = segment
        default: segments.4 = segment
        }
    }

    /// The segment at `index` (below ``kept``), or an empty one past the last.
    subscript(index: Int) -> Substring {
        switch index {
        case 0: segments.0
        case 1: segments.1
        case 2: segments.2
        case 3: segments.3
        default: segments.4
        }
    }
}
