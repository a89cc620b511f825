/// The decimal digits of an unsigned integer written into a caller's buffer: JSON numbers, a
/// revision's generation and CouchDB's sequence strings write theirs this way, without a `String`.
package enum DecimalDigits {
    /// The most digits a `UInt64` has.
    package static let maximumCount = 20

    /// How many decimal digits `value` has (one for zero).
    package static func count(of value: UInt64) -> Int {
        var count = 1
        var rest = value
        while rest >= 10 {
            rest /= 10
            count += 1
        }
        return count
    }

    /// Writes the decimal digits of `value` at the start of `buffer`, which has room for
    /// ``count(of:)`` bytes, and returns how many it wrote.
    @discardableResult
    package static func write(_ value: UInt64, into buffer: UnsafeMutableRawBufferPointer) -> Int {
        let count = count(of: value)
        precondition(buffer.count >= count, "no room for the digits")
        var rest = value
        for position in stride(from: count - 1, through: 0, by: -1) {
            buffer[position] = UInt8(truncatingIfNeeded: rest % 10) &+ UInt8(ascii: "0")
            rest /= 10
        }
        return count
    }
}
