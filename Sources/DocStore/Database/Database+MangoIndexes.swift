import Foundation

extension Database {
    /// Creates a Mango `json` index (CouchDB `POST /db/_index`), stored as a view of a design document
    /// with `"language": "query"` exactly as CouchDB stores it.
    ///
    /// ```swift
    /// let index = try await db.createIndex(fields: [.ascending("type"), .ascending("date")], name: "by-type-date")
    /// ```
    /// - Parameters:
    ///   - fields: the indexed fields, all ascending or all descending.
    ///   - name: the index name; by default the SHA-1 of its definition.
    ///   - designDocument: the design document (`"_design/x"` or `"x"`); by default `_design/` + the
    ///     SHA-1 of the definition. An existing one keeps its other indexes.
    ///   - partialFilter: only documents matching it are indexed (CouchDB `partial_filter_selector`).
    /// - Returns: where the index is, and whether it was created or already existed with that definition
    ///   (one of that name with another definition is replaced).
    /// - Throws: ``DocStoreError`` — ``DocStoreError/Code/unsupportedMixedSort`` for fields in both
    ///   directions, ``DocStoreError/Code/invalidFieldName`` for a malformed path, a selector error for a
    ///   malformed partial filter, ``DocStoreError/Code/invalidIndex`` when the design document exists
    ///   but is not a query design document.
    @discardableResult
    public func createIndex(fields: [SortField], name: String? = nil, designDocument: String? = nil,
                            partialFilter: JSON? = nil) async throws -> IndexCreation {
        try ensureOpen()
        for field in fields { _ = try FieldPath(field.path) }
        if Set(fields.map(\.descending)).count > 1 {
            throw DocStoreError(.unsupportedMixedSort, "Sorts currently only support a single direction for all fields.")
        }
        let filter = try partialFilter.flatMap { $0 == .object([:]) ? nil : try MangoSelector($0).withoutText(for: "the documents of an index") }
        return try await store(fields: fields, name: name, designDocument: designDocument, partialFilter: filter, type: .json)
    }

    /// Creates a Mango `text` index (Cloudant Query's `POST /db/_index` with `"type": "text"`): a
    /// full-text index of the strings at `fields` — every string of each document when `fields` is
    /// empty — stored in the `indexes` of a design document with `"language": "query"`, as CouchDB
    /// stores it. A selector's `$text` searches it (``find(_:)``), and so does ``search(index:_:)``
    /// under its ``MangoIndex/indexName``.
    ///
    /// ```swift
    /// try await db.createTextIndex(fields: ["title", "body"], name: "notes-text", designDocument: "search")
    /// let found = try await db.find(FindQuery(selector: try MangoSelector(["$text": "green tea", "type": "note"])))
    /// ```
    /// - Parameters:
    ///   - fields: dotted paths of string fields (or arrays of strings); empty for every string.
    ///   - name: the index's name; by default one made from its definition, as CouchDB makes it.
    ///   - designDocument: the design document that holds it (`_design/` is added when missing); by
    ///     default one of its own, named from its definition and name, as CouchDB names it.
    ///   - partialFilter: a selector the documents of the index must match.
    /// - Returns: where the index is, and whether it was created or already existed.
    /// - Throws: ``DocStoreError`` — ``DocStoreError/Code/invalidFieldName`` for a malformed path, a
    ///   selector error for a malformed partial filter, ``DocStoreError/Code/invalidIndex`` when the
    ///   design document exists but is not a query design document.
    @discardableResult
    public func createTextIndex(fields: [String] = [], name: String? = nil, designDocument: String? = nil,
                                partialFilter: JSON? = nil) async throws -> IndexCreation {
        try ensureOpen()
        for field in fields { _ = try FieldPath(field) }
        let filter = try partialFilter.flatMap { $0 == .object([:]) ? nil : try MangoSelector($0).withoutText(for: "the documents of an index") }
        return try await store(fields: fields.map { SortField($0) }, name: name, designDocument: designDocument,
                               partialFilter: filter, type: .text)
    }

