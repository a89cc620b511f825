/// The JavaScript every context loads before any design document: CouchDB's query-server globals
/// (`emit`, `log`, `sum`, `isArray`, `toJSON`, `require`, `send`, `getRow`, `start`, `provides`,
/// `registerType`) and the entry points Swift calls (`__compile`, `__map`, …), written here after
/// the behaviour described in CouchDB's query-server documentation and observed on CouchDB 3.3.
///
/// Errors the runtime raises itself are CouchDB's triples `["error", name, reason]`, which
/// ``JavaScriptContext/failure(_:)`` turns into typed errors.
enum JavaScriptRuntime {
    /// The functions Swift calls, looked up once per context.
    static let entryPoints = ["__compile", "__map", "__mapBatch", "__reduce", "__filter", "__filterView", "__validate",
                              "__show", "__list", "__update", "__rewrite"]

    static let source = #"""
    "use strict";
    var __emits = null;
    var __output = null;

    function log(message) {
      __log(typeof message === "string" ? message : JSON.stringify(message));
    }
    function emit(key, value) {
      if (__emits === null) { throw ["error", "invalid_emit", "emit() is only available in map functions"]; }
      __emits.push([key === undefined ? null : key, value === undefined ? null : value]);
    }
    function sum(values) {
      var total = 0;
      for (var i = 0; i < values.length; i++) { total += values[i]; }
      return total;
    }
    function isArray(value) { return Array.isArray(value); }
    function toJSON(value) { return JSON.stringify(value); }

    // Documents are frozen all the way down before a function sees them, as CouchDB seals them:
    // a function cannot change what the next function (or the next view) sees.
    // Values from JSON have no cycles: each object is frozen once, and only objects are recursed into.
    function __freeze(value) {
      if (value === null || typeof value !== "object") { return value; }
      var member;
      if (Array.isArray(value)) {
        for (var i = 0; i < value.length; i++) {
          member = value[i];
          if (member !== null && typeof member === "object") { __freeze(member); }
        }
      } else {
        for (var key in value) {
          member = value[key];
          if (member !== null && typeof member === "object") { __freeze(member); }
        }
      }
      // Frozen after its members are read: reading a frozen object's members with for-in made the
      // whole of js_index_build take about a fifth more CPU (four alternating pairs, 2.69 s against 2.23 s).
      Object.freeze(value);
      return value;
    }

    // CommonJS modules of a design document: `require("views/lib/x")`, relative paths with ./ and ../.
    function __resolve(names, module, root) {
      if (names.length === 0) {
        if (typeof module.current !== "string") {
          throw ["error", "invalid_require_path", "Must require a JavaScript string, not: " + (typeof module.current)];
        }
        return { current: module.current, parent: module.parent, id: module.id, exports: {} };
      }
      var name = names.shift();
      if (name === "..") {
        if (!(module.parent && module.parent.parent)) {
          throw ["error", "invalid_require_path", "Object has no parent " + JSON.stringify(module.current)];
        }
        return __resolve(names, { id: module.id.slice(0, module.id.lastIndexOf("/")),
                                  parent: module.parent.parent, current: module.parent.current });
      }
      if (name === ".") {
        if (!module.parent) {
          throw ["error", "invalid_require_path", "Object has no parent " + JSON.stringify(module.current)];
        }
        return __resolve(names, { parent: module.parent, current: module.current, id: module.id });
      }
      if (root) { module = { current: root }; }
      if (module.current === null || typeof module.current !== "object" || module.current[name] === undefined) {
        throw ["error", "invalid_require_path", "Object has no property \"" + name + "\". " + JSON.stringify(module.current)];
      }
      return __resolve(names, { current: module.current[name], parent: module, id: module.id ? module.id + "/" + name : name });
    }
    function __makeRequire(root) {
      var cache = {};
      function require(name, requiring) {
        var module = __resolve(String(name).split("/"), requiring ? (requiring.parent || {}) : {}, root);
        if (!Object.prototype.hasOwnProperty.call(cache, module.id)) {
          var body;
          try {
            body = new Function("module", "exports", "require", module.current + "\n");
          } catch (e) {
            throw ["error", "compilation_error", "Module require('" + name + "') raised error " + String(e)];
          }
          cache[module.id] = module.exports;
          body.call(module.exports, module, module.exports, function (inner) { return require(inner, module); });
          cache[module.id] = module.exports;
        }
        return cache[module.id];
      }
      return function (name) { return require(name, null); };
    }

