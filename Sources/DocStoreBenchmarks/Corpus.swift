import DocStore

/// A seeded pseudo-random generator, so every run benchmarks the same corpus.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// The benchmark corpus: documents of 600–1000 bytes with the fields of a typical user record, kept
/// as serialized JSON bodies (what the raw-SQLite baseline stores). ``documents(count:)`` reads them
/// into `Document`s for the operations that need them, so that the benchmark's own memory does not
/// hold 100 000 parsed documents for the whole run.
struct Corpus {
    let bodies: [[UInt8]]
    let ids: [String]

    static let words = ["lorem", "ipsum", "dolor", "sit", "amet", "consectetur", "adipiscing", "elit", "sed", "do",
                        "eiusmod", "tempor", "incididunt", "ut", "labore", "et", "dolore", "magna", "aliqua", "enim"]
    static let tags = ["red", "green", "blue", "swift", "linux", "sync", "couch", "edge", "mobile", "server"]
    static let cities = ["Paris", "Lyon", "Berlin", "Zürich", "Kraków", "Oslo", "Lisboa", "Québec", "Tokyo", "Seoul"]

    init(count: Int, seed: UInt64 = 0xD0C5) {
        var g = SplitMix64(seed: seed)
        var bodies: [[UInt8]] = []
        var ids: [String] = []
        bodies.reserveCapacity(count)
        ids.reserveCapacity(count)
        for n in 0..<count {
            let id = "user-\(String(n, radix: 36))-\(g.next() % 1_000_000)"
            var body = JSONObject()
            body["type"] = n % 5 == 0 ? "admin" : "user"
            body["name"] = .string("\(Corpus.words[Int(g.next() % 20)].capitalized) \(Corpus.words[Int(g.next() % 20)].capitalized)")
            body["email"] = .string("user\(n)@example.com")
            body["age"] = .integer(18 + Int(g.next() % 70))
            body["score"] = .integer(Int(g.next() % 1_000_000))
            body["rating"] = .double(Double(g.next() % 50_000) / 10_000)
            body["active"] = .bool(g.next() % 3 != 0)
            body["created_at"] = .string("2026-\(1 + g.next() % 12)-\(1 + g.next() % 28)T10:\(g.next() % 60):00Z")
            body["tags"] = .array((0..<(2 + Int(g.next() % 5))).map { _ in .string(Corpus.tags[Int(g.next() % 10)]) })
            body["address"] = [
                "street": .string("\(g.next() % 300) \(Corpus.words[Int(g.next() % 20)]) street"),
                "city": .string(Corpus.cities[Int(g.next() % 10)]),
                "geo": ["lat": .double(Double(Int(g.next() % 180_000)) / 1000 - 90), "lon": .double(Double(Int(g.next() % 360_000)) / 1000 - 180)],
            ]
            body["counts"] = ["views": .integer(Int(g.next() % 100_000)), "likes": .integer(Int(g.next() % 5_000)), "shares": .integer(Int(g.next() % 500))]
            let length = 250 + Int(g.next() % 300)
            var paragraph = ""
            while paragraph.utf8.count < length { paragraph += Corpus.words[Int(g.next() % 20)] + " " }
            body["bio"] = .string(paragraph)
            let serialized = try! JSON.object(body).serialized()
            // An exact-size copy: the serializer's buffer has room to spare.
            bodies.append([UInt8](unsafeUninitializedCapacity: serialized.count) { buffer, count in
                count = buffer.initialize(fromContentsOf: serialized)
            })
            ids.append(id)
        }
        self.bodies = bodies
        self.ids = ids
    }

    /// The first `count` documents, their bodies kept as the corpus's JSON text, as `Document(json:)`
    /// keeps a body that arrives in DocStore's form (the corpus is `JSONWriter`'s output). They share
    /// the corpus's bytes instead of holding a second copy of them: the benchmark's memory peak is then
    /// DocStore's work, not 100 000 documents held twice by the harness.
    func documents(count: Int) -> [Document] {
        (0..<count).map { Document(id: ids[$0], body: JSONObject(storedJSON: bodies[$0])) }
    }
}
