import Foundation

/// A change to a document of a ``Model`` type, as ``Database/observeChanges(of:)`` delivers it: the
/// ``DocumentChange`` notification of the write, with the model it stored.
public struct ModelChange<M: Model>: Sendable {
    /// The notification of the write.
    public let change: DocumentChange
    /// The model as it is now; `nil` when the document was deleted.
    public let model: M?

    /// The document id.
    public var id: String { change.id }
    /// The revision the change stored (for a conflict merge, the merged one).
    public var revision: RevisionID { change.revision }
    /// Whether the change was written here or arrived by replication.
    public var source: DocumentChange.Source { change.source }
    /// Whether the document was deleted.
    public var isDeleted: Bool { change.isDeleted }
}

extension Database {
    // MARK: Typed writes

    /// Adds new models in one transaction, all or nothing; a model with an empty id gets one.
    ///
    /// - Returns: the models as saved: ids filled in, each with its new ``Model/revision``.
    /// - Throws: ``DocStoreError`` naming the first model that failed (``DocStoreError/itemIndex``,
    ///   ``DocStoreError/documentID``) — ``DocStoreError/Code/conflict`` when a live document has its id,
    ///   ``DocStoreError/Code/invalidDocument`` or ``DocStoreError/Code/invalidDocumentID`` for a value
    ///   that cannot be stored; nothing is written then.
    @discardableResult
    public func add<M: Model>(_ models: [M]) async throws -> [M] {
        let documents = try await modelDocuments(models, current: nil)
        return try await saveModels(models, documents, policy: .add)
    }

    /// Adds one model (see ``add(_:)-([M])``).
    @discardableResult
    public func add<M: Model>(_ model: M) async throws -> M {
        try await add([model])[0]
    }

    /// Updates models at the revisions they carry, in one transaction, all or nothing.
    ///
    /// For a type with ``Model/history``, each property whose value changed gets a new value in the
    /// history, dated now and signed by this database.
    /// - Returns: the models with their new revisions.
    /// - Throws: ``DocStoreError`` naming the first model that failed — ``DocStoreError/Code/notFound``
    ///   when its document does not exist (or is deleted), ``DocStoreError/Code/conflict`` when its
    ///   revision is not the current one, ``DocStoreError/Code/invalidModel`` when the document is of
    ///   another collection; nothing is written then.
    @discardableResult
    public func update<M: Model>(_ models: [M]) async throws -> [M] {
        var current: [Document?] = []
        current.reserveCapacity(models.count)
        for (position, model) in models.enumerated() {
            let document = try await currentDocument(of: model, at: position)
            current.append(document)
        }
        let documents = try await modelDocuments(models, current: current)
        return try await saveModels(models, documents, policy: .update)
    }

    /// Updates one model (see ``update(_:)-([M])``).
    @discardableResult
    public func update<M: Model>(_ model: M) async throws -> M {
        try await update([model])[0]
    }

    /// Deletes models at the revisions they carry, in one transaction, all or nothing.
    /// - Returns: the tombstone revisions, in order.
    /// - Throws: as ``update(_:)-([M])``.
    @discardableResult
    public func delete<M: Model>(_ models: [M]) async throws -> [RevisionID] {
        var tombstones: [Document] = []
        for (position, model) in models.enumerated() {
            let current = try await currentDocument(of: model, at: position)
            // The tombstone keeps the type (so typed change streams know it) and the channels (so
            // channel-limited readers see the deletion).
            var tombstone = Document(id: model.id, revision: model.revision, body: ["type": .string(M.collection)])
            if let channels = current?["channels"] { tombstone["channels"] = channels }
            tombstone.isDeleted = true
            tombstones.append(tombstone)
        }
        try ensureOpen()
        let written = tombstones
        return try await waitingForTheLock(of: writer) { try writer.writeAll(written, policy: .update) }.map { $0.revision! }
    }

