import DocStore
import Foundation

/// The parsers DocStore exposes to untrusted bytes, each with the properties its fuzz target checks
/// (Docs/Reliability.md). ``check(_:)`` stops the process (`preconditionFailure`) when a
/// property does not hold, which is how libFuzzer learns of it; ``failure(_:)`` says the same as a value,
/// for the tests that replay the seed corpora.
public enum FuzzTarget: String, CaseIterable, Sendable {
    /// JSON text: what parses writes out and parses back to the same value, and the document reader
    /// (stored bytes kept as they came) agrees with the tree parser, value for value (but for the
    /// documents' metadata coming first) and error for error.
    case json
    /// `multipart/*` bodies: the same events however the bytes are split into reads.
    case multipart
    /// Mango selectors and sorts: parsed or refused with a typed error; a parsed selector matches
    /// documents without failing.
    case mango
    /// Full-text queries: parsed, or refused with `invalidQuery` at a position inside the text.
    case fullText = "full-text"
    /// Revision ids and documents with `_rev`/`_revisions`: a parsed id writes out as it was read; a
    /// document read from JSON writes out as JSON that reads back to the same document.
    case revisions
    /// Query strings of `_changes`, views and `_all_docs`: what the parameter reader reads encodes back
    /// to the same parameters; each endpoint of `fuzzdb` answers the query with rows (no more than
    /// `limit`) or CouchDB's 4xx JSON error, never a 5xx, and in time.
    case queryString = "query-string"
    /// Whole HTTP requests (`METHOD target`, header lines, an empty line, the body) to DocServer's
    /// responder in this process: every answer comes in time, no error escapes its middleware, no
    /// answer is a 5xx but a JavaScript function's own failure, and every error is CouchDB's JSON body.
    case http

    /// The target `DOCSTORE_FUZZ_TARGET` names (`json` when unset), for a fuzzing run.
    public static let current: FuzzTarget = {
        let name = ProcessInfo.processInfo.environment["DOCSTORE_FUZZ_TARGET"] ?? "json"
        guard let target = FuzzTarget(rawValue: name) else {
            preconditionFailure("DOCSTORE_FUZZ_TARGET=\(name): one of \(FuzzTarget.allCases.map(\.rawValue))")
        }
        return target
    }()

    /// Checks the target's properties on `bytes`, stopping the process when one does not hold.
    public func check(_ bytes: [UInt8]) {
        if let failure = failure(bytes) { preconditionFailure("\(rawValue): \(failure)") }
    }

    /// Why `bytes` break a property of the target, or `nil` when they all hold.
    public func failure(_ bytes: [UInt8]) -> String? {
        switch self {
        case .json: return FuzzTarget.checkJSON(bytes)
        case .multipart: return FuzzTarget.checkMultipart(bytes)
        case .mango: return FuzzTarget.checkMango(bytes)
        case .fullText: return FuzzTarget.checkFullText(bytes)
        case .revisions: return FuzzTarget.checkRevisions(bytes)
        case .queryString: return FuzzTarget.checkQueryString(bytes)
        case .http: return FuzzTarget.checkHTTP(bytes)
        }
    }

    // MARK: The properties

    private static func checkJSON(_ bytes: [UInt8]) -> String? {
        let tree: JSON
        do {
            tree = try JSON(parsing: bytes)
        } catch let treeError as DocStoreError {
            // The document reader refuses the same text with the same message.
            for depth in 1...3 {
                do {
                    _ = try JSON(parsing: bytes, documentDepth: depth)
                    return "depth \(depth) accepts what the tree parser refuses (\(treeError.reason))"
                } catch let other as DocStoreError where other.reason == treeError.reason {
                } catch {
                    return "depth \(depth) refuses with \(error), the tree parser with \(treeError)"
                }
            }
            return nil
        } catch {
            return "an untyped error: \(error)"
        }
        let written: [UInt8]
        do {
            written = try tree.serialized()
        } catch {
            return "what parses does not write: \(error)"
        }
        guard let again = try? JSON(parsing: written), again == tree else { return "written \(String(decoding: written, as: UTF8.self)) reads back differently" }
        guard (try? again.serialized()) == written else { return "writing is not stable" }
        for depth in 1...3 {
            guard let bytesRead = try? JSON(parsing: bytes, documentDepth: depth) else { return "depth \(depth) refuses what the tree parser reads" }
            guard metadataFirst(bytesRead, depth: depth) == metadataFirst(tree, depth: depth) else { return "depth \(depth) reads another value" }
        }
        return nil
    }

    /// `value` with the members of each object at nesting level `depth` (1: `value` itself) reordered
    /// `_` members first, as the document reader gives them; otherwise unchanged.
    private static func metadataFirst(_ value: JSON, depth: Int) -> JSON {
        switch value {
        case .object(let object) where depth == 1:
            let members = object.map { ($0.key, $0.value) }
            return .object(JSONObject(members.filter { $0.0.hasPrefix("_") } + members.filter { !$0.0.hasPrefix("_") }))
        case .object(let object) where depth > 1:
            return .object(JSONObject(object.map { ($0.key, metadataFirst($0.value, depth: depth - 1)) }))
        case .array(let items) where depth > 1:
            return .array(items.map { metadataFirst($0, depth: depth - 1) })
        default:
            return value
        }
    }

