import XCTest
@testable import DocStore

/// ``DecimalDigits`` writes what `String(_:)` writes for the same number: at every power of ten and
/// either side of it, at the extremes, and for random values; and no byte past its count.
final class DecimalDigitsTests: XCTestCase {
    func testDigitsAreTheStandardLibrarysDescription() {
        var values: [UInt64] = [0, 1, 9, UInt64.max, UInt64.max - 1, UInt64(Int64.max), UInt64(Int64.max) + 1]
        var power: UInt64 = 1
        for _ in 0..<19 {
            power *= 10
            values += [power - 1, power, power + 1]
        }
        var random = SystemRandomNumberGenerator()
        for _ in 0..<2_000 {
            // Random magnitudes, not only twenty-digit numbers.
            values.append(UInt64.random(in: 0...UInt64.max, using: &random) >> UInt64.random(in: 0...63, using: &random))
        }
        for value in values {
            var buffer = [UInt8](repeating: UInt8(ascii: "#"), count: DecimalDigits.maximumCount + 4)
            let count = buffer.withUnsafeMutableBytes { DecimalDigits.write(value, into: $0) }
            XCTAssertEqual(count, DecimalDigits.count(of: value), "\(value)")
            XCTAssertEqual(String(decoding: buffer[..<count], as: UTF8.self), String(value))
            XCTAssertTrue(buffer[count...].allSatisfy { $0 == UInt8(ascii: "#") }, "\(value) wrote past its digits")
        }
    }
}