    /// The document a model was read from, checked to be of its collection; `nil` when it does not
    /// exist (the write then reports it).
    private func currentDocument<M: Model>(of model: M, at position: Int) async throws -> Document? {
        guard let revision = model.revision, !model.id.isEmpty else {
            throw DocStoreError.conflict("\(M.self) \(model.id) has no revision: it was not read from the database")
                .naming(item: position, id: model.id)
        }
        guard let document = try await document(withID: model.id, revision: revision) else { return nil }
        if document.type != M.collection {
            throw DocStoreError(.invalidModel, "Document \(model.id) is not a \(M.collection)")
                .naming(item: position, id: model.id)
        }
        return document
    }

    /// The documents to write for `models`: each model's properties and `type`, and for a type with
    /// history, the history of `current` (the revision updated) with the new values recorded.
    private func modelDocuments<M: Model>(_ models: [M], current: [Document?]?) async throws -> [Document] {
        let replica = M.history == nil ? "" : try await replicaID()
        let now = Date.now
        var documents: [Document] = []
        documents.reserveCapacity(models.count)
        for (position, model) in models.enumerated() {
            do {
                var document = try ModelCoding.document(for: model, dateFormat: configuration.dateFormat)
                if let policy = M.history {
                    let base = current?[position]
                    var history = base.flatMap { PropertyHistory(body: $0.body) } ?? PropertyHistory(policy: policy)
                    history.policy = policy
                    var properties = document.body
                    properties.removeValue(forKey: ModelCoding.typeMember)
                    history.record(properties, at: now, replica: replica)
                    document.body = history.body(over: document.body)
                }
                if let base = current?[position] { document.attachments = base.attachments }
                documents.append(document)
            } catch let error as DocStoreError {
                throw error.naming(item: position, id: model.id)
            }
        }
        return documents
    }

    private func saveModels<M: Model>(_ models: [M], _ documents: [Document], policy: WritePolicy) async throws -> [M] {
        try ensureOpen()
        let saved = try await waitingForTheLock(of: writer) { try writer.writeAll(documents, policy: policy) }
        return zip(models, saved).map { model, document in
            var model = model
            model.id = document.id
            model.revision = document.revision
            return model
        }
    }

    /// This database's id as a replica: the ``DatabaseInfo/uuid`` made when its file was created.
    func replicaID() async throws -> String {
        try await readByKey { try Schema.uuid($0) }
    }

    // MARK: Typed reads

    /// The models with the given ids, in order.
    /// - Throws: ``DocStoreError`` naming the first id that failed: ``DocStoreError/Code/notFound``
    ///   when there is no live document, ``DocStoreError/Code/invalidModel`` when the document is of
    ///   another collection or does not decode.
    public func fetch<M: Model>(_ type: M.Type, ids: [String]) async throws -> [M] {
        try await fetchWithDocuments(M.self, ids: ids).map(\.model)
    }

    /// ``fetch(_:ids:)``, each model with the document it was read from.
    func fetchWithDocuments<M: Model>(_ type: M.Type, ids: [String]) async throws -> [(model: M, document: Document)] {
        let documents = try await documents(withIDs: ids)
        var byID: [ExactString: Document] = [:]
        for document in documents { byID[ExactString(document.id)] = document }
        return try ids.enumerated().map { position, id in
            guard let document = byID[ExactString(id)] else {
                throw DocStoreError.notFound("No \(M.collection) \(id)").naming(item: position, id: id)
            }
            do {
                return (try ModelCoding.model(M.self, from: document, dateFormat: configuration.dateFormat), document)
            } catch let error as DocStoreError {
                throw error.naming(item: position, id: id)
            }
        }
    }

    /// The model with the given id, or `nil` when there is no live document with it.
    /// - Throws: ``DocStoreError/Code/invalidModel`` when the document is of another collection.
    public func fetch<M: Model>(_ type: M.Type, id: String) async throws -> M? {
        guard let document = try await document(withID: id) else { return nil }
        return try ModelCoding.model(M.self, from: document, dateFormat: configuration.dateFormat)
    }