    // A function from its source, as CouchDB compiles it: the source must evaluate to a function.
    // Map functions may require only from views.lib; the others from the whole design document.
    function __compile(source, ddoc, forMap) {
      if (typeof source !== "string" || source.length === 0) {
        throw ["error", "not_found", "missing function"];
      }
      var root = null;
      if (ddoc) {
        root = forMap ? { views: { lib: (ddoc.views && ddoc.views.lib) || {} } } : ddoc;
      }
      var text = source.replace(/[\s;]+$/, "");
      var fn;
      try {
        fn = new Function("require", "return (" + text + "\n);")(root ? __makeRequire(root) : undefined);
      } catch (e) {
        throw ["error", "compilation_error", String(e) + " (" + source + ")"];
      }
      if (typeof fn !== "function") {
        throw ["error", "compilation_error", "Expression does not eval to a function. (" + source + ")"];
      }
      return fn;
    }

    function __map(fn, doc) {
      __freeze(doc);
      __emits = [];
      try {
        fn(doc);
        return __emits;
      } finally {
        __emits = null;
      }
    }
    // CouchDB's reduce_limit: an output over 4 KiB that does not shrink to less than half its input
    // is an error (the input measured as the JSON of the keys and values).
    // Many documents in one call: each one's rows, or {error} for one whose map threw.
    function __mapBatch(fn, docs) {
      var out = new Array(docs.length);
      for (var i = 0; i < docs.length; i++) {
        try {
          out[i] = __map(fn, docs[i]);
        } catch (e) {
          var text;
          if (e && e.name && e.message !== undefined) { text = e.name + ": " + e.message; }
          else { try { text = JSON.stringify(e); } catch (_) { text = String(e); } }
          out[i] = { error: text === undefined ? String(e) : text };
        }
      }
      return out;
    }
    function __reduce(fn, keys, values, rereduce) {
      var result = fn(keys, values, rereduce);
      if (result === undefined) { result = null; }
      var output = JSON.stringify(result);
      if (output !== undefined && output.length > 4096) {
        var input = JSON.stringify([keys, values]).length;
        if (output.length * 2 > input) {
          throw ["error", "reduce_overflow_error",
                 "Reduce output must shrink more rapidly: input size: " + input + " output size: " + output.length];
        }
      }
      return result;
    }
    function __filter(fn, ddoc, doc, req) {
      __freeze(doc);
      return fn.call(ddoc, doc, req) ? true : false;
    }
    function __filterView(fn, doc) {
      return __map(fn, doc).length > 0;
    }
    function __validate(fn, ddoc, newDoc, oldDoc, userCtx, secObj) {
      __freeze(newDoc);
      __freeze(oldDoc);
      fn.call(ddoc, newDoc, oldDoc, userCtx, secObj);
      return true;
    }

    // Rendering: send/start/getRow and the MIME negotiation of provides/registerType.
    var __render = null;
    function __resetRender(rows) {
      __render = { chunks: [], start: {}, rows: rows || [], next: 0, gotRow: false, provides: [], providesUsed: false,
                   contentType: null };
    }
    function start(response) { __render.start = response || {}; }
    function send(chunk) { __render.chunks.push(String(chunk)); }
    function getRow() {
      __render.gotRow = true;
      if (__render.next < __render.rows.length) { return __render.rows[__render.next++]; }
      return null;
    }
    var __mimesByKey = {};
    var __keysByMime = {};
    function registerType(key) {
      var mimes = Array.prototype.slice.call(arguments, 1);
      __mimesByKey[key] = mimes;
      mimes.forEach(function (mime) { __keysByMime[mime] = key; });
    }
    registerType("all", "*/*");
    registerType("text", "text/plain; charset=utf-8", "txt");
    registerType("html", "text/html; charset=utf-8");
    registerType("xhtml", "application/xhtml+xml", "xhtml");
    registerType("xml", "application/xml", "text/xml", "application/x-xml");
    registerType("js", "text/javascript", "application/javascript", "application/x-javascript");
    registerType("css", "text/css");
    registerType("ics", "text/calendar");
    registerType("csv", "text/csv");
    registerType("rss", "application/rss+xml");
    registerType("atom", "application/atom+xml");
    registerType("yaml", "application/x-yaml", "text/yaml");
    registerType("multipart_form", "multipart/form-data");
    registerType("url_encoded_form", "application/x-www-form-urlencoded");
    registerType("json", "application/json", "text/x-json");
    function provides(type, fn) {
      __render.providesUsed = true;
      __render.provides.push([type, fn]);
    }

