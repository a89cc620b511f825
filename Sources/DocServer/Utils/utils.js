// DocStore's web administration page. Plain JavaScript, no framework: it asks this server's CouchDB API
// with the signed-in user's own session, so it shows exactly what that user may see (channels and
// _security included). Everything from the server is written with textContent, never as HTML.
"use strict";

(() => {
  const main = document.getElementById("main");
  const status = document.getElementById("status");
  const enc = encodeURIComponent;
  const session = { name: null, roles: [], admin: false };
  let timers = [];         // polling of the page on screen, stopped when the page changes
  let renderCount = 0;     // a page's asynchronous work stops drawing once another page is shown
  let firstRender = true;

  // MARK: DOM

  /// An element: h("a", {href: "#/", class: "x", onclick: f}, "text", child, …). Strings become text.
  function h(tag, attributes, ...children) {
    const element = document.createElement(tag);
    for (const [name, value] of Object.entries(attributes || {})) {
      if (value === undefined || value === null || value === false) continue;
      if (name.startsWith("on")) element.addEventListener(name.slice(2), value);
      else if (name === "value") element.value = value;
      else if (name === "checked") element.checked = element.defaultChecked = !!value;
      else element.setAttribute(name, value === true ? "" : String(value));
    }
    append(element, children);
    return element;
  }

  function append(element, children) {
    for (const child of children.flat(Infinity)) {
      if (child === undefined || child === null || child === false) continue;
      element.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return element;
  }

  /// Replaces an element's children (null, false and nested arrays allowed, as for h()).
  function fill(element, ...children) {
    element.replaceChildren();
    return append(element, children);
  }

  function field(label, input, extra) {
    const id = input.id || (input.id = "f-" + Math.random().toString(36).slice(2, 9));
    const check = input.type === "checkbox";
    return h("div", { class: check ? "field check" : "field" },
      check ? [input, h("label", { for: id }, label)] : [h("label", { for: id }, label), input], extra);
  }

  function table(headings, rows, caption) {
    return h("div", { class: "scroll" }, h("table", {},
      caption ? h("caption", { class: "muted" }, caption) : null,
      h("thead", {}, h("tr", {}, headings.map((title) => h("th", { scope: "col", class: headingClass(title) }, title)))),
      h("tbody", {}, rows)));
  }

  /// Figures are right-aligned; the columns a phone can do without are hidden there.
  function headingClass(title) {
    return [/^(Documents|Deleted|Size|Written|Read|Pending|Errors|Score|Length)$/.test(title) ? "num" : null,
      /^(Deleted|Digest|Revision|Read|Started|Updated)$/.test(title) ? "narrow-hidden" : null].filter(Boolean).join(" ") || null;
  }

  const json = (value, indent) => JSON.stringify(value, null, indent);
  const short = (text, length) => text.length > length ? text.slice(0, length - 1) + "…" : text;
  const code = (text) => h("code", {}, text);

  function bytes(count) {
    if (typeof count !== "number") return "—";
    const units = ["B", "kB", "MB", "GB", "TB"];
    let value = count, unit = 0;
    while (value >= 1000 && unit < units.length - 1) { value /= 1000; unit += 1; }
    return (unit === 0 ? value : value.toFixed(1)) + " " + units[unit];
  }

  function time(seconds) {
    if (!seconds) return "—";
    const date = new Date(typeof seconds === "number" ? seconds * 1000 : seconds);
    return isNaN(date) ? String(seconds) : date.toLocaleString();
  }

  function say(text, kind) {
    status.textContent = text || "";
    status.className = "status" + (kind ? " " + kind : "");
  }

  /// The page's heading and crumbs; moves focus there for keyboard and screen reader users.
  function page(title, crumbs, ...content) {
    document.title = title + " · DocStore";
    main.replaceChildren();
    append(main, [crumbs ? h("p", { class: "crumbs" }, crumbs.map((crumb, index) => [index ? " / " : "", crumb])) : null,
      h("h1", {}, title), content]);
    if (!firstRender) main.focus();
    firstRender = false;
  }

  // MARK: The API

  class ApiError extends Error {
    constructor(status, body) {
      super(body && body.reason ? body.reason : "HTTP " + status);
      this.status = status;
      this.error = body && body.error ? body.error : "error";
    }
    toString() { return this.status + " " + this.error + ": " + this.message; }
  }

  /// A request to this server: JSON in and out (or a Blob/File body with its type); errors are ApiError.
  /// A 401 once the session has ended sends the user to the sign-in form.
  async function api(method, path, body, options) {
    const headers = { Accept: "application/json" };
    let payload;
    if (body instanceof Blob) {
      payload = body;
      headers["Content-Type"] = body.type || "application/octet-stream";
    } else if (body !== undefined) {
      payload = JSON.stringify(body);
      headers["Content-Type"] = "application/json";
    }
    const response = await fetch(path, { method, headers, body: payload, credentials: "same-origin" });
    const text = await response.text();
    let value = null;
    try { value = text ? JSON.parse(text) : null; } catch { value = { reason: text }; }
    if (!response.ok) {
      // 401 is also CouchDB's answer to a signed-in user asking for an administrator's endpoint: the
      // session has ended only when /_session says so.
      if (response.status === 401 && !(options && options.quiet401) && !await stillSignedIn()) {
        session.name = null;
        session.admin = false;
        sessionEnded();
      }
      throw new ApiError(response.status, value);
    }
    return value;
  }

  async function stillSignedIn() {
    try {
      const answer = await (await fetch("/_session", { credentials: "same-origin" })).json();
      return !!(answer.userCtx && (answer.userCtx.name !== null || (answer.userCtx.roles || []).includes("_admin")));
    } catch {
      return false;
    }
  }

  function databasePath(db) { return "/" + enc(db); }
  function documentPath(db, id) {
    for (const prefix of ["_design/", "_local/"]) {
      if (id.startsWith(prefix)) return databasePath(db) + "/" + prefix + enc(id.slice(prefix.length));
    }
    return databasePath(db) + "/" + enc(id);
  }
  function query(parameters) {
    const pairs = Object.entries(parameters).filter(([, value]) => value !== undefined && value !== null && value !== "");
    return pairs.length ? "?" + pairs.map(([name, value]) => enc(name) + "=" + enc(value)).join("&") : "";
  }
  function link(...parts) { return "#/" + parts.map(enc).join("/"); }

  /// Runs `work`, reporting its error in the status line (and returning undefined).
  async function attempt(work, success) {
    try {
      const result = await work();
      if (success) say(typeof success === "function" ? success(result) : success, "ok");
      return result;
    } catch (error) {
      if (!(error instanceof ApiError && error.status === 401)) say(String(error), "error");
      return undefined;
    }
  }

  function failure(error) {
    return h("p", { class: "error", role: "alert" }, String(error));
  }

  // MARK: Confirmation

  /// Asks before something that cannot be undone; `word`, when given, must be typed (a database's name).
  function confirmAction(title, text, word, action) {
    const dialog = document.getElementById("confirm");
    const input = document.getElementById("confirm-input");
    const ok = document.getElementById("confirm-ok");
    document.getElementById("confirm-title").textContent = title;
    document.getElementById("confirm-text").textContent = text;
    document.getElementById("confirm-typed").hidden = !word;
    document.getElementById("confirm-word").textContent = word || "";
    ok.textContent = action || "Delete";
    input.value = "";
    ok.disabled = !!word;
    input.oninput = () => { ok.disabled = input.value !== word; };
    return new Promise((resolve) => {
      dialog.onclose = () => resolve(dialog.returnValue === "ok" && (!word || input.value === word));
      dialog.returnValue = "";
      dialog.showModal();
      (word ? input : ok).focus();
    });
  }

  // MARK: Session

  async function loadSession() {
    const answer = await api("GET", "/_session", undefined, { quiet401: true });
    const context = answer.userCtx || {};
    session.name = context.name;
    session.roles = context.roles || [];
    session.admin = session.roles.includes("_admin");
    const signedIn = session.name !== null || session.admin;
    document.getElementById("sections").hidden = !signedIn;
    document.getElementById("who").hidden = !signedIn;
    // Without a name, an administrator is everyone (`--allow-anonymous`): there is nobody to sign out.
    document.getElementById("user-name").textContent = session.name ? "Signed in as " + session.name + (session.admin ? " (administrator)" : "") : "Open to everyone, as administrator";
    document.getElementById("sign-out").hidden = session.name === null;
    return signedIn;
  }

  function sessionEnded() {
    document.getElementById("sections").hidden = true;
    document.getElementById("who").hidden = true;
    if (!location.hash.startsWith("#/signin")) {
      sessionStorage.setItem("docstore-after-signin", location.hash);
      location.hash = "#/signin";
    }
  }

  function signInPage() {
    const name = h("input", { id: "signin-name", name: "name", autocomplete: "username", required: true, autocapitalize: "none" });
    const password = h("input", { id: "signin-password", name: "password", type: "password", autocomplete: "current-password", required: true });
    const message = h("p", { class: "error", role: "alert" });
    const form = h("form", { class: "panel signin", id: "signin-form", onsubmit: async (event) => {
      event.preventDefault();
      message.textContent = "";
      try {
        await api("POST", "/_session", { name: name.value, password: password.value }, { quiet401: true });
        await loadSession();
        say("");
        const next = sessionStorage.getItem("docstore-after-signin");
        sessionStorage.removeItem("docstore-after-signin");
        location.hash = next && !next.startsWith("#/signin") ? next : "#/";
      } catch (error) {
        message.textContent = error.status === 401 ? "Name or password is incorrect." : String(error);
        password.select();
      }
    } },
    h("h2", {}, "Sign in"),
    h("p", { class: "muted" }, "With a user of this server (its administrator, or a user of the _users database)."),
    field("Name", name), field("Password", password), message,
    h("div", { class: "actions" }, h("button", { type: "submit", id: "signin-submit" }, "Sign in")));
    page("DocStore", null, form);
    name.focus();
  }

  document.getElementById("sign-out").addEventListener("click", async () => {
    await attempt(() => api("DELETE", "/_session"));
    session.name = null;
    session.admin = false;
    sessionEnded();
  });

  // MARK: Databases

  let databaseSkip = 0;     // the databases page shows 50 at a time
  const databasesShown = 50;

  async function databasesPage(token) {
    const list = h("div", {}, h("p", { class: "muted" }, "Loading databases…"));
    let create = null;
    if (session.admin) {
      const name = h("input", { id: "new-database", name: "database", required: true, autocapitalize: "none", spellcheck: "false",
        pattern: "[a-z][a-z0-9_$\\(\\)+\\/\\-]*", title: "Lowercase letters, digits and _ $ ( ) + - /, starting with a letter" });
      create = h("form", { class: "panel inline", id: "create-database", onsubmit: async (event) => {
        event.preventDefault();
        const database = name.value;
        if (await attempt(() => api("PUT", databasePath(database)), "Database " + database + " created.")) {
          location.hash = link("db", database);
        }
      } }, field("New database", name), h("button", { type: "submit" }, "Create"));
    }
    page("Databases", null, create, list);
    let names;
    try {
      names = await api("GET", "/_all_dbs" + query({ limit: databasesShown + 1, skip: databaseSkip }));
    } catch (error) {
      fill(list, failure(error));
      return;
    }
    const more = names.length > databasesShown;
    names = names.slice(0, databasesShown);
    const infos = await Promise.all(names.map((db) => api("GET", databasePath(db)).catch((error) => ({ error }))));
    if (token !== renderCount) return;
    const rows = names.map((db, index) => {
      const info = infos[index];
      const remove = session.admin ? h("button", { type: "button", class: "danger small", "aria-label": "Delete database " + db, onclick: async () => {
        if (!await confirmAction("Delete database " + db + "?", "Every document and attachment in it is deleted. This cannot be undone.", db)) return;
        if (await attempt(() => api("DELETE", databasePath(db)), "Database " + db + " deleted.")) route();
      } }, "Delete") : null;
      return h("tr", { "data-database": db },
        h("td", {}, h("a", { href: link("db", db) }, db)),
        info.error ? h("td", { colspan: 3, class: "muted" }, info.error.status === 403 ? "no access" : String(info.error))
          : [h("td", { class: "num" }, info.doc_count), h("td", { class: "num narrow-hidden" }, info.doc_del_count),
             h("td", { class: "num" }, bytes(info.sizes && info.sizes.file))],
        h("td", {}, remove));
    });
    const pager = databaseSkip || more ? h("div", { class: "pager" },
      h("button", { type: "button", class: "quiet", disabled: !databaseSkip, onclick: () => { databaseSkip = Math.max(0, databaseSkip - databasesShown); route(); } }, "Previous"),
      h("span", { class: "muted" }, `${databaseSkip + 1}–${databaseSkip + names.length}`),
      h("button", { type: "button", class: "quiet", disabled: !more, onclick: () => { databaseSkip += databasesShown; route(); } }, "Next")) : null;
    fill(list, names.length ? table(["Name", "Documents", "Deleted", "Size", ""], rows) : h("p", { class: "muted" }, databaseSkip ? "No more databases." : "No databases yet."), pager);
  }

  // MARK: One database

  const databaseTabs = [["Documents", ""], ["Query", "query"], ["Indexes", "indexes"], ["Views", "views"], ["Information", "info"]];

  function databasePage(db, tab, title, ...content) {
    const tabs = h("nav", { class: "tabs", "aria-label": "Database " + db },
      databaseTabs.map(([name, path]) => h("a", { href: path ? link("db", db, path) : link("db", db), "aria-current": tab === path ? "page" : null }, name)));
    page(title || db, [h("a", { href: "#/" }, "Databases"), title ? h("a", { href: link("db", db) }, db) : null].filter(Boolean), tabs, content);
  }

  const pageStarts = new Map();   // database → the start keys of the pages before the one shown

  async function documentsPage(db, token, direction) {
    const size = Number(sessionStorage.getItem("docstore-page-size") || 20);
    let starts = pageStarts.get(db) || [];
    if (direction === undefined) starts = [];
    pageStarts.set(db, starts);
    const start = starts[starts.length - 1];
    const list = h("div", {}, h("p", { class: "muted" }, "Loading documents…"));
    const jump = h("input", { id: "jump-id", placeholder: "Document id", autocapitalize: "none", spellcheck: "false" });
    databasePage(db, "", null,
      h("div", { class: "row" },
        h("a", { class: "button", href: link("db", db, "new"), id: "new-document" }, "New document"),
        h("form", { class: "inline", onsubmit: (event) => { event.preventDefault(); if (jump.value) location.hash = link("db", db, "doc", jump.value); } },
          field("Open a document", jump), h("button", { type: "submit", class: "quiet" }, "Open"))),
      list);
    let answer;
    try {
      answer = await api("GET", databasePath(db) + "/_all_docs" + query({ limit: size + 1, include_docs: true, conflicts: true, startkey: start === undefined ? undefined : json(start) }));
    } catch (error) {
      if (token === renderCount) fill(list, failure(error));
      return;
    }
    if (token !== renderCount) return;
    const rows = answer.rows.slice(0, size);
    const next = answer.rows.length > size ? answer.rows[size].key : undefined;
    const sizeSelect = h("select", { id: "page-size", onchange: () => { sessionStorage.setItem("docstore-page-size", sizeSelect.value); documentsPage(db, renderCount); } },
      [10, 20, 50, 100].map((count) => h("option", { value: count, selected: count === size }, count + " per page")));
    const shown = rows.map((row) => {
      const doc = row.doc || {};
      const conflicts = doc._conflicts ? doc._conflicts.length : 0;
      const preview = Object.fromEntries(Object.entries(doc).filter(([key]) => !key.startsWith("_")));
      return h("tr", { "data-id": row.id },
        h("td", {}, h("a", { href: link("db", db, "doc", row.id) }, row.id),
          conflicts ? [" ", h("span", { class: "badge warn" }, conflicts === 1 ? "1 conflict" : conflicts + " conflicts")] : null,
          doc._attachments ? [" ", h("span", { class: "badge" }, Object.keys(doc._attachments).length + " attached")] : null),
        h("td", { class: "mono narrow-hidden" }, short(row.value.rev, 14)),
        h("td", { class: "json" }, code(short(json(preview), 120))));
    });
    const first = starts.length * size;
    list.replaceChildren(
      rows.length ? table(["Id", "Revision", "Content"], shown) : h("p", { class: "muted" }, "No documents here" + (starts.length ? " on this page." : " yet (or none you may see).")),
      h("div", { class: "pager" },
        h("button", { type: "button", class: "quiet", disabled: !starts.length, onclick: () => { starts.pop(); documentsPage(db, renderCount, -1); } }, "Previous"),
        // total_rows counts the whole database, also documents outside a user's channels: only administrators get it.
        h("span", { class: "muted" }, rows.length ? `${first + 1}–${first + rows.length}` + (session.admin ? ` of ${answer.total_rows}` : "") : ""),
        h("button", { type: "button", class: "quiet", id: "next-page", disabled: next === undefined, onclick: () => { starts.push(next); documentsPage(db, renderCount, 1); } }, "Next"),
        sizeSelect));
  }

  // MARK: One document

  async function documentPage(db, id, rev, token) {
    const crumbs = [h("a", { href: "#/" }, "Databases"), h("a", { href: link("db", db) }, db)];
    page(id, crumbs, h("p", { class: "muted" }, "Loading…"));
    let doc, winner;
    try {
      winner = await api("GET", documentPath(db, id) + query({ conflicts: true, deleted_conflicts: true, revs_info: true }));
      doc = rev && rev !== winner._rev ? await api("GET", documentPath(db, id) + query({ rev, revs_info: true })) : winner;
    } catch (error) {
      if (token === renderCount) page(id, crumbs, failure(error));
      return;
    }
    if (token !== renderCount) return;
    const conflicts = winner._conflicts || [];
    const viewingConflict = doc !== winner;
    const editable = Object.fromEntries(Object.entries(doc).filter(([key]) => !["_revs_info", "_conflicts", "_deleted_conflicts"].includes(key)));
    const editor = h("textarea", { class: "json", id: "document-json", spellcheck: "false", "aria-describedby": "document-help" });
    editor.value = json(editable, 2);

    const save = async () => {
      let body;
      try { body = JSON.parse(editor.value); } catch (error) { say("The document is not valid JSON: " + error.message, "error"); return; }
      if (viewingConflict) body._rev = winner._rev;   // this revision's content becomes the winner's next
      const result = await attempt(() => api("PUT", documentPath(db, id), body), (answer) => "Saved as revision " + answer.rev + ".");
      if (!result) return;
      if (viewingConflict) {
        // Choosing a conflicting revision: every other leaf is deleted, as Fauxton resolves conflicts.
        const deletions = conflicts.map((conflict) => ({ _id: id, _rev: conflict, _deleted: true }));
        await attempt(() => api("POST", databasePath(db) + "/_bulk_docs", { docs: deletions }), "Saved as revision " + result.rev + "; the other revisions are deleted.");
      }
      location.hash = link("db", db, "doc", id);
      if (!viewingConflict) documentPage(db, id, undefined, renderCount);
    };

    const facts = h("dl", { class: "facts" },
      h("dt", {}, viewingConflict ? "Showing revision" : "Revision"), h("dd", { class: "mono", id: "document-rev" }, doc._rev),
      viewingConflict ? [h("dt", {}, "Winning revision"), h("dd", {}, h("a", { href: link("db", db, "doc", id), class: "mono" }, winner._rev))] : null,
      h("dt", {}, "Conflicts"),
      h("dd", { id: "document-conflicts" }, conflicts.length ? conflicts.map((conflict) => h("div", {},
        h("a", { href: link("db", db, "doc", id, "rev", conflict), class: "mono" }, conflict), " ",
        h("button", { type: "button", class: "danger small", onclick: async () => {
          if (!await confirmAction("Delete revision " + conflict + "?", "This conflicting revision is deleted; the winner stays.")) return;
          if (await attempt(() => api("DELETE", documentPath(db, id) + query({ rev: conflict })), "Revision " + conflict + " deleted.")) {
            location.hash = link("db", db, "doc", id);
            documentPage(db, id, undefined, renderCount);
          }
        } }, "Delete"))) : h("span", { class: "muted" }, "none")),
      winner._deleted_conflicts ? [h("dt", {}, "Deleted conflicts"), h("dd", { class: "mono" }, winner._deleted_conflicts.join(", "))] : null);

    const history = (doc._revs_info || []).map((info) => h("li", {},
      info.status === "available" ? h("a", { href: link("db", db, "doc", id, "rev", info.rev), class: "mono" }, info.rev) : h("span", { class: "mono" }, info.rev),
      " ", h("span", { class: "muted" }, info.status)));

    page(id, crumbs,
      viewingConflict ? h("p", { class: "badge warn", role: "note" }, "A conflicting revision: saving it makes it the document's content and deletes the other revisions.") : null,
      conflicts.length && !viewingConflict ? h("p", { role: "note" }, h("span", { class: "badge warn" }, "In conflict"), " The document has revisions that lost to this one; open one to compare or choose it.") : null,
      h("section", { class: "panel", "aria-label": "Revisions" }, facts,
        history.length ? h("details", {}, h("summary", {}, "Revision history"), h("ol", {}, history)) : null),
      h("section", { class: "panel", "aria-labelledby": "json-heading" },
        h("h2", { id: "json-heading" }, "JSON"),
        h("p", { id: "document-help", class: "muted" }, "Edit and save to write a new revision. Attachment stubs keep their attachments."),
        editor,
        h("div", { class: "actions" },
          h("button", { type: "button", class: "danger", id: "delete-document", onclick: async () => {
            if (!await confirmAction("Delete document " + id + "?", "A deletion is a new revision: it replicates like any other.")) return;
            if (await attempt(() => api("DELETE", documentPath(db, id) + query({ rev: winner._rev })), "Document " + id + " deleted.")) location.hash = link("db", db);
          } }, "Delete document"),
          h("button", { type: "button", id: "save-document", onclick: save }, viewingConflict ? "Choose this revision" : "Save"))),
      attachmentsSection(db, id, doc, winner, viewingConflict));
  }

  function attachmentsSection(db, id, doc, winner, viewingConflict) {
    const attachments = Object.entries(doc._attachments || {});
    const viewable = /^image\/(png|jpeg|gif|webp|avif)$/;
    const rows = attachments.map(([name, info]) => {
      const path = documentPath(db, id) + "/" + name.split("/").map(enc).join("/") + (viewingConflict ? query({ rev: doc._rev }) : "");
      return h("tr", { "data-attachment": name },
        h("td", {}, h("a", { href: path, download: name.split("/").pop() }, name),
          viewable.test(info.content_type) ? [" ", h("a", { href: path, target: "_blank", rel: "noopener" }, "view")] : null),
        h("td", {}, info.content_type), h("td", { class: "num" }, bytes(info.length)), h("td", { class: "mono narrow-hidden" }, short(info.digest || "", 20)),
        h("td", {}, viewingConflict ? null : h("button", { type: "button", class: "danger small", "aria-label": "Delete attachment " + name, onclick: async () => {
          if (!await confirmAction("Delete attachment " + name + "?", "The document gets a new revision without it.")) return;
          const path = documentPath(db, id) + "/" + name.split("/").map(enc).join("/") + query({ rev: winner._rev });
          if (await attempt(() => api("DELETE", path), "Attachment " + name + " deleted.")) documentPage(db, id, undefined, renderCount);
        } }, "Delete")));
    });
    const file = h("input", { type: "file", id: "attachment-file", required: true });
    const upload = viewingConflict ? null : h("form", { class: "inline", id: "upload-attachment", onsubmit: async (event) => {
      event.preventDefault();
      const chosen = file.files[0];
      if (!chosen) return;
      const path = documentPath(db, id) + "/" + enc(chosen.name) + query({ rev: winner._rev });
      if (await attempt(() => api("PUT", path, chosen), "Attachment " + chosen.name + " saved.")) documentPage(db, id, undefined, renderCount);
    } }, field("Add an attachment", file), h("button", { type: "submit" }, "Upload"));
    return h("section", { class: "panel", "aria-labelledby": "attachments-heading" },
      h("h2", { id: "attachments-heading" }, "Attachments"),
      rows.length ? table(["Name", "Type", "Length", "Digest", ""], rows) : h("p", { class: "muted" }, "None."),
      upload);
  }

  async function newDocumentPage(db, token) {
    const editor = h("textarea", { class: "json", id: "document-json", spellcheck: "false" });
    const uuid = await api("GET", "/_uuids").then((answer) => answer.uuids[0]).catch(() => undefined);
    if (token !== renderCount) return;
    editor.value = json(uuid ? { _id: uuid } : {}, 2);
    databasePage(db, "new", "New document",
      h("section", { class: "panel" },
        h("label", { for: "document-json" }, "The document as JSON; without an _id the server picks one."),
        editor,
        h("div", { class: "actions" }, h("button", { type: "button", id: "save-document", onclick: async () => {
          let body;
          try { body = JSON.parse(editor.value); } catch (error) { say("The document is not valid JSON: " + error.message, "error"); return; }
          const answer = await attempt(() => typeof body._id === "string" ? api("PUT", documentPath(db, body._id), body) : api("POST", databasePath(db), body),
            (result) => "Created " + result.id + " at revision " + result.rev + ".");
          if (answer) location.hash = link("db", db, "doc", answer.id);
        } }, "Create"))));
    editor.focus();
  }

  // MARK: Mango

  async function queryPage(db, token) {
    const editor = h("textarea", { class: "json", id: "mango-query", spellcheck: "false" });
    editor.value = sessionStorage.getItem("docstore-mango-" + db) || json({ selector: {}, limit: 25 }, 2);
    const output = h("div", { id: "mango-output", "aria-live": "polite" });
    const parse = () => {
      try { return JSON.parse(editor.value); } catch (error) { say("The query is not valid JSON: " + error.message, "error"); return undefined; }
    };
    const run = async (bookmark) => {
      const body = parse();
      if (!body) return;
      sessionStorage.setItem("docstore-mango-" + db, editor.value);
      if (bookmark) body.bookmark = bookmark;
      fill(output, h("p", { class: "muted" }, "Running…"));
      try {
        const answer = await api("POST", databasePath(db) + "/_find", body);
        say("");
        const rows = answer.docs.map((doc) => h("tr", {},
          h("td", {}, typeof doc._id === "string" ? h("a", { href: link("db", db, "doc", doc._id) }, doc._id) : "—"),
          h("td", { class: "json" }, code(short(json(doc), 400)))));
        output.replaceChildren(
          answer.warning ? h("p", { class: "badge warn", role: "note" }, answer.warning) : null,
          h("p", { id: "mango-count" }, answer.docs.length === 1 ? "1 document" : answer.docs.length + " documents"),
          answer.docs.length ? table(["Id", "Document"], rows) : null,
          answer.execution_stats ? h("details", {}, h("summary", {}, "Execution statistics"), h("pre", {}, json(answer.execution_stats, 2))) : null,
          answer.bookmark && answer.docs.length >= (body.limit || 25) ? h("div", { class: "pager" }, h("button", { type: "button", class: "quiet", onclick: () => run(answer.bookmark) }, "Next page")) : null);
      } catch (error) {
        fill(output, failure(error));
      }
    };
    const explain = async () => {
      const body = parse();
      if (!body) return;
      try {
        const answer = await api("POST", databasePath(db) + "/_explain", body);
        const index = answer.index || {};
        fill(output, h("section", { id: "mango-explain", "aria-label": "Explanation" },
          h("h2", {}, "Index used"),
          h("dl", { class: "facts" },
            h("dt", {}, "Index"), h("dd", {}, index.name || "—", index.ddoc ? " in " + index.ddoc : ""),
            h("dt", {}, "Type"), h("dd", {}, index.type || "—"),
            h("dt", {}, "Fields"), h("dd", { class: "mono" }, json((index.def && index.def.fields) || [])),
            answer.mrargs ? [h("dt", {}, "Range"), h("dd", { class: "mono" }, json({ start_key: answer.mrargs.start_key, end_key: answer.mrargs.end_key }))] : null),
          h("details", {}, h("summary", {}, "Whole answer"), h("pre", {}, json(answer, 2)))));
      } catch (error) {
        fill(output, failure(error));
      }
    };
    databasePage(db, "query", "Query " + db,
      h("section", { class: "panel" },
        h("label", { for: "mango-query" }, "A Mango query: selector, fields, sort, limit, skip, use_index, execution_stats…"),
        editor,
        h("div", { class: "actions" },
          h("button", { type: "button", class: "quiet", id: "mango-explain-button", onclick: explain }, "Explain"),
          h("button", { type: "button", id: "mango-run", onclick: () => run() }, "Run query"))),
      output);
    void token;
  }

  async function indexesPage(db, token) {
    const list = h("div", {}, h("p", { class: "muted" }, "Loading indexes…"));
    const fields = h("input", { id: "index-fields", required: true, placeholder: "type, date:desc", autocapitalize: "none", spellcheck: "false" });
    const name = h("input", { id: "index-name", autocapitalize: "none", spellcheck: "false" });
    const ddoc = h("input", { id: "index-ddoc", autocapitalize: "none", spellcheck: "false" });
    const type = h("select", { id: "index-type" }, h("option", { value: "json" }, "json"), h("option", { value: "text" }, "text (full-text)"));
    const load = async () => {
      try {
        const answer = await api("GET", databasePath(db) + "/_index");
        if (token !== renderCount) return;
        const rows = answer.indexes.map((index) => h("tr", { "data-index": index.name },
          h("td", {}, index.name), h("td", {}, index.ddoc || "—"), h("td", {}, index.type),
          h("td", { class: "mono" }, json((index.def && index.def.fields) || [])),
          h("td", {}, index.ddoc ? h("button", { type: "button", class: "danger small", "aria-label": "Delete index " + index.name, onclick: async () => {
            if (!await confirmAction("Delete index " + index.name + "?", "Queries that use it fall back to another index or a scan.")) return;
            const path = databasePath(db) + "/_index/" + enc(index.ddoc.replace(/^_design\//, "")) + "/" + enc(index.type) + "/" + enc(index.name);
            if (await attempt(() => api("DELETE", path), "Index " + index.name + " deleted.")) load();
          } }, "Delete") : null)));
        fill(list, table(["Name", "Design document", "Type", "Fields", ""], rows, answer.total_rows + " indexes"));
      } catch (error) {
        fill(list, failure(error));
      }
    };
    const form = h("form", { class: "panel inline", id: "create-index", onsubmit: async (event) => {
      event.preventDefault();
      const definition = fields.value.split(",").map((part) => part.trim()).filter(Boolean).map((part) => {
        const [fieldName, order] = part.split(":");
        return type.value === "text" ? { name: fieldName, type: order || "string" } : (order === "desc" ? { [fieldName]: "desc" } : fieldName);
      });
      const body = { index: { fields: definition }, type: type.value };
      if (name.value) body.name = name.value;
      if (ddoc.value) body.ddoc = ddoc.value;
      if (await attempt(() => api("POST", databasePath(db) + "/_index", body), (answer) => "Index " + answer.name + " " + answer.result + ".")) load();
    } },
    field("Fields (comma-separated; field:desc, or field:number for text)", fields), field("Name (optional)", name),
    field("Design document (optional)", ddoc), field("Type", type), h("button", { type: "submit" }, "Create index"));
    databasePage(db, "indexes", "Indexes of " + db, form, list);
    await load();
  }

  // MARK: Views

  async function viewsPage(db, token) {
    let designs = [];
    try {
      const answer = await api("GET", databasePath(db) + "/_design_docs" + query({ include_docs: true }));
      designs = answer.rows.map((row) => row.doc).filter(Boolean);
    } catch (error) {
      databasePage(db, "views", "Views of " + db, failure(error));
      return;
    }
    if (token !== renderCount) return;
    const choices = [];
    for (const design of designs) {
      const designName = design._id.replace(/^_design\//, "");
      const language = design.language || "javascript";
      for (const [viewName, view] of Object.entries(design.views || {})) {
        choices.push({ path: designName + "/" + viewName, label: viewName, group: designName + " (" + language + ")", reduce: !!(view && view.reduce) });
      }
      for (const indexName of Object.keys(design.indexes || {})) {
        choices.push({ path: designName + "/" + indexName, label: indexName + " (full-text)", group: designName + " (" + language + ")", fullText: true });
      }
    }
    const groups = new Map();
    for (const choice of choices) groups.set(choice.group, [...(groups.get(choice.group) || []), choice]);
    const viewInput = h("input", { id: "view-name", required: true, placeholder: "design/view", autocapitalize: "none", spellcheck: "false", value: choices[0] ? choices[0].path : "" });
    const picker = h("select", { id: "view-picker", onchange: () => { viewInput.value = picker.value; } },
      [...groups].map(([group, items]) => h("optgroup", { label: group }, items.map((item) => h("option", { value: item.path }, item.label)))));
    const input = (id, placeholder) => h("input", { id, placeholder, autocapitalize: "none", spellcheck: "false" });
    const options = {
      key: input("view-key", "JSON, e.g. \"a\""), startkey: input("view-startkey", "JSON"), endkey: input("view-endkey", "JSON"),
      limit: h("input", { id: "view-limit", type: "number", min: 0, value: 25 }), skip: h("input", { id: "view-skip", type: "number", min: 0, value: 0 }),
      group_level: h("input", { id: "view-group-level", type: "number", min: 0 }),
      descending: h("input", { id: "view-descending", type: "checkbox" }), include_docs: h("input", { id: "view-include-docs", type: "checkbox" }),
      group: h("input", { id: "view-group", type: "checkbox" }),
      reduce: h("select", { id: "view-reduce" }, h("option", { value: "" }, "as defined"), h("option", { value: "true" }, "true"), h("option", { value: "false" }, "false")),
      update: h("select", { id: "view-update" }, h("option", { value: "" }, "true"), h("option", { value: "lazy" }, "lazy"), h("option", { value: "false" }, "false")),
      full_text: input("view-full-text", "words to search for"),
    };
    const output = h("div", { id: "view-output", "aria-live": "polite" });
    const run = async (event) => {
      if (event) event.preventDefault();
      const [designName, ...rest] = viewInput.value.split("/");
      if (!designName || !rest.length) { say("Name the view as design/view.", "error"); return; }
      const parameters = {};
      for (const name of ["key", "startkey", "endkey"]) {
        const text = options[name].value.trim();
        if (!text) continue;
        try { JSON.parse(text); } catch { say(name + " must be JSON (a string in quotes).", "error"); return; }
        parameters[name] = text;
      }
      for (const name of ["limit", "skip", "group_level", "reduce", "update"]) if (options[name].value !== "") parameters[name] = options[name].value;
      for (const name of ["descending", "include_docs", "group"]) if (options[name].checked) parameters[name] = "true";
      if (options.full_text.value.trim()) {
        parameters.full_text = json(options.full_text.value.trim());
        for (const name of ["key", "startkey", "endkey", "group_level", "reduce", "descending", "group"]) delete parameters[name];
      }
      const path = databasePath(db) + "/_design/" + enc(designName) + "/_view/" + enc(rest.join("/")) + query(parameters);
      fill(output, h("p", { class: "muted" }, "Querying…"));
      try {
        const answer = await api("GET", path);
        say("");
        const fullText = parameters.full_text !== undefined;
        const rows = answer.rows.map((row) => h("tr", {},
          h("td", {}, row.id !== undefined ? h("a", { href: link("db", db, "doc", row.id) }, row.id) : "—"),
          fullText ? [h("td", { class: "num" }, row.score === undefined ? "" : Number(row.score).toFixed(3)), h("td", {}, row.snippet || "")]
            : [h("td", { class: "json" }, code(json(row.key))), h("td", { class: "json" }, code(short(json(row.value === undefined ? null : row.value), 300)))],
          parameters.include_docs ? h("td", { class: "json" }, code(short(json(row.doc), 300))) : null));
        const headings = fullText ? ["Id", "Score", "Snippet"] : ["Id", "Key", "Value"];
        if (parameters.include_docs) headings.push("Document");
        output.replaceChildren(
          h("p", { id: "view-count" }, answer.rows.length + " rows", answer.total_rows !== undefined ? " of " + answer.total_rows : "",
            answer.offset !== undefined ? ", from offset " + answer.offset : ""),
          answer.rows.length ? table(headings, rows) : null);
      } catch (error) {
        fill(output, failure(error));
      }
    };
    databasePage(db, "views", "Views of " + db,
      h("form", { class: "panel", id: "view-form", onsubmit: run },
        h("div", { class: "row" },
          choices.length ? field("Views of the design documents", picker) : h("p", { class: "muted" }, "No design document defines views here."),
          field("View (design/view; also indexes registered in Swift)", viewInput)),
        h("div", { class: "row" }, field("key", options.key), field("startkey", options.startkey), field("endkey", options.endkey)),
        h("div", { class: "row" }, field("limit", options.limit), field("skip", options.skip), field("reduce", options.reduce),
          field("group_level", options.group_level), field("update", options.update)),
        h("div", { class: "row" }, field("descending", options.descending), field("include_docs", options.include_docs), field("group", options.group)),
        h("div", { class: "row" }, field("Full-text search (instead of keys)", options.full_text)),
        h("div", { class: "actions" }, h("button", { type: "submit", id: "view-run" }, "Query view"))),
      output);
  }

  // MARK: Database information

  async function infoPage(db, token) {
    let info;
    try {
      info = await api("GET", databasePath(db));
    } catch (error) {
      databasePage(db, "info", "About " + db, failure(error));
      return;
    }
    if (token !== renderCount) return;
    const facts = h("dl", { class: "facts", id: "database-info" },
      [["Documents", info.doc_count], ["Deleted documents", info.doc_del_count], ["Update sequence", info.update_seq],
       ["File size", bytes(info.sizes && info.sizes.file)], ["Live data", bytes(info.sizes && info.sizes.active)],
       ["Documents' size", bytes(info.sizes && info.sizes.external)], ["Purge sequence", info.purge_seq],
       ["Compaction running", info.compact_running ? "yes" : "no"], ["Partitioned", info.props && info.props.partitioned ? "yes" : "no"]]
        .map(([term, value]) => [h("dt", {}, term), h("dd", { class: "mono" }, String(value))]));
    const security = h("div", {}, h("p", { class: "muted" }, "Loading…"));
    const maintenance = h("div", { class: "actions" },
      h("button", { type: "button", class: "quiet", onclick: () => attempt(() => api("POST", databasePath(db) + "/_view_cleanup", {}), "Old index files removed.") }, "Clean up views"),
      h("button", { type: "button", class: "quiet", onclick: () => attempt(() => api("POST", databasePath(db) + "/_compact", {}), "Compaction started.") }, "Compact"));
    databasePage(db, "info", "About " + db, h("section", { class: "panel" }, facts, maintenance),
      h("section", { class: "panel", "aria-labelledby": "security-heading" }, h("h2", { id: "security-heading" }, "Security (_security)"), security));
    try {
      const object = await api("GET", databasePath(db) + "/_security");
      const editor = h("textarea", { class: "json", id: "security-json", spellcheck: "false", "aria-labelledby": "security-heading" });
      editor.value = json(object, 2);
      security.replaceChildren(
        h("p", { class: "muted" }, "Members (names, roles) may use the database within their channels; its admins also write design documents. {} lets every signed-in user in."),
        editor,
        h("div", { class: "actions" }, h("button", { type: "button", onclick: async () => {
          let body;
          try { body = JSON.parse(editor.value); } catch (error) { say("Not valid JSON: " + error.message, "error"); return; }
          await attempt(() => api("PUT", databasePath(db) + "/_security", body), "Security saved.");
        } }, "Save security")));
    } catch (error) {
      fill(security, failure(error));
    }
  }

  // MARK: Replication

  function stateBadge(state) {
    const kind = { completed: "ok", running: "ok", failed: "bad", crashing: "bad", error: "bad", pending: "warn", initializing: "warn" }[state] || "";
    return h("span", { class: "badge " + kind, "data-state": state || "unknown" }, state || "unknown");
  }

  function endpointText(endpoint) {
    if (typeof endpoint === "string") return endpoint.replace(/\/\/[^@/]*@/, "//");
    return endpoint && endpoint.url ? endpoint.url.replace(/\/\/[^@/]*@/, "//") : "—";
  }

  async function replicationPage(token) {
    if (!session.admin) {
      page("Replication", null, h("p", { id: "replications-note" },
        "Replications (the _replicator database and the scheduler) are the administrators'. Replicate as this user with a client such as PouchDB or docstore replicate; it sees your channels."));
      return;
    }
    const source = h("input", { id: "replication-source", required: true, placeholder: "a database here, or http://host:5984/db", autocapitalize: "none", spellcheck: "false" });
    const target = h("input", { id: "replication-target", required: true, placeholder: "a database here, or a URL", autocapitalize: "none", spellcheck: "false" });
    const user = h("input", { id: "replication-user", autocomplete: "off", autocapitalize: "none" });
    const password = h("input", { id: "replication-password", type: "password", autocomplete: "new-password" });
    const id = h("input", { id: "replication-id", autocapitalize: "none", spellcheck: "false" });
    const selector = h("input", { id: "replication-selector", placeholder: "{\"type\": \"invoice\"}", spellcheck: "false" });
    const continuous = h("input", { id: "replication-continuous", type: "checkbox" });
    const createTarget = h("input", { id: "replication-create-target", type: "checkbox", checked: true });
    const documents = h("div", { id: "replications" }, h("p", { class: "muted" }, "Loading…"));
    const jobs = h("div", { id: "replication-jobs" });
    const updated = h("p", { class: "muted", id: "replication-updated" });

    const form = h("form", { class: "panel", id: "new-replication", onsubmit: async (event) => {
      event.preventDefault();
      const endpoint = (text) => {
        if (!/^https?:\/\//.test(text) || !user.value) return text;
        return { url: text, auth: { basic: { username: user.value, password: password.value } } };
      };
      const doc = { source: endpoint(source.value.trim()), target: endpoint(target.value.trim()), continuous: continuous.checked, create_target: createTarget.checked };
      if (selector.value.trim()) {
        try { doc.selector = JSON.parse(selector.value); } catch (error) { say("The selector is not valid JSON: " + error.message, "error"); return; }
      }
      const write = id.value.trim() ? () => api("PUT", documentPath("_replicator", id.value.trim()), doc) : () => api("POST", "/_replicator", doc);
      if (await attempt(write, (answer) => "Replication " + answer.id + " saved; the scheduler starts it.")) {
        form.reset();
        refresh();
      }
    } },
    h("h2", {}, "New replication"),
    h("div", { class: "row" }, field("Source", source), field("Target", target)),
    h("div", { class: "row" }, field("User at the remote end (optional)", user), field("Password", password), field("Document id (optional)", id)),
    h("div", { class: "row" }, field("Selector (optional)", selector), field("Continuous", continuous), field("Create the target", createTarget)),
    h("div", { class: "actions" }, h("button", { type: "submit", id: "start-replication" }, "Start replication")));

    const refresh = async () => {
      try {
        const [all, scheduled, running] = await Promise.all([
          api("GET", "/_replicator/_all_docs" + query({ include_docs: true })),
          api("GET", "/_scheduler/docs"),
          api("GET", "/_scheduler/jobs"),
        ]);
        if (token !== renderCount) return;
        const states = new Map(scheduled.docs.filter((doc) => doc.database === "_replicator").map((doc) => [doc.doc_id, doc]));
        const rows = all.rows.filter((row) => !row.id.startsWith("_design/") && row.doc).map((row) => {
          const doc = row.doc, scheduler = states.get(row.id) || {}, info = scheduler.info || {};
          const state = scheduler.state || doc._replication_state;
          return h("tr", { "data-replication": row.id },
            h("td", {}, h("a", { href: link("db", "_replicator", "doc", row.id) }, row.id)),
            h("td", {}, endpointText(doc.source), " → ", endpointText(doc.target)),
            h("td", {}, doc.continuous ? "continuous" : "one-shot"),
            h("td", {}, stateBadge(state)),
            h("td", { class: "num" }, info.docs_written ?? "—"), h("td", { class: "num narrow-hidden" }, info.docs_read ?? "—"),
            h("td", { class: "num" }, info.changes_pending ?? "—"),
            h("td", {}, info.error || doc._replication_state_reason || scheduler.error_count || ""),
            h("td", {}, h("button", { type: "button", class: "danger small", "aria-label": "Delete replication " + row.id, onclick: async () => {
              if (!await confirmAction("Delete replication " + row.id + "?", "The job stops; what it copied stays.")) return;
              if (await attempt(() => api("DELETE", documentPath("_replicator", row.id) + query({ rev: doc._rev })), "Replication " + row.id + " deleted.")) refresh();
            } }, "Delete")));
        });
        fill(documents, rows.length ? table(["Document", "Source → target", "Type", "State", "Written", "Read", "Pending", "Errors", ""], rows)
          : h("p", { class: "muted" }, "No replications in _replicator."));
        const jobRows = running.jobs.map((job) => h("tr", {},
          h("td", { class: "mono" }, short(job.id, 24)), h("td", {}, job.doc_id || "(_replicate)"),
          h("td", {}, endpointText(job.source), " → ", endpointText(job.target)),
          h("td", {}, (job.history && job.history[0] && job.history[0].type) || ""), h("td", { class: "narrow-hidden" }, time(job.start_time))));
        fill(jobs, jobRows.length ? table(["Job", "Document", "Source → target", "Last event", "Started"], jobRows) : h("p", { class: "muted" }, "No jobs running."));
        updated.textContent = "Updated " + new Date().toLocaleTimeString() + "; refreshed every 2 seconds.";
      } catch (error) {
        fill(documents, failure(error));
      }
    };
    page("Replication", null, form,
      h("section", { "aria-labelledby": "replications-heading" }, h("h2", { id: "replications-heading" }, "Replications (_replicator)"), documents),
      h("section", { "aria-labelledby": "jobs-heading" }, h("h2", { id: "jobs-heading" }, "Running jobs (_scheduler/jobs)"), jobs), updated);
    await refresh();
    timers.push(setInterval(refresh, 2000));
  }

  // MARK: Activity

  const samples = [];   // {at, requests, writes, reads} from _prometheus, newest last, at most 90

  /// The Prometheus text format's samples, summed by metric name (over their labels).
  function prometheus(text) {
    const sums = {};
    for (const line of text.split("\n")) {
      if (!line || line.startsWith("#")) continue;
      const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)/.exec(line);
      if (!match) continue;
      const value = Number(match[3]);
      if (!isNaN(value)) sums[match[1]] = (sums[match[1]] || 0) + value;
    }
    return sums;
  }

  function chart(series, labels) {
    const ns = "http://www.w3.org/2000/svg";
    const svg = document.createElementNS(ns, "svg");
    const width = 300, height = 100;
    svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
    svg.setAttribute("preserveAspectRatio", "none");
    svg.setAttribute("role", "img");
    const top = Math.max(1, ...series.flat());
    svg.setAttribute("aria-label", labels.map((label, index) => label + ": " + (series[index].length ? series[index][series[index].length - 1].toFixed(1) : "none") + " per second now").join("; "));
    for (const y of [0.25, 0.5, 0.75]) {
      const grid = document.createElementNS(ns, "line");
      Object.entries({ x1: 0, x2: width, y1: height * y, y2: height * y, class: "grid" }).forEach(([key, value]) => grid.setAttribute(key, value));
      svg.append(grid);
    }
    series.forEach((values, index) => {
      if (values.length < 2) return;
      const line = document.createElementNS(ns, "polyline");
      const step = width / (values.length - 1), offset = 0;
      line.setAttribute("points", values.map((value, i) => `${(offset + i * step).toFixed(1)},${(height - value / top * (height - 4) - 2).toFixed(1)}`).join(" "));
      line.setAttribute("class", index ? "line second" : "line");
      svg.append(line);
    });
    return h("figure", { class: "chart" }, svg,
      h("figcaption", { class: "legend" }, labels.map((label, index) => h("span", {}, h("span", { class: index ? "key second" : "key" }), label)),
        h("span", { class: "muted" }, "per second, 0 to " + top.toFixed(1) + ", over the last " + Math.round((samples[samples.length - 1].at - samples[0].at) / 1000) + " s")));
  }

  async function activityPage(token) {
    const tasks = h("div", { id: "active-tasks" }, h("p", { class: "muted" }, "Loading…"));
    const figures = h("div", { id: "metrics" });
    page("Activity", null,
      h("section", { "aria-labelledby": "tasks-heading" }, h("h2", { id: "tasks-heading" }, "Active tasks"), tasks),
      h("section", { "aria-labelledby": "metrics-heading" }, h("h2", { id: "metrics-heading" }, "Server figures (_prometheus)"), figures));
    const refresh = async () => {
      try {
        const active = await api("GET", "/_active_tasks");
        if (token !== renderCount) return;
        // A replication counts documents written and changes pending; an index build or a compaction
        // (`indexer`, `view_compaction`, `database_compaction`) its changes done of its total.
        const rows = active.map((task) => {
          const replication = task.type === "replication";
          return h("tr", { "data-type": task.type },
            h("td", {}, task.type), h("td", {}, replication ? [endpointText(task.source), " → ", endpointText(task.target)]
              : [task.database, task.design_document ? " " + task.design_document : ""]),
            h("td", { class: "num" }, replication ? (task.docs_written ?? "—") + " written" : (task.changes_done ?? 0) + " of " + (task.total_changes ?? 0)),
            h("td", { class: "num" }, replication ? (task.changes_pending ?? "—") + " pending" : (task.progress ?? 0) + " %"),
            h("td", { class: "narrow-hidden" }, time(task.started_on)), h("td", { class: "narrow-hidden" }, time(task.updated_on)));
        });
        fill(tasks, rows.length ? table(["Type", "Database", "Done", "Progress", "Started", "Updated"], rows) : h("p", { class: "muted" }, "Nothing running."));
      } catch (error) {
        fill(tasks, failure(error));
      }
      if (!session.admin) {
        fill(figures, h("p", { class: "muted" }, "The server's figures are the administrators'."));
        return;
      }
      try {
        const response = await fetch("/_node/_local/_prometheus", { credentials: "same-origin" });
        if (!response.ok) throw new ApiError(response.status, await response.json().catch(() => null));
        const sums = prometheus(await response.text());
        if (token !== renderCount) return;
        samples.push({ at: Date.now(), requests: sums.couchdb_httpd_requests_total || 0, writes: sums.couchdb_database_writes_total || 0, reads: sums.couchdb_database_reads_total || 0 });
        while (samples.length > 90) samples.shift();
        const rate = (key) => samples.slice(1).map((sample, index) => Math.max(0, (sample[key] - samples[index][key]) / Math.max(0.001, (sample.at - samples[index].at) / 1000)));
        figures.replaceChildren(
          chart([rate("requests"), rate("writes")], ["HTTP requests", "document writes"]),
          h("dl", { class: "facts" },
            [["Requests", sums.couchdb_httpd_requests_total], ["Document writes", sums.couchdb_database_writes_total],
             ["Document reads", sums.couchdb_database_reads_total], ["Open databases", sums.couchdb_open_databases_total],
             ["Replication jobs", sums.couchdb_couch_replicator_jobs_total], ["Running jobs", sums.couchdb_couch_replicator_jobs_running]]
              .map(([term, value]) => [h("dt", {}, term), h("dd", { class: "mono" }, value === undefined ? "—" : String(value))])));
      } catch (error) {
        fill(figures, failure(error));
      }
    };
    await refresh();
    timers.push(setInterval(refresh, 2000));
  }

  // MARK: Routing

  /// `#/section/…` — each part percent-encoded — to the page that shows it.
  async function route() {
    timers.forEach(clearInterval);
    timers = [];
    const token = ++renderCount;
    const parts = location.hash.replace(/^#\/?/, "").split("/").filter((part, index, all) => part !== "" || index < all.length - 1).map(decodeURIComponent);
    if (parts[0] === "signin") {
      setSection(null);
      signInPage();
      return;
    }
    if (session.name === null && !session.admin) {
      let signedIn = false;
      try { signedIn = await loadSession(); } catch (error) { page("DocStore", null, failure(error)); return; }
      if (!signedIn) { sessionEnded(); return; }
      if (token !== renderCount) return;
    }
    const [section, db, sub, ...rest] = parts;
    try {
      if (!section) { setSection("databases"); await databasesPage(token); return; }
      if (section === "replication") { setSection("replication"); await replicationPage(token); return; }
      if (section === "activity") { setSection("activity"); await activityPage(token); return; }
      if (section === "db" && db !== undefined) {
        setSection("databases");
        if (!sub) await documentsPage(db, token);
        else if (sub === "new") await newDocumentPage(db, token);
        else if (sub === "doc" && rest.length) {
          const revision = rest.length >= 3 && rest[rest.length - 2] === "rev" ? rest[rest.length - 1] : undefined;
          await documentPage(db, (revision ? rest.slice(0, -2) : rest).join("/"), revision, token);
        } else if (sub === "query") await queryPage(db, token);
        else if (sub === "indexes") await indexesPage(db, token);
        else if (sub === "views") await viewsPage(db, token);
        else if (sub === "info") await infoPage(db, token);
        else page("Not found", null, h("p", {}, "No such page. ", h("a", { href: "#/" }, "Databases")));
        return;
      }
      page("Not found", null, h("p", {}, "No such page. ", h("a", { href: "#/" }, "Databases")));
    } catch (error) {
      page("Something went wrong", null, failure(error));
    }
  }

  function setSection(section) {
    for (const anchor of document.querySelectorAll("#sections a")) {
      if (anchor.dataset.section === section) anchor.setAttribute("aria-current", "page");
      else anchor.removeAttribute("aria-current");
    }
  }

  window.addEventListener("hashchange", () => { say(""); route(); });
  route();
})();
