import NIOCore

/// Follows the framing of HTTP/1.1 requests on the raw bytes of a connection, to reject a declared
/// chunk size larger than any body the server accepts as soon as its size line arrives.
///
/// The HTTP parser (llhttp) accepts any chunk size up to 2⁶⁴ − 1 and then waits for that many bytes,
/// so a request declaring an absurd chunk would hang until the idle timeout. This guard reads request
/// heads (for `Transfer-Encoding` and `Content-Length`), skips bodies and chunk data, and parses each
/// chunk-size line as it arrives; a size over ``limit`` is reported at its first digit too many, before
/// the line even ends. Whatever it cannot follow (a malformed head or size line) it stops inspecting
/// and leaves to the HTTP parser, which rejects it. A pure state machine: no I/O.
struct ChunkSizeGuard {
    /// What the bytes fed so far show.
    enum Verdict: Equatable {
        /// Nothing wrong so far.
        case pass
        /// A chunk-size line declares more than the limit; `consumed` bytes of the last input were
        /// examined, the offending digit included.
        case tooLarge(consumed: Int)
    }

    private enum State: Equatable {
        /// Reading a request head, line by line.
        case head
        /// Skipping `Content-Length` bytes of body.
        case body(remaining: UInt64)
        /// Reading a chunk-size line; `value` is the size read so far, until `;`, CR or LF.
        case chunkSize(value: UInt64, digits: Int, inExtension: Bool)
        /// Skipping chunk data.
        case chunkData(remaining: UInt64)
        /// Skipping the CRLF after chunk data.
        case chunkEnd(remaining: Int)
        /// Reading trailer lines after the last chunk, until an empty line.
        case trailers
        /// Not inspecting any more (after something this guard does not follow, or a verdict).
        case transparent
    }

    /// The largest chunk accepted.
    let limit: UInt64
    private var state: State = .head
    /// The current line of a head or of trailers, without its line end.
    private var line: [UInt8] = []
    private var headBytes = 0
    private var sawRequestLine = false
    private var chunked = false
    private var contentLength: UInt64 = 0
    private var isConnect = false

    /// A head larger than this is left to the parser (which has its own limits).
    static let maximumHeadSize = 128 * 1024

    init(limit: UInt64) {
        self.limit = limit
    }

    /// Whether the guard has stopped inspecting.
    var isTransparent: Bool { state == .transparent }

