import CJavaScriptCore
import DocStore
import Foundation
import Logging

/// One JavaScriptCore context with CouchDB's query-server runtime (``JavaScriptRuntime``) loaded: the
/// functions of design documents compiled in it, cached, and called with JSON in and JSON out.
///
/// Not `Sendable`: a context belongs to the thread that made it (``JavaScriptEngine`` keeps one per
/// thread) and is only ever used there. Its context group is its own, so its watchdog
/// (``JavaScriptEngine/timeLimit``, ``JavaScriptEngine/memoryLimit``) stops only its own runaway
/// scripts.
final class JavaScriptContext {
    let group: JSContextGroupRef
    let context: JSGlobalContextRef
    /// Compiled functions and design-document objects, by ``cacheKey``; protected from collection.
    private var cache: [String: JSObjectRef] = [:]
    /// The runtime's entry points.
    private let entry: [String: JSObjectRef]
    /// Calls since the last garbage collection.
    private var callsSinceCollection = 0
    /// What the watchdog judges each call by; kept alive as long as the group that points at it.
    private let watch: CallWatch
    static let cacheLimit = 512

    /// A context whose calls may each take `timeLimit` seconds of CPU (0: no limit) and grow the
    /// process's resident memory by `memoryLimit` bytes (`nil`: no bound).
    init(timeLimit: Double, memoryLimit: Int? = nil) throws {
        group = JSContextGroupCreate()
        context = JSGlobalContextCreateInGroup(group, nil)
        watch = CallWatch(timeLimit: timeLimit, memoryLimit: memoryLimit)
        if watch.isActive {
            JSContextGroupSetExecutionTimeLimit(group, watch.tick, watchdogCallback, Unmanaged.passUnretained(watch).toOpaque())
        }
        let global = JSContextGetGlobalObject(context)!
        JavaScriptContext.installNativeLog(in: context, global: global)
        var exception: JSValueRef?
        let script = JSStringCreateWithUTF8CString(JavaScriptRuntime.source)
        defer { JSStringRelease(script) }
        JSEvaluateScript(context, script, nil, nil, 1, &exception)
        if let exception {
            let message = JavaScriptContext.describe(exception, in: context)
            JSGlobalContextRelease(context)
            JSContextGroupRelease(group)
            throw DocStoreError(.scriptFailure, "The JavaScript runtime did not load: \(message)")
        }
        var entry: [String: JSObjectRef] = [:]
        for name in JavaScriptRuntime.entryPoints {
            let key = JSStringCreateWithUTF8CString(name)
            defer { JSStringRelease(key) }
            let value = JSObjectGetProperty(context, global, key, nil)
            guard let value, let object = JSValueToObject(context, value, nil), JSObjectIsFunction(context, object) else {
                JSGlobalContextRelease(context)
                JSContextGroupRelease(group)
                throw DocStoreError(.scriptFailure, "The JavaScript runtime lacks \(name)")
            }
            JSValueProtect(context, object)
            entry[name] = object
        }
        self.entry = entry
    }

    deinit {
        for object in cache.values { JSValueUnprotect(context, object) }
        for object in entry.values { JSValueUnprotect(context, object) }
        JSGlobalContextRelease(context)
        JSContextGroupRelease(group)
    }

    // MARK: Values

    /// A JavaScript value parsed from JSON text (`undefined` for `nil`).
    func value(json: String?) throws -> JSValueRef {
        guard let json else { return JSValueMakeUndefined(context)! }
        let string = JSStringCreateWithUTF8CString(json)
        defer { JSStringRelease(string) }
        guard let value = JSValueMakeFromJSONString(context, string) else {
            throw DocStoreError(.scriptFailure, "JavaScriptCore could not read JSON")
        }
        return value
    }

    /// A JavaScript value parsed from JSON text in UTF-8 bytes.
    func value(jsonBytes bytes: [UInt8]) throws -> JSValueRef {
        let units = JavaScriptContext.utf16(bytes)
        guard let string = units.withUnsafeBufferPointer({ JSStringCreateWithCharacters($0.baseAddress, $0.count) }) else {
            throw DocStoreError(.scriptFailure, "JavaScriptCore could not make a string")
        }
        defer { JSStringRelease(string) }
        guard let value = JSValueMakeFromJSONString(context, string) else {
            throw DocStoreError(.scriptFailure, "JavaScriptCore could not read JSON")
        }
        return value
    }

