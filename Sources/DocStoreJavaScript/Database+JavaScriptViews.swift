import DocStore
import Foundation

extension Database {
    /// Queries a JavaScript view of a design document stored in this database (saved here or arrived
    /// by replication), with every option of a native index query.
    ///
    /// The view becomes a DocStore index the first time it is queried; when the design document's view
    /// code changes (its map, reduce, `views.lib` or `options`), the next query rebuilds it. As in
    /// CouchDB, a map function that throws for a document leaves that document out of the view, and
    /// design documents are mapped only with the `include_design` option.
    ///
    /// ```swift
    /// var query = IndexQuery()
    /// query.group = true
    /// for row in try await db.query(designDocument: "app", view: "by_type", query) {
    ///     print(row.key, row.value)
    /// }
    /// ```
    /// - Throws: ``DocStoreError`` — ``DocStoreError/Code/notFound`` for a missing design document or
    ///   view, ``DocStoreError/Code/unknownQueryLanguage`` when the design document is in another
    ///   language, ``DocStoreError/Code/compilationError`` when its functions do not compile,
    ///   ``DocStoreError/Code/scriptTimeout`` when its map function runs over the engine's time limit
    ///   for a document, and what ``query(_:_:)`` throws.
    public func query(designDocument name: String, view: String, _ query: IndexQuery = IndexQuery(),
                      engine: JavaScriptEngine = .shared) async throws -> QueryResult {
        let (design, indexName) = try await javaScriptView(designDocument: name, view: view, engine: engine)
        let result = try await self.query(indexName, query)
        if let stopped = result.mapErrors.first(where: { $0.reason.hasPrefix(JavaScriptViews.timeoutMarker) }) {
            let why = stopped.reason.dropFirst(JavaScriptViews.timeoutMarker.count).trimmingCharacters(in: .whitespaces)
            throw DocStoreError(.scriptTimeout, "The map function of \(design.id)/_view/\(view) was stopped on document \(stopped.documentID): \(why)")
        }
        return result
    }

    /// The design document and the registered index of view `view` of `_design/<name>`, registered (or
    /// registered again, which rebuilds it) when its code is new.
    func javaScriptView(designDocument name: String, view: String, engine: JavaScriptEngine) async throws -> (DesignDocument, String) {
        let design = try await designDocument(named: name)
        if !design.isJavaScript {
            // As CouchDB: a missing view first, then the language.
            guard case .object(let views)? = design.body["views"], views[view] != nil else {
                throw DocStoreError(.notFound, "missing_named_view")
            }
            throw DocStoreError(.unknownQueryLanguage, design.language)
        }
        guard design.views[view] != nil, let version = design.version(of: view) else {
            throw DocStoreError(.notFound, "missing_named_view")
        }
        let indexName = JavaScriptViews.indexName(designDocument: design.name, view: view)
        if try await indexDefinition(named: indexName)?.version != version {
            let definition = try await JavaScriptViews.definition(design, view: view, engine: engine)
            try await register(definition)
        }
        return (design, indexName)
    }

    /// The design document `_design/<name>`, read as a ``DesignDocument``.
    /// - Throws: ``DocStoreError/Code/notFound`` (`missing` or `deleted`, as CouchDB says).
    public func designDocument(named name: String) async throws -> DesignDocument {
        let id = name.hasPrefix(DesignDocument.prefix) ? name : DesignDocument.prefix + name
        guard let document = try await document(withID: id) else {
            throw DocStoreError(.notFound, "missing")
        }
        if document.isDeleted { throw DocStoreError(.notFound, "deleted") }
        return try DesignDocument(document)
    }
}

/// JavaScript views as DocStore indexes.
public enum JavaScriptViews {
    /// How the map errors of a stopped runaway function begin.
    static let timeoutMarker = "timeout:"

    /// The DocStore index name of a view (``Database/indexSizes(named:)`` takes it, for one).
    public static func indexName(designDocument: String, view: String) -> String {
        "javascript:\(designDocument)/\(view)"
    }

