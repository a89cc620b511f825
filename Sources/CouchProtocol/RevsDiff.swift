import DocStore

/// `POST /db/_revs_diff`: `{"id":["rev",…],…}` → `{"id":{"missing":[…],"possible_ancestors":[…]?},…}`.
package enum RevsDiff {
    /// The offered revisions.
    package struct Request: Sendable, Hashable {
        package var offered: [Offer]

        package struct Offer: Sendable, Hashable {
            package var id: String
            package var revisions: [RevisionID]

            package init(id: String, revisions: [RevisionID]) {
                self.id = id
                self.revisions = revisions
            }
        }

        package init(_ offered: [Offer]) { self.offered = offered }

        package init(json: JSON) throws {
            guard case .object(let object) = json else { throw DocStoreError(.badRequest, "Request body must be a JSON object") }
            offered = try object.map { id, value in
                guard let list = value.arrayValue else { throw DocStoreError(.badRequest, "Revisions of \(id) must be an array") }
                return Offer(id: id, revisions: try list.map { item in
                    guard let text = item.stringValue, let revision = RevisionID.readAsCouchDB(text) else {
                        throw DocStoreError(.badRequest, "Invalid rev format")
                    }
                    return revision
                })
            }
        }

        package var json: JSON {
            var object = JSONObject()
            for offer in offered { object[offer.id] = JSON(offer.revisions.map(\.description)) }
            return .object(object)
        }
    }

    /// The revisions the answering side lacks, per document; documents it has whole are left out.
    package struct Response: Sendable, Hashable {
        package var differences: [RevisionDifference]

        package init(_ differences: [RevisionDifference]) { self.differences = differences }

        package init(json: JSON) throws {
            guard case .object(let object) = json else {
                throw DocStoreError(.badRequest, "_revs_diff answered \(json.description.prefix(200))")
            }
            func revisions(_ value: JSON?, of id: String) throws -> [RevisionID] {
                try (value?.arrayValue ?? []).map { item in
                    guard let text = item.stringValue, let revision = RevisionID(text) else {
                        throw DocStoreError(.invalidRevision, "_revs_diff answered an invalid rev for \(id)")
                    }
                    return revision
                }
            }
            differences = try object.map { id, entry in
                RevisionDifference(id: id, missing: try revisions(entry[Keys.missing], of: id),
                                   possibleAncestors: try revisions(entry[Keys.possibleAncestors], of: id))
            }
        }

        /// `possible_ancestors` is left out when there are none, as CouchDB does.
        package var json: JSON {
            var object = JSONObject()
            for difference in differences {
                var entry: JSONObject = [Keys.missing: JSON(difference.missing.map(\.description))]
                if !difference.possibleAncestors.isEmpty {
                    entry[Keys.possibleAncestors] = JSON(difference.possibleAncestors.map(\.description))
                }
                object[difference.id] = .object(entry)
            }
            return .object(object)
        }

        /// The answer of `_missing_revs`: `{"missing_revs": {"id": ["rev", …]}}`.
        package var missingRevisionsJSON: JSON {
            var object = JSONObject()
            for difference in differences { object[difference.id] = JSON(difference.missing.map(\.description)) }
            return [Keys.missingRevs: .object(object)]
        }
    }

    enum Keys {
        static let missing = "missing"
        static let missingRevs = "missing_revs"
        static let possibleAncestors = "possible_ancestors"
    }
}
