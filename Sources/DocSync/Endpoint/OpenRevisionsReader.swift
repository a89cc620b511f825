import DocStore
import Foundation

/// The body of an answer: in memory, or downloaded to a file this process removes when done.
enum ResponseBody {
    case memory(Data)
    case file(URL)

    /// The bytes in pieces of at most 256 KiB.
    func pieces(_ body: (Data) async throws -> Void) async throws {
        switch self {
        case .memory(let data):
            try await body(data)
        case .file(let url):
            let handle = try FileHandle(forReadingFrom: url)
            defer { try? handle.close() }
            while let piece = try handle.read(upToCount: 256 * 1024), !piece.isEmpty { try await body(piece) }
        }
    }

    /// Up to `count` bytes from the start (for error bodies and JSON answers).
    func prefix(_ count: Int) throws -> Data {
        switch self {
        case .memory(let data): return data.prefix(count)
        case .file(let url):
            let handle = try FileHandle(forReadingFrom: url)
            defer { try? handle.close() }
            return try handle.read(upToCount: count) ?? Data()
        }
    }

    func remove() {
        if case .file(let url) = self { try? FileManager.default.removeItem(at: url) }
    }
}

/// Reads an `open_revs` answer in `multipart/mixed`, as CouchDB and DocServer write it: a part per
/// revision — `application/json` for one without attachment bytes, `multipart/related` (JSON, then
/// the attachments' bytes) for one with them, `application/json; error="true"` for a missing one.
/// Attachments are streamed into the staging database as they are read (``MultipartDocumentReader``).
enum OpenRevisionsReader {
    static func read(_ body: ResponseBody, boundary: String, stagingInto stagingDatabase: Database?) async throws -> [Document] {
        var parser = MultipartParser(boundary: boundary)
        var documents: [Document] = []
        var part: Part = .none
        enum Part {
            case none
            case json([UInt8])
            case related(MultipartDocumentReader)
            case skipped
        }
        do {
            try await body.pieces { piece in
                for event in try parser.parse(piece) {
                    switch event {
                    case .headers(let headers):
                        let type = headers["Content-Type"] ?? "application/json"
                        if Multipart.mediaType(of: type) == "multipart/related", let inner = Multipart.boundary(from: type) {
                            part = .related(MultipartDocumentReader(boundary: inner, database: stagingDatabase,
                                                                    maximumJSONSize: Int.max, maximumAttachmentSize: Int.max))
                        } else if type.contains("error") {
                            part = .skipped
                        } else {
                            part = .json([])
                        }
                    case .body(let bytes):
                        switch part {
                        case .json(var json):
                            json += bytes
                            part = .json(json)
                        case .related(var reader):
                            try await reader.read(bytes)
                            part = .related(reader)
                        case .none, .skipped:
                            break
                        }
                    case .partEnd:
                        switch part {
                        case .json(let json): documents.append(try Document(couchJSON: JSON(parsing: json)))
                        case .related(var reader): documents.append(try await reader.finish())
                        case .none, .skipped: break
                        }
                        part = .none
                    case .end:
                        break
                    }
                }
            }
            try parser.finish()
        } catch {
            if case .related(var reader) = part { await reader.abandon() }
            throw ReplicationError(.badResponse, "open_revs answer: \(error)", cause: error)
        }
        return documents
    }
}