    /// The events of a multipart body, normalised: headers, then the part's bytes joined, per part.
    private static func events(of bytes: [UInt8], boundary: String, splits: [Int]) -> Result<[String], DocStoreError>? {
        var parser = MultipartParser(boundary: boundary)
        var out: [String] = []
        var body: [UInt8] = []
        var start = 0
        do {
            for end in splits + [bytes.count] where end >= start {
                for event in try parser.parse(bytes[start..<end]) {
                    switch event {
                    case .headers(let headers):
                        out.append("headers " + headers.fields.map { "\($0.name): \($0.value)" }.joined(separator: "\n"))
                    case .body(let piece):
                        body += piece
                    case .partEnd:
                        out.append("body \(body)")
                        body = []
                        out.append("end of part")
                    case .end:
                        out.append("end")
                    }
                }
                start = end
            }
        } catch let error as DocStoreError {
            return .failure(error)
        } catch {
            return nil
        }
        if !body.isEmpty { out.append("unfinished body \(body)") }
        return .success(out)
    }

    private static func checkMultipart(_ bytes: [UInt8]) -> String? {
        let boundary = "b0und"
        guard let whole = events(of: bytes, boundary: boundary, splits: []) else { return "an untyped error" }
        // Splits derived from the input, so that a failure replays: every byte alone, and a few cuts.
        var seed = bytes.reduce(UInt64(1469598103934665603)) { ($0 ^ UInt64($1)) &* 1099511628211 }
        var cuts: [Int] = []
        if !bytes.isEmpty {
            for _ in 0..<min(8, bytes.count) {
                seed = seed &* 6364136223846793005 &+ 1442695040888963407
                cuts.append(Int(seed >> 33) % bytes.count)
            }
        }
        for splits in [cuts.sorted()] + (bytes.count <= 256 ? [Array(0..<bytes.count)] : []) {
            guard let split = events(of: bytes, boundary: boundary, splits: splits) else { return "an untyped error" }
            switch (whole, split) {
            case (.success(let a), .success(let b)) where a == b: continue
            case (.failure, .failure): continue
            default: return "read whole: \(whole); read in pieces at \(splits.prefix(20)): \(split)"
            }
        }
        return nil
    }

    private static let sampleDocuments: [JSON] = [
        ["_id": "a", "n": 1, "s": "x", "a": [1, "b", nil], "o": ["p": ["q": true]]],
        ["_id": "b", "n": -2.5, "s": "", "a": [], "o": [:], "e": nil],
        ["_id": "c", "tags": ["x", "y"], "n": "1", "deep": [["k": 1], ["k": 2]]],
    ]

    private static func checkMango(_ bytes: [UInt8]) -> String? {
        guard let json = try? JSON(parsing: bytes) else { return nil }
        let selectorJSON = json["selector"] ?? json
        do {
            let selector = try MangoSelector(selectorJSON)
            for document in sampleDocuments { _ = selector.matches(document) }
        } catch is DocStoreError {
        } catch {
            return "selector: an untyped error \(error)"
        }
        if let sort = json["sort"] {
            do {
                _ = try SortField.list(from: sort)
            } catch is DocStoreError {
            } catch {
                return "sort: an untyped error \(error)"
            }
        }
        return nil
    }

    private static func checkFullText(_ bytes: [UInt8]) -> String? {
        let text = String(decoding: bytes, as: UTF8.self)
        do {
            _ = try TextQuery(text)
        } catch let error as DocStoreError {
            guard error.code == .invalidQuery else { return "refused with \(error.code), not invalidQuery" }
            if let offset = error.byteOffset, offset < 0 || offset > text.utf8.count {
                return "refused at byte \(offset) of a \(text.utf8.count)-byte text"
            }
        } catch {
            return "an untyped error: \(error)"
        }
        return nil
    }

    private static func checkRevisions(_ bytes: [UInt8]) -> String? {
        let text = String(decoding: bytes, as: UTF8.self)
        if let revision = RevisionID(text), RevisionID(revision.description) != revision {
            return "\(text) reads as \(revision), which reads back differently"
        }
        guard let json = try? JSON(parsing: bytes), case .object = json else { return nil }
        let document: Document
        do {
            document = try Document(couchJSON: json)
        } catch is DocStoreError {
            return nil
        } catch {
            return "an untyped error: \(error)"
        }
        let written = document.json(revisions: true)
        guard let again = try? Document(json: written) else { return "\(written) does not read back" }
        guard again.id == document.id, again.revision == document.revision, again.body == document.body,
              again.isDeleted == document.isDeleted else {
            return "\(written) reads back as another document"
        }
        return nil
    }
}
