import Crypto
import DocStore
import Foundation

/// The replication id: a deterministic hash of everything that decides *what* is replicated — the
/// endpoints' identities (never credentials), filters, their parameters, document ids, channels,
/// selector and starting sequence — so that a change of any of them starts over, and a new password does not.
enum ReplicationID {
    static func make(source: String, target: String, filter: SourceFilter, filterCode: String? = nil,
                     startSequence: JSON? = nil) -> String {
        var object: JSONObject = ["source": .string(source), "target": .string(target)]
        if let filterCode { object["filter_code"] = .string(filterCode) }
        if let startSequence { object["since_seq"] = startSequence }
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
