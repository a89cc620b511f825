import DocStore
import Foundation

// MARK: - Documents as compared

/// A revision of a document as the comparison sees it: its body (order-sensitive), `_revisions`, and its
/// attachments by name — decoded content where the answer carried the bytes.
public struct ComparedRevision: Equatable, CustomStringConvertible {
    public struct ComparedAttachment: Equatable {
        public var contentType: JSON?
        public var revpos: JSON?
        public var digest: JSON?
        public var length: Int?
        /// The decoded content, or nil for a stub.
        public var data: Data?
    }

    public var body: JSON
    public var revisions: JSON?
    public var attachments: [String: ComparedAttachment]

    public var description: String { "\(body) \(revisions ?? .null) \(attachments.mapValues { "\($0.digest ?? .null) \($0.data?.count ?? -1)" })" }

    /// From a document's JSON (with inline data or stubs), with the bytes of `following` parts.
    public init(_ json: JSON, following: [String: (data: Data, gzip: Bool)] = [:]) throws {
        guard case .object(var object) = json else { throw DocStoreError(.badRequest, "not a document") }
        revisions = object.removeValue(forKey: "_revisions")
        var attachments: [String: ComparedAttachment] = [:]
        if case .object(let members)? = object.removeValue(forKey: "_attachments") {
            for (name, meta) in members {
                var entry = ComparedAttachment(contentType: meta["content_type"], revpos: meta["revpos"], digest: meta["digest"],
                                               length: meta["length"]?.intValue, data: nil)
                if let base64 = meta["data"]?.stringValue {
                    entry.data = Data(base64Encoded: base64)
                    entry.length = entry.data?.count
                } else if meta["follows"]?.boolValue == true, let part = following[name] {
                    let gzip = part.gzip || meta["encoding"]?.stringValue == "gzip"
                    entry.data = gzip ? try GzipStream.decompress(part.data) : part.data
                }
                attachments[name] = entry
            }
        }
        self.attachments = attachments
        body = .object(object)
    }

    /// Whether `actual` is this revision as another server may legitimately answer it: the same body and
    /// history, the same attachments with the same metadata and decoded bytes — except that an
    /// attachment the client said it has (no newer than `knownGeneration`) may come as a stub.
    public func matches(_ actual: ComparedRevision, knownGeneration: Int? = nil) -> [String] {
        var problems: [String] = []
        if body != actual.body { problems.append("body \(body) != \(actual.body)") }
        if revisions != actual.revisions { problems.append("_revisions \(revisions ?? .null) != \(actual.revisions ?? .null)") }
        guard Set(attachments.keys) == Set(actual.attachments.keys) else {
            return problems + ["attachments \(attachments.keys.sorted()) != \(actual.attachments.keys.sorted())"]
        }
        for (name, expected) in attachments {
            let other = actual.attachments[name]!
            if expected.contentType != other.contentType || expected.revpos != other.revpos || expected.digest != other.digest
                || (expected.length != nil && other.length != nil && expected.length != other.length) {
                problems.append("\(name): \(expected.contentType ?? .null) \(expected.revpos ?? .null) \(expected.digest ?? .null) \(expected.length ?? -1) != \(other.contentType ?? .null) \(other.revpos ?? .null) \(other.digest ?? .null) \(other.length ?? -1)")
            }
            switch (expected.data, other.data) {
            case (let left?, let right?) where left != right:
                problems.append("\(name): different bytes (\(left.count) and \(right.count))")
            case (_?, nil):
                // DocServer honours atts_since on open_revs (CouchDB 3.3.3 ignores it; 3.5 does the same).
                let revpos = expected.revpos?.intValue ?? Int.max
                if revpos > (knownGeneration ?? -1) { problems.append("\(name): a stub where the client lacks the bytes") }
            case (nil, _?):
                problems.append("\(name): bytes where CouchDB sent a stub")
            default:
                break
            }
        }
        return problems
    }
}