    // The best of `supported` for an Accept header: the media range that fits best (type and
    // subtype matches, then parameters), weighted by its q; ties go to the later supported type.
    function __parseMediaRange(range) {
      var parts = range.split(";");
      var params = {};
      for (var i = 1; i < parts.length; i++) {
        var pair = parts[i].split("=");
        if (pair.length === 2) { params[pair[0].trim()] = pair[1].trim(); }
      }
      var full = parts[0].trim();
      if (full === "*") { full = "*/*"; }
      var types = full.split("/");
      var q = parseFloat(params.q);
      if (!("q" in params) || isNaN(q) || q < 0 || q > 1) { q = 1; }
      params.q = q;
      return { type: types[0], subtype: types[1] || "", params: params };
    }
    function __fitness(mime, ranges) {
      var target = __parseMediaRange(mime);
      var best = -1, bestQ = 0;
      ranges.forEach(function (range) {
        if ((range.type === target.type || range.type === "*" || target.type === "*") &&
            (range.subtype === target.subtype || range.subtype === "*" || target.subtype === "*")) {
          var fit = (range.type === target.type ? 100 : 0) + (range.subtype === target.subtype ? 10 : 0);
          for (var name in target.params) {
            if (name !== "q" && range.params[name] === target.params[name]) { fit += 1; }
          }
          if (fit > best) { best = fit; bestQ = range.params.q; }
        }
      });
      return [best, bestQ];
    }
    function __bestMatch(supported, header) {
      var ranges = header.split(",").map(__parseMediaRange);
      var winner = null, winnerFit = [-1, 0];
      supported.forEach(function (mime) {
        var fit = __fitness(mime, ranges);
        if (fit[1] > 0 && (fit[1] > winnerFit[1] || (fit[1] === winnerFit[1] && fit[0] >= winnerFit[0]))) {
          winner = mime;
          winnerFit = fit;
        }
      });
      return winner;
    }
    function __runProvides(req, ddoc) {
      var provided = __render.provides;
      var bestKey = null, accept = req.headers && req.headers["Accept"];
      if (req.query && req.query.format) {
        bestKey = req.query.format;
        __render.contentType = (__mimesByKey[bestKey] || [])[0] || null;
      } else if (accept) {
        var supported = [];
        provided.slice().reverse().forEach(function (entry) {
          if (__mimesByKey[entry[0]]) { supported = supported.concat(__mimesByKey[entry[0]]); }
        });
        __render.contentType = __bestMatch(supported, accept);
        bestKey = __keysByMime[__render.contentType];
      } else if (provided.length > 0) {
        bestKey = provided[0][0];
        __render.contentType = __mimesByKey[bestKey][0];
      }
      for (var i = 0; i < provided.length; i++) {
        if (provided[i][0] === bestKey) { return provided[i][1].call(ddoc); }
      }
      var types = provided.map(function (entry) { return (__mimesByKey[entry[0]] || []).join(", ") || entry[0]; });
      throw ["error", "not_acceptable", "Content-Type " + (accept || bestKey) + " not supported, try one of: " + types.join(", ")];
    }
    function __wrap(response) {
      return typeof response === "string" ? { body: response } : response;
    }
    function __renderError(e) {
      if ((e && e.error && e.reason) || (Array.isArray(e) && e[0] === "error")) { throw e; }
      var message = "function raised error: " + String(e) + " \nstacktrace: " + (e && e.stack);
      log(message);
      throw ["error", "render_error", message];
    }

