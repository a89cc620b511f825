import CouchProtocol
import DocStore
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// The options of a document read, from the query string.
struct DocumentOptions: Sendable {
    var revs = false
    var revsInfo = false
    var conflicts = false
    var deletedConflicts = false
    /// Attachment data for every attachment the client cannot have (see ``attsSince``).
    var attachments = false
    /// Revisions the client has: attachments no newer than the newest of them on a document's
    /// history are sent as stubs.
    var attsSince: [RevisionID] = []
    /// A single read's `atts_since` was given (CouchDB's `GET /db/doc`): an attachment of revpos 0 is
    /// then a stub unless the list names a revision of the document's history older than it — as
    /// CouchDB 3.3.3 answers `atts_since=[]`. Elsewhere (`open_revs`, `_bulk_get`) every attachment the
    /// list does not cover is sent, so that a leaf is always complete.
    var attsSinceGiven = false
    var latest = false
    /// `encoding` and `encoded_length` in attachment stubs.
    var encodingInfo = false
    /// `_local_seq`: the sequence of the document's last change (`local_seq`; not part of `meta`).
    var localSequence = false

    init(_ request: CouchRequest) throws {
        // As CouchDB reads a document request's options: `true` turns one on, any other value leaves it off.
        func flag(_ name: String) -> Bool { request.query[name] == "true" }
        revs = flag("revs")
        revsInfo = flag("revs_info")
        conflicts = flag("conflicts")
        deletedConflicts = flag("deleted_conflicts")
        if flag("meta") {
            (revsInfo, conflicts, deletedConflicts) = (true, true, true)
        }
        attachments = flag("attachments")
        latest = flag("latest")
        encodingInfo = flag("att_encoding_info")
        localSequence = flag("local_seq")
        if let since = try request.json("atts_since") {
            attsSince = try DocumentOptions.revisions(since)
        }
    }

    init() {}

    /// These options for a revision asked for by `rev` or `open_revs`: as CouchDB 3.3.3 answers one, with
    /// `_revisions` and attachments but not the tree's members (`_revs_info`, `_conflicts`,
    /// `_deleted_conflicts`) or `_local_seq`.
    var forARevision: DocumentOptions {
        var options = self
        (options.revsInfo, options.conflicts, options.deletedConflicts, options.localSequence) = (false, false, false, false)
        return options
    }

    /// What CouchDB 3.3 applies to the documents `include_docs=true` adds to the rows of `_all_docs`,
    /// views and `_changes`: `conflicts`, `attachments` (inline base64 data) and `att_encoding_info`;
    /// `nil` without any of them.
    init?(includedDocuments flag: (String) throws -> Bool) rethrows {
        conflicts = try flag("conflicts")
        attachments = try flag("attachments")
        encodingInfo = try flag("att_encoding_info")
        guard conflicts || attachments || encodingInfo else { return nil }
    }

    static func revisions(_ value: JSON) throws -> [RevisionID] {
        // CouchDB's words, whichever list it is.
        guard let list = value.arrayValue else { throw CouchError.badRequest("Invalid list of revisions") }
        return try list.map { item in
            guard let text = item.stringValue, let revision = RevisionID(text) else {
                throw CouchError.badRequest("Invalid rev format")
            }
            return revision
        }
    }
}

extension DocServer {
    /// A document `include_docs=true` adds to a row, with `options` (``DocumentOptions/init(includedDocuments:)``).
    func includedDocument(_ document: Document, in db: Database, _ options: DocumentOptions?) async throws -> JSON {
        guard let options else { return document.json() }
        return try await answer(for: document, in: db, options, withData: options.attachments, multipart: false).json
    }

    /// The document ``answer(for:in:_:withData:multipart:)`` would give as JSON, when that needs
    /// neither its revision tree nor its attachments — no `revs_info`, `conflicts`,
    /// `deleted_conflicts` or `local_seq` asked for, no attachment — to be written by
    /// ``DocStore/JSONWriter/writeDocument(_:revisions:)`` with `revisions`: its history cut to
    /// `revisionsLimit` as there. `nil` for any other.
    static func plainAnswer(_ document: Document, _ options: DocumentOptions,
                            revisionsLimit: Int) -> (document: Document, revisions: Bool)? {
        guard document.attachments.isEmpty, !options.conflicts, !options.deletedConflicts, !options.revsInfo,
            !options.localSequence
        else { return nil }
        guard options.revs, document.revisionHistory != nil else { return (document, false) }
        return (cutHistory(of: document, toLimit: revisionsLimit), true)
    }

