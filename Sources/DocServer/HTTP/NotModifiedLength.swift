import NIOCore
import NIOHTTP1

/// Gives a 304 answer the `Content-Length: 0` header CouchDB 3.3.3 sends with it.
///
/// NIO's response encoder removes framing headers from an answer that cannot have a body (a 304
/// among them), so the header cannot be set on the response. Two handlers around the encoder put it
/// back: ``Marker``, on the encoder's application side, sees a 304 head go in; ``Writer``, first in
/// the pipeline (next to the socket), adds the header to the bytes the encoder writes for that head.
/// The encoder writes a head's bytes synchronously, as one buffer, within its `write` of the head —
/// so the first buffer ``Writer`` sees after ``Marker`` marked a head is that head, and nothing
/// else: not a body (a 304 has none) and not the next answer (which passes ``Marker`` first).
enum NotModifiedLength {
    /// What ``Marker`` tells ``Writer``: whether the next bytes written are a 304's head. Both handlers
    /// of a connection run on its event loop, so they share it without a lock.
    final class Mark {
        var headPending = false
    }

    /// Marks each 304 head on its way to the encoder.
    final class Marker: ChannelOutboundHandler, RemovableChannelHandler {
        typealias OutboundIn = HTTPServerResponsePart
        typealias OutboundOut = HTTPServerResponsePart

        let mark: Mark

        init(mark: Mark) {
            self.mark = mark
        }

        func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
            if case .head(let head) = unwrapOutboundIn(data), head.status == .notModified {
                mark.headPending = true
            }
            context.write(data, promise: promise)
        }
    }

    /// Adds `Content-Length: 0` to the marked head's bytes, before the blank line that ends them.
    final class Writer: ChannelOutboundHandler, RemovableChannelHandler {
        typealias OutboundIn = IOData
        typealias OutboundOut = IOData

        let mark: Mark

        init(mark: Mark) {
            self.mark = mark
        }

        func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
            guard mark.headPending, case .byteBuffer(let head) = unwrapOutboundIn(data) else {
                context.write(data, promise: promise)
                return
            }
            mark.headPending = false
            context.write(wrapOutboundOut(.byteBuffer(NotModifiedLength.addingZeroLength(to: head))), promise: promise)
        }
    }

    /// `head` (a response head, ending with an empty line) with `Content-Length: 0` as its last header;
    /// `head` unchanged when it does not end so or already has a length.
    static func addingZeroLength(to head: ByteBuffer) -> ByteBuffer {
        let view = head.readableBytesView
        let end = Array("\r\n\r\n".utf8)
        guard view.count >= end.count, view.suffix(end.count).elementsEqual(end) else { return head }
        let text = String(decoding: view, as: UTF8.self).lowercased()
        guard !text.contains("\r\ncontent-length:") else { return head }
        var patched = ByteBuffer()
        patched.reserveCapacity(view.count + 19)
        patched.writeBytes(view.prefix(view.count - 2))
        patched.writeString("Content-Length: 0\r\n\r\n")
        return patched
    }
}
