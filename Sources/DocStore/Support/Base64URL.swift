import Foundation

/// URL-safe base64 without padding (RFC 4648 §5), as CouchDB writes bookmarks and session cookies.
package enum Base64URL {
    /// `bytes` in URL-safe base64, unpadded.
    package static func encode(_ bytes: some Sequence<UInt8>) -> String {
        let standard = Data(bytes).base64EncodedData()
        var result: [UInt8] = []
        result.reserveCapacity(standard.count)
        for byte in standard {
            switch byte {
            case UInt8(ascii: "+"): result.append(UInt8(ascii: "-"))
            case UInt8(ascii: "/"): result.append(UInt8(ascii: "_"))
            case UInt8(ascii: "="): break
            default: result.append(byte)
            }
        }
        return String(decoding: result, as: UTF8.self)
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