    // A show: [response] where response is {code, headers, body | json | base64}.
    function __show(fn, ddoc, doc, req, docPath) {
      __resetRender();
      try {
        __freeze(doc);
        var response = __wrap(fn.call(ddoc, doc, req) || {});
        if (__render.chunks.length > 0) {
          response.headers = response.headers || {};
          for (var name in __render.start) { response.headers[name] = __render.start[name]; }
          response.body = __render.chunks.join("") + (response.body || "");
          __render.chunks = [];
        }
        if (__render.providesUsed) {
          var provided = __wrap(__runProvides(req, ddoc) || {});
          response.body = (response.body || "") + __render.chunks.join("") + (provided.body || "");
          if (__render.contentType) {
            response.headers = response.headers || {};
            if (!response.headers["Content-Type"]) { response.headers["Content-Type"] = __render.contentType; }
          }
        }
        var kind = typeof response;
        if (response === null || (kind !== "object" && kind !== "string")) {
          throw ["error", "render_error", "undefined response from show function"];
        }
        return response;
      } catch (e) {
        if (doc === null && docPath) { throw ["error", "not_found", "document not found"]; }
        __renderError(e);
      }
    }

    // A list: {start, body} — the response start() gave, and every chunk sent, in order.
    function __list(fn, ddoc, head, req, rows) {
      __resetRender(rows);
      try {
        var tail = fn.call(ddoc, head, req);
        if (__render.providesUsed) { tail = __runProvides(req, ddoc); }
        if (tail !== undefined && tail !== null) { __render.chunks.push(String(tail)); }
        var startResponse = __render.start || {};
        if (__render.contentType) {
          startResponse.headers = startResponse.headers || {};
          if (!startResponse.headers["Content-Type"]) { startResponse.headers["Content-Type"] = __render.contentType; }
        }
        return { start: startResponse, body: __render.chunks.join("") };
      } catch (e) {
        __renderError(e);
      }
    }

    // An update handler: [doc or null, response].
    function __update(fn, ddoc, doc, req) {
      try {
        if (req.method === "GET") { throw ["error", "method_not_allowed", "Update functions do not allow GET"]; }
        var result = fn.call(ddoc, doc, req);
        if (!Array.isArray(result)) { throw ["error", "render_error", "update function must return [doc, response]"]; }
        var response = result[1];
        var kind = typeof response;
        if (response === null || (kind !== "object" && kind !== "string")) {
          log("Warning: invalid update function response: " + JSON.stringify(response));
          response = {};
        }
        return [result[0] === undefined ? null : result[0], __wrap(response)];
      } catch (e) {
        __renderError(e);
      }
    }

    // A rewrite function (a design document's `rewrites` as a string): what the request becomes —
    // {path, query, method, headers, body} or {code, headers, body} — or null when it names nothing.
    // A plain string is a path, for the request's own method.
    function __rewrite(fn, ddoc, req) {
      var result;
      try {
        result = fn.call(ddoc, req);
      } catch (e) {
        if ((e && e.error && e.reason) || (Array.isArray(e) && e[0] === "error")) { throw e; }
        var message = "function raised error: " + String(e) + " \nstacktrace: " + (e && e.stack);
        log(message);
        throw ["error", "rewrite_error", message];
      }
      if (!result) { return null; }
      if (typeof result === "string") { return { path: result, method: req.method }; }
      return result;
    }

    // As CouchDB's sandbox: functions cannot make code from strings through a function's constructor
    // or eval (the runtime itself compiles with the Function it keeps).
    (function () {
      function refuse() { throw new EvalError("Code generation from strings is not allowed in design document functions"); }
      Object.defineProperty(Function.prototype, "constructor", { value: refuse, writable: false, configurable: false, enumerable: false });
      Object.defineProperty(globalThis, "eval", { value: refuse, writable: false, configurable: false, enumerable: false });
    })();
    """#
}