    /// UTF-16 of valid UTF-8 (a stored body's bytes), decoded here: JavaScriptCore's own conversion in
    /// `JSStringCreateWithUTF8CString` goes byte by byte at a fraction of this speed, and the standard
    /// library's `transcode` (a closure call per unit) made `js_index_build` 15–20 % slower.
    static func utf16(_ bytes: [UInt8]) -> [UInt16] {
        // Each UTF-8 sequence gives at most as many UTF-16 units as it has bytes.
        [UInt16](unsafeUninitializedCapacity: bytes.count) { units, count in
            bytes.withUnsafeBufferPointer { source in
                var written = 0
                var index = 0
                let end = source.count
                while index < end {
                    let byte = source[index]
                    if byte < 0x80 {
                        units[written] = UInt16(byte)
                        written += 1
                        index += 1
                        continue
                    }
                    let length = byte >= 0xF0 ? 4 : byte >= 0xE0 ? 3 : 2
                    var scalar = UInt32(byte) & (length == 2 ? 0x1F : length == 3 ? 0x0F : 0x07)
                    for offset in 1..<length where index + offset < end {
                        scalar = scalar << 6 | UInt32(source[index + offset] & 0x3F)
                    }
                    if scalar >= 0x1_0000 {
                        let high = scalar - 0x1_0000
                        units[written] = UInt16(0xD800 + (high >> 10))
                        units[written + 1] = UInt16(0xDC00 + (high & 0x3FF))
                        written += 2
                    } else {
                        units[written] = UInt16(scalar)
                        written += 1
                    }
                    index += length
                }
                count = written
            }
        }
    }

    /// A JavaScript value for a JSON value.
    func value(_ json: JSON) throws -> JSValueRef {
        try value(json: try json.serializedString())
    }

    /// A JavaScript string.
    func string(_ text: String) -> JSValueRef {
        let string = JSStringCreateWithUTF8CString(text)
        defer { JSStringRelease(string) }
        return JSValueMakeString(context, string)!
    }

    /// The text of a JavaScript string value, or `nil` when it is not a string.
    func text(of value: JSValueRef) -> String? {
        guard JSValueIsString(context, value), let string = JSValueToStringCopy(context, value, nil) else { return nil }
        defer { JSStringRelease(string) }
        return JavaScriptContext.swiftString(string)
    }

    /// A JavaScript value as a ``JSON`` value (`undefined` becomes `null`).
    func json(of value: JSValueRef) throws -> JSON {
        var exception: JSValueRef?
        guard let string = JSValueCreateJSONString(context, value, 0, &exception) else {
            if let exception { throw failure(exception) }
            return .null
        }
        defer { JSStringRelease(string) }
        // UTF-8 straight from JavaScriptCore (its JSON escapes lone surrogates), parsed as bytes.
        let capacity = JSStringGetMaximumUTF8CStringSize(string)
        let bytes = [UInt8](unsafeUninitializedCapacity: capacity) { buffer, count in
            let written = buffer.baseAddress.map { base in
                base.withMemoryRebound(to: CChar.self, capacity: capacity) { JSStringGetUTF8CString(string, $0, capacity) }
            } ?? 0
            count = max(written - 1, 0)
        }
        return try JSON(parsing: bytes)
    }

    static func swiftString(_ string: JSStringRef) -> String {
        let length = JSStringGetLength(string)
        guard length > 0, let characters = JSStringGetCharactersPtr(string) else { return "" }
        return String(decoding: UnsafeBufferPointer(start: characters, count: length), as: UTF16.self)
    }

    // MARK: Calls

    /// Calls runtime entry point `name` with `arguments`; a JavaScript exception becomes an error
    /// (``failure(_:)``).
    func call(_ name: String, _ arguments: [JSValueRef?]) throws -> JSValueRef {
        guard let function = entry[name] else { preconditionFailure("no runtime entry point \(name)") }
        watch.reset()
        var exception: JSValueRef?
        let result = arguments.withUnsafeBufferPointer { buffer in
            JSObjectCallAsFunction(context, function, nil, buffer.count, buffer.baseAddress, &exception)
        }
        collectGarbageNowAndThen()
        if let exception { throw failure(exception) }
        return result ?? JSValueMakeUndefined(context)!
    }

    /// A cached object (a compiled function or a design document), made by `make` the first time.
    func cached(_ key: String, _ make: () throws -> JSValueRef) throws -> JSObjectRef {
        if let object = cache[key] { return object }
        let value = try make()
        guard let object = JSValueToObject(context, value, nil) else {
            throw DocStoreError(.scriptFailure, "not an object: \(key)")
        }
        if cache.count >= JavaScriptContext.cacheLimit {
            for object in cache.values { JSValueUnprotect(context, object) }
            cache.removeAll()
        }
        JSValueProtect(context, object)
        cache[key] = object
        return object
    }

