import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// An HTTP answer read off a raw connection.
struct RawResponse {
    let status: Int
    /// Header names lowercased.
    let headers: [String: String]
    var body: [UInt8]
}

/// A plain TCP connection to 127.0.0.1 for sending bytes exactly as given — what no HTTP client
/// library would send, or what a recorded CouchDB client sent — and reading answers as they come.
final class RawConnection {
    private let socket: Int32
    private var received: [UInt8] = []

    /// Connects; every read gives up after `timeout` (a bound on a broken server, not a wait).
    init(port: Int, timeout: Double = 10) throws {
        socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { throw POSIXError(.EIO) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            close(socket)
            throw POSIXError(.ECONNREFUSED)
        }
        var limit = timeval(tv_sec: Int(timeout), tv_usec: Int(timeout.truncatingRemainder(dividingBy: 1) * 1_000_000))
        setsockopt(socket, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit { close(socket) }

    func send(_ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes { Glibc.send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard sent > 0 else { return }
            offset += sent
        }
    }

    func send(_ text: String) { send(Array(text.utf8)) }

    /// Sends a request with these headers (a `Content-Length` is added for a body).
    func sendRequest(_ method: String, _ target: String, headers: [(String, String)], body: [UInt8] = []) {
        var head = "\(method) \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        if !body.isEmpty || method == "PUT" || method == "POST" { head += "Content-Length: \(body.count)\r\n" }
        send(Array((head + "\r\n").utf8) + body)
    }

    /// One whole answer — by `Content-Length`, chunked, or up to the end of the connection — or `nil` if
    /// the connection ended or the read timed out first.
    func readResponse(head: Bool = false) -> RawResponse? {
        guard let response = readHead() else { return nil }
        if head || response.status == 304 || response.status == 204 { return response }
        return readBody(of: response)
    }

    /// The body of the answer whose head was just read.
    func readBody(of response: RawResponse) -> RawResponse? {
        var result = response
        if response.headers["transfer-encoding"]?.lowercased() == "chunked" {
            var ended = false
            result.body = readChunked(until: { _ in false }, ended: &ended)
            return ended ? result : nil
        }
        if let length = response.headers["content-length"].flatMap(Int.init) {
            while received.count < length { guard fill() else { return nil } }
            result.body = Array(received[..<length])
            received.removeFirst(length)
            return result
        }
        while fill() {}
        result.body = received
        received = []
        return result
    }

    /// The status line and headers of the next answer.
    func readHead() -> RawResponse? {
        while true {
            if let end = find([13, 10, 13, 10]) {
                let head = String(decoding: received[..<end], as: UTF8.self)
                received.removeFirst(end + 4)
                var lines = head.components(separatedBy: "\r\n")
                let statusLine = lines.removeFirst().split(separator: " ")
                guard statusLine.count >= 2, let status = Int(statusLine[1]) else { return nil }
                var headers: [String: String] = [:]
                for line in lines {
                    guard let colon = line.firstIndex(of: ":") else { continue }
                    headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
                }
                return RawResponse(status: status, headers: headers, body: [])
            }
            guard fill() else { return nil }
        }
    }

    /// The decoded bytes of a chunked body, until it ends (`ended`) or `enough` says what has come
    /// suffices (a stream that would go on).
    func readChunked(until enough: ([UInt8]) -> Bool, ended: inout Bool) -> [UInt8] {
        var body: [UInt8] = []
        while true {
            guard let lineEnd = findOrFill([13, 10]) else { return body }
            let sizeText = String(decoding: received[..<lineEnd], as: UTF8.self).split(separator: ";").first ?? ""
            received.removeFirst(lineEnd + 2)
            guard let size = Int(sizeText.trimmingCharacters(in: .whitespaces), radix: 16) else { return body }
            if size == 0 {
                _ = findOrFill([13, 10]).map { received.removeFirst($0 + 2) }
                ended = true
                return body
            }
            while received.count < size + 2 { guard fill() else { return body } }
            body += received[..<size]
            received.removeFirst(size + 2)
            if enough(body) { return body }
        }
    }

    /// Whether the server closes the connection (rather than the read timing out).
    func isClosedByServer() -> Bool {
        received = []
        while true {
            guard let more = read() else { return false }
            if more.isEmpty { return true }
        }
    }

    private func findOrFill(_ needle: [UInt8]) -> Int? {
        while true {
            if let index = find(needle) { return index }
            guard fill() else { return nil }
        }
    }

    /// Reads more bytes; `false` at the end of the stream or on a timeout.
    private func fill() -> Bool {
        guard let more = read(), !more.isEmpty else { return false }
        received += more
        return true
    }

    /// The next bytes; empty at the end of the stream, `nil` on a timeout.
    private func read() -> [UInt8]? {
        var buffer = [UInt8](repeating: 0, count: 65536)
        let count = buffer.withUnsafeMutableBytes { recv(socket, $0.baseAddress, $0.count, 0) }
        if count < 0 { return nil }
        if count == 0 { return [] }
        return Array(buffer[..<count])
    }

    private func find(_ needle: [UInt8]) -> Int? {
        guard received.count >= needle.count else { return nil }
        for index in 0...(received.count - needle.count) where received[index] == needle[0] {
            if Array(received[index..<(index + needle.count)]) == needle { return index }
        }
        return nil
    }
}
