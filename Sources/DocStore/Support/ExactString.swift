/// A string compared and hashed by its exact UTF-8 bytes, as CouchDB compares document ids and JSON
/// object keys.
///
/// Swift's `String` equality is canonical equivalence: "é" precomposed (NFC) and "e" + combining accent
/// (NFD) are `==` and hash alike, so a `Set<String>` or `[String: …]` keyed by ids from outside merges
/// two documents CouchDB keeps apart (DESIGN.md §3). Key such collections by `ExactString` instead.
@usableFromInline
package struct ExactString: Hashable, Sendable, CustomStringConvertible {
    @usableFromInline package let value: String

    @usableFromInline package init(_ value: String) {
        self.value = value
    }

    @usableFromInline package static func == (lhs: ExactString, rhs: ExactString) -> Bool {
        lhs.value.utf8.elementsEqual(rhs.value.utf8)
    }

    @usableFromInline package func hash(into hasher: inout Hasher) {
        var value = self.value
        value.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
    }

    @usableFromInline package var description: String { value }
}

extension String {
    /// Whether the two strings have the same UTF-8 bytes (not merely canonically equivalent).
    package func isIdentical(to other: String) -> Bool {
        utf8.elementsEqual(other.utf8)
    }
}