    /// Examines the next bytes of the connection.
    mutating func consume(_ bytes: UnsafeRawBufferPointer) -> Verdict {
        var index = 0
        while index < bytes.count {
            switch state {
            case .transparent:
                return .pass
            case .head, .trailers:
                // The rest of the line (its end included) at once: a head is read per line, not per byte.
                let newline = bytes[index...].firstIndex(of: UInt8(ascii: "\n"))
                let segmentEnd = newline.map { $0 + 1 } ?? bytes.count
                headBytes += segmentEnd - index
                if headBytes > ChunkSizeGuard.maximumHeadSize {
                    state = .transparent
                    return .pass
                }
                line.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[index..<(newline ?? bytes.count)]))
                index = segmentEnd
                if newline != nil {
                    if line.last == UInt8(ascii: "\r") { line.removeLast() }
                    endLine()
                    line.removeAll(keepingCapacity: true)
                }
            case .body(let remaining):
                let skipped = min(remaining, UInt64(bytes.count - index))
                index += Int(skipped)
                state = skipped == remaining ? .head : .body(remaining: remaining - skipped)
                if skipped == remaining { startHead() }
            case .chunkData(let remaining):
                let skipped = min(remaining, UInt64(bytes.count - index))
                index += Int(skipped)
                state = skipped == remaining ? .chunkEnd(remaining: 2) : .chunkData(remaining: remaining - skipped)
            case .chunkEnd(let remaining):
                let byte = bytes[index]
                index += 1
                let expected = remaining == 2 ? UInt8(ascii: "\r") : UInt8(ascii: "\n")
                guard byte == expected else {
                    state = .transparent
                    return .pass
                }
                state = remaining == 2 ? .chunkEnd(remaining: 1) : .chunkSize(value: 0, digits: 0, inExtension: false)
            case .chunkSize(let value, let digits, let inExtension):
                let byte = bytes[index]
                index += 1
                if byte == UInt8(ascii: "\n") {
                    guard digits > 0 else {
                        state = .transparent
                        return .pass
                    }
                    if value == 0 {
                        headBytes = 0
                        line.removeAll(keepingCapacity: true)
                        state = .trailers
                    } else {
                        state = .chunkData(remaining: value)
                    }
                } else if inExtension || byte == UInt8(ascii: "\r") {
                    // An extension or the CR before the line end: not part of the size.
                    state = .chunkSize(value: value, digits: digits, inExtension: true)
                } else if byte == UInt8(ascii: ";") || byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") {
                    state = .chunkSize(value: value, digits: digits, inExtension: true)
                } else if let digit = ChunkSizeGuard.hexValue(byte) {
                    // Sixteen significant hex digits fill 64 bits; one more overflows.
                    if value > (UInt64.max >> 4) {
                        state = .transparent
                        return .tooLarge(consumed: index)
                    }
                    let next = value << 4 | UInt64(digit)
                    if next > limit {
                        state = .transparent
                        return .tooLarge(consumed: index)
                    }
                    state = .chunkSize(value: next, digits: digits + 1, inExtension: false)
                } else {
                    state = .transparent
                    return .pass
                }
            }
        }
        return .pass
    }

    /// A complete line of a head or of trailers.
    private mutating func endLine() {
        if state == .trailers {
            if line.isEmpty { startHead() }
            return
        }
        if !sawRequestLine {
            // Empty lines before a request line are tolerated, as by the parser.
            guard !line.isEmpty else { return }
            sawRequestLine = true
            isConnect = line.starts(with: "CONNECT ".utf8)
            return
        }
        guard !line.isEmpty else {
            endHead()
            return
        }
        guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { return }
        // Only two header names matter; the others are passed over without making strings of them.
        let name = line[..<colon]
        let isTransferEncoding = ChunkSizeGuard.equalsIgnoringASCIICase(name, "transfer-encoding")
        guard isTransferEncoding || ChunkSizeGuard.equalsIgnoringASCIICase(name, "content-length") else { return }
        let value = String(decoding: line[(colon + 1)...], as: UTF8.self).trimmingCharacters(in: [" ", "\t"])
        if isTransferEncoding {
            if value.lowercased().contains("chunked") { chunked = true }
        } else {
            if let length = UInt64(value) { contentLength = length } else { state = .transparent }
        }
    }

    /// Whether `bytes` spell `lowercase` (which is lower-case ASCII) in any case.
    private static func equalsIgnoringASCIICase(_ bytes: ArraySlice<UInt8>, _ lowercase: StaticString) -> Bool {
        guard bytes.count == lowercase.utf8CodeUnitCount else { return false }
        let expected = UnsafeBufferPointer(start: lowercase.utf8Start, count: lowercase.utf8CodeUnitCount)
        return zip(bytes, expected).allSatisfy { byte, wanted in
            byte == wanted || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") && byte | 0x20 == wanted)
        }
    }

    private mutating func endHead() {
        if isConnect {
            state = .transparent
        } else if chunked {
            state = .chunkSize(value: 0, digits: 0, inExtension: false)
        } else if contentLength > 0 {
            state = .body(remaining: contentLength)
        } else {
            startHead()
        }
    }

    private mutating func startHead() {
        state = .head
        line.removeAll(keepingCapacity: true)
        headBytes = 0
        sawRequestLine = false
        chunked = false
        contentLength = 0
        isConnect = false
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}

/// The error a request's body stream ends with when its chunk-size line declares more than the server
/// accepts.
struct ChunkTooLargeError: Error {
    let limit: UInt64
}

/// Runs a ``ChunkSizeGuard`` over a connection's inbound bytes, in front of the HTTP decoder. On a
/// verdict it passes on the bytes up to the offending digit (so the request head still arrives), fires
/// ``ChunkTooLargeError`` down the pipeline — the request's body stream ends with it — and discards
/// whatever the client sends afterwards.
final class ChunkSizeGuardHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private var guardState: ChunkSizeGuard
    private var blocked = false

    init(limit: UInt64) {
        guardState = ChunkSizeGuard(limit: limit)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if blocked { return }
        var buffer = unwrapInboundIn(data)
        if guardState.isTransparent {
            context.fireChannelRead(data)
            return
        }
        let verdict = buffer.withUnsafeReadableBytes { guardState.consume($0) }
        switch verdict {
        case .pass:
            context.fireChannelRead(data)
        case .tooLarge(let consumed):
            blocked = true
            if let prefix = buffer.readSlice(length: consumed) {
                context.fireChannelRead(wrapInboundOut(prefix))
            }
            context.fireErrorCaught(ChunkTooLargeError(limit: guardState.limit))
        }
    }
}
