import DocStore

/// A design document's `rewrites` rules (CouchDB's `_rewrite` with an array of rules), read and
/// applied as CouchDB 3.3 does: each rule `{"from", "to", "method"?, "query"?, "formats"?}` is tried in
/// order; the first whose method and `from` path match the request names the new path. `from` and
/// `to` are paths of segments, where `:name` binds one segment and `*` the rest; the request's query
/// parameters bind their names too (`key`, `startkey`, `start_key`, `endkey`, `end_key` and `keys`
/// as JSON). A rule's `query` values `":name"` (also inside an array) and `"*"` take the bound value,
/// converted by `formats` (`"int"`, `"bool"`); every binding the rule's query does not set is passed
/// on as a query parameter as well.
struct RewriteRules {
    /// A segment of a rule's `from` or `to`.
    enum Segment: Equatable {
        case literal(String)
        case variable(String)
        case rest
    }

    struct Rule {
        var method: String?
        var from: [Segment]
        var to: [Segment]
        var query: [(name: String, value: JSON)]
        var formats: [String: String]
    }

    let rules: [Rule]

    /// The query parameters whose values travel as JSON.
    static let jsonParameters: Set<String> = ["key", "startkey", "start_key", "endkey", "end_key", "keys"]

    /// Reads the rules of a design document.
    /// - Parameter secure: refuse a `to` that climbs more than two levels (`../../..`) — above the
    ///   database — as CouchDB's `chttpd/secure_rewrites` (on by default).
    /// - Throws: ``CouchError`` — CouchDB's 500 `insecure_rewrite_rule`, or `invalid_rewrite_target` for a
    ///   rule without `to`.
    init(_ rules: [JSON], secure: Bool) throws {
        self.rules = try rules.compactMap { rule in
            // CouchDB skips what is not an object.
            guard case .object(let members) = rule else { return nil }
            let method = members["method"]?.stringValue
            // Only `to` is checked for climbing: `from` matches the request's path.
            let from = try members["from"]?.stringValue.map { try RewriteRules.segments($0, secure: false) } ?? [.rest]
            guard case .string(let to)? = members["to"] else {
                throw CouchError(.internalServerError, "error", "invalid_rewrite_target")
            }
            var query: [(String, JSON)] = []
            if case .object(let object)? = members["query"] { query = Array(object) }
            var formats: [String: String] = [:]
            if case .object(let object)? = members["formats"] {
                for (name, format) in object { if let format = format.stringValue { formats[name] = format } }
            }
            return Rule(method: method, from: from, to: try RewriteRules.segments(to, secure: secure), query: query,
                        formats: formats)
        }
    }

    /// A rule's path as segments: empty ones dropped, `*` the rest, `:name` a variable.
    static func segments(_ path: String, secure: Bool) throws -> [Segment] {
        var segments: [Segment] = []
        var climbs = 0
        for part in path.split(separator: "/", omittingEmptySubsequences: true) {
            switch part {
            case "*":
                segments.append(.rest)
            case "..":
                climbs += 1
                if climbs > 2, secure {
                    throw CouchError(.internalServerError, "insecure_rewrite_rule", "too many ../.. segments")
                }
                segments.append(.literal(".."))
            case _ where part.hasPrefix(":"):
                segments.append(.variable(String(part.dropFirst())))
            default:
                segments.append(.literal(String(part)))
            }
        }
        return segments
    }

    /// The query parameters of a request as the rules bind them: in order, `key`-like ones parsed as JSON.
    /// - Throws: ``CouchError`` 400 when such a value is not JSON.
    static func bindings(ofQuery pairs: [(name: String, value: String)]) throws -> [(name: String, value: JSON)] {
        try pairs.map { pair in
            guard jsonParameters.contains(pair.name) else { return (pair.name, .string(pair.value)) }
            do {
                return (pair.name, try JSON(parsing: pair.value))
            } catch {
                throw CouchError.badRequest("invalid UTF-8 JSON")
            }
        }
    }

