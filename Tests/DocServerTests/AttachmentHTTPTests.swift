@testable import DocServer
import DocStore
import Foundation
import XCTest

/// Attachments over HTTP as CouchDB serves them: encodings kept apart from content, every leaf complete,
/// ranges, ETags, and bodies streamed in chunks both ways.
final class AttachmentHTTPTests: XCTestCase {
    private func text(_ words: Int, seed: UInt64 = 1) -> Data {
        let vocabulary = ["sofa", "chunk", "replica", "gzip", "leaf", "stub", "digest", "winner", "tombstone"]
        var state = seed &* 6364136223846793005
        var out = ""
        for _ in 0..<words {
            state = state &* 6364136223846793005 &+ 1442695040888963407
            out += vocabulary[Int(state >> 33) % vocabulary.count] + " "
        }
        return Data(out.utf8)
    }

    private func server(_ configure: (inout ServerConfiguration) -> Void = { _ in }) async throws -> TestServer {
        let server = try await TestServer(self, configure: configure)
        _ = try await server.request("PUT", "/db")
        return server
    }

    /// A multipart/related body as CouchDB's replicator sends it: gzip bytes for compressible types.
    private func replicatorPut(_ server: TestServer, id: String, json: String, parts: [(name: String, type: String, bytes: Data, gzip: Bool)],
                               newEdits: Bool = false) async throws -> TestServer.Reply {
        let boundary = "d7643fdd5c82f88ce9eb1da8f2302bd1"
        var body = Array("--\(boundary)\r\nContent-Type: application/json\r\n\r\n\(json)".utf8)
        for part in parts {
            body += Array("\r\n--\(boundary)\r\nContent-Disposition: attachment; filename=\"\(part.name)\"\r\nContent-Type: \(part.type)\r\nContent-Length: \(part.bytes.count)\r\n".utf8)
            if part.gzip { body += Array("Content-Encoding: gzip\r\n".utf8) }
            body += Array("\r\n".utf8) + Array(part.bytes)
        }
        body += Array("\r\n--\(boundary)--".utf8)
        return try await server.request("PUT", "/db/\(id)\(newEdits ? "" : "?new_edits=false")", body: Data(body),
                                        contentType: "multipart/related; boundary=\"\(boundary)\"")
    }

    /// The bug CouchDB's replicator found: gzip parts were stored as the content.
    func testGzipPartsFromTheReplicatorKeepContentApartFromEncoding() async throws {
        let server = try await server()
        let content = text(3000)
        let gzip = try GzipStream.compress(content)
        let png = Data((0..<700).map { UInt8(truncatingIfNeeded: $0 * 7) })
        let json = #"{"_id":"g","_rev":"1-abc","_revisions":{"start":1,"ids":["abc"]},"_attachments":{"notes.txt":{"content_type":"text/plain","revpos":1,"digest":"\#(Attachment.digest(of: gzip))","length":\#(content.count),"follows":true,"encoding":"gzip","encoded_length":\#(gzip.count)},"pixel.png":{"content_type":"image/png","revpos":1,"digest":"\#(Attachment.digest(of: png))","length":700,"follows":true}}}"#
        let put = try await replicatorPut(server, id: "g", json: json, parts: [("notes.txt", "text/plain", gzip, true), ("pixel.png", "image/png", png, false)])
        XCTAssertEqual(put.status, 201, put.text)
        XCTAssertEqual(put.json, ["ok": true, "id": "g", "rev": "1-abc"])

        let plain = try await server.request("GET", "/db/g/notes.txt", headers: ["Accept-Encoding": "identity"])
        XCTAssertEqual(plain.body, content, "served decoded")
        XCTAssertEqual(plain.header("Content-Length"), String(content.count))
        XCTAssertNil(plain.header("Content-Encoding"))
        XCTAssertEqual(plain.header("Accept-Ranges"), "none")
        XCTAssertEqual(plain.header("ETag"), "\"\(Attachment.digest(of: gzip).dropFirst(4))\"")

        let stub = try await server.request("GET", "/db/g")
        XCTAssertEqual(stub.json["_attachments"]?["notes.txt"],
                       ["content_type": "text/plain", "revpos": 1, "digest": .string(Attachment.digest(of: gzip)),
                        "length": .integer(content.count), "stub": true])
        let info = try await server.request("GET", "/db/g?att_encoding_info=true")
        XCTAssertEqual(info.json["_attachments"]?["notes.txt"]?["encoding"], "gzip")
        XCTAssertEqual(info.json["_attachments"]?["notes.txt"]?["encoded_length"], .integer(gzip.count))
        XCTAssertNil(info.json["_attachments"]?["pixel.png"]?["encoding"])
        let inline = try await server.request("GET", "/db/g?attachments=true")
        XCTAssertEqual(inline.json["_attachments"]?["notes.txt"]?["data"], .string(content.base64EncodedString()), "inline data is decoded")

        // Pushed on to another server, the bytes and the digest stay those of the gzip data.
        let related = try await server.request("GET", "/db/g?attachments=true", headers: ["Accept": "multipart/related"])
        let boundary = try XCTUnwrap(Multipart.boundary(from: related.header("Content-Type") ?? ""))
        let parts = try Multipart.parse(Array(related.body), boundary: boundary)
        XCTAssertEqual(parts.count, 3)
        XCTAssertEqual(try JSON(parsing: parts[0].body)["_attachments"]?["notes.txt"]?["follows"], true)
        XCTAssertEqual(parts[1].headers["Content-Encoding"], "gzip")
        XCTAssertEqual(Data(parts[1].body), gzip)
        XCTAssertEqual(Data(parts[2].body), png)
        XCTAssertEqual(related.header("Content-Length"), String(related.body.count))
    }