    /// Every model of the type, in id order.
    public func fetchAll<M: Model>(_ type: M.Type) async throws -> [M] {
        try await fetch(M.self, FindQuery(where: .collection(M.collection)))
    }

    /// The models that satisfy `condition` (built with ``QueryField``), in id order unless an index orders them.
    ///
    /// ```swift
    /// let adults = try await db.fetch(Person.self, where: QueryField("age") >= 18)
    /// ```
    public func fetch<M: Model>(_ type: M.Type, where condition: QueryCondition) async throws -> [M] {
        try await fetch(M.self, FindQuery(where: condition))
    }

    /// The models a Mango query finds, restricted to the type's collection; `fields` is ignored, since a
    /// model needs all of them.
    public func fetch<M: Model>(_ type: M.Type, _ query: FindQuery) async throws -> [M] {
        var query = query
        query.selector = try MangoSelector(["$and": [.object(["type": .string(M.collection)]), query.selector.root]])
        query.fields = nil
        return try await find(query).documents.map {
            try ModelCoding.model(M.self, from: $0, dateFormat: configuration.dateFormat)
        }
    }

    /// The values a property of a model with ``Model/history`` has had, newest first (empty for a type
    /// without history, or a property never set).
    public func history<M: Model>(of model: M, property: String) async throws -> [PropertyValue] {
        try await history(of: M.self, id: model.id, property: property)
    }

    /// The values a property of the document `id` has had, newest first.
    public func history<M: Model>(of type: M.Type, id: String, property: String) async throws -> [PropertyValue] {
        guard let document = try await document(withID: id) else {
            throw DocStoreError.notFound("No \(M.collection) \(id)")
        }
        return PropertyHistory(body: document.body)?.values[property] ?? []
    }

    // MARK: Typed observation

    /// The changes to documents of the type, from now until the database closes or the consumer stops:
    /// each with the model as it is after the change (`nil` for a deletion). A deletion whose tombstone
    /// has no `type` (one not made by ``delete(_:)-([M])``) is reported to every type.
    public func observeChanges<M: Model>(of type: M.Type) -> AsyncStream<ModelChange<M>> {
        let batches = observeChanges()
        return AsyncStream { continuation in
            let task = Task {
                for await batch in batches {
                    for change in batch {
                        if change.isDeleted {
                            // A typed delete keeps the type in the tombstone; others (from CouchDB
                            // clients) may have none, and are reported to every type.
                            let tombstone = try? await self.document(withID: change.id, revision: change.revision)
                            guard tombstone?.type == nil || tombstone?.type == M.collection else { continue }
                            continuation.yield(ModelChange(change: change, model: nil))
                            continue
                        }
                        guard let document = try? await self.document(withID: change.id, revision: change.revision),
                            document.type == M.collection,
                            let model = try? ModelCoding.model(M.self, from: document, dateFormat: self.configuration.dateFormat)
                        else { continue }
                        continuation.yield(ModelChange(change: change, model: model))
                    }
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    /// A live query of models: the models that satisfy `condition` (all of the type when `nil`) now,
    /// then again after every committed change that alters them.
    public func observe<M: Model & Equatable>(_ type: M.Type, where condition: QueryCondition? = nil)
        -> AsyncThrowingStream<[M], any Error>
    {
        let (stream, continuation) = AsyncThrowingStream<[M], any Error>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let task = Task {
            do {
                let query = try condition.map { try FindQuery(where: $0) } ?? FindQuery(where: .collection(M.collection))
                try await runLive({ try await self.fetch(M.self, query) }, changed: { $0 != $1 },
                                  deliver: { continuation.yield($0) })
                continuation.finish()
            } catch {
                continuation.finish(throwing: error)
            }
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }
}
