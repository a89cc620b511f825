import HTTPTypes
import Hummingbird
import NIOCore

/// CouchDB's JSONP (`chttpd/allow_jsonp = true`): a JSON answer to a request with `?callback=name`
/// becomes `/* CouchDB */name(…);`, `application/javascript`, errors included.
enum JSONP {
    /// Whether `callback` may name the function: letters, digits, `.`, `_`, `[`, `]`.
    static func isValid(_ callback: String) -> Bool {
        !callback.isEmpty && callback.utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "["), UInt8(ascii: "]"):
                true
            default:
                false
            }
        }
    }

    /// `response` wrapped in a call of `callback`, when it is JSON.
    static func wrap(_ response: Response, callback: String) -> Response {
        guard response.headers[.contentType]?.hasPrefix("application/json") == true else { return response }
        var wrapped = response
        wrapped.headers[.contentType] = "application/javascript"
        wrapped.headers[.contentLength] = nil
        let body = response.body
        wrapped.body = ResponseBody { writer in
            try await body.write(Writer(base: writer, prefix: "/* CouchDB */\(callback)("))
        }
        return wrapped
    }

    /// Writes the prefix before the first bytes and `);` at the end, in place of the final newline.
    private struct Writer: ResponseBodyWriter {
        var base: any ResponseBodyWriter
        var prefix: String?
        var heldNewline = false

        mutating func write(_ buffer: ByteBuffer) async throws {
            if let prefix {
                try await base.write(ByteBuffer(string: prefix))
                self.prefix = nil
            }
            if heldNewline {
                try await base.write(ByteBuffer(string: "\n"))
                heldNewline = false
            }
            var buffer = buffer
            if buffer.readableBytesView.last == UInt8(ascii: "\n") {
                buffer.moveWriterIndex(to: buffer.writerIndex - 1)
                heldNewline = true
            }
            if buffer.readableBytes > 0 { try await base.write(buffer) }
        }

        consuming func finish(_ trailingHeaders: HTTPFields?) async throws {
            if let prefix { try await base.write(ByteBuffer(string: prefix)) }
            try await base.write(ByteBuffer(string: ");"))
            try await base.finish(trailingHeaders)
        }
    }
}
