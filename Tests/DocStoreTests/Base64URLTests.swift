import Foundation
import XCTest
@testable import DocStore

/// ``Base64URL/encode(_:)`` writes its own base64 (the encoder `CouchSequence` writes each sequence with):
/// Foundation's base64 of the same bytes, made URL-safe and unpadded, is the reference, for every
/// length's remainder; and the text decodes back to the bytes.
final class Base64URLTests: XCTestCase {
    func testEncodingIsFoundationsBase64MadeURLSafe() {
        var random = SystemRandomNumberGenerator()
        for length in 0..<70 {
            for _ in 0..<5 {
                let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &random) }
                let reference = Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-")
                    .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
                let encoded = Base64URL.encode(bytes)
                XCTAssertEqual(encoded, reference, "\(bytes)")
                XCTAssertEqual(encoded.utf8.count, Base64URL.encodedCount(of: length))
                XCTAssertEqual(Base64URL.decode(encoded).map(Array.init), bytes)
            }
        }
    }

    /// ``Base64URL/isAlphabetByte(_:)`` holds for exactly the characters the encoder writes.
    func testTheAlphabetIsWhatTheEncoderWrites() {
        var written = Set<UInt8>()
        for value in 0..<64 {
            // Six bits in a byte's top, then a pad: the first character is that value's.
            written.insert(Base64URL.encode([UInt8(value << 2)]).utf8.first!)
        }
        XCTAssertEqual(written.count, 64)
        for byte in 0...255 {
            XCTAssertEqual(Base64URL.isAlphabetByte(UInt8(byte)), written.contains(UInt8(byte)), "byte \(byte)")
        }
    }
}
