import DocStore

/// Seeded random JSON values with what parsers and writers get wrong: every number kind, escapes,
/// control characters, combining marks, astral and noncharacter scalars, nesting.
public enum RandomJSON {
    /// A random value, at most five containers deep below `depth`.
    public static func value(_ g: inout SplitMix64, depth: Int = 0) -> JSON {
        switch g.next() % (depth > 4 ? 6 : 8) {
        case 0: return .null
        case 1: return .bool(g.next() & 1 == 0)
        case 2: return .integer(Int(bitPattern: UInt(g.next())) >> Int(g.next() % 64))
        case 3:
            let d = Double(bitPattern: g.next())
            return d.isFinite ? .double(d) : .double(Double(Int64(bitPattern: g.next() >> 12)) / 1024)
        case 4: return .bigInteger((g.next() & 1 == 0 ? "-" : "") + "1" + String(repeating: "7", count: 19 + Int(g.next() % 30)))
        case 5: return .string(string(&g))
        case 6: return .array((0..<Int(g.next() % 5)).map { _ in value(&g, depth: depth + 1) })
        default: return .object(object(&g, depth: depth + 1))
        }
    }

    /// A random object of up to four members.
    public static func object(_ g: inout SplitMix64, depth: Int = 0) -> JSONObject {
        var object = JSONObject()
        for _ in 0..<Int(g.next() % 5) { object[string(&g)] = value(&g, depth: depth) }
        return object
    }

    /// A random string of up to eleven scalars.
    public static func string(_ g: inout SplitMix64) -> String {
        let alphabet: [Unicode.Scalar] = ["a", "Z", "0", " ", "\"", "\\", "/", "\n", "\u{0}", "\u{1F}", "é", "\u{301}", "中", "😀", "\u{FFFF}", "\u{10FFFF}"]
        var scalars = String.UnicodeScalarView()
        for _ in 0..<Int(g.next() % 12) { scalars.append(alphabet[Int(g.next() % UInt64(alphabet.count))]) }
        return String(scalars)
    }
}
