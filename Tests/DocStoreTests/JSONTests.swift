import DocStore
import Foundation
import XCTest

final class JSONTests: XCTestCase {
    private func roundTrip(_ text: String, file: StaticString = #filePath, line: UInt = #line) throws -> String {
        try JSON(parsing: text).serializedString()
    }

    func testScalarsRoundTripExactly() throws {
        for text in ["null", "true", "false", "0", "-1", "42", "123456789012345678",
                     "9223372036854775807", "-9223372036854775808", "1.0", "0.1", "-2.5", "100.0",
                     "5e-324", "1.7976931348623157e+308", "-0.0", "\"\"", "\"plain\""] {
            XCTAssertEqual(try roundTrip(text), text, "round trip of \(text)")
        }
    }

    func testIntegersBeyond64BitsKeepTheirDigits() throws {
        let cases = ["9223372036854775808", "18446744073709551621", "-9223372036854775817",
                     "123456789012345678901234567890123456789012345678901234567890"]
        for text in cases {
            let value = try JSON(parsing: text)
            XCTAssertEqual(value, .bigInteger(text))
            XCTAssertEqual(try value.serializedString(), text)
        }
        XCTAssertEqual(try JSON(parsing: "-9223372036854775808"), .integer(Int.min))
        XCTAssertEqual(try JSON(parsing: "9223372036854775807"), .integer(Int.max))
        XCTAssertEqual(try JSON(parsing: "[18446744073709551621]").serializedString(), "[18446744073709551621]")
    }

    func testNumberForms() throws {
        XCTAssertEqual(try JSON(parsing: "1.0"), .double(1.0))
        XCTAssertEqual(try JSON(parsing: "1"), .integer(1))
        XCTAssertEqual(try JSON(parsing: "1e2"), .double(100))
        XCTAssertEqual(try JSON(parsing: "1E+2"), .double(100))
        XCTAssertEqual(try JSON(parsing: "-1.25e-2"), .double(-0.0125))
        XCTAssertEqual(try JSON(parsing: "0.1").doubleValue, 0.1)
        XCTAssertEqual(try JSON(parsing: "123456789.123456789").doubleValue, 123456789.123456789)
        XCTAssertEqual(try JSON(parsing: "2.2250738585072014e-308").doubleValue, 2.2250738585072014e-308)
        // Slow path (more than 15 significant digits) must round correctly too.
        XCTAssertEqual(try JSON(parsing: "3.14159265358979323846").doubleValue, 3.14159265358979323846)
        XCTAssertEqual(try JSON(parsing: "1e23").doubleValue, 1e23)
        // Negative zero: integer -0 is 0; -0.0 keeps its sign.
        XCTAssertEqual(try JSON(parsing: "-0"), .integer(0))
        let negativeZero = try JSON(parsing: "-0.0").doubleValue!
        XCTAssertEqual(negativeZero, 0)
        XCTAssertEqual(negativeZero.sign, .minus)
        XCTAssertEqual(try JSON(parsing: "-0e0").serializedString(), "-0.0")
        // Underflow rounds to zero rather than failing; overflow is an error.
        XCTAssertEqual(try JSON(parsing: "1e-400").doubleValue, 0)
        XCTAssertEqual(try JSON(parsing: "1.5e300").serializedString(), "1.5e+300")
    }