    /// `attachments=true` and `att_encoding_info=true` with `include_docs=true` in `_all_docs`, views and
    /// `_changes`, as CouchDB 3.3.3 answers them (recorded with curl): inline base64 data of the decoded
    /// content instead of stubs, `encoding`/`encoded_length` in stubs or beside the data; nothing
    /// without `include_docs`. (DocServer ignored both there, sending stubs.)
    func testIncludedDocumentsCarryAttachmentsWhenAsked() async throws {
        let server = try await server()
        let content = text(300)
        let gzip = try GzipStream.compress(content)
        let json = #"{"_id":"g","_rev":"1-abc","_revisions":{"start":1,"ids":["abc"]},"_attachments":{"notes.txt":{"content_type":"text/plain","revpos":1,"digest":"\#(Attachment.digest(of: gzip))","length":\#(content.count),"follows":true,"encoding":"gzip","encoded_length":\#(gzip.count)}}}"#
        await XCTAssertEqualAsync(try await replicatorPut(server, id: "g", json: json, parts: [("notes.txt", "text/plain", gzip, true)]).status, 201)
        await XCTAssertEqualAsync(try await server.request("PUT", "/db/_design/d", json: [
            "views": ["v": ["map": "function(doc) { if (doc._attachments) emit(doc._id, null); }"]]]).status, 201)
        let data = JSON.string(content.base64EncodedString())

        for path in ["/db/_all_docs?include_docs=true&attachments=true&key=%22g%22",
                     "/db/_design/d/_view/v?include_docs=true&attachments=true"] {
            let rows = try await server.request("GET", path).json["rows"]
            let attachment = rows?[0]?["doc"]?["_attachments"]?["notes.txt"]
            XCTAssertEqual(attachment?["data"], data, path)
            XCTAssertNil(attachment?["stub"], path)
            XCTAssertNil(attachment?["encoding"], path)
        }
        let encoded = try await server.request("GET", "/db/_all_docs?include_docs=true&att_encoding_info=true&key=%22g%22")
        XCTAssertEqual(encoded.json["rows"]?[0]?["doc"]?["_attachments"]?["notes.txt"],
                       ["content_type": "text/plain", "revpos": 1, "digest": .string(Attachment.digest(of: gzip)),
                        "length": .integer(content.count), "stub": true, "encoding": "gzip", "encoded_length": .integer(gzip.count)])
        let both = try await server.request("GET", "/db/_design/d/_view/v?include_docs=true&att_encoding_info=true&attachments=true")
        XCTAssertEqual(both.json["rows"]?[0]?["doc"]?["_attachments"]?["notes.txt"]?["data"], data)
        XCTAssertEqual(both.json["rows"]?[0]?["doc"]?["_attachments"]?["notes.txt"]?["encoding"], "gzip")
        await XCTAssertEqualAsync(try await server.request("GET", "/db/_all_docs?attachments=true&key=%22g%22").json["rows"]?[0]?["doc"], nil)

        let changes = try await server.request("GET", "/db/_changes?include_docs=true&attachments=true&att_encoding_info=true")
        let change = changes.json["results"]?.arrayValue?.first { $0["id"] == "g" }
        XCTAssertEqual(change?["doc"]?["_attachments"]?["notes.txt"]?["data"], data)
        XCTAssertEqual(change?["doc"]?["_attachments"]?["notes.txt"]?["encoded_length"], .integer(gzip.count))
        let stubs = try await server.request("GET", "/db/_changes?include_docs=true")
        XCTAssertEqual(stubs.json["results"]?.arrayValue?.first { $0["id"] == "g" }?["doc"]?["_attachments"]?["notes.txt"]?["stub"], true)
    }