/// The documents of an `open_revs` or `_bulk_get` answer in `multipart/mixed`, each with its
/// following attachments' bytes (decoded as their part headers say).
public func documentsOfMultipartMixed(_ body: [UInt8], contentType: String) throws -> [ComparedRevision] {
    guard let boundary = Multipart.boundary(from: contentType) else { throw DocStoreError(.badRequest, "no boundary") }
    var documents: [ComparedRevision] = []
    for part in try Multipart.parse(body, boundary: boundary) {
        let type = part.headers["Content-Type"] ?? "application/json"
        if type.contains("error") { continue }
        if Multipart.mediaType(of: type) == "multipart/related" {
            guard let inner = Multipart.boundary(from: type) else { throw DocStoreError(.badRequest, "no inner boundary") }
            let parts = try Multipart.parse(part.body, boundary: inner)
            let json = try JSON(parsing: parts[0].body)
            var following: [String: (data: Data, gzip: Bool)] = [:]
            let names = (json["_attachments"]?.objectValue ?? JSONObject()).filter { $0.value["follows"]?.boolValue == true }.map(\.key)
            for (name, attachmentPart) in zip(names, parts.dropFirst()) {
                following[name] = (Data(attachmentPart.body), attachmentPart.headers["Content-Encoding"] == "gzip")
            }
            documents.append(try ComparedRevision(json, following: following))
        } else {
            documents.append(try ComparedRevision(try JSON(parsing: part.body)))
        }
    }
    return documents
}

/// The revisions of a `GET ?open_revs` answer (JSON or multipart), by revision.
public func revisionsOfOpenRevs(contentType: String, body: [UInt8]) throws -> [String: ComparedRevision] {
    var revisions: [ComparedRevision] = []
    if Multipart.mediaType(of: contentType) == "multipart/mixed" {
        revisions = try documentsOfMultipartMixed(body, contentType: contentType)
    } else {
        for entry in try JSON(parsing: body).arrayValue ?? [] {
            if let ok = entry["ok"] { revisions.append(try ComparedRevision(ok)) }
        }
    }
    var byRevision: [String: ComparedRevision] = [:]
    for revision in revisions { byRevision[revision.body["_rev"]?.stringValue ?? "?"] = revision }
    return byRevision
}

extension CouchDBFixtures {
    /// Every replicated document of `source-dump.json` (all but `_local/fx-note`): its id and, by
    /// revision, CouchDB's own answer for each leaf (with `_revisions` and inline attachment data).
    public static func sourceDocuments() throws -> [(id: String, leaves: [String: ComparedRevision])] {
        let dump = try JSON(parsing: sourceDump())
        return try (dump["docs"]?.arrayValue ?? []).map { entry in
            var leaves: [String: ComparedRevision] = [:]
            for row in entry["open_revs"]?.arrayValue ?? [] {
                if let ok = row["ok"], let revision = ok["_rev"]?.stringValue { leaves[revision] = try ComparedRevision(ok) }
            }
            return (entry["id"]?.stringValue ?? "", leaves)
        }
    }

    /// The differences between the source's documents and what `leaves` answers for each id (nil when
    /// the id is unknown).
    public static func differencesFromSource(_ leaves: (String) async throws -> [String: ComparedRevision]?) async throws -> [String] {
        var problems: [String] = []
        for (id, expected) in try sourceDocuments() {
            guard let actual = try await leaves(id) else {
                problems.append("\(id): missing")
                continue
            }
            if Set(actual.keys) != Set(expected.keys) {
                problems.append("\(id): leaves \(actual.keys.sorted()) != \(expected.keys.sorted())")
                continue
            }
            for (revision, want) in expected {
                let found = want.matches(actual[revision]!)
                if !found.isEmpty { problems.append("\(id) \(revision): \(found)") }
            }
        }
        return problems
    }
}

extension Database {
    /// Every leaf of a document as the comparisons see it: its JSON with `_revisions` and the decoded
    /// content of every attachment inline; nil if the document does not exist.
    public func comparedLeaves(of id: String) async throws -> [String: ComparedRevision]? {
        guard let tree = try await revisionTree(ofDocumentWithID: id) else { return nil }
        var leaves: [String: ComparedRevision] = [:]
        for leaf in tree.leaves {
            guard var document = try await document(withID: id, revision: leaf.revision, includeRevisionHistory: true) else { continue }
            for (name, attachment) in document.attachments { document.attachments[name] = try loadingContent(of: attachment) }
            leaves[leaf.revision.description] = try ComparedRevision(document.json(attachmentData: true, revisions: true))
        }
        return leaves
    }
}

/// The database sequence in a CouchDB 3 sequence (`"12-g2wAAA…"`, the number before the dash) or a
/// plain number; `nil` for anything else.
public func sequenceNumber(_ json: JSON?) -> Int? {
    switch json {
    case .integer(let number)?: return number
    case .string(let text)?: return Int(text.prefix { $0 != "-" })
    default: return nil
    }
}
