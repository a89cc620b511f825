import DocStore
import Foundation

/// The sequences DocServer gives out, in CouchDB 3's form: `"N-<opaque>"`, where `N` is the database's
/// sequence (the count CouchDB 3 puts first) and the opaque part is the unpadded base64url of the
/// Erlang external term CouchDB 3 keeps there, written for one shard covering every id:
/// `[{'nonode@nohost', [0, 4294967295], {N, <<"docstor">>, 'nonode@nohost'}}]`. Replicators and
/// PouchDB treat sequences as opaque; CouchDB's own tests read the number before the dash and decode
/// the term.
package enum CouchSequence {
    /// The sequence string for `sequence`.
    /// - Complexity: O(1), and one allocation (the string's): every `_changes` row carries one, so the
    ///   term and the digits are written on the stack and encoded straight into the string (Foundation's
    ///   base64 and `replacingOccurrences` took an eighth of a pull's time, arrays for the term's parts
    ///   later 30 % of the server's `_changes`).
    package static func string(_ sequence: Int64) -> String {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: termPrefix.count + 11 + termSuffix.count + 20) { scratch in
            var termCount = 0
            func put(_ byte: UInt8) {
                scratch[termCount] = byte
                termCount += 1
            }
            termPrefix.forEach(put)
            writeInteger(sequence, put)
            termSuffix.forEach(put)
            let term = UnsafeBufferPointer(rebasing: scratch[..<termCount])
            // The decimal digits, after the term.
            let digitsCount = DecimalDigits.write(sequence.magnitude, into: UnsafeMutableRawBufferPointer(UnsafeMutableBufferPointer(rebasing: scratch[termCount...])))
            let digits = UnsafeBufferPointer(rebasing: scratch[termCount..<(termCount + digitsCount)])
            let sign = sequence < 0 ? 1 : 0
            return String(unsafeUninitializedCapacity: sign + digits.count + 1 + Base64URL.encodedCount(of: term.count)) { buffer in
                if sign == 1 { buffer[0] = UInt8(ascii: "-") }
                var at = UnsafeMutableBufferPointer(rebasing: buffer[sign...]).initialize(fromContentsOf: digits) + sign
                buffer[at] = UInt8(ascii: "-")
                at += 1
                return at + Base64URL.encode(term, into: UnsafeMutableBufferPointer(rebasing: buffer[at...]))
            }
        }
    }

    /// ``string(_:)`` as JSON.
    package static func json(_ sequence: Int64) -> JSON { .string(string(sequence)) }

    /// The database sequence a client's `since` names: `0`, a plain number (CouchDB 1's sequences,
    /// DocServer's before it spoke CouchDB 3's) or `"N-<opaque>"` with an opaque part in base64url;
    /// `nil` when malformed.
    package static func parse(_ text: String) -> Int64? {
        if let number = Int64(text), number >= 0 { return number }
        guard let dash = text.firstIndex(of: "-"), let number = Int64(text[..<dash]), number >= 0 else { return nil }
        let opaque = text[text.index(after: dash)...]
        guard !opaque.isEmpty, opaque.utf8.allSatisfy(Base64URL.isAlphabetByte) else { return nil }
        return number
    }

    private static let node = atom("nonode@nohost")

    /// `[{Node, [0, 4294967295], {N, <<"docstor">>, Node}}]` in the external term format (version 131):
    /// the bytes before `N` and after it.
    private static let termPrefix: [UInt8] = [131, 108, 0, 0, 0, 1]  // a list of one element
        + [104, 3] + node  // {Node, Range, {…}}
        + [108, 0, 0, 0, 2, 97, 0, 110, 4, 0, 0xFF, 0xFF, 0xFF, 0xFF, 106]  // [0, 4294967295]
        + [104, 3]
    private static let termSuffix: [UInt8] = [109, 0, 0, 0, 7] + Array("docstor".utf8) + node
        + [106]  // the list's tail

    /// An atom as Erlang/OTP 25 (CouchDB 3.3's) writes it: `ATOM_EXT`, a 16-bit length.
    private static func atom(_ name: String) -> [UInt8] { [100, 0, UInt8(name.utf8.count)] + Array(name.utf8) }

    /// An integer as the external term format writes it, byte by byte: `SMALL_INTEGER_EXT`, `INTEGER_EXT`,
    /// or `SMALL_BIG_EXT` beyond 32 bits (at most 11 bytes).
    private static func writeInteger(_ value: Int64, _ put: (UInt8) -> Void) {
        if (0...255).contains(value) {
            put(97)
            put(UInt8(value))
        } else if value <= Int64(Int32.max) {
            put(98)
            withUnsafeBytes(of: Int32(value).bigEndian) { $0.forEach(put) }
        } else {
            var magnitude = UInt64(value)
            let count = (64 - magnitude.leadingZeroBitCount + 7) / 8
            put(110)
            put(UInt8(count))
            put(0)
            for _ in 0..<count {
                put(UInt8(truncatingIfNeeded: magnitude))
                magnitude >>= 8
            }
        }
    }
}
