import Foundation

/// A string compared and hashed by its exact UTF-8 bytes, as CouchDB compares document ids and JSON
/// object keys.
///
/// Swift's `String` equality is canonical equivalence: "é" precomposed (NFC) and "e" + combining accent
/// (NFD) are `==` and hash alike, so a `Set<String>` or `[String: …]` keyed by ids from outside merges
/// two documents CouchDB keeps apart. Key such collections by `ExactString` instead.
@usableFromInline
package struct ExactString: Hashable, Sendable, CustomStringConvertible {
    @usableFromInline package let value: String

    @usableFromInline package init(_ value: String) {
        self.value = value
    }

    @usableFromInline package static func == (lhs: ExactString, rhs: ExactString) -> Bool {
        lhs.value.isIdentical(to: rhs.value)
    }

    @usableFromInline package func hash(into hasher: inout Hasher) {
        var value = self.value
        value.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
    }

    @usableFromInline package var description: String { value }
}

extension String {
    /// Whether the two strings have the same UTF-8 bytes (not merely canonically equivalent).
    ///
    /// Native strings (all that the JSON parser and SQLite produce) compare with one `memcmp`; the
    /// generic byte-by-byte comparison of the two UTF-8 views, which bridged strings need, cost 2–3 % of
    /// a replication in key lookups.
    @inlinable package func isIdentical(to other: String) -> Bool {
        let compared = utf8.withContiguousStorageIfAvailable { lhs in
            other.utf8.withContiguousStorageIfAvailable { rhs in
                lhs.count == rhs.count && (lhs.isEmpty || memcmp(lhs.baseAddress!, rhs.baseAddress!, lhs.count) == 0)
            }
        }
        if let compared, let equal = compared { return equal }
        return utf8.elementsEqual(other.utf8)
    }
}
