import Foundation
import HTTPTypes
import XCTest
@testable import DocServer

/// DocServer decodes and encodes request paths itself (Foundation's versions cost a tenth of a
/// single GET's time); these are checked against Foundation's, which they replace.
final class PercentEncodingTests: XCTestCase {
    /// Strings made of the pieces a path or query string may hold: plain and reserved characters,
    /// `+`, good escapes (of ASCII and of UTF-8 sequences), truncated and non-hex escapes, escapes of
    /// bytes that are not UTF-8, and raw non-ASCII.
    private func randomTexts(count: Int) -> [String] {
        let pieces = ["a", "Z", "0", "-", "_", ".", "~", "+", " ", "/", "?", "&", "=", "%2F", "%2f", "%2B", "%20", "%25",
                      "%C3%A9", "%c3%a9", "%E2%82%AC", "%F0%9F%98%80", "%", "%2", "%G1", "%zz", "%C3", "%FF", "%80", "%00",
                      "é", "€", "😀", "_design", "doc"]
        var generator = SystemRandomNumberGenerator()
        return (0..<count).map { _ in
            (0..<Int.random(in: 0...6, using: &generator)).map { _ in pieces.randomElement(using: &generator)! }.joined()
        }
    }

    /// A request's header is its one field's value as it came, or several fields joined as HTTPFields
    /// joins them (`, `, and `; ` for cookies); none is `nil`.
    func testHeadersReadAsHTTPFieldsJoinsThem() throws {
        var fields = HTTPFields()
        fields.append(HTTPField(name: .accept, value: "application/json"))
        fields.append(HTTPField(name: .authorization, value: "Basic YTpi"))
        fields.append(HTTPField(name: .accept, value: "multipart/mixed"))
        fields.append(HTTPField(name: .cookie, value: "a=1"))
        fields.append(HTTPField(name: .cookie, value: "b=2"))
        fields.append(HTTPField(name: .cookie, value: "c=3"))
        let request = try CouchRequest(method: .get, path: "/db", rawQuery: nil, headers: fields, body: [])
        for name: HTTPField.Name in [.accept, .authorization, .cookie, .ifMatch, .contentType] {
            XCTAssertEqual(request.header(name), fields[name], name.rawName)
        }
        XCTAssertEqual(request.header(.accept), "application/json, multipart/mixed")
        XCTAssertEqual(request.header(.cookie), "a=1; b=2; c=3")
        XCTAssertEqual(request.header(.authorization), "Basic YTpi")
        XCTAssertNil(request.header(.ifMatch))
    }

    func testDecodingAnswersAsFoundation() {
        for text in randomTexts(count: 5000) + ["", "%", "abc%", "%%", "+%2B+"] {
            XCTAssertEqual(CouchRequest.percentDecoded(Substring(text), plusIsSpace: false), text.removingPercentEncoding, text)
            XCTAssertEqual(CouchRequest.percentDecoded(Substring(text), plusIsSpace: true),
                           text.replacingOccurrences(of: "+", with: " ").removingPercentEncoding, text)
        }
    }

    func testEncodingAnswersAsFoundation() {
        let unreserved = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.~")
        for text in randomTexts(count: 5000).compactMap(\.removingPercentEncoding) + ["", "a/b", "é€😀", "\u{0}"] {
            XCTAssertEqual(CouchRequest.percentEncoded(text), text.addingPercentEncoding(withAllowedCharacters: unreserved), text)
        }
    }
}
