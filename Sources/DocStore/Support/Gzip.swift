import CZlib
import Foundation

/// Streaming gzip decompression and compression over the system zlib, for attachments that CouchDB
/// stores and sends gzip-encoded.
///
/// A stream is fed any number of input pieces and hands its output to a closure in bounded pieces, so
/// neither side of a large attachment is ever held whole.
///
/// Not thread-safe: one task feeds one stream at a time (the `z_stream` lives on the heap, as zlib
/// keeps a pointer to it, and is freed with the object).
package final class GzipStream {
    package enum Direction { case inflate, deflate }

    private let stream: UnsafeMutablePointer<z_stream>
    private let direction: Direction
    private var output = [UInt8](repeating: 0, count: 64 * 1024)
    private var finished = false
    /// The input handed to ``feed(_:)``, which `stream.next_in` points into until it is used up.
    private var pending: UnsafeMutableRawBufferPointer?

    /// A stream that decompresses (`.inflate`) or compresses (`.deflate`, at `level`) gzip data.
    package init(_ direction: Direction, level: Int32 = 6) throws {
        self.direction = direction
        stream = .allocate(capacity: 1)
        stream.initialize(to: z_stream())
        let status = direction == .inflate
            ? czlib_inflate_init_gzip(stream)
            : czlib_deflate_init_gzip(stream, level)
        guard status == Z_OK else {
            stream.deallocate()
            throw DocStoreError(.io, "zlib could not start a gzip stream (\(status))")
        }
    }

    deinit {
        if direction == .inflate { inflateEnd(stream) } else { deflateEnd(stream) }
        stream.deallocate()
        pending?.deallocate()
    }

    /// Whether a decompressing stream has read the end of the gzip data.
    package var isFinished: Bool { finished }

    /// Feeds `input`; every piece of output is passed to `sink` before this returns.
    /// - Throws: ``DocStoreError/Code/badRequest`` for data that is not gzip, or that goes on after
    ///   the end of the gzip stream.
    package func update(_ input: UnsafeRawBufferPointer, _ sink: (UnsafeRawBufferPointer) throws -> Void) throws {
        guard !input.isEmpty else { return }
        if finished {
            throw DocStoreError(.badRequest, "Data continues after the end of the gzip stream")
        }
        try run(input, flush: Z_NO_FLUSH, sink)
    }

    /// Ends the stream: a compressing stream writes its last bytes; a decompressing stream checks that
    /// the gzip data was complete.
    package func finish(_ sink: (UnsafeRawBufferPointer) throws -> Void) throws {
        switch direction {
        case .deflate:
            if !finished { try run(UnsafeRawBufferPointer(start: nil, count: 0), flush: Z_FINISH, sink) }
        case .inflate:
            guard finished else { throw DocStoreError(.badRequest, "The gzip data ends early") }
        }
    }

    private func run(_ input: UnsafeRawBufferPointer, flush: Int32, _ sink: (UnsafeRawBufferPointer) throws -> Void) throws {
        stream.pointee.next_in = UnsafeMutablePointer(mutating: input.baseAddress?.assumingMemoryBound(to: Bytef.self))
        stream.pointee.avail_in = uInt(input.count)
        defer {
            stream.pointee.next_in = nil
            stream.pointee.avail_in = 0
        }
        let capacity = output.count
        while true {
            let (status, produced): (Int32, Int) = output.withUnsafeMutableBytes { buffer in
                stream.pointee.next_out = buffer.baseAddress!.assumingMemoryBound(to: Bytef.self)
                stream.pointee.avail_out = uInt(capacity)
                let status = direction == .inflate ? inflate(stream, flush) : deflate(stream, flush)
                return (status, capacity - Int(stream.pointee.avail_out))
            }
            if produced > 0 {
                try output.withUnsafeBytes { try sink(UnsafeRawBufferPointer(rebasing: $0[..<produced])) }
            }
            switch status {
            case Z_STREAM_END:
                finished = true
                if direction == .inflate, stream.pointee.avail_in > 0 {
                    throw DocStoreError(.badRequest, "Data continues after the end of the gzip stream")
                }
                return
            case Z_OK:
                // More output may be pending while the buffer was filled; otherwise the input is used up.
                if produced == capacity { continue }
                if stream.pointee.avail_in == 0 && flush == Z_NO_FLUSH { return }
            case Z_BUF_ERROR:
                // No progress possible: all input consumed and nothing more to write.
                if flush == Z_NO_FLUSH { return }
                throw DocStoreError(.io, "zlib could not finish the gzip stream")
            default:
                throw DocStoreError(.badRequest, "Invalid gzip data (zlib status \(status))")
            }
        }
    }

    // MARK: Pulling output in bounded pieces

    /// Whether the input given to ``feed(_:)`` is used up (or none was given).
    package var needsInput: Bool { pending == nil || stream.pointee.avail_in == 0 }

    /// Gives a decompressing stream its next input, for ``produce(maximum:)``; the previous input must be
    /// used up.
    package func feed(_ input: some DataProtocol) {
        precondition(needsInput, "feed(_:) before the previous input was used up")
        pending?.deallocate()
        pending = nil
        guard !input.isEmpty else { return }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: input.count, alignment: 1)
        input.copyBytes(to: buffer)
        pending = buffer
        stream.pointee.next_in = buffer.baseAddress!.assumingMemoryBound(to: Bytef.self)
        stream.pointee.avail_in = uInt(buffer.count)
    }

    /// Decompresses the fed input into at most `maximum` bytes; empty when the input is used up (feed
    /// more) or the gzip data has ended (``isFinished``). However much a small input expands, no more
    /// than `maximum` bytes are produced at once.
    /// - Throws: ``DocStoreError/Code/badRequest`` for invalid gzip data or bytes after its end.
    package func produce(maximum: Int) throws -> Data {
        precondition(direction == .inflate)
        guard !finished, !needsInput else { return Data() }
        var result = Data(count: maximum)
        let (status, produced): (Int32, Int) = result.withUnsafeMutableBytes { buffer in
            stream.pointee.next_out = buffer.baseAddress!.assumingMemoryBound(to: Bytef.self)
            stream.pointee.avail_out = uInt(maximum)
            let status = inflate(stream, Z_NO_FLUSH)
            return (status, maximum - Int(stream.pointee.avail_out))
        }
        result.count = produced
        switch status {
        case Z_STREAM_END:
            finished = true
            if stream.pointee.avail_in > 0 {
                throw DocStoreError(.badRequest, "Data continues after the end of the gzip stream")
            }
        case Z_OK, Z_BUF_ERROR:
            break
        default:
            throw DocStoreError(.badRequest, "Invalid gzip data (zlib status \(status))")
        }
        return result
    }

    /// The decompressed content of complete gzip data.
    package static func decompress(_ data: some DataProtocol) throws -> Data {
        let stream = try GzipStream(.inflate)
        var result = Data()
        let bytes = Array(data)
        try bytes.withUnsafeBytes { try stream.update($0) { result.append(contentsOf: $0) } }
        try stream.finish { result.append(contentsOf: $0) }
        return result
    }

    /// `data` compressed as gzip.
    package static func compress(_ data: some DataProtocol, level: Int32 = 6) throws -> Data {
        let stream = try GzipStream(.deflate, level: level)
        var result = Data()
        let bytes = Array(data)
        try bytes.withUnsafeBytes { try stream.update($0) { result.append(contentsOf: $0) } }
        try stream.finish { result.append(contentsOf: $0) }
        return result
    }
}
