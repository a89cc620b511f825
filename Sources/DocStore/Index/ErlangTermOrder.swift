/// The order Erlang gives JSON values as CouchDB holds them (numbers, then the atoms `false`, `null`,
/// `true`, then objects, arrays and strings), which CouchDB uses where it sorts values rather than
/// collating them: the rows one document emits under one key.
enum ErlangTermOrder {
    /// Whether `a` comes before `b`.
    static func precedes(_ a: JSON, _ b: JSON) -> Bool {
        compare(a, b) < 0
    }

    /// Negative, zero or positive as `a` comes before, with or after `b`.
    static func compare(_ a: JSON, _ b: JSON) -> Int {
        let (rankA, rankB) = (rank(a), rank(b))
        if rankA != rankB { return rankA < rankB ? -1 : 1 }
        switch (a, b) {
        case (.string(let x), .string(let y)):
            return bytes(x.utf8, y.utf8)
        case (.array(let x), .array(let y)):
            for (p, q) in zip(x, y) {
                let order = compare(p, q)
                if order != 0 { return order }
            }
            return x.count == y.count ? 0 : (x.count < y.count ? -1 : 1)
        case (.object(let x), .object(let y)):
            // `{[{K, V}, …]}`: the member lists compared as lists of `{K, V}` pairs.
            for ((k1, v1), (k2, v2)) in zip(x, y) {
                let order = bytes(k1.utf8, k2.utf8)
                if order != 0 { return order }
                let valueOrder = compare(v1, v2)
                if valueOrder != 0 { return valueOrder }
            }
            return x.count == y.count ? 0 : (x.count < y.count ? -1 : 1)
        default:
            // Numbers by value; atoms by rank.
            if let x = a.doubleValue, let y = b.doubleValue { return x == y ? 0 : (x < y ? -1 : 1) }
            return 0
        }
    }

    private static func rank(_ value: JSON) -> Int {
        switch value {
        case .integer, .bigInteger, .double: 0
        case .bool(false): 1
        case .null: 2
        case .bool(true): 3
        case .object: 4
        case .array: 5
        case .string: 6
        }
    }

    private static func bytes(_ x: String.UTF8View, _ y: String.UTF8View) -> Int {
        for (p, q) in zip(x, y) where p != q { return p < q ? -1 : 1 }
        return x.count == y.count ? 0 : (x.count < y.count ? -1 : 1)
    }
}
