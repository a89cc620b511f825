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
    package static func string(_ sequence: Int64) -> String {
        "\(sequence)-" + base64URL(term(sequence))
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
        let alphabet = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        guard !opaque.isEmpty, opaque.allSatisfy({ alphabet.contains($0) }) else { return nil }
        return number
    }

    private static let node = atom("nonode@nohost")

    /// `[{Node, [0, 4294967295], {N, <<"docstor">>, Node}}]` in the external term format (version 131).
    private static func term(_ sequence: Int64) -> [UInt8] {
        var bytes: [UInt8] = [131, 108, 0, 0, 0, 1]  // a list of one element
        bytes += [104, 3] + node  // {Node, Range, {…}}
        bytes += [108, 0, 0, 0, 2, 97, 0, 110, 4, 0, 0xFF, 0xFF, 0xFF, 0xFF, 106]  // [0, 4294967295]
        bytes += [104, 3] + integer(sequence) + [109, 0, 0, 0, 7] + Array("docstor".utf8) + node
        bytes.append(106)  // the list's tail
        return bytes
    }

    /// An atom as Erlang/OTP 25 (CouchDB 3.3's) writes it: `ATOM_EXT`, a 16-bit length.
    private static func atom(_ name: String) -> [UInt8] { [100, 0, UInt8(name.utf8.count)] + Array(name.utf8) }

    private static func integer(_ value: Int64) -> [UInt8] {
        if (0...255).contains(value) { return [97, UInt8(value)] }
        if value <= Int64(Int32.max) { return [98] + withUnsafeBytes(of: Int32(value).bigEndian, Array.init) }
        var magnitude = UInt64(value)
        var digits: [UInt8] = []
        while magnitude > 0 {
            digits.append(UInt8(truncatingIfNeeded: magnitude))
            magnitude >>= 8
        }
        return [110, UInt8(digits.count), 0] + digits
    }

    private static func base64URL(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }
}
