import Foundation

/// URL-safe base64 without padding (RFC 4648 §5), as CouchDB writes bookmarks and session cookies.
package enum Base64URL {
    /// `bytes` in URL-safe base64, unpadded.
    package static func encode(_ bytes: some Sequence<UInt8>) -> String {
        Array(bytes).withUnsafeBufferPointer { bytes in
            String(unsafeUninitializedCapacity: encodedCount(of: bytes.count)) { encode(bytes, into: $0) }
        }
    }

    /// How many characters ``encode(_:into:)`` writes for `count` bytes.
    package static func encodedCount(of count: Int) -> Int { (count * 4 + 2) / 3 }

    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// Whether `byte` is one of URL-safe base64's 64 characters (padding is not).
    package static func isAlphabetByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
             UInt8(ascii: "-"), UInt8(ascii: "_"):
            return true
        default:
            return false
        }
    }

    /// Writes `bytes` in URL-safe base64, unpadded, at the start of `output` (which has room for
    /// ``encodedCount(of:)`` characters); returns the number of characters written.
    package static func encode(_ bytes: UnsafeBufferPointer<UInt8>, into output: UnsafeMutableBufferPointer<UInt8>) -> Int {
        var at = 0
        func put(_ group: UInt32, _ shift: UInt32) {
            output[at] = alphabet[Int(group >> shift & 63)]
            at += 1
        }
        var index = 0
        while index + 3 <= bytes.count {
            let group = UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8 | UInt32(bytes[index + 2])
            put(group, 18)
            put(group, 12)
            put(group, 6)
            put(group, 0)
            index += 3
        }
        let rest = bytes.count - index
        if rest > 0 {
            let group = UInt32(bytes[index]) << 16 | (rest == 2 ? UInt32(bytes[index + 1]) << 8 : 0)
            put(group, 18)
            put(group, 12)
            if rest == 2 { put(group, 6) }
        }
        return at
    }

    /// The bytes of URL-safe base64 text, padded or not; `nil` if it is not base64.
    package static func decode(_ text: String) -> Data? {
        var standard: [UInt8] = []
        standard.reserveCapacity(text.utf8.count + 3)
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "-"): standard.append(UInt8(ascii: "+"))
            case UInt8(ascii: "_"): standard.append(UInt8(ascii: "/"))
            default: standard.append(byte)
            }
        }
        while standard.count % 4 != 0 { standard.append(UInt8(ascii: "=")) }
        return Data(base64Encoded: Data(standard))
    }
}
