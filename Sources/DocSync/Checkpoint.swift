import Crypto
import DocStore
import Foundation

/// The replication id: a deterministic hash of everything that decides *what* is replicated — the
/// endpoints' identities (never credentials), filters, their parameters, document ids, channels and
/// selector — so that a change of any of them starts over, and a new password does not.
enum ReplicationID {
    static func make(source: String, target: String, filter: ChangesFilter) -> String {
        var object: JSONObject = ["source": .string(source), "target": .string(target)]
        if let ids = filter.documentIDs { object["doc_ids"] = JSON(ids.sorted()) }
        if let channels = filter.channels { object["channels"] = JSON(channels.sorted()) }
        if let selector = filter.selector { object["selector"] = selector.root }
        if let named = filter.named {
            object["filter"] = .string(named.name)
            object["query_params"] = .object(JSONObject(named.parameters.sorted { $0.key < $1.key }.map { ($0.key, JSON.string($0.value)) }))
        }
        let digest = Insecure.SHA1.hash(data: (try? JSON.object(object).serialized()) ?? [])
        return digest.map { String(format: "%02x", $0) }.joined()
    }
}

/// CouchDB's replication checkpoint (`_local/<replication id>`), written on both sides:
/// `{"session_id", "source_last_seq", "replication_id_version", "history": [...]}`.
struct Checkpoint {
    var sessionID: String
    var sourceLastSequence: JSON
    var history: [JSON]

    init(sessionID: String, sourceLastSequence: JSON, history: [JSON]) {
        self.sessionID = sessionID
        self.sourceLastSequence = sourceLastSequence
        self.history = history
    }

    init?(_ body: JSONObject) {
        guard let session = body["session_id"]?.stringValue, let last = body["source_last_seq"] else { return nil }
        sessionID = session
        sourceLastSequence = last
        history = body["history"]?.arrayValue ?? []
    }

    var body: JSONObject {
        ["session_id": .string(sessionID), "source_last_seq": sourceLastSequence, "replication_id_version": 4,
         "history": .array(Array(history.prefix(50))), "replicator": "docsync"]
    }

    /// CouchDB's rule: the same session on both sides → its sequence; else the newest session the two
    /// histories share → its recorded sequence; else start over.
    static func startSequence(source: Checkpoint?, target: Checkpoint?) -> JSON {
        guard let source, let target else { return .integer(0) }
        if source.sessionID == target.sessionID { return source.sourceLastSequence }
        let targetSessions = Set(([target.body["session_id"]] + target.history.map { $0["session_id"] }).compactMap { $0?.stringValue })
        if targetSessions.contains(source.sessionID) { return source.sourceLastSequence }
        for entry in source.history {
            if let session = entry["session_id"]?.stringValue, targetSessions.contains(session) {
                return entry["recorded_seq"] ?? .integer(0)
            }
        }
        return .integer(0)
    }
}
