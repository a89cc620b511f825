extension DatabaseWriter {
    /// The largest body, in bytes of JSON (about), that a point write carries
    /// (``ThreadRule/Exception/pointWrite``): encoding, hashing and storing it take microseconds.
    static let pointWriteBytes = 16 * 1024

    /// Whether writing `document` is a point write: its body is a point write's
    /// (``isPointWrite(body:)``) and its attachments carry no content (stubs, kept from its previous
    /// revision).
    static func isPointWrite(_ document: Document) -> Bool {
        document.attachments.values.allSatisfy(\.isStub) && isPointWrite(body: document.body)
    }

    /// Whether `body` (a document's, a `_local` document's) is at most ``pointWriteBytes``. Deciding
    /// costs a walk of at most that many bytes' worth of it.
    static func isPointWrite(body: JSONObject) -> Bool {
        var budget = pointWriteBytes
        return body.fits(in: &budget)
    }
}

extension JSONObject {
    /// Whether this object's JSON text takes at most `budget` bytes, counted roughly (keys' and
    /// strings' UTF-8, eight bytes per other scalar, two per container), taking them off `budget`; stops
    /// as soon as it does not.
    func fits(in budget: inout Int) -> Bool {
        if case .stored(let stored) = storage {
            budget -= stored.bytes.count
            if budget < 0 { return false }
            for member in stored.head + stored.tail {
                budget -= member.key.utf8.count + 4
                guard budget >= 0, member.value.fits(in: &budget) else { return false }
            }
            return true
        }
        budget -= 2
        for (key, value) in self {
            budget -= key.utf8.count + 4
            guard budget >= 0, value.fits(in: &budget) else { return false }
        }
        return budget >= 0
    }
}

extension JSON {
    /// ``JSONObject/fits(in:)`` for any value.
    func fits(in budget: inout Int) -> Bool {
        switch self {
        case .null, .bool, .integer, .double: budget -= 8
        case .bigInteger(let digits): budget -= digits.utf8.count
        case .string(let text): budget -= text.utf8.count + 2
        case .array(let items):
            budget -= 2
            for item in items {
                guard budget >= 0, item.fits(in: &budget) else { return false }
            }
        case .object(let object): return object.fits(in: &budget)
        }
        return budget >= 0
    }
}
