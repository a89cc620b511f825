import Foundation

/// What ``Database/export(_:to:)`` writes, and how.
public struct ExportOptions: Sendable {
    /// One JSON array, or NDJSON (one document per line, a stream).
    public enum Format: String, Sendable, CaseIterable {
        /// One JSON array of the records.
        case json
        /// One record a line.
        case ndjson
    }

    /// How much of each document.
    public enum Form: String, Sendable {
        /// Every leaf revision (the winner, conflicts and deleted leaves), each with `_rev`,
        /// `_revisions`, `_deleted` when deleted and its attachments inline with their stored bytes
        /// (`encoding` given when they are compressed), the property history included: importing it
        /// into an empty database reproduces the database exactly.
        case full
        /// The current value of each live document: `_id` and its members, without revision, history,
        /// conflicts or attachments.
        case compact
    }

    /// The file's form: one JSON array, or one record a line.
    public var format: Format
    /// How much of each document is written.
    public var form: Form
    /// Only documents whose current revision satisfies it (all when `nil`).
    public var selector: MangoSelector?

    /// Options for an export; by default every document, in full, as one JSON array.
    public init(format: Format = .json, form: Form = .full, selector: MangoSelector? = nil) {
        self.format = format
        self.form = form
        self.selector = selector
    }
}

/// What ``Database/importDocuments(from:progress:)`` wrote.
public struct ImportSummary: Sendable, Hashable {
    /// Records read from the file.
    public var records: Int
    /// Revisions written (a full record whose revision the database has already writes nothing).
    public var revisionsWritten: Int
}

extension Database {
    /// Writes documents to `write`, chunk by chunk, in id order: every document, or those the
    /// options' selector picks, in the full or compact form (see ``ExportOptions/Form``), as a JSON
    /// array or NDJSON. Design documents are included; `_local` documents are not.
    ///
    /// ```swift
    /// var output = Data()
    /// try await db.export(ExportOptions(format: .ndjson, form: .compact)) { output.append($0) }
    /// ```
    /// - Returns: the number of records written.
    @discardableResult
    public func export(_ options: ExportOptions = ExportOptions(), to write: (Data) throws -> Void) async throws -> Int {
        var records = 0
        if options.format == .json { try write(Data("[".utf8)) }
        var chunk = Data()
        for id in try await exportIDs(options.form) {
            for record in try await exportRecords(of: id, options) {
                if options.format == .json {
                    if records > 0 { chunk.append(0x2C) }
                    chunk.append(0x0A)
                }
                chunk.append(contentsOf: try record.serialized())
                if options.format == .ndjson { chunk.append(0x0A) }
                records += 1
            }
            if chunk.count >= 1 << 16 {
                try write(chunk)
                chunk = Data()
            }
        }
        if options.format == .json { chunk.append(contentsOf: (records > 0 ? "\n]\n" : "]\n").utf8) }
        try write(chunk)
        return records
    }

    /// The ids to export, in id order: every document for the full form (deleted ones too), the live
    /// ones for the compact form.
    private func exportIDs(_ form: ExportOptions.Form) async throws -> [String] {
        var ids: [String] = []
        var since: Int64 = 0
        while true {
            let page = try await changes(since: since, limit: 1000)
            for change in page.changes where form == .full || !change.isDeleted { ids.append(change.id) }
            guard page.changes.count == 1000 else { break }
            since = page.lastSequence
        }
        return ids.sorted()
    }

    /// The records of one document: its leaves (full) or its current value (compact).
    private func exportRecords(of id: String, _ options: ExportOptions) async throws -> [JSON] {
        guard options.form == .full else {
            guard let current = try await document(withID: id) else { return [] }
            if let selector = options.selector, !selector.matches(current) { return [] }
            var body = current.body
            body.removeValue(forKey: PropertyHistory.member)
            var object: JSONObject = ["_id": .string(id)]
            for (key, value) in body { object[key] = value }
            return [.object(object)]
        }
        guard let tree = try await revisionTree(ofDocumentWithID: id), let winner = tree.winner else { return [] }
        if let selector = options.selector {
            // A selection picks documents by their current revision; a deleted one has nothing to match.
            guard !winner.isDeleted, let current = try await document(withID: id), selector.matches(current) else { return [] }
        }
        let leaves = tree.leaves.sorted { $0.revision > $1.revision }
        let documents = try await documentsWithHistory(leaves.map { (id: id, revision: $0.revision) })
        var records: [JSON] = []
        for case var document? in documents {
            var inline = JSONObject()
            for name in document.attachments.keys {
                let attachment = try loadingContent(of: document.attachments[name]!)
                document.attachments[name] = attachment
                guard case .object(var member) = attachment.json(.inline, encodingInfo: true) else { continue }
                // The stored bytes, so that a compressed attachment comes back as it was.
                member["data"] = .string((attachment.encodedData ?? Data()).base64EncodedString())
                member["length"] = .integer(attachment.length)
                inline[name] = .object(member)
            }
            document.attachments = [:]
            guard case .object(var object) = document.json(revisions: true) else { continue }
            if !inline.isEmpty { object["_attachments"] = .object(inline) }
            records.append(.object(object))
        }
        return records
    }

