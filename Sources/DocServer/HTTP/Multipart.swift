/// MIME multipart bodies (`multipart/related` documents with attachments, `multipart/mixed` answers).
enum Multipart {
    struct Part {
        var headers: [(String, String)]
        var body: [UInt8]

        func header(_ name: String) -> String? {
            headers.first { $0.0.lowercased() == name }?.1
        }
    }

    /// The boundary parameter of a `multipart/…` content type.
    static func boundary(from contentType: String) -> String? {
        for parameter in contentType.split(separator: ";").dropFirst() {
            let pair = parameter.trimmingCharacters(in: .whitespaces).split(separator: "=", maxSplits: 1)
            if pair.count == 2, pair[0].lowercased() == "boundary" {
                let value = pair[1].trimmingCharacters(in: CharacterSet(charactersIn: "\""))
                return value.isEmpty || value.count > 200 ? nil : value
            }
        }
        return nil
    }

    /// Splits a multipart body into its parts.
    /// - Throws: 400 if the body is not well-formed.
    static func parse(_ body: [UInt8], boundary: String) throws -> [Part] {
        let delimiter = Array("--\(boundary)".utf8)
        guard var position = find(delimiter, in: body, from: 0) else {
            throw CouchError.badRequest("Multipart body has no boundary line")
        }
        var parts: [Part] = []
        while true {
            position += delimiter.count
            // "--" after the delimiter ends the body.
            if position + 1 < body.count, body[position] == 0x2D, body[position + 1] == 0x2D { return parts }
            guard let lineEnd = find([0x0D, 0x0A], in: body, from: position) else {
                throw CouchError.badRequest("Multipart body ends inside a boundary line")
            }
            position = lineEnd + 2
            guard let headerEnd = find([0x0D, 0x0A, 0x0D, 0x0A], in: body, from: position - 2) else {
                throw CouchError.badRequest("Multipart part without a blank line after its headers")
            }
            var headers: [(String, String)] = []
            if headerEnd > position - 2 {
                let text = String(decoding: body[position..<max(position, headerEnd)], as: UTF8.self)
                for line in text.split(separator: "\r\n", omittingEmptySubsequences: true) {
                    guard let colon = line.firstIndex(of: ":") else { throw CouchError.badRequest("Malformed multipart header") }
                    headers.append((String(line[..<colon]).trimmingCharacters(in: .whitespaces),
                                    String(line[line.index(after: colon)...]).trimmingCharacters(in: .whitespaces)))
                }
            }
            let contentStart = headerEnd + 4
            guard let next = find([0x0D, 0x0A] + delimiter, in: body, from: contentStart) else {
                throw CouchError.badRequest("Multipart part is not closed by a boundary")
            }
            parts.append(Part(headers: headers, body: Array(body[contentStart..<next])))
            position = next + 2
            guard parts.count <= 10_000 else { throw CouchError.badRequest("Too many multipart parts") }
        }
    }

    /// Builds a multipart body.
    static func encode(parts: [(headers: [(String, String)], body: [UInt8])], boundary: String) -> [UInt8] {
        var out: [UInt8] = []
        for part in parts {
            out += Array("--\(boundary)\r\n".utf8)
            for (name, value) in part.headers { out += Array("\(name): \(value)\r\n".utf8) }
            out += [0x0D, 0x0A]
            out += part.body
            out += [0x0D, 0x0A]
        }
        out += Array("--\(boundary)--".utf8)
        return out
    }

    /// The first index of `needle` in `haystack` at or after `start`.
    static func find(_ needle: [UInt8], in haystack: [UInt8], from start: Int) -> Int? {
        guard !needle.isEmpty, start >= 0, haystack.count >= needle.count else { return nil }
        var i = start
        let last = haystack.count - needle.count
        let first = needle[0]
        while i <= last {
            if haystack[i] == first {
                var matched = true
                for k in 1..<needle.count where haystack[i + k] != needle[k] {
                    matched = false
                    break
                }
                if matched { return i }
            }
            i += 1
        }
        return nil
    }
}

import Foundation