    /// As CouchDB 3.3.3 with its default `[attachments]`: a text attachment of a new edit, whole in its
    /// JSON or streamed in alone, is stored gzip (`att_encoding_info` shows it, the digest is the gzip bytes', readers get the
    /// text); other types, `compression_level = 0` and replicated revisions are kept as they came.
    func testCompressibleAttachmentsAreStoredGzip() async throws {
        let server = try await server()
        let text = text(200)
        let put = try await server.request("PUT", "/db/t", json: ["_attachments": [
            "notes.txt": ["content_type": "text/plain", "data": .string(text.base64EncodedString())],
            "pixel.png": ["content_type": "image/png", "data": "AAEC"],
        ]])
        XCTAssertEqual(put.status, 201)
        let info = try await server.request("GET", "/db/t?att_encoding_info=true").json["_attachments"]
        XCTAssertEqual(info?["notes.txt"]?["encoding"], "gzip")
        XCTAssertLessThan(info?["notes.txt"]?["encoded_length"]?.intValue ?? .max, text.count)
        XCTAssertEqual(info?["notes.txt"]?["length"], .integer(text.count))
        XCTAssertNotEqual(info?["notes.txt"]?["digest"], .string(Attachment.digest(of: text)), "the gzip bytes' digest")
        XCTAssertNil(info?["pixel.png"]?["encoding"])
        await XCTAssertEqualAsync(try await server.request("GET", "/db/t/notes.txt", headers: ["Accept-Encoding": "identity"]).body, text)

        let replicated = try await server.request("POST", "/db/_bulk_docs", json: ["new_edits": false, "docs": [[
            "_id": "r", "_rev": "1-abc", "_attachments": ["notes.txt": ["content_type": "text/plain", "data": .string(text.base64EncodedString())]],
        ]]])
        XCTAssertEqual(replicated.status, 201)
        await XCTAssertEqualAsync(try await server.request("GET", "/db/r?att_encoding_info=true").json["_attachments"]?["notes.txt"]?["digest"],
                                  .string(Attachment.digest(of: text)), "a replicated revision keeps its peer's bytes")

        // Streamed in alone: compressed as it arrives, also where a Content-MD5 vouches for the bytes as
        // sent (checked against them), as CouchDB 3.3.3: the same stored form, digest and revision.
        let alone = try await server.request("PUT", "/db/s/notes.txt", body: text, contentType: "text/plain")
        XCTAssertEqual(alone.status, 201)
        let streamed = try await server.request("GET", "/db/s?att_encoding_info=true").json["_attachments"]?["notes.txt"]
        XCTAssertEqual(streamed?["encoding"], "gzip")
        XCTAssertEqual(streamed?["length"], .integer(text.count))
        await XCTAssertEqualAsync(try await server.request("GET", "/db/s/notes.txt", headers: ["Accept-Encoding": "identity"]).body, text)
        let md5 = String(Attachment.digest(of: text).dropFirst(4))
        let vouched = try await server.request("PUT", "/db/m/notes.txt", body: text, contentType: "text/plain", headers: ["Content-MD5": md5])
        XCTAssertEqual(vouched.status, 201)
        XCTAssertEqual(vouched.json["rev"], alone.json["rev"])
        await XCTAssertEqualAsync(try await server.request("GET", "/db/m?att_encoding_info=true").json["_attachments"]?["notes.txt"], streamed)
        let mismatch = try await server.request("PUT", "/db/m2/notes.txt", body: text, contentType: "text/plain",
                                                headers: ["Content-MD5": String(Attachment.digest(of: Data("x".utf8)).dropFirst(4))])
        XCTAssertEqual(mismatch.status, 400)
        XCTAssertEqual(mismatch.json["error"], "content_md5_mismatch")

        _ = try await server.request("PUT", "/_node/_local/_config/attachments/compression_level", json: "0", headers: ["X-Couch-Persist": "false"])
        _ = try await server.request("PUT", "/db/plain", json: ["_attachments": ["notes.txt": ["content_type": "text/plain", "data": .string(text.base64EncodedString())]]])
        await XCTAssertEqualAsync(try await server.request("GET", "/db/plain?att_encoding_info=true").json["_attachments"]?["notes.txt"]?["encoding"], nil)
    }