    /// Imports a file that ``export(_:to:)`` wrote — either format, either form (told apart by their
    /// content) — in one transaction, all or nothing.
    ///
    /// A full record (one with `_rev`) is inserted as replication inserts it: with its history, so the
    /// database ends up with exactly the exported leaves (a conflict stays a conflict). A compact
    /// record (no `_rev`) creates its document, or updates the current revision of an existing one.
    ///
    /// - Throws: ``DocStoreError`` with code ``DocStoreError/Code/invalidImport`` naming the line
    ///   (NDJSON) or element (JSON array) and its byte offset for a record that is not valid, and the
    ///   write's error (with ``DocStoreError/itemIndex``, the record's position) for one that cannot be
    ///   stored. Nothing is written then.
    /// - Parameter data: an export, in either format (a JSON array, or NDJSON: one record a line).
    /// - Parameter progress: told, from the writer's thread, how many records of how many are written
    ///   so far, every thousand records and at the end (for a progress bar; the transaction commits
    ///   after the last call).
    @discardableResult
    public func importDocuments(from data: Data, progress: (@Sendable (_ written: Int, _ of: Int) -> Void)? = nil) async throws -> ImportSummary {
        let records = try Self.parseImport(data)
        try ensureOpen()
        do {
            let documents = records.map(\.document)
            let written = try await waitingForTheLock(of: writer) { try writer.importAll(documents, progress: progress) }
            return ImportSummary(records: records.count, revisionsWritten: written)
        } catch let error as DocStoreError {
            guard let index = error.itemIndex else { throw error }
            var named = DocStoreError(error.code, "\(records[index].place): \(error.reason)",
                                      byteOffset: records[index].offset, cause: error.cause)
            named = named.naming(item: index, id: error.documentID)
            throw named
        }
    }

    /// One record of an import file, and where it is.
    struct ImportRecord {
        let document: Document
        /// "line 3" or "element 2".
        let place: String
        /// The byte where the record starts (for NDJSON; the parser does not tell it for an array element).
        let offset: Int?
    }

    /// Reads an import file: a JSON array when its first non-blank byte is `[`, NDJSON otherwise.
    static func parseImport(_ data: Data) throws -> [ImportRecord] {
        let bytes = [UInt8](data)
        let blank: Set<UInt8> = [0x20, 0x09, 0x0A, 0x0D]
        guard let first = bytes.firstIndex(where: { !blank.contains($0) }) else { return [] }
        if bytes[first] == 0x5B {
            let array: JSON
            do {
                array = try JSON(parsing: data)
            } catch let error as DocStoreError {
                let offset = error.byteOffset ?? 0
                throw DocStoreError(.invalidImport, "The JSON array is not valid at byte \(offset) (line \(line(of: offset, in: bytes))): \(error.reason)",
                                    byteOffset: offset)
            }
            guard case .array(let elements) = array else {
                throw DocStoreError(.invalidImport, "The file is not a JSON array", byteOffset: first)
            }
            return try elements.enumerated().map { index, element in
                try record(element, place: "element \(index)", offset: nil)
            }
        }
        var records: [ImportRecord] = []
        var start = 0
        var lineNumber = 0
        while start < bytes.count {
            let end = bytes[start...].firstIndex(of: 0x0A) ?? bytes.count
            lineNumber += 1
            let line = bytes[start..<end]
            if line.contains(where: { !blank.contains($0) }) {
                let json: JSON
                do {
                    json = try line.withUnsafeBufferPointer { try JSONParser.parse($0) }
                } catch let error as DocStoreError {
                    let offset = start + (error.byteOffset ?? 0)
                    throw DocStoreError(.invalidImport, "line \(lineNumber) is not valid JSON at byte \(offset): \(error.reason)",
                                        byteOffset: offset)
                }
                records.append(try record(json, place: "line \(lineNumber)", offset: start))
            }
            start = end + 1
        }
        return records
    }

    private static func line(of offset: Int, in bytes: [UInt8]) -> Int {
        bytes[..<min(offset, bytes.count)].reduce(1) { $1 == 0x0A ? $0 + 1 : $0 }
    }

    /// A record read as a document; inline attachments with an `encoding` keep their stored bytes.
    private static func record(_ json: JSON, place: String, offset: Int?) throws -> ImportRecord {
        do {
            guard case .object(var object) = json else {
                throw DocStoreError(.invalidDocument, "A record must be a JSON object")
            }
            var encoded: Attachments = [:]
            if case .object(var attachments)? = object["_attachments"] {
                for (name, member) in attachments {
                    guard let encoding = member["encoding"]?.stringValue else { continue }
                    guard let kind = AttachmentEncoding(rawValue: encoding), let text = member["data"]?.stringValue,
                        let bytes = Data(base64Encoded: text), let digest = member["digest"]?.stringValue,
                        let length = member["length"]?.intValue
                    else {
                        throw DocStoreError(.invalidAttachment, "Attachment \"\(name)\" needs data, digest and length with its encoding")
                    }
                    encoded[name] = Attachment(stubWithContentType: member["content_type"]?.stringValue ?? "application/octet-stream",
                                               length: length, digest: digest, revpos: member["revpos"]?.intValue,
                                               encoding: kind, encodedLength: bytes.count).with(encodedData: bytes)
                    attachments.removeValue(forKey: name)
                }
                object["_attachments"] = .object(attachments)
            }
            guard case .string(let id)? = object["_id"], !id.isEmpty else {
                throw DocStoreError(.invalidDocumentID, "A record needs an _id")
            }
            var document = try Document(couchJSON: .object(object))
            for (name, attachment) in encoded { document.attachments[name] = attachment }
            if document.revision != nil && document.revisionHistory == nil { document.revisionHistory = [] }
            return ImportRecord(document: document, place: place, offset: offset)
        } catch let error as DocStoreError {
            throw DocStoreError(.invalidImport, "\(place): \(error.reason)", byteOffset: offset)
        }
    }
}