    /// The index of one view: its map (and reduce) run in `engine`'s contexts. Compiles the functions
    /// first, so that a syntax error fails here, and only this view.
    static func definition(_ design: DesignDocument, view name: String, engine: JavaScriptEngine) async throws -> IndexDefinition {
        guard let view = design.views[name], let version = design.version(of: name) else {
            throw DocStoreError(.notFound, "missing_named_view")
        }
        let map = JavaScriptContext.FunctionReference(design: design, path: "views.\(name).map", source: view.map, forMap: true)
        let reduce = try reduceFunction(design, view: name, engine: engine)
        try await engine.run { context in
            do {
                _ = try context.function(map)
            } catch let error as DocStoreError where error.code == .compilationError {
                throw DocStoreError(.compilationError, "Compilation of the map function in the '\(name)' view failed: \(error.reason)")
            }
            if let source = view.reduce, !source.hasPrefix("_") {
                do {
                    _ = try context.function(.init(design: design, path: "views.\(name).reduce", source: source))
                } catch let error as DocStoreError where error.code == .compilationError {
                    throw DocStoreError(.compilationError, "Compilation of the reduce function in the '\(name)' view failed: \(error.reason)")
                }
            }
        }
        let includeDesign = design.includesDesignDocuments
        let localSequence = design.includesLocalSequence
        // The document as CouchDB hands it to map functions.
        @Sendable func mapped(_ document: Document) -> JSON {
            var json = document.json()
            if localSequence, case .object(var members) = json, let sequence = document.sequence {
                members["_local_seq"] = .integer(Int(sequence))
                json = .object(members)
            }
            return json
        }
        var definition = IndexDefinition(name: indexName(designDocument: design.name, view: name), version: version,
                                         collation: design.collation(of: name), reduce: reduce) { document, emit in
            if !includeDesign && document.id.hasPrefix(DesignDocument.prefix) { return }
            let text = try mapped(document).serializedString()
            let rows: [(JSON, JSON)]
            do {
                rows = try engine.withContext { try $0.map(map, documentJSON: text) }
            } catch let error as DocStoreError where error.code == .scriptTimeout {
                throw DocStoreError(.indexFailure, timeoutMarker + " " + error.reason)
            }
            for (key, value) in rows { emit(key, value) }
        }
        // CouchDB's map functions see `_conflicts`.
        definition.includesConflicts = true
        // A window of documents goes into JavaScript in one call per engine thread, as JSON spliced from
        // the stored bodies (parsed only when attachment stubs must be written as CouchDB writes them); a
        // window that runs over the time limit is mapped again document by document, to find (and skip)
        // the one that does.
        let single = definition.map
        definition.batchMap = { documents in
            let mappable = documents.map { includeDesign || !$0.id.hasPrefix(DesignDocument.prefix) }
            func oneByOne() -> [Result<[(key: JSON, value: JSON?)], any Error>] {
                documents.map { raw in
                    Result {
                        var rows: [(key: JSON, value: JSON?)] = []
                        try single(try raw.document()) { rows.append(($0, $1)) }
                        return rows
                    }
                }
            }
            // A window of some size is split in as many parts as the engine has threads, mapped at once.
            let indices = documents.indices.filter { mappable[$0] }
            let partCount = indices.count >= 64 ? engine.threads : 1
            let partSize = (indices.count + partCount - 1) / Swift.max(partCount, 1)
            var texts: [[UInt8]] = []
            do {
                for start in stride(from: 0, to: indices.count, by: Swift.max(partSize, 1)) {
                    let part = indices[start..<Swift.min(start + partSize, indices.count)]
                    var text: [UInt8] = [UInt8(ascii: "[")]
                    text.reserveCapacity(part.reduce(2) { $0 + documents[$1].body.count + 96 })
                    for (offset, index) in part.enumerated() {
                        if offset > 0 { text.append(UInt8(ascii: ",")) }
                        let raw = documents[index]
                        if raw.mayHaveAttachments {
                            text += try mapped(try raw.document()).serialized()
                        } else {
                            splice(raw, localSequence: localSequence, into: &text)
                        }
                    }
                    text.append(UInt8(ascii: "]"))
                    texts.append(text)
                }
            } catch {
                return oneByOne()
            }
            let jobs = texts.map { text in { @Sendable (context: JavaScriptContext) in try context.mapBatch(map, documentsJSON: text) } }
            guard let parts = try? engine.withContexts(jobs) else { return oneByOne() }
            let results = parts.flatMap { $0 }
            var iterator = results.makeIterator()
            return mappable.map { $0 ? (iterator.next() ?? .success([])) : .success([]) }
        }
        return definition
    }