    /// `document` with its `_revisions` as CouchDB shows them: at most `_revs_limit` revisions, also of a
    /// history that grew before the limit was lowered (compaction stems it).
    static func cutHistory(of document: Document, toLimit limit: Int) -> Document {
        guard let ancestry = document.revisionHistory, ancestry.count >= limit else { return document }
        var document = document
        document.revisionHistory = Array(ancestry.prefix(max(0, limit - 1)))
        return document
    }

    /// A document as an answer gives it, with CouchDB's member order (`_id`, `_rev`, body, `_deleted`,
    /// `_revisions`, `_revs_info`, `_conflicts`, `_deleted_conflicts`, `_attachments`).
    ///
    /// - Parameters:
    ///   - withData: send the bytes of every attachment the client cannot already have: those added
    ///     after the newest revision of `options.attsSince` on this revision's history (all of them
    ///     when none is). The others are stubs.
    ///   - multipart: the bytes follow the JSON as parts of their own (`"follows": true`, with the
    ///     stored bytes, gzip ones included); otherwise they are inline, decoded, in base64.
    func answer(for document: Document, in db: Database, _ options: DocumentOptions, withData: Bool,
                multipart: Bool) async throws -> MultipartDocument {
        var members = JSONObject()
        if options.conflicts || options.deletedConflicts || options.revsInfo,
            let tree = try await db.revisionTree(ofDocumentWithID: document.id) {
            if options.revsInfo, let revision = document.revision {
                var info: [JSON] = []
                for ancestor in tree.history(of: revision) {
                    let status: String
                    if tree.isDeleted(ancestor) {
                        status = "deleted"
                    } else if ancestor == revision {
                        status = "available"
                    } else {
                        status = try await db.document(withID: document.id, revision: ancestor) == nil ? "missing" : "available"
                    }
                    info.append(["rev": .string(ancestor.description), "status": .string(status)])
                }
                members["_revs_info"] = .array(info)
            }
            if options.conflicts, !tree.conflicts.isEmpty { members["_conflicts"] = JSON(tree.conflicts.map(\.description)) }
            if options.deletedConflicts, !tree.deletedConflicts.isEmpty {
                members["_deleted_conflicts"] = JSON(tree.deletedConflicts.map(\.description))
            }
        }
        if options.localSequence, let sequence = document.sequence { members["_local_seq"] = .integer(Int(sequence)) }
        var document = document
        if options.revs, document.revisionHistory != nil {
            document = Self.cutHistory(of: document, toLimit: await db.revisionsLimit)
        }
        // The newest revision the client has on this revision's history; without one every
        // attachment is sent (even those of revpos 0, which replicated writes without revpos get).
        let history = [document.revision].compactMap { $0 } + (document.revisionHistory ?? [])
        let known = history.first(where: options.attsSince.contains)?.generation ?? (options.attsSinceGiven ? 0 : -1)
        return try MultipartDocument(document, revisions: options.revs && document.revisionHistory != nil, members: members,
                                     encodingInfo: options.encodingInfo || multipart) { attachment in
            // A revpos of 0 (a replicated write that gave none) says nothing of when the attachment
            // came: its bytes are sent, but where CouchDB's single read stubs it.
            let revpos = attachment.revpos ?? Int.max
            guard withData, revpos > known || (revpos == 0 && !options.attsSinceGiven) else { return .stub }
            return multipart ? .follows : .inline(try db.loadingContent(of: attachment))
        }
    }
}

extension MultipartBody {
    /// The answer's body, written piece by piece.
    func responseBody(_ db: Database) -> ResponseBody {
        let pieces = self.pieces
        return ResponseBody(contentLength: length) { writer in
            for piece in pieces {
                switch piece {
                case .bytes(let bytes):
                    try await writer.write(ByteBuffer(bytes: bytes))
                case .attachment(let attachment):
                    for try await chunk in try db.attachmentContent(attachment, encoded: true) {
                        try await writer.write(ByteBuffer(bytes: chunk))
                    }
                }
            }
            try await writer.finish(nil)
        }
    }
}