    /// As CouchDB 3.3.3 (its attachments_multipart test): a compressible attachment that arrives as a
    /// part of a `multipart/related` document is stored gzip too; a replicated revision's is not; a
    /// part whose length is not the one announced is refused.
    func testMultipartPartsOfCompressibleTypesAreStoredGzip() async throws {
        let server = try await server()
        let text = text(300)
        func multipart(_ type: String, _ content: Data, announced: Int? = nil, revision: String? = nil) -> Data {
            let revisionMember = revision.map { "\"_rev\": \"\($0)\", \"_revisions\": {\"start\": 1, \"ids\": [\"\($0.dropFirst(2))\"]}, " } ?? ""
            let json = "{\(revisionMember)\"_attachments\": {\"a.txt\": {\"follows\": true, \"content_type\": \"\(type)\", \"length\": \(announced ?? content.count)}}}"
            return Data("--abc123\r\ncontent-type: application/json\r\n\r\n\(json)\r\n--abc123\r\n\r\n".utf8) + content + Data("\r\n--abc123--".utf8)
        }
        let type = "multipart/related;boundary=\"abc123\""
        await XCTAssertEqualAsync(try await server.request("PUT", "/db/text", body: multipart("text/plain", text), contentType: type).status, 201)
        await XCTAssertEqualAsync(try await server.request("PUT", "/db/other", body: multipart("application/test", text), contentType: type).status, 201)
        let stored = try await server.request("GET", "/db/text?att_encoding_info=true").json["_attachments"]?["a.txt"]
        XCTAssertEqual(stored?["encoding"], "gzip")
        XCTAssertEqual(stored?["length"], .integer(text.count))
        await XCTAssertEqualAsync(try await server.request("GET", "/db/text/a.txt", headers: ["Accept-Encoding": "identity"]).body, text)
        await XCTAssertEqualAsync(try await server.request("GET", "/db/other?att_encoding_info=true").json["_attachments"]?["a.txt"]?["encoding"], nil)
        let replicated = try await server.request("PUT", "/db/rep?new_edits=false", body: multipart("text/plain", text, revision: "1-abc"), contentType: type)
        XCTAssertEqual(replicated.status, 201, replicated.text)
        await XCTAssertEqualAsync(try await server.request("GET", "/db/rep?att_encoding_info=true").json["_attachments"]?["a.txt"]?["encoding"], nil)
        let short = try await server.request("PUT", "/db/short", body: multipart("text/plain", text, announced: text.count + 5), contentType: type)
        XCTAssertEqual(short.status, 400)
        await XCTAssertEqualAsync(try await server.request("GET", "/db/short").status, 404)
        let long = try await server.request("PUT", "/db/long", body: multipart("text/plain", text, announced: text.count - 5), contentType: type)
        XCTAssertEqual(long.status, 400)
        await XCTAssertEqualAsync(try await server.request("GET", "/db/long").status, 404)
    }

    /// As CouchDB 3.3.3 (curl, recorded): attachments keep the order their JSON gives, a standalone
    /// upload puts its attachment first — and the revision ids, hashed over that order, are CouchDB's.
    func testAttachmentsKeepCouchDBsOrderAndRevisionIDs() async throws {
        let server = try await server()
        let listed = try await server.request("PUT", "/db/m", json: ["_attachments": [
            "z.txt": ["content_type": "application/octet-stream", "data": "enp6"],
            "a.txt": ["content_type": "application/octet-stream", "data": "YWFh"]]])
        XCTAssertEqual(listed.json["rev"], "1-d051a62f1049f2a3a614335316496fa9")
        let names = try await server.request("GET", "/db/m").json["_attachments"]?.objectValue?.keys
        XCTAssertEqual(names, ["z.txt", "a.txt"])

        let first = try await server.request("PUT", "/db/d", json: [:])
        XCTAssertEqual(first.json["rev"], "1-967a00dff5e02add41819138abb3284d")
        let second = try await server.request("PUT", "/db/d/a.txt?rev=1-967a00dff5e02add41819138abb3284d", body: Data("aaa".utf8))
        XCTAssertEqual(second.json["rev"], "2-53b2d0024875fccbaf4e5d6153ca6b3f")
        let third = try await server.request("PUT", "/db/d/b.txt?rev=2-53b2d0024875fccbaf4e5d6153ca6b3f", body: Data("bbb".utf8))
        XCTAssertEqual(third.json["rev"], "3-d8d1f3610f3105e51f7ba6bfd660c5a7")
        await XCTAssertEqualAsync(try await server.request("GET", "/db/d").json["_attachments"]?.objectValue?.keys, ["b.txt", "a.txt"])

        // A multipart/related document keeps its JSON's order, whichever attachments follow.
        let json = #"{"_rev": "3-d8d1f3610f3105e51f7ba6bfd660c5a7", "_attachments": {"c.txt": {"follows": true, "content_type": "application/test", "length": 3}, "a.txt": {"stub": true}, "b.txt": {"stub": true}}}"#
        let body = Data("--x\r\ncontent-type: application/json\r\n\r\n\(json)\r\n--x\r\n\r\nccc\r\n--x--".utf8)
        await XCTAssertEqualAsync(try await server.request("PUT", "/db/d", body: body, contentType: "multipart/related;boundary=x").status, 201)
        await XCTAssertEqualAsync(try await server.request("GET", "/db/d").json["_attachments"]?.objectValue?.keys, ["c.txt", "a.txt", "b.txt"])
    }