    /// Adds an index to its design document (made when missing), unless one of that name and
    /// definition is already there.
    private func store(fields: [SortField], name: String?, designDocument: String?, partialFilter filter: MangoSelector?,
                       type: MangoIndex.Kind) async throws -> IndexCreation {
        let generated = MangoIndex.generatedName(fields: fields, partialFilter: filter, type: type)
        let indexName = name ?? generated
        guard !indexName.isEmpty else { throw DocStoreError(.badRequest, "The index name must not be empty") }
        // As CouchDB, an index without a design document gets one of its own, named from its definition and name.
        let ddocID = designDocument.map { $0.hasPrefix("_design/") ? $0 : "_design/" + $0 }
            ?? "_design/" + (name.map { MangoIndex.generatedName(fields: fields, partialFilter: filter, type: type, name: $0) } ?? generated)
        let index = MangoIndex(designDocument: ddocID, name: indexName, fields: fields, partialFilter: filter, type: type)
        let member = type == .json ? "views" : "indexes"

        // A conflict means someone else changed the design document meanwhile: read it again.
        while true {
            var ddoc = try await document(withID: ddocID) ?? Document(id: ddocID)
            if ddoc.revision != nil, ddoc["language"]?.stringValue != "query" {
                throw DocStoreError(.invalidIndex, "\(ddocID) exists and is not a query design document")
            }
            var entries = ddoc[member]?.objectValue ?? [:]
            if MangoIndex.indexes(in: ddoc).contains(index) {
                try await synchronizeMangoIndexes()
                return IndexCreation(designDocument: ddocID, name: indexName, created: false)
            }
            entries[indexName] = type == .json ? index.viewJSON : index.textIndexJSON
            ddoc.body["language"] = "query"
            ddoc.body[member] = .object(entries)
            do {
                _ = try await put(ddoc)
            } catch let error as DocStoreError where error.code == .conflict {
                continue
            }
            try await synchronizeMangoIndexes()
            return IndexCreation(designDocument: ddocID, name: indexName, created: true)
        }
    }

    /// The Mango indexes (json and text) of this database, from its query design documents (those that
    /// arrived by replication included), in design document and name order.
    public func mangoIndexes() async throws -> [MangoIndex] {
        try await synchronizeMangoIndexes()
    }

    /// Deletes a Mango index (CouchDB `DELETE /db/_index/{ddoc}/{type}/{name}`): it leaves the design
    /// document, which is deleted when no index or view is left in it.
    /// - Throws: ``DocStoreError/Code/notFound`` if there is no such index.
    public func deleteIndex(designDocument: String, name: String, type: MangoIndex.Kind = .json) async throws {
        try ensureOpen()
        let ddocID = designDocument.hasPrefix("_design/") ? designDocument : "_design/" + designDocument
        let member = type == .json ? "views" : "indexes"
        while true {
            guard var ddoc = try await document(withID: ddocID),
                MangoIndex.indexes(in: ddoc).contains(where: { $0.name == name && $0.type == type }),
                var entries = ddoc[member]?.objectValue else {
                throw DocStoreError(.notFound, "Index not found")
            }
            entries[name] = nil
            let otherMember = type == .json ? "indexes" : "views"
            let othersLeft = !(ddoc[otherMember]?.objectValue?.isEmpty ?? true)
            do {
                if entries.isEmpty, !othersLeft {
                    _ = try await delete(ddoc)
                } else {
                    ddoc.body[member] = entries.isEmpty ? JSON?.none : .object(entries)
                    _ = try await put(ddoc)
                }
            } catch let error as DocStoreError where error.code == .conflict {
                continue
            }
            try await synchronizeMangoIndexes()
            return
        }
    }

    /// Brings the registered Mango indexes in line with the query design documents: registers new and
    /// changed ones (a changed definition rebuilds), drops those whose design document or view went.
    /// Returns the indexes.
    @discardableResult
    func synchronizeMangoIndexes() async throws -> [MangoIndex] {
        // Nothing committed since the last check: the indexes are those read then.
        let sequence = notifier.committedSequence
        if let cached = mangoIndexCache.withLock({ $0 }), cached.sequence == sequence { return cached.indexes }
        var query = AllDocumentsQuery(startKey: "_design/", endKey: "_design0", inclusiveEnd: false)
        // Else the design documents' revisions tell whether they still are.
        let revisions = Dictionary(try await allDocuments(query, counting: false).rows.map { ($0.id, $0.revision) }, uniquingKeysWith: { first, _ in first })
        if let cached = mangoIndexCache.withLock({ $0 }), cached.revisions == revisions {
            mangoIndexCache.withLock { $0?.sequence = sequence }
            return cached.indexes
        }
        query.includeDocuments = true
        let designDocuments = try await allDocuments(query, counting: false).rows.compactMap(\.document)
        let indexes = designDocuments.flatMap(MangoIndex.indexes(in:))
            .sorted { ($0.designDocument, $0.name, $0.type.rawValue) < ($1.designDocument, $1.name, $1.type.rawValue) }
        let wanted = Dictionary(indexes.map { ($0.indexName, $0) }, uniquingKeysWith: { first, _ in first })
        for name in await indexWriter.names
        where MangoIndex.indexNamePrefixes.contains(where: name.hasPrefix) && wanted[name] == nil {
            try await indexWriter.drop(name)
        }
        for (name, index) in wanted {
            let definition = index.definition
            if (try? await indexWriter.state(named: name))?.definition.version != definition.version {
                _ = try await indexWriter.register(definition)
            }
        }
        let read = Dictionary(designDocuments.map { ($0.id, $0.revision) }, uniquingKeysWith: { first, _ in first })
        mangoIndexCache.withLock { $0 = (sequence, read, indexes) }
        return indexes
    }
}