    /// The document as CouchDB gives it to map functions, written from its stored body (which has no
    /// attachment stubs): `_id`, `_rev`, the members, `_conflicts`, `_deleted_conflicts` and
    /// `_local_seq` when there are.
    static func splice(_ raw: RawDocument, localSequence: Bool, into text: inout [UInt8]) {
        text += Array(#"{"_id":"#.utf8)
        text += (try? JSON.string(raw.id).serialized()) ?? Array("\"\"".utf8)
        text += Array(#","_rev":""#.utf8)
        text += Array(raw.revision.description.utf8)
        text.append(UInt8(ascii: "\""))
        // The body's members, without its braces.
        if raw.body.count > 2 {
            text.append(UInt8(ascii: ","))
            text += raw.body[1..<(raw.body.count - 1)]
        }
        for (member, revisions) in [("_conflicts", raw.conflicts), ("_deleted_conflicts", raw.deletedConflicts)] where !revisions.isEmpty {
            text += Array(",\"\(member)\":[".utf8)
            for (index, revision) in revisions.enumerated() {
                if index > 0 { text.append(UInt8(ascii: ",")) }
                text.append(UInt8(ascii: "\""))
                text += Array(revision.description.utf8)
                text.append(UInt8(ascii: "\""))
            }
            text.append(UInt8(ascii: "]"))
        }
        if localSequence {
            text += Array(#","_local_seq":\#(raw.sequence)"#.utf8)
        }
        text.append(UInt8(ascii: "}"))
    }

    /// The reduce of a view: CouchDB's built-ins as DocStore's, a JavaScript function in the engine.
    static func reduceFunction(_ design: DesignDocument, view name: String, engine: JavaScriptEngine) throws -> ReduceFunction? {
        guard let source = design.views[name]?.reduce else { return nil }
        if source.hasPrefix("_") {
            guard let builtin = builtinReduce(source) else {
                throw DocStoreError(.invalidDesignDocument, "`\(source)` is not a supported reduce function.")
            }
            return builtin
        }
        let reference = JavaScriptContext.FunctionReference(design: design, path: "views.\(name).reduce", source: source)
        return .couchDB { keys, values, rereduce in
            // An overflow stays the group's value through rereduces, as CouchDB reports it per row.
            if rereduce, let overflow = values.first(where: { JavaScriptViews.reduceError(in: $0) != nil }) { return overflow }
            do {
                return try engine.withContext { try $0.reduce(reference, keys: keys, values: values, rereduce: rereduce) }
            } catch let error as DocStoreError where error.couchDBError == "reduce_overflow_error" {
                return [JavaScriptViews.reduceErrorMember: ["error": "reduce_overflow_error", "reason": .string(error.reason)]]
            }
        }
    }

    /// The member of the value that stands for a group's reduce error (CouchDB's `reduce_overflow_error`
    /// row): a name no JSON a reduce function makes by accident has.
    static let reduceErrorMember = "\u{1}docstore.reduce_error"

    /// The `error` and `reason` of a reduced value that stands for an error.
    public static func reduceError(in value: JSON) -> (error: String, reason: String)? {
        guard case .object(let members) = value, members.count == 1, case .object(let error)? = members[reduceErrorMember],
              let name = error["error"]?.stringValue else { return nil }
        return (name, error["reason"]?.stringValue ?? "")
    }

    /// CouchDB's built-in reduce a source names: like CouchDB, it goes by the start of the text
    /// (`"_sum"`, `"_sum\n"` and `"_summary"` are all `_sum`).
    static func builtinReduce(_ source: String) -> ReduceFunction? {
        if source.hasPrefix("_count") { return .count }
        if source.hasPrefix("_sum") { return .sum }
        if source.hasPrefix("_stats") { return .stats }
        if source.hasPrefix("_approx_count_distinct") { return .approximateCountDistinct }
        return nil
    }
}

extension Database {
    /// Drops the indexes of JavaScript views whose design document, or view, no longer exists
    /// (CouchDB's `_view_cleanup`). A view whose code changed is rebuilt in place when next queried.
    public func dropStaleJavaScriptViews() async throws {
        for name in await indexNames where name.hasPrefix("javascript:") {
            let parts = name.dropFirst("javascript:".count).split(separator: "/", maxSplits: 1).map(String.init)
            guard parts.count == 2 else { continue }
            let design = try? await designDocument(named: parts[0])
            if design?.views[parts[1]] == nil { try await deleteIndex(named: name) }
        }
    }
}
