
/// Who is writing, as CouchDB's validation functions see it: the `userCtx` and the database's
/// `_security` object. A server sets it for the writes it makes on a user's behalf with
/// `WriteContext.$current.withValue(…)`; writes made without one are validated with `nil`.
package struct WriteContext: Sendable {
    /// CouchDB's `userCtx`: `{"db": …, "name": … | null, "roles": […]}`.
    package var userContext: JSON
    /// The database's `_security` object.
    package var securityObject: JSON

    /// A context of `userContext` in a database whose `_security` is `securityObject`.
    package init(userContext: JSON, securityObject: JSON = [:]) {
        self.userContext = userContext
        self.securityObject = securityObject
    }

    /// The writer of the current task, if a server set one.
    @TaskLocal package static var current: WriteContext?
}

/// One write, as a ``WriteValidator`` is asked about it: CouchDB's `validate_doc_update(newDoc,
/// oldDoc, userCtx, secObj)`.
package struct ValidatedWrite: Sendable {
    /// The document being written (a deletion has ``Document/isDeleted``), with the revision it was
    /// given (`nil` for a new document).
    package let newDocument: Document
    /// The revision it replaces: for an edit, the revision it names; for a replicated revision, its
    /// nearest ancestor this database holds; `nil` when there is none.
    package let oldDocument: Document?
    /// Whether the revision arrived by replication (`new_edits=false`).
    package let isReplicated: Bool
    /// Who writes it, when known.
    package let context: WriteContext?
    /// The live design documents of the database that have a `validate_doc_update` member, in id order.
    package let validatingDesignDocuments: [Document]

    /// The same write, shown with other validating design documents: for a validator that handles
    /// some design documents itself and passes the others on.
    package func with(validatingDesignDocuments designs: [Document]) -> ValidatedWrite {
        ValidatedWrite(newDocument: newDocument, oldDocument: oldDocument, isReplicated: isReplicated,
                       context: context, validatingDesignDocuments: designs)
    }
}

/// Decides whether a write may be stored: returns to accept it, throws a ``DocStoreError`` to refuse it
/// (``DocStoreError/Code/forbidden``, ``DocStoreError/Code/unauthorized``, …). It runs inside the write
/// transaction, for every document of every write path (single, bulk, replicated, imported), and must
/// not write to the database itself. A refused document is reported as that document's failure.
package typealias WriteValidator = @Sendable (_ write: ValidatedWrite) throws -> Void

/// Changes a document before it is stored — CouchDB's `before_doc_update`, which a CouchDB users
/// database uses to hash passwords: gets the document of each write (edits and replicated revisions
/// alike, before validation), whether it is replicated, and who writes it; returns whether it changed
/// the document, or throws a ``DocStoreError`` to refuse it. It runs inside the write transaction and
/// must not write to the database itself. A replicated revision keeps its revision id.
package typealias WritePreparer = @Sendable (_ document: inout Document, _ isReplicated: Bool,
                                            _ context: WriteContext?) throws -> Bool

/// The validator of a database and the design documents it needs, cached by the writer.
final class WriteValidation: Sendable {
    private struct State {
        var preparer: WritePreparer?
        var validator: WriteValidator?
        /// The validating design documents; `nil` once a design document was written.
        var designDocuments: [Document]?
    }
    private let state = Locked(State())

    var preparer: WritePreparer? {
        get { state.withLock { $0.preparer } }
        set { state.withLock { $0.preparer = newValue } }
    }

    var validator: WriteValidator? {
        get { state.withLock { $0.validator } }
        set { state.withLock { $0.validator = newValue } }
    }

    /// The validating design documents, read with `load` when not known.
    func designDocuments(_ load: () throws -> [Document]) rethrows -> [Document] {
        if let known = state.withLock({ $0.designDocuments }) { return known }
        let loaded = try load()
        state.withLock { $0.designDocuments = loaded }
        return loaded
    }

    /// Forgets the design documents: one is being written.
    /// Whether a write may run the app's validation code for long: a validator is set and the
    /// database has validating design documents (or they are not known yet). A validator with no
    /// design document to run (JavaScript's, on most databases) returns at once.
    var mayRunUserCode: Bool {
        state.withLock { $0.validator != nil && $0.designDocuments?.isEmpty != true }
    }

    func designDocumentWritten() {
        state.withLock { $0.designDocuments = nil }
    }
}

extension Database {
    /// The function that decides whether each write may be stored (CouchDB's `validate_doc_update`),
    /// or `nil` for none. `DocStoreJavaScript` sets one that runs the database's JavaScript design
    /// documents; set your own to enforce rules in Swift.
    ///
    /// ```swift
    /// db.writeValidator = { write in
    ///     if write.newDocument["total"]?.doubleValue ?? 0 < 0 {
    ///         throw DocStoreError(.forbidden, "totals cannot be negative")
    ///     }
    /// }
    /// ```
    package var writeValidator: WriteValidator? {
        get { writer.validation.validator }
        set {
            writer.validation.validator = newValue
            writer.validation.designDocumentWritten()
        }
    }

    /// The function that may change each document before it is validated and stored (CouchDB's
    /// `before_doc_update`), or `nil` for none.
    ///
    /// ```swift
    /// db.writePreparer = { document, _, _ in
    ///     guard document["email"] != nil else { return false }
    ///     document["email"] = document["email"]?.stringValue.map { .string($0.lowercased()) }
    ///     return true
    /// }
    /// ```
    package var writePreparer: WritePreparer? {
        get { writer.validation.preparer }
        set { writer.validation.preparer = newValue }
    }
}