    func testAttachmentGetEncodingsRangesAndETags() async throws {
        let server = try await server()
        let content = text(2000)
        let gzip = try GzipStream.compress(content)
        let binary = Data((0..<5000).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        let json = #"{"_id":"r","_rev":"1-r","_attachments":{"t.txt":{"content_type":"text/plain","digest":"\#(Attachment.digest(of: gzip))","length":\#(content.count),"follows":true,"encoding":"gzip","encoded_length":\#(gzip.count)},"b.bin":{"content_type":"application/octet-stream","length":5000,"follows":true}}}"#
        let put = try await replicatorPut(server, id: "r", json: json, parts: [("t.txt", "text/plain", gzip, true), ("b.bin", "application/octet-stream", binary, false)])
        XCTAssertEqual(put.status, 201, put.text)

        let encoded = try await server.request("GET", "/db/r/t.txt", headers: ["Accept-Encoding": "gzip"])
        XCTAssertEqual(encoded.header("Content-Encoding"), "gzip")
        XCTAssertEqual(encoded.header("Content-MD5"), String(Attachment.digest(of: gzip).dropFirst(4)))
        let head = try await server.request("HEAD", "/db/r/t.txt", headers: ["Accept-Encoding": "gzip"])
        XCTAssertEqual(head.header("Content-Length"), String(gzip.count))
        XCTAssertTrue(head.body.isEmpty)

        let etag = try XCTUnwrap(encoded.header("ETag"))
        let unchanged = try await server.request("GET", "/db/r/t.txt", headers: ["If-None-Match": etag])
        XCTAssertEqual(unchanged.status, 304)

        let one = try await server.request("GET", "/db/r/b.bin", headers: ["Range": "bytes=100-199"])
        XCTAssertEqual(one.status, 206)
        XCTAssertEqual(one.body, binary[100..<200])
        XCTAssertEqual(one.header("Content-Range"), "bytes 100-199/5000")
        let suffix = try await server.request("GET", "/db/r/b.bin", headers: ["Range": "bytes=-10"])
        XCTAssertEqual(suffix.body, binary[4990...])
        let clamped = try await server.request("GET", "/db/r/b.bin", headers: ["Range": "bytes=4990-99999"])
        XCTAssertEqual(clamped.body, binary[4990...])
        let two = try await server.request("GET", "/db/r/b.bin", headers: ["Range": "bytes=0-1,10-12"])
        XCTAssertEqual(two.status, 206)
        let rangeBoundary = try XCTUnwrap(Multipart.boundary(from: two.header("Content-Type") ?? ""))
        XCTAssertTrue(two.header("Content-Type")?.hasPrefix("multipart/byteranges") ?? false)
        let ranges = try Multipart.parse(Array(two.body), boundary: rangeBoundary)
        XCTAssertEqual(ranges.map { Data($0.body) }, [binary[0..<2], binary[10..<13]])
        let beyond = try await server.request("GET", "/db/r/b.bin", headers: ["Range": "bytes=6000-"])
        XCTAssertEqual(beyond.status, 416)
        XCTAssertEqual(beyond.json["error"], "requested_range_not_satisfiable")
        let whole = try await server.request("GET", "/db/r/b.bin", headers: ["Range": "bytes=0-"])
        XCTAssertEqual(whole.status, 200)
        XCTAssertEqual(whole.body, binary)
        let gzipRange = try await server.request("GET", "/db/r/t.txt", headers: ["Range": "bytes=0-9"])
        XCTAssertEqual(gzipRange.status, 200, "ranges only apply to contents stored as they are")
        XCTAssertEqual(gzipRange.body, content)
    }

    /// A standalone upload is streamed into the database; its MD5 and encoding are honoured.
    func testStandaloneUploadsStreamAndCheckTheirDigest() async throws {
        let server = try await server { $0.maximumBodySize = 64 * 1024 }
        let big = Data((0..<(3 * 1024 * 1024 + 17)).map { UInt8(truncatingIfNeeded: $0 ^ ($0 >> 8)) })
        let md5 = String(Attachment.digest(of: big).dropFirst(4))
        let put = try await server.request("PUT", "/db/up/big.bin", body: big, contentType: "application/octet-stream",
                                           headers: ["Content-MD5": md5])
        XCTAssertEqual(put.status, 201, put.text)
        XCTAssertEqual(put.header("Location"), "http://127.0.0.1:\(server.port)/db/up/big.bin")
        let back = try await server.request("GET", "/db/up/big.bin")
        XCTAssertEqual(back.body, big)
        let rev = try XCTUnwrap(put.json["rev"]?.stringValue)

        let wrong = try await server.request("PUT", "/db/up/other.bin?rev=\(rev)", body: Data("abc".utf8),
                                             contentType: "application/octet-stream", headers: ["Content-MD5": md5])
        XCTAssertEqual(wrong.status, 400)
        XCTAssertEqual(wrong.json["error"], "content_md5_mismatch")

        let content = text(500)
        let gzip = try GzipStream.compress(content)
        let encoded = try await server.request("PUT", "/db/up/words.txt?rev=\(rev)", body: gzip, contentType: "text/plain",
                                               headers: ["Content-Encoding": "gzip"])
        XCTAssertEqual(encoded.status, 201, encoded.text)
        let rev2 = try XCTUnwrap(encoded.json["rev"]?.stringValue)
        let stub = try await server.request("GET", "/db/up?att_encoding_info=true")
        XCTAssertEqual(stub.json["_attachments"]?["words.txt"]?["length"], .integer(content.count), "the decoded length, counted")
        XCTAssertEqual(stub.json["_attachments"]?["words.txt"]?["encoded_length"], .integer(gzip.count))
        let words = try await server.request("GET", "/db/up/words.txt")
        XCTAssertEqual(words.body, content)
        let unsupported = try await server.request("PUT", "/db/up/x.txt?rev=\(rev2)", body: gzip, contentType: "text/plain",
                                                   headers: ["Content-Encoding": "br"])
        XCTAssertEqual(unsupported.status, 415)
        let notGzip = try await server.request("PUT", "/db/up/y.txt?rev=\(rev2)", body: content, contentType: "text/plain",
                                               headers: ["Content-Encoding": "gzip"])
        XCTAssertEqual(notGzip.status, 400)
    }

    /// Every leaf of a conflicted document is complete: its own attachments follow it, whatever the
    /// other leaves carry — also with `atts_since`, which CouchDB 3.3.3 does not apply to `open_revs`.
    func testOpenRevsAndBulkGetSendEveryLeafComplete() async throws {
        let server = try await server()
        let base = Data("base attachment".utf8)
        let left = Data("left only".utf8)
        let right = text(300)
        let rightGzip = try GzipStream.compress(right)
        func revisionJSON(_ rev: String, _ ids: [String], _ attachments: String) -> String {
            #"{"_id":"c","_rev":"\#(rev)","_revisions":{"start":\#(ids.count),"ids":[\#(ids.map { "\"\($0)\"" }.joined(separator: ","))]},"_attachments":{\#(attachments)}}"#
        }
        let baseJSON = #""base.txt":{"content_type":"text/plain","revpos":1,"length":\#(base.count),"follows":true}"#
        await XCTAssertEqualAsync(try await replicatorPut(server, id: "c", json: revisionJSON("1-a", ["a"], baseJSON),
                                               parts: [("base.txt", "text/plain", base, false)]).status, 201)
        let leftJSON = #""base.txt":{"content_type":"text/plain","revpos":1,"length":\#(base.count),"stub":true},"left.txt":{"content_type":"text/plain","revpos":2,"length":\#(left.count),"follows":true}"#
        await XCTAssertEqualAsync(try await replicatorPut(server, id: "c", json: revisionJSON("2-l", ["l", "a"], leftJSON),
                                               parts: [("left.txt", "text/plain", left, false)]).status, 201)
        let rightJSON = #""right.txt":{"content_type":"text/plain","revpos":2,"length":\#(right.count),"follows":true,"encoding":"gzip","encoded_length":\#(rightGzip.count)}"#
        await XCTAssertEqualAsync(try await replicatorPut(server, id: "c", json: revisionJSON("2-r", ["r", "a"], rightJSON),
                                               parts: [("right.txt", "text/plain", rightGzip, true)]).status, 201)

        let mixed = try await server.request("GET", "/db/c?open_revs=all&revs=true&latest=true", headers: ["Accept": "multipart/mixed"])
        let outer = try XCTUnwrap(Multipart.boundary(from: mixed.header("Content-Type") ?? ""))
        let leaves = try Multipart.parse(Array(mixed.body), boundary: outer)
        XCTAssertEqual(leaves.count, 2)
        var byRevision: [String: [String: Data]] = [:]
        for leaf in leaves {
            let inner = try XCTUnwrap(Multipart.boundary(from: leaf.headers["Content-Type"] ?? ""))
            let parts = try Multipart.parse(leaf.body, boundary: inner)
            let json = try JSON(parsing: parts[0].body)
            var files: [String: Data] = [:]
            for part in parts.dropFirst() { files[part.headers.filename ?? "?"] = Data(part.body) }
            byRevision[json["_rev"]!.stringValue!] = files
            XCTAssertEqual(json["_attachments"]?.objectValue?.count, files.count, "every attachment of the leaf follows it")
        }
        XCTAssertEqual(byRevision["2-l"], ["base.txt": base, "left.txt": left])
        XCTAssertEqual(byRevision["2-r"], ["right.txt": rightGzip], "stored bytes, gzip ones as they are")

        // The client has 1-a: on 2-l only left.txt is new, and yet both follow, as CouchDB sends them.
        let since = try await server.request("GET", "/db/c?open_revs=%5B%222-l%22%5D&revs=true&atts_since=%5B%221-a%22%5D",
                                             headers: ["Accept": "multipart/mixed"])
        let sinceParts = try Multipart.parse(Array(since.body), boundary: try XCTUnwrap(Multipart.boundary(from: since.header("Content-Type") ?? "")))
        let sinceInner = try Multipart.parse(sinceParts[0].body, boundary: try XCTUnwrap(Multipart.boundary(from: sinceParts[0].headers["Content-Type"] ?? "")))
        let sinceJSON = try JSON(parsing: sinceInner[0].body)
        XCTAssertEqual(sinceJSON["_attachments"]?["base.txt"]?["follows"], true)
        XCTAssertEqual(sinceJSON["_attachments"]?["left.txt"]?["follows"], true)
        XCTAssertEqual(sinceInner.count, 3, "the JSON and both attachments")

        // _bulk_get: JSON with inline data for each leaf, and multipart/mixed.
        let json = try await server.request("POST", "/db/_bulk_get?revs=true&attachments=true",
                                            json: ["docs": [["id": "c", "rev": "2-l"], ["id": "c", "rev": "2-r"], ["id": "nope"]]])
        XCTAssertEqual(json.json["results"]?[0]?["docs"]?[0]?["ok"]?["_attachments"]?["left.txt"]?["data"], .string(left.base64EncodedString()))
        XCTAssertEqual(json.json["results"]?[1]?["docs"]?[0]?["ok"]?["_attachments"]?["right.txt"]?["data"], .string(right.base64EncodedString()))
        XCTAssertEqual(json.json["results"]?[2]?["docs"]?[0]?["error"]?["error"], "not_found")
        let bulkMixed = try await server.request("POST", "/db/_bulk_get?revs=true", json: ["docs": [["id": "c", "rev": "2-r"], ["id": "nope"]]],
                                                 headers: ["Accept": "multipart/mixed"])
        let bulkBoundary = try XCTUnwrap(Multipart.boundary(from: bulkMixed.header("Content-Type") ?? ""))
        XCTAssertTrue(bulkBoundary.hasPrefix("--"))
        let bulkParts = try Multipart.parse(Array(bulkMixed.body), boundary: bulkBoundary)
        XCTAssertEqual(bulkParts.count, 2)
        XCTAssertEqual(bulkParts[0].headers["X-Doc-Id"], "c")
        XCTAssertEqual(bulkParts[0].headers["X-Rev-Id"], "2-r")
        XCTAssertEqual(bulkParts[1].headers["Content-Type"], #"application/json; error="true""#)
    }

    /// Stubs that name no attachment of the ancestor the target holds fail the write with 412, as in
    /// CouchDB — a single PUT and the whole of a `_bulk_docs`.
    func testInvalidStubsAre412() async throws {
        let server = try await server()
        let single = try await server.request("PUT", "/db/s?new_edits=false", json: try JSON(parsing:
            #"{"_rev":"2-b","_revisions":{"start":2,"ids":["b","a"]},"_attachments":{"x.txt":{"stub":true,"revpos":1}}}"#))
        XCTAssertEqual(single.status, 412)
        XCTAssertEqual(single.json, ["error": "missing_stub", "reason": "Invalid attachment stub in s for x.txt"])
        let bulk = try await server.request("POST", "/db/_bulk_docs", json: try JSON(parsing:
            #"{"new_edits":false,"docs":[{"_id":"fine","_rev":"1-f"},{"_id":"s","_rev":"2-b","_revisions":{"start":2,"ids":["b","a"]},"_attachments":{"x.txt":{"stub":true}}}]}"#))
        XCTAssertEqual(bulk.status, 412)
        XCTAssertEqual(bulk.json["error"], "missing_stub")
    }

    func testMultipartUploadsAreCheckedAgainstTheirAnnouncements() async throws {
        let server = try await server { $0.maximumAttachmentSize = 10_000 }
        let bytes = Data(repeating: 7, count: 100)
        func put(_ meta: String, _ body: Data) async throws -> TestServer.Reply {
            try await replicatorPut(server, id: "m", json: #"{"_id":"m","_rev":"1-m","_attachments":{"a.bin":{\#(meta),"follows":true}}}"#,
                                    parts: [("a.bin", "application/octet-stream", body, false)])
        }
        await XCTAssertEqualAsync(try await put(#""content_type":"a/b","length":99"#, bytes).status, 400, "longer than announced")
        await XCTAssertEqualAsync(try await put(#""content_type":"a/b","length":101"#, bytes).status, 400, "shorter than announced")
        await XCTAssertEqualAsync(try await put(#""content_type":"a/b","length":100,"digest":"md5-AAAAAAAAAAAAAAAAAAAAAA==""#, bytes).json["error"],
                       "content_md5_mismatch")
        let large = try await put(#""content_type":"a/b","length":20000"#, Data(repeating: 1, count: 20000))
        XCTAssertEqual(large.status, 413)
        XCTAssertEqual(large.json, ["error": "attachment_too_large", "reason": "a.bin"])
        await XCTAssertEqualAsync(try await put(#""content_type":"a/b","length":100,"encoding":"gzip","encoded_length":100"#, bytes).status, 400,
                       "not gzip data")
        await XCTAssertEqualAsync(try await server.request("GET", "/db/m").status, 404, "nothing was written")
        let ok = try await put(#""content_type":"a/b","length":100,"digest":"\#(Attachment.digest(of: bytes))""#, bytes)
        XCTAssertEqual(ok.status, 201, ok.text)
    }

    /// As CouchDB 3.3.3 (write_parity.py compares them): an attachment written or deleted on another leaf
    /// than the winner (a conflict, a deleted branch) extends that leaf; a deletion without `rev` first
    /// looks for the attachment.
    func testAttachmentsOnAnyLeaf() async throws {
        let server = try await server()
        let docs: JSON = ["new_edits": false, "docs": [
            ["_id": "c", "_rev": "1-aaa", "v": 1], ["_id": "c", "_rev": "1-ccc", "v": 3],
            ["_id": "c", "_rev": "2-bbb", "_deleted": true, "_revisions": ["start": 2, "ids": ["bbb", "aaa"]]],
        ]]
        await XCTAssertEqualAsync(try await server.request("POST", "/db/_bulk_docs", json: docs).status, 201)
        let upload = try await server.request("PUT", "/db/d/a.bin", body: Data("x".utf8), contentType: "application/octet-stream")
        XCTAssertEqual(upload.status, 201)
        let branch: JSON = ["new_edits": false, "docs": [["_id": "d", "_rev": "1-zzz", "v": 9]]]
        await XCTAssertEqualAsync(try await server.request("POST", "/db/_bulk_docs", json: branch).status, 201)
        let loser = try XCTUnwrap(upload.json["rev"]?.stringValue)
        // `d`: two leaves, the upload's and a replicated one; the upload's takes another attachment, whichever wins.
        let conflicted = try await server.request("PUT", "/db/d/b.bin?rev=\(loser)", body: Data("y".utf8), contentType: "application/octet-stream")
        XCTAssertEqual(conflicted.status, 201, conflicted.text)
        let leaves = try await server.request("GET", "/db/d?open_revs=all")
        let withB = leaves.json.arrayValue?.compactMap { $0["ok"] }.first { $0["_attachments"]?["b.bin"] != nil }
        XCTAssertEqual(withB?["_rev"], conflicted.json["rev"])
        XCTAssertEqual(withB?["_attachments"]?["a.bin"]?["revpos"], 1)
        // On the deleted branch of `c`: a new revision that is still deleted.
        let onTombstone = try await server.request("PUT", "/db/c/a.bin?rev=2-bbb", body: Data("z".utf8), contentType: "application/octet-stream")
        XCTAssertEqual(onTombstone.status, 201, onTombstone.text)
        let c = try await server.request("GET", "/db/c?deleted_conflicts=true")
        XCTAssertEqual(c.json["_rev"], "1-ccc")
        XCTAssertEqual(c.json["_deleted_conflicts"], [onTombstone.json["rev"] ?? .null])
        // An older revision conflicts; without `rev`, a missing attachment is 404 before the conflict.
        await XCTAssertEqualAsync(try await server.request("PUT", "/db/c/x.bin?rev=1-aaa", body: Data("w".utf8),
                                                           contentType: "application/octet-stream").status, 409)
        await XCTAssertEqualAsync(try await server.request("DELETE", "/db/c/nope.bin").json,
                                  ["error": "not_found", "reason": "Document is missing attachment"])
    }
}