    func testStringEscapes() throws {
        let parsed = try JSON(parsing: #""quote\" backslash\\ slash\/ \b\f\n\r\t end""#)
        XCTAssertEqual(parsed, .string("quote\" backslash\\ slash/ \u{8}\u{C}\n\r\t end"))
        XCTAssertEqual(try parsed.serializedString(), #""quote\" backslash\\ slash/ \b\f\n\r\t end""#)
        XCTAssertEqual(try JSON(parsing: #""\u00e9\u4e2d""#), .string("é中"))
        XCTAssertEqual(try JSON(parsing: #""\u00E9""#), .string("é"))
        // Surrogate pair → one scalar, written back as raw UTF-8.
        let emoji = try JSON(parsing: #""\ud83d\ude00!""#)
        XCTAssertEqual(emoji, .string("😀!"))
        XCTAssertEqual(try emoji.serializedString(), "\"😀!\"")
        // NUL and other control characters are escaped on output.
        let controls = try JSON(parsing: #""a\u0000b\u001fc""#)
        XCTAssertEqual(controls.stringValue?.unicodeScalars.count, 5)
        XCTAssertEqual(try controls.serializedString(), #""a\u0000b\u001fc""#)
        // Raw multi-byte UTF-8 passes through untouched.
        XCTAssertEqual(try roundTrip("\"日本語 한국어 Ελληνικά 🇫🇷\""), "\"日本語 한국어 Ελληνικά 🇫🇷\"")
    }

    func testNFCAndNFDStringsStayDistinctBytes() throws {
        let nfc = try JSON(parsing: "\"\u{00E9}\"")
        let nfd = try JSON(parsing: "\"e\u{0301}\"")
        XCTAssertNotEqual(try nfc.serialized(), try nfd.serialized())
        XCTAssertEqual(try nfc.serialized(), [0x22, 0xC3, 0xA9, 0x22])
        XCTAssertEqual(try nfd.serialized(), [0x22, 0x65, 0xCC, 0x81, 0x22])
    }

    func testContainersAndOrder() throws {
        for text in ["[]", "{}", "[[]]", "[{}]", "{\"a\":{}}", "{\"a\":[]}", "[[[[]]]]",
                     "{\"z\":1,\"a\":2,\"m\":3}", "{\"b\":[1,{\"y\":null,\"x\":true}],\"a\":\"s\"}"] {
            XCTAssertEqual(try roundTrip(text), text)
        }
        XCTAssertEqual(try roundTrip(" { \"a\" : [ 1 , 2 ] }\n\t"), "{\"a\":[1,2]}")
        let object = try JSON(parsing: "{\"z\":1,\"a\":2}").objectValue!
        XCTAssertEqual(object.keys, ["z", "a"])
        XCTAssertNotEqual(try JSON(parsing: "{\"a\":1,\"b\":2}"), try JSON(parsing: "{\"b\":2,\"a\":1}"))
    }

    func testDeepNesting() throws {
        let depth = JSONParser.maximumDepth
        let deep = String(repeating: "[", count: depth) + String(repeating: "]", count: depth)
        XCTAssertEqual(try roundTrip(deep), deep)
        let deepObjects = String(repeating: "{\"a\":", count: depth) + "1" + String(repeating: "}", count: depth)
        XCTAssertEqual(try roundTrip(deepObjects), deepObjects)
        let tooDeep = String(repeating: "[", count: depth + 1) + String(repeating: "]", count: depth + 1)
        assertThrowsDocStoreErrorSync(.invalidJSON) { try JSON(parsing: tooDeep) }
        // Far too deep must fail cleanly, not overflow the stack.
        let hostile = String(repeating: "[", count: 200_000)
        let error = assertThrowsDocStoreErrorSync(.invalidJSON) { try JSON(parsing: hostile) }
        XCTAssertEqual(error?.byteOffset, depth)
    }

    func testMalformedInputsAreRejectedWithOffsets() throws {
        let cases: [(String, Int)] = [
            ("", 0),
            ("   ", 3),
            ("[1,]", 3),
            ("{\"a\":1,}", 7),
            ("{'a':1}", 1),
            ("[01]", 1),
            ("NaN", 0),
            ("Infinity", 0),
            ("-Infinity", 0),
            ("-", 0),
            ("1.", 2),
            (".5", 0),
            ("1e", 2),
            ("+1", 0),
            ("0x10", 1),
            ("\"abc", 0),
            ("\"\\x\"", 1),
            ("\"\\u12\"", 3),
            ("\"\\ud800\"", 1),
            ("\"\\udc00x\"", 1),
            ("\"\\ud800\\u0041\"", 1),
            ("[1 2]", 3),
            ("{\"a\" 1}", 5),
            ("tru", 0),
            ("nul", 0),
            ("1E400", 0),
            ("-1e999", 0),
            ("[1]]", 3),
            ("\"tab\there\"", 4),
            ("/* comment */ 1", 0),
            ("{\"a\":1} x", 8),
            ("[", 1),
            ("{\"a\":", 5),
            ("{1:2}", 1),
        ]
        for (text, offset) in cases {
            let error = assertThrowsDocStoreErrorSync(.invalidJSON) { try JSON(parsing: text) }
            XCTAssertEqual(error?.byteOffset, offset, "offset for \(text.debugDescription): \(error?.reason ?? "")")
            XCTAssertEqual(error?.httpStatus, 400)
        }
    }

    /// A repeated key is found whatever the path — plain ASCII keys (hashed), escaped spellings of the
    /// same key, objects too large for the pairwise check — and keeps its last member, where that
    /// stands, as JavaScript's `JSON.parse` and CouchDB read it. Keys are compared by their bytes, as in
    /// CouchDB: canonically equivalent spellings are different keys.
    func testARepeatedKeyKeepsItsLastMember() throws {
        let many = (0..<40).map { "\"k\($0)\":\($0)" }.joined(separator: ",")
        let cases: [(String, JSON)] = [
            (#"{"a":1,"b":2,"a":3}"#, ["b": 2, "a": 3]),
            (#"{"a":1,"\u0061":2}"#, ["a": 2]),
            (#"{"\u00e9":1,"é":2}"#, ["é": 2]),
            (#"{"x":{"a":1},"y":{"b":1,"b":2}}"#, ["x": ["a": 1], "y": ["b": 2]]),
            (#"{"n":{"k":1,"k":[2]},"n":{"k":3,"j":4,"k":5}}"#, ["n": ["j": 4, "k": 5]]),
        ]
        for (text, expected) in cases {
            let parsed = try JSON(parsing: text)
            XCTAssertEqual(parsed, expected, text)
            XCTAssertEqual(try parsed.serializedString(), try expected.serializedString(), "member order of \(text)")
        }
        let repeated = try XCTUnwrap(try JSON(parsing: "{" + many + ",\"k7\":-7}").objectValue)
        XCTAssertEqual(repeated.count, 40)
        XCTAssertEqual(repeated["k7"], .integer(-7))
        XCTAssertEqual(repeated.keys.last, "k7")
        XCTAssertEqual(Array(repeated.keys.prefix(8)), ["k0", "k1", "k2", "k3", "k4", "k5", "k6", "k8"])
        XCTAssertEqual(try JSON(parsing: #"{"K":1,"\u212A":2}"#).objectValue?.count, 2)
        XCTAssertEqual(try JSON(parsing: "{\"é\":1,\"e\u{301}\":2}").objectValue?.count, 2)
        // The same keys in different objects, and keys that only share a hash prefix, are fine.
        let nested = try JSON(parsing: #"{"a":{"a":{"a":1}},"b":[{"a":1},{"a":2}],"ab":1,"ba":2}"#)
        XCTAssertEqual(nested["a"]?["a"]?["a"], .integer(1))
        XCTAssertEqual(nested["b"]?[1]?["a"], .integer(2))
        let wide = try JSON(parsing: "{" + many + "}")
        XCTAssertEqual(wide.objectValue?.count, 40)
        XCTAssertEqual(wide["k39"], .integer(39))
        XCTAssertEqual(wide.objectValue?.keys.first, "k0")
    }

    /// Short keys are read by word loads and shared through a per-thread cache. Every key length around
    /// the cut-offs, at every distance from the end of the input (where the general path reads them),
    /// comes out with exactly its bytes, through thousands of distinct keys that collide in the
    /// cache's slots; a duplicate is found whichever path read each of the two copies.
    func testShortKeysThroughTheKeyCacheKeepTheirBytes() throws {
        var generator = SplitMix64(seed: 0x6B65_7973)
        let alphabet = Array("abcXYZ019_-. ~".utf8)
        for round in 0..<3000 {
            var keys: [String] = []
            for _ in 0..<(1 + Int(generator.next() % 6)) {
                let length = Int(generator.next() % 18)
                let bytes = (0..<length).map { _ in alphabet[Int(generator.next() % UInt64(alphabet.count))] }
                let key = String(decoding: bytes, as: UTF8.self)
                if !keys.contains(key) { keys.append(key) }
            }
            let text = "{" + keys.enumerated().map { "\"\($0.element)\":\($0.offset)" }.joined(separator: ",") + "}"
            let object = try XCTUnwrap(try JSON(parsing: text).objectValue, text)
            XCTAssertEqual(Array(object.keys), keys, "round \(round): \(text)")
            for (offset, key) in keys.enumerated() { XCTAssertEqual(object[key], .integer(offset), text) }
        }
        // Keys with an escape, a control character or non-ASCII within their first 16 bytes.
        let special = try JSON(parsing: #"{"a\"b":1,"é":2,"tab\there":3,"0123456789abcdé":4,"x":5}"#)
        XCTAssertEqual(special.objectValue?.keys.map { $0 }, ["a\"b", "é", "tab\there", "0123456789abcdé", "x"])
        // A duplicate near the end of the input (read by the general path) of a key read by word loads.
        for key in ["", "k", "abcdefg", "abcdefgh", "abcdefghijklmno", "abcdefghijklmnop"] {
            let text = "{\"\(key)\":1,\"\(key)\":2}"
            XCTAssertEqual(try JSON(parsing: text), .object(JSONObject([(key, .integer(2))])), text)
            // The first copy far enough from the end to be read by word loads, the second not.
            let padded = "{\"\(key)\":1," + String(repeating: " ", count: 20) + "\"\(key)\":2}"
            XCTAssertEqual(try JSON(parsing: padded), .object(JSONObject([(key, .integer(2))])), padded)
        }
    }

    /// Containers larger than the parser's initial stacks, nested and side by side.
    func testLargeAndNestedContainersKeepEveryMember() throws {
        let elements = (0..<1000).map { "[\($0),{\"v\":\"\(String(repeating: "s", count: $0 % 40))\"}]" }
        let text = "{\"list\":[" + elements.joined(separator: ",") + "],\"after\":true}"
        let value = try JSON(parsing: text)
        XCTAssertEqual(value["list"]?.arrayValue?.count, 1000)
        XCTAssertEqual(value["list"]?[999]?[0], .integer(999))
        XCTAssertEqual(value["list"]?[39]?[1]?["v"]?.stringValue?.count, 39)
        XCTAssertEqual(value["after"], .bool(true))
        XCTAssertEqual(try value.serializedString(), text)
    }

    /// Objects below and above the size where a position table is kept behave the same under edits.
    func testObjectMembersStayInOrderThroughEditsAtEverySize() throws {
        for size in [0, 1, 15, 16, 17, 40] {
            var object = JSONObject()
            var expected: [(String, JSON)] = []
            for k in 0..<size {
                object["k\(k)"] = .integer(k)
                expected.append(("k\(k)", .integer(k)))
            }
            // Replace in place, remove from the middle and the front, append again.
            if size > 3 {
                object["k2"] = "two"
                expected[2].1 = "two"
                XCTAssertEqual(object.removeValue(forKey: "k1"), .integer(1))
                expected.remove(at: 1)
                object["k0"] = nil
                expected.remove(at: 0)
                object["k1"] = true
                expected.append(("k1", true))
            }
            XCTAssertNil(object.removeValue(forKey: "absent"))
            XCTAssertEqual(object.keys, expected.map(\.0), "size \(size)")
            XCTAssertEqual(object.values, expected.map(\.1), "size \(size)")
            for (key, value) in expected { XCTAssertEqual(object[key], value, "size \(size), \(key)") }
            XCTAssertEqual(object.count, expected.count)
            XCTAssertEqual(object, JSONObject(expected))
            XCTAssertEqual(Set([object, JSONObject(expected)]).count, 1)
            let reparsed = try JSON(parsing: JSON.object(object).serialized())
            XCTAssertEqual(reparsed.objectValue, object)
            if expected.count > 1 {
                XCTAssertNotEqual(object, JSONObject(expected.reversed()), "order matters")
            }
        }
        // Keys compare as exact bytes, in small and large objects alike.
        var small: JSONObject = ["K": 1]
        small["\u{212A}"] = 2
        XCTAssertEqual(small.count, 2)
        XCTAssertEqual(small["K"], 1)
        var large = JSONObject((0..<30).map { ("k\($0)", JSON.integer($0)) })
        large["e\u{301}"] = 1
        XCTAssertNil(large["\u{E9}"])
        XCTAssertEqual(large["e\u{301}"], 1)
        XCTAssertEqual(large.count, 31)
    }

    func testInvalidUTF8IsRejected() {
        for bytes: [UInt8] in [[0x22, 0xFF, 0x22], [0x22, 0xC3, 0x22], [0x22, 0xED, 0xA0, 0x80, 0x22], [0x22, 0xE2, 0x82, 0x22]] {
            let error = assertThrowsDocStoreErrorSync(.invalidJSON) { try JSON(parsing: bytes) }
            XCTAssertEqual(error?.byteOffset, 1)
        }
    }

    func testNonFiniteDoublesCannotBeSerialized() {
        assertThrowsDocStoreErrorSync(.invalidJSON) { try JSON.double(.nan).serialized() }
        assertThrowsDocStoreErrorSync(.invalidJSON) { try JSON.array([.double(.infinity)]).serialized() }
        XCTAssertEqual(JSON.double(.nan).description, "null")
    }

    func testAccessorsAndLiterals() throws {
        var value: JSON = ["name": "Ada", "age": 36, "ratio": 0.5, "tags": ["x", "y"], "nested": ["city": "London"], "none": nil]
        XCTAssertEqual(value["name"]?.stringValue, "Ada")
        XCTAssertEqual(value["age"]?.intValue, 36)
        XCTAssertEqual(value["age"]?.doubleValue, 36)
        XCTAssertEqual(value["ratio"]?.intValue, nil)
        XCTAssertEqual(value["tags"]?[1]?.stringValue, "y")
        XCTAssertNil(value["tags"]?[5])
        XCTAssertEqual(value.value(atPath: "nested.city"), "London")
        XCTAssertNil(value.value(atPath: "nested.zip"))
        XCTAssertEqual(value["none"], .null)
        value["age"] = 37
        XCTAssertEqual(value["age"], 37)
        XCTAssertEqual(try value.serializedString(),
                       #"{"name":"Ada","age":37,"ratio":0.5,"tags":["x","y"],"nested":{"city":"London"},"none":null}"#)
    }

    func testCodableBridge() throws {
        struct Point: Codable, Equatable { var x: Int; var label: String }
        let data = try JSONEncoder().encode(JSON(["x": 3, "label": "p"]))
        XCTAssertEqual(try JSONDecoder().decode(Point.self, from: data), Point(x: 3, label: "p"))
        let back = try JSONDecoder().decode(JSON.self, from: Data(#"{"a":[1,2.5,"s",null,true]}"#.utf8))
        XCTAssertEqual(back["a"], [1, 2.5, "s", nil, true])
    }

    /// Strings are scanned eight bytes at a time: put each special byte at every position of strings of
    /// every length around those chunk boundaries.
    func testSpecialBytesAtEveryPositionOfLongStrings() throws {
        for length in 1...40 {
            for position in 0..<length {
                for special in ["\"", "\\", "\n", "\u{1}", "é", "😀"] {
                    var characters = Array(repeating: "x", count: length)
                    characters[position] = special
                    let value = JSON.string(characters.joined())
                    let text = try value.serialized()
                    XCTAssertEqual(try JSON(parsing: text), value, "length \(length), \(special.debugDescription) at \(position)")
                }
            }
            let raw = "\"" + String(repeating: "y", count: length) + "\u{7}\""
            XCTAssertThrowsError(try JSON(parsing: raw), "unescaped control character after \(length) bytes")
        }
    }

    /// Random values survive serialize → parse unchanged (seeded, so failures reproduce).
    /// Decimals of 16 to 19 significant digits take a faster path than the C library where the
    /// platform has 80-bit floats; it must give the same double as `strtod` for every input,
    /// including those next to a halfway point between two doubles.
    func testLongDecimalsRoundLikeTheCLibrary() throws {
        var g = SplitMix64(seed: 0x0DD5_EED5)
        var texts: [String] = []
        // Random digit strings, with the decimal point anywhere and small exponents.
        for _ in 0..<20_000 {
            let digitCount = 16 + Int(g.next() % 4)
            var digits = String(1 + g.next() % 9)
            for _ in 1..<digitCount { digits.append(String(g.next() % 10)) }
            let point = Int(g.next() % UInt64(digitCount + 1))
            let integer = point == 0 ? "0" : String(digits.prefix(point))
            let fraction = point == digitCount ? "" : "." + digits.dropFirst(point)
            let exponent = g.next() % 3 == 0 ? "e\(Int(g.next() % 21) - 10)" : ""
            texts.append((g.next() & 1 == 0 ? "-" : "") + integer + fraction + exponent)
        }
        // Halfway points between neighbouring doubles, cut to 16-19 significant digits, and the same
        // plus one in the last digit: the inputs where rounding twice could go wrong.
        for _ in 0..<10_000 {
            let low = Double(g.next() % 1_000_000_000_000) / Double(1 << (g.next() % 40)) + 1
            // low = m × 2^e, so the halfway point to the next double is (2m + 1) × 5^k / 10^k, k = 1 - e.
            let m = (UInt64(1) << 52) | low.significandBitPattern
            let k = 1 - (Int(low.exponent) - 52)
            var digits: [UInt8] = []   // least significant first
            var n = 2 * m + 1
            while n > 0 { digits.append(UInt8(n % 10)); n /= 10 }
            for _ in 0..<k {
                var carry: UInt8 = 0
                for i in digits.indices {
                    let product = digits[i] * 5 + carry
                    digits[i] = product % 10
                    carry = product / 10
                }
                if carry > 0 { digits.append(carry) }
            }
            let integerDigits = digits.count - k
            for significant in 16...19 {
                var kept = Array(digits.reversed().prefix(significant))
                for bump in 0...1 {
                    if bump == 1 {
                        var i = kept.count - 1
                        while i >= 0 && kept[i] == 9 { kept[i] = 0; i -= 1 }
                        if i < 0 { continue }
                        kept[i] += 1
                    }
                    let text = kept.map(String.init).joined()
                    texts.append(String(text.prefix(integerDigits)) + "." + String(text.dropFirst(integerDigits)))
                }
            }
        }
        texts += ["23.456000000000003", "-90.00000000000001", "0.30000000000000004", "9007199254740993.0",
                  "1.7976931348623157", "4.9406564584124654", "9999999999999999999.0", "0.1000000000000000055511151231257827"]
        var mismatches: [String] = []
        for text in texts {
            let parsed = try JSON(parsing: text).doubleValue
            let expected = Double(text)
            if parsed?.bitPattern != expected?.bitPattern { mismatches.append("\(text): \(String(describing: parsed)) ≠ \(String(describing: expected))") }
        }
        XCTAssertEqual(mismatches.count, 0, mismatches.prefix(10).joined(separator: "\n"))
        XCTAssertGreaterThan(texts.count, 100_000)
    }

    func testRandomValuesRoundTrip() throws {
        var generator = SplitMix64(seed: 0xD0C5_7031)
        for _ in 0..<500 {
            let value = RandomJSON.value(&generator)
            let text = try value.serialized()
            let parsed = try JSON(parsing: text)
            XCTAssertEqual(parsed, value, String(decoding: text, as: UTF8.self))
            XCTAssertEqual(try parsed.serialized(), text)
        }
    }
}

/// Object keys are exact bytes, as in CouchDB: the NFC and NFD spellings of a key are two members.
final class JSONExactKeyTests: XCTestCase {
    func testCanonicallyEquivalentKeysAreDistinct() throws {
        let nfc = "caf\u{E9}", nfd = "cafe\u{301}"
        XCTAssertEqual(nfc, nfd, "Swift's String equality merges them")
        let parsed = try JSON(parsing: #"{"\#(nfc)":["1-a"],"\#(nfd)":["1-b"]}"#)
        let object = try XCTUnwrap(parsed.objectValue)
        XCTAssertEqual(object.count, 2)
        XCTAssertEqual(object[nfc], ["1-a"])
        XCTAssertEqual(object[nfd], ["1-b"])
        XCTAssertEqual(try JSON(parsing: #"{"\#(nfc)":1,"\#(nfc)":2}"#).objectValue?.count, 1, "the same bytes twice are one key")
        XCTAssertEqual(try JSON(parsing: #"{"\#(nfc)":1,"\#(nfd)":2,"\#(nfc)":3}"#).objectValue?.count, 2)
        // Past the size at which an object keeps a key table, too.
        var large = JSONObject()
        for index in 0..<40 { large["k\(index)"] = .integer(index) }
        large[nfc] = 1
        large[nfd] = 2
        XCTAssertEqual(large[nfc], 1)
        XCTAssertEqual(large[nfd], 2)
        large.removeValue(forKey: nfc)
        XCTAssertNil(large[nfc])
        XCTAssertEqual(large[nfd], 2)
        XCTAssertNotEqual(JSONObject([(nfc, JSON.integer(1))]), JSONObject([(nfd, JSON.integer(1))]))
    }
}
