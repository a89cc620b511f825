import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// `/_utils/`: the web administration page (``ServerConfiguration/utilsPage``). Its files are the
/// package's `Sources/DocServer/Utils/`, embedded in the library at build time (no bundle to find at run
/// time, nothing fetched from elsewhere). They are public, as CouchDB serves Fauxton: the page signs in
/// with `_session` and then asks the API with the user's own rights, so it shows what that user may see.
extension DocServer {
    func addUtilsRoutes(to router: Router<DocServerRequestContext>) {
        guard configuration.utilsPage else { return }
        for path in ["/_utils", "/_utils/{file}"] {
            router.route(RouterPath(path)) { request, _ in
                guard request.method == .get || request.method == .head else { throw CouchError.only("GET,HEAD") }
                // As CouchDB: `/_utils` moves to `/_utils/`, so the page's relative links resolve below it.
                if request.segments.count == 1 && !request.endsWithSlash {
                    return Response(status: .movedPermanently, headers: [.location: "/_utils/", .contentLength: "0"])
                }
                let name = request.segments.count > 1 ? request.segments[1] : "index.html"
                guard let file = UtilsFile.all[name] else { throw CouchError.notFound() }
                return file.response(to: request)
            }
        }
    }
}

/// One file of the administration page, with its type and validator.
struct UtilsFile: Sendable {
    let bytes: [UInt8]
    let contentType: String
    let etag: String

    init(_ bytes: [UInt8], _ contentType: String) {
        self.bytes = bytes
        self.contentType = contentType
        etag = "\"" + SHA256.hash(data: bytes).prefix(12).map { String(format: "%02x", $0) }.joined() + "\""
    }

    /// The page's files by name (`PackageResources` is SwiftPM's code for `.embedInCode` resources).
    static let all: [String: UtilsFile] = [
        "index.html": UtilsFile(PackageResources.index_html, "text/html; charset=utf-8"),
        "utils.css": UtilsFile(PackageResources.utils_css, "text/css; charset=utf-8"),
        "utils.js": UtilsFile(PackageResources.utils_js, "text/javascript; charset=utf-8"),
        "icon.svg": UtilsFile(PackageResources.icon_svg, "image/svg+xml"),
    ]

    /// The page's own scripts and styles only, and requests to this server only: a document's HTML
    /// shown by the page cannot run script or reach elsewhere.
    static let contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
        + "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

    /// The file, or 304 when the browser's copy is current (`If-None-Match`); browsers revalidate on
    /// every load (`no-cache`), so a new server version is seen at once.
    func response(to request: CouchRequest) -> Response {
        var headers: HTTPFields = [
            .contentType: contentType, .eTag: etag, .cacheControl: "no-cache",
            .contentSecurityPolicy: Self.contentSecurityPolicy, HTTPField.Name("X-Content-Type-Options")!: "nosniff",
            HTTPField.Name("Referrer-Policy")!: "no-referrer",
        ]
        if let candidates = request.header(.ifNoneMatch),
           candidates.split(separator: ",").contains(where: { $0.trimmingCharacters(in: .whitespaces) == etag }) {
            return Response(status: .notModified, headers: headers)
        }
        headers[.contentLength] = String(bytes.count)
        let body = request.isHead ? ResponseBody() : ResponseBody(byteBuffer: ByteBuffer(bytes: bytes))
        return Response(status: .ok, headers: headers, body: body)
    }
}