    /// The path (relative to the design document, segments percent-encoded, with its query string) the
    /// first matching rule makes of the request's path after `_rewrite`; `nil` when no rule matches.
    func rewrite(method: String, path: [String], query: [(name: String, value: JSON)]) -> String? {
        for rule in rules {
            if let ruleMethod = rule.method, ruleMethod != "*", ruleMethod != method { continue }
            guard let (remaining, pathBindings) = Self.match(rule.from, path) else { continue }
            let bindings = pathBindings + query
            let ruleQuery = rule.query.map { (name: $0.name, value: Self.substitute($0.value, bindings, rule.formats)) }
            let ruleNames = Set(ruleQuery.map(\.name))
            let all = bindings.filter { !ruleNames.contains($0.name) } + ruleQuery
            var parts: [String] = []
            target: for segment in rule.to {
                switch segment {
                case .literal(let text): parts.append(text)
                case .variable(let name): parts.append(all.first { $0.name == name }.map { Self.text($0.value) } ?? "undefined")
                case .rest:
                    parts += remaining
                    break target
                }
            }
            var result = parts.map(Self.quotePlus).joined(separator: "/")
            // CouchDB writes them in the reverse order it gathered them.
            let parameters = all.reversed().filter { $0.name != "*" }.map { binding in
                let value = Self.jsonParameters.contains(binding.name) ? ((try? binding.value.serializedString()) ?? "null")
                    : Self.text(binding.value)
                return Self.quotePlus(binding.name) + "=" + Self.quotePlus(value)
            }
            if !parameters.isEmpty { result += "?" + parameters.joined(separator: "&") }
            return result
        }
        return nil
    }

    /// The bindings of `from` against the request's segments, and the segments `*` took.
    static func match(_ from: [Segment], _ path: [String]) -> (remaining: [String], bindings: [(name: String, value: JSON)])? {
        var bindings: [(name: String, value: JSON)] = []
        var index = 0
        for (position, segment) in from.enumerated() {
            if segment == .rest, position == from.count - 1 { return (Array(path[index...]), bindings.reversed()) }
            guard index < path.count else { return nil }
            switch segment {
            case .variable(let name): bindings.append((name, .string(path[index])))
            // A `*` before the end binds one segment, by the name `*`.
            case .rest: bindings.append(("*", .string(path[index])))
            case .literal(let text) where text == path[index]: break
            default: return nil
            }
            index += 1
        }
        return index == path.count ? ([], bindings.reversed()) : nil
    }

    /// A rule's query value with `":name"` (at the top or as an element of an array) and `"*"` replaced
    /// by their bindings, formatted; objects and other values as they are.
    static func substitute(_ value: JSON, _ bindings: [(name: String, value: JSON)], _ formats: [String: String]) -> JSON {
        func variable(_ name: String, default fallback: JSON) -> JSON {
            let bound = bindings.first { $0.name == name }?.value ?? fallback
            return format(bound, formats[name])
        }
        switch value {
        case .string("*"): return variable("*", default: value)
        case .string(let text) where text.hasPrefix(":"): return variable(String(text.dropFirst()), default: value)
        case .array(let items):
            return .array(items.map { item in
                if case .string(let text) = item, text.hasPrefix(":") { return variable(String(text.dropFirst()), default: item) }
                return item
            })
        default: return value
        }
    }

    /// `value` as `format` says: `"int"` a whole number, `"bool"` `true`/`false` (any case); unchanged
    /// when it does not read as one.
    static func format(_ value: JSON, _ format: String?) -> JSON {
        guard let format, case .string(let text) = value else { return value }
        switch format {
        case "int": return Int(text).map(JSON.integer) ?? value
        case "bool":
            switch text.lowercased() {
            case "true": return .bool(true)
            case "false": return .bool(false)
            default: return value
            }
        default: return value
        }
    }

    /// A bound value as a path segment or a plain query value: a string as it is, an array of strings
    /// joined (as CouchDB writes one), anything else as JSON (where CouchDB fails with a 500).
    static func text(_ value: JSON) -> String {
        switch value {
        case .string(let text): return text
        case .array(let items) where items.allSatisfy({ $0.stringValue != nil }): return items.compactMap(\.stringValue).joined()
        default: return (try? value.serializedString()) ?? ""
        }
    }

    /// `text` encoded as a form value, as CouchDB's rewrites write paths and query strings.
    static func quotePlus(_ text: String) -> String { CouchRequest.percentEncoded(text, spaceAsPlus: true) }

    /// `path` with empty, `.` and `..` segments resolved (a `..` at the top stays), from the root.
    static func normalize(_ path: String) -> String {
        var segments: [Substring] = []
        for part in path.split(separator: "/", omittingEmptySubsequences: true) {
            switch part {
            case ".": continue
            case "..":
                if segments.isEmpty || segments.last == ".." { segments.append(part) } else { segments.removeLast() }
            default: segments.append(part)
            }
        }
        return "/" + segments.joined(separator: "/")
    }
}
