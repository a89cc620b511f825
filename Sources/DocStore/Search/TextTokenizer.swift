/// Splits text into the tokens full-text search indexes and matches (Docs/Search.md): maximal runs of
/// Unicode letters and decimal digits, with the marks that follow them, folded to lower case without
/// diacritics, so that "Café", "CAFE" and "cafe" are one token.
///
/// It is the tokenizer of every full-text index: SQLite's FTS5 calls it (as the tokenizer named
/// `docstore`) for document text and for the words of a query alike, so both are always cut and
/// folded the same way. ASCII text takes a byte-by-byte path with no allocation; a token with any
/// other character is folded through Unicode's canonical decomposition.
package enum TextTokenizer {
    /// The folded tokens of `text`, in order.
    public static func tokens(_ text: String) -> [String] {
        var tokens: [String] = []
        var text = text
        text.withUTF8 { bytes in
            forEachToken(in: bytes) { token, _, _ in
                tokens.append(String(decoding: token, as: UTF8.self))
                return true
            }
        }
        return tokens
    }

    /// Calls `body` with each token of the UTF-8 `text`: its folded UTF-8 (valid only during the call)
    /// and the byte range it was cut from. Stops early when `body` returns `false`.
    static func forEachToken(in text: UnsafeBufferPointer<UInt8>,
                             _ body: (_ token: UnsafeBufferPointer<UInt8>, _ start: Int, _ end: Int) -> Bool) {
        var folded: [UInt8] = []
        folded.reserveCapacity(64)
        let count = text.count
        var index = 0
        while index < count {
            // Find where a token starts: an ASCII letter or digit, or a letter or digit elsewhere.
            let byte = text[index]
            if byte < 0x80 {
                if !isASCIIWordByte(byte) {
                    index += 1
                    continue
                }
            } else {
                let (scalar, length) = decode(text, at: index)
                guard let scalar, kind(of: scalar) == .starts else {
                    index += length
                    continue
                }
            }
            let start = index
            var isASCII = true
            while index < count {
                let byte = text[index]
                if byte < 0x80 {
                    guard isASCIIWordByte(byte) else { break }
                    index += 1
                } else {
                    let (scalar, length) = decode(text, at: index)
                    guard let scalar, kind(of: scalar) != .separates else { break }
                    isASCII = false
                    index += length
                }
            }
            folded.removeAll(keepingCapacity: true)
            if isASCII {
                for offset in start..<index {
                    let byte = text[offset]
                    folded.append(byte >= 0x41 && byte <= 0x5A ? byte + 0x20 : byte)
                }
            } else {
                folded.append(contentsOf: fold(String(decoding: UnsafeBufferPointer(rebasing: text[start..<index]), as: UTF8.self)).utf8)
            }
            // Folding can leave nothing (a run that was all marks cannot start, so this is defensive).
            if folded.isEmpty { continue }
            let goOn = folded.withUnsafeBufferPointer { body($0, start, index) }
            if !goOn { return }
        }
    }

    /// Lower case, without diacritics: canonical decomposition, then the combining diacritical marks
    /// (U+0300–U+036F, what accents on Latin, Greek and Cyrillic letters are made of) dropped.
    static func fold(_ token: String) -> String {
        var folded = String.UnicodeScalarView()
        for scalar in token.lowercased().decomposedStringWithCanonicalMapping.unicodeScalars {
            if (0x300...0x36F).contains(scalar.value) { continue }
            folded.append(scalar)
        }
        return String(folded).precomposedStringWithCanonicalMapping
    }

    private static func isASCIIWordByte(_ byte: UInt8) -> Bool {
        (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
    }

    private enum Kind { case starts, continues, separates }

    /// Letters and decimal digits start (and continue) a token; marks only continue one, so a mark with
    /// no letter before it separates, like punctuation, spaces and symbols.
    private static func kind(of scalar: Unicode.Scalar) -> Kind {
        switch scalar.properties.generalCategory {
        case .uppercaseLetter, .lowercaseLetter, .titlecaseLetter, .modifierLetter, .otherLetter, .decimalNumber:
            return .starts
        case .nonspacingMark, .spacingMark, .enclosingMark:
            return .continues
        default:
            return .separates
        }
    }

    /// The scalar whose UTF-8 starts at `index` and its length; `nil` (length 1) for a malformed
    /// sequence, which separates tokens.
    private static func decode(_ text: UnsafeBufferPointer<UInt8>, at index: Int) -> (Unicode.Scalar?, Int) {
        let lead = text[index]
        let length: Int
        var value: UInt32
        switch lead {
        case 0xC2...0xDF: length = 2; value = UInt32(lead & 0x1F)
        case 0xE0...0xEF: length = 3; value = UInt32(lead & 0x0F)
        case 0xF0...0xF4: length = 4; value = UInt32(lead & 0x07)
        default: return (nil, 1)
        }
        guard index + length <= text.count else { return (nil, 1) }
        for offset in 1..<length {
            let byte = text[index + offset]
            guard byte & 0xC0 == 0x80 else { return (nil, 1) }
            value = value << 6 | UInt32(byte & 0x3F)
        }
        // Overlong forms and surrogates are malformed.
        let minimum: UInt32 = length == 2 ? 0x80 : length == 3 ? 0x800 : 0x10000
        guard value >= minimum, let scalar = Unicode.Scalar(value) else { return (nil, 1) }
        return (scalar, length)
    }
}