    /// Collects garbage every few thousand calls, bounding the memory a long view build holds.
    private func collectGarbageNowAndThen() {
        callsSinceCollection += 1
        if callsSinceCollection >= 20_000 {
            callsSinceCollection = 0
            JSGarbageCollect(context)
        }
    }

    // MARK: Errors

    /// The error for a JavaScript exception: CouchDB's `forbidden`/`unauthorized` objects, the
    /// runtime's `["error", name, reason]` triples, the watchdog's termination, or a thrown error.
    func failure(_ exception: JSValueRef) -> DocStoreError {
        let message = JavaScriptContext.describe(exception, in: context)
        if message.contains("JavaScript execution terminated") {
            if watch.stopped == .memory, let limit = watch.memoryLimit {
                return DocStoreError(.scriptTimeout, "The JavaScript function used more than \(limit / (1024 * 1024)) MB of memory and was stopped")
            }
            return DocStoreError(.scriptTimeout, "The JavaScript function ran over its time limit and was stopped")
        }
        if JSValueIsObject(context, exception) {
            if let json = try? self.json(of: exception) {
                switch json {
                case .object(let members):
                    if let reason = members["forbidden"] {
                        return DocStoreError(.forbidden, reason.stringValue ?? reason.description)
                    }
                    if let reason = members["unauthorized"] {
                        return DocStoreError(.unauthorized, reason.stringValue ?? reason.description)
                    }
                    if let error = members["error"]?.stringValue, let reason = members["reason"] {
                        // `throw({error: …, reason: …})`: CouchDB answers with that name.
                        var failure = DocStoreError(error == "not_found" ? .notFound : .scriptFailure, reason.stringValue ?? reason.description)
                        failure.errorName = error
                        return failure
                    }
                    if members.count == 1, let (_, reason) = members.first(where: { _ in true }) {
                        return DocStoreError(.unknownError, reason.stringValue ?? reason.description)
                    }
                case .array(let items) where items.count == 3 && items[0] == "error":
                    let name = items[1].stringValue ?? "error"
                    let reason = items[2].stringValue ?? items[2].description
                    switch name {
                    case "compilation_error": return DocStoreError(.compilationError, reason)
                    case "invalid_require_path": return DocStoreError(.invalidRequirePath, reason)
                    case "not_found": return DocStoreError(.notFound, reason)
                    case "render_error": return DocStoreError(.renderError, reason)
                    case "not_acceptable": return DocStoreError(.notAcceptable, reason)
                    default:
                        var failure = DocStoreError(.scriptFailure, reason)
                        failure.errorName = name
                        return failure
                    }
                default:
                    break
                }
            }
        }
        if JSValueIsString(context, exception), let text = text(of: exception) {
            return DocStoreError(.unknownError, text)
        }
        return DocStoreError(.scriptFailure, message)
    }

    /// A thrown value as text: an error's name, message and line, or the value's JSON.
    static func describe(_ value: JSValueRef, in context: JSContextRef) -> String {
        if let object = JSValueToObject(context, value, nil) {
            func property(_ name: String) -> String? {
                let key = JSStringCreateWithUTF8CString(name)
                defer { JSStringRelease(key) }
                guard let value = JSObjectGetProperty(context, object, key, nil), !JSValueIsUndefined(context, value),
                      let string = JSValueToStringCopy(context, value, nil) else { return nil }
                defer { JSStringRelease(string) }
                return swiftString(string)
            }
            if let message = property("message") {
                let name = property("name") ?? "Error"
                return "\(name): \(message)" + (property("line").map { " (line \($0))" } ?? "")
            }
            if let string = JSValueCreateJSONString(context, value, 0, nil) {
                defer { JSStringRelease(string) }
                return swiftString(string)
            }
        }
        guard let string = JSValueToStringCopy(context, value, nil) else { return "unknown JavaScript error" }
        defer { JSStringRelease(string) }
        return swiftString(string)
    }

    // MARK: log()

    static let logger = Logger(label: "docstore.javascript")

    /// `__log(message)`: CouchDB's `log()`, to the `docstore.javascript` logger.
    private static func installNativeLog(in context: JSContextRef, global: JSObjectRef) {
        let name = JSStringCreateWithUTF8CString("__log")
        defer { JSStringRelease(name) }
        let function = JSObjectMakeFunctionWithCallback(context, name) { context, _, _, count, arguments, _ in
            if let context, count > 0, let arguments, let value = arguments[0],
               let string = JSValueToStringCopy(context, value, nil) {
                defer { JSStringRelease(string) }
                JavaScriptContext.logger.info("\(JavaScriptContext.swiftString(string))")
            }
            return JSValueMakeUndefined(context)
        }
        JSObjectSetProperty(context, global, name, function, JSPropertyAttributes(kJSPropertyAttributeDontEnum), nil)
    }
}
