// The scenario `pouchdb_interop.py` runs in headless Chromium: PouchDB (IndexedDB in the browser)
// replicating with, and calling, the server named in the page's query string. Each step records an
// outcome; the list is posted back to the page's own server when the scenario ends. A step's `value`
// holds only what must be the same against any CouchDB-compatible server (PouchDB's own revision
// hashes are random, so revisions it made appear as their generation); its `ok` is the step's own
// check, true or false whatever the server.
"use strict";

const parameters = new URLSearchParams(location.search);
const base = parameters.get("server");
const auth = {username: parameters.get("user"), password: parameters.get("password")};
const suffix = parameters.get("suffix");
const steps = [];

const generation = rev => Number(rev.split("-")[0]);
const sleep = ms => new Promise(resolve => setTimeout(resolve, ms));
const remoteDB = name => new PouchDB(base + "/" + name + suffix, {auth, skip_setup: false});
const localDB = name => new PouchDB("local-" + name + suffix);

function withTimeout(promise, seconds, what) {
  return Promise.race([promise, sleep(seconds * 1000).then(() => { throw new Error("timeout: " + what); })]);
}

/// Runs a step: `body` returns {ok, value}; an exception is recorded as the step's failure.
async function step(name, body) {
  try {
    const {ok, value, detail} = await withTimeout(body(), 90, name);
    steps.push({name, ok: !!ok, value: value === undefined ? null : value, detail: detail || null});
  } catch (error) {
    steps.push({name, ok: false, value: null, detail: "threw " + JSON.stringify(errorShape(error || {})) + " " + (error && error.stack)});
  }
}

/// What a PouchDB error says, as a CouchDB client sees it.
function errorShape(error) {
  return {status: error.status, name: error.name, error: error.error === true ? true : error.error, reason: error.reason || error.message};
}

async function expectError(promise) {
  try {
    await promise;
    return {status: "no error"};
  } catch (error) {
    return errorShape(error);
  }
}

/// A database's documents as comparable data: id, revision, conflicts, deleted conflicts, history.
async function snapshot(db, keepRevisions) {
  const all = await db.allDocs({include_docs: true, conflicts: true, attachments: false});
  const rows = [];
  for (const row of all.rows) {
    const doc = row.doc;
    const full = await db.get(row.id, {revs: true, deleted_conflicts: true, conflicts: true});
    const revision = keepRevisions ? doc._rev : generation(doc._rev);
    const body = Object.assign({}, doc);
    for (const key of Object.keys(body)) if (key.startsWith("_")) delete body[key];
    const attachments = {};
    for (const [name, stub] of Object.entries(doc._attachments || {})) {
      attachments[name] = {content_type: stub.content_type, length: stub.length, digest: stub.digest};
    }
    rows.push({
      id: row.id, rev: revision, body,
      conflicts: (doc._conflicts || []).map(r => keepRevisions ? r : generation(r)).sort(),
      deleted_conflicts: (full._deleted_conflicts || []).map(r => keepRevisions ? r : generation(r)).sort(),
      history: keepRevisions ? full._revisions.ids.length : full._revisions.start,
      attachments,
    });
  }
  return {total_rows: all.total_rows, rows};
}

function sameJSON(a, b) { return JSON.stringify(a) === JSON.stringify(b); }

function bytesOf(length, seed) {
  const bytes = new Uint8Array(length);
  let x = seed;
  for (let i = 0; i < length; i++) { x = (x * 1103515245 + 12345) >>> 0; bytes[i] = x >>> 24; }
  return bytes;
}

async function blobBytes(blob) { return new Uint8Array(await blob.arrayBuffer()); }

function equalBytes(a, b) {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

const designDocument = {
  _id: "_design/app",
  views: {
    by_type: {map: "function (doc) { if (doc.type) emit(doc.type, doc.n); }", reduce: "_count"},
    by_n: {map: "function (doc) { if (typeof doc.n === 'number') emit(doc.n, doc.n); }", reduce: "_sum"},
    bad_sum: {map: "function (doc) { if (doc.n === 1) emit(doc.n, 'text'); }", reduce: "_sum"},
  },
  filters: {by_type: "function (doc, req) { return doc.type === req.query.type; }"},
};

/// Two branches of one document, with revision ids chosen here (the same on every run and server).
const conflictBranches = [
  {_id: "conflicted", _rev: "2-" + "a".repeat(32), side: "a",
   _revisions: {start: 2, ids: ["a".repeat(32), "0".repeat(32)]}},
  {_id: "conflicted", _rev: "3-" + "b".repeat(32), side: "b",
   _revisions: {start: 3, ids: ["b".repeat(32), "c".repeat(32), "0".repeat(32)]}},
  {_id: "conflicted", _rev: "2-" + "d".repeat(32), _deleted: true,
   _revisions: {start: 2, ids: ["d".repeat(32), "0".repeat(32)]}},
];

async function run() {
  const local = localDB("source");
  const remote = remoteDB("pouch");
  const smallBinary = bytesOf(3000, 7);
  const largeBinary = bytesOf(300000, 11);

  await step("remote info creates the database", async () => {
    const info = await remote.info();
    return {ok: info.doc_count === 0 && info.db_name === "pouch" + suffix, value: {doc_count: info.doc_count, deleted: info.doc_del_count}};
  });

  await step("local data written", async () => {
    const docs = [];
    for (let i = 0; i < 1200; i++) {
      docs.push({_id: "doc-" + String(i).padStart(4, "0"), n: i, type: i % 2 ? "odd" : "even",
                 nested: {list: [i, "x", null, true], text: "é✓ \u2028 \"quoted\""}});
    }
    docs.push(designDocument);
    let results = await local.bulkDocs(docs);
    for (let round = 0; round < 2; round++) {
      const some = await local.allDocs({keys: ["doc-0001", "doc-0002", "doc-0003"], include_docs: true});
      results = results.concat(await local.bulkDocs(some.rows.map(r => Object.assign(r.doc, {updated: round + 1}))));
    }
    const gone = await local.allDocs({keys: ["doc-0004", "doc-0005"]});
    results = results.concat(await local.bulkDocs(gone.rows.map(r => ({_id: r.id, _rev: r.value.rev, _deleted: true}))));
    let r = await local.put({_id: "att-text", kind: "attachments"});
    r = await local.putAttachment("att-text", "note.txt", r.rev, new Blob(["hello from PouchDB é"], {type: "text/plain"}), "text/plain");
    r = await local.putAttachment("att-text", "data.bin", r.rev, new Blob([smallBinary], {type: "application/octet-stream"}), "application/octet-stream");
    r = await local.put({_id: "att-large", kind: "large"});
    await local.putAttachment("att-large", "large.bin", r.rev, new Blob([largeBinary], {type: "image/png"}), "image/png");
    results = results.concat(await local.bulkDocs(conflictBranches, {new_edits: false}));
    await local.put({_id: "_local/not-replicated", x: 1});
    const failed = results.filter(x => x.error);
    return {ok: failed.length === 0, detail: failed.length ? JSON.stringify(failed.slice(0, 3)) : null};
  });

  await step("push: local.replicate.to(remote)", async () => {
    const result = await local.replicate.to(remote, {batch_size: 100});
    return {ok: result.ok && result.doc_write_failures === 0 && result.docs_written === result.docs_read,
            value: {docs_read: result.docs_read, docs_written: result.docs_written, failures: result.doc_write_failures, status: result.status},
            detail: JSON.stringify(result.errors || [])};
  });

  await step("pushed documents equal the local ones", async () => {
    const mine = await snapshot(local, true);
    const theirs = await snapshot(remote, true);
    // A compressible attachment's digest is left out of the comparison with CouchDB: CouchDB 3.3.3
    // gzips a replicated one and gives it the gzip bytes' digest, DocServer keeps the one PouchDB sent
    // (Docs/Server.md, "Differences from CouchDB"); the check against PouchDB's own data keeps it.
    const summary = await snapshot(remote, false);
    for (const row of summary.rows) {
      for (const stub of Object.values(row.attachments)) {
        if (/^text\/|json|javascript|xml/.test(stub.content_type)) stub.digest = "(compressible)";
      }
    }
    const differing = mine.rows.filter((row, i) => !sameJSON(row, theirs.rows[i])).map(row => row.id);
    return {ok: sameJSON(mine, theirs), value: {total_rows: summary.total_rows, sample: summary.rows.filter(r => !r.id.startsWith("doc-") || r.id <= "doc-0006")},
            detail: differing.length ? "differ: " + differing.slice(0, 5).join(",") + " " + JSON.stringify(theirs.rows.find(r => r.id === differing[0])) : null};
  });

  await step("pushed conflicts: open_revs=all", async () => {
    const leaves = await remote.get("conflicted", {open_revs: "all", revs: true});
    const value = leaves.map(l => ({rev: l.ok._rev, deleted: !!l.ok._deleted, history: l.ok._revisions.ids.length, side: l.ok.side || null}))
      .sort((a, b) => a.rev < b.rev ? -1 : 1);
    const winner = await remote.get("conflicted", {conflicts: true, deleted_conflicts: true});
    return {ok: value.length === 3 && winner._rev === "3-" + "b".repeat(32), value: {leaves: value, winner: winner._rev,
            conflicts: winner._conflicts || [], deleted_conflicts: winner._deleted_conflicts || []}};
  });

  await step("pushed attachments read back from the server", async () => {
    const text = await remote.getAttachment("att-text", "note.txt");
    const small = await blobBytes(await remote.getAttachment("att-text", "data.bin"));
    const large = await blobBytes(await remote.getAttachment("att-large", "large.bin"));
    const inline = await remote.get("att-text", {attachments: true, binary: true});
    const inlineSmall = await blobBytes(inline._attachments["data.bin"].data);
    const content = await text.text();
    return {ok: content === "hello from PouchDB é" && equalBytes(small, smallBinary) && equalBytes(large, largeBinary) && equalBytes(inlineSmall, smallBinary),
            value: {text: content, types: [text.type, inline._attachments["data.bin"].content_type], lengths: [small.length, large.length]}};
  });

  const copy = localDB("copy");
  await step("pull: PouchDB.replicate(remote, fresh local)", async () => {
    const result = await PouchDB.replicate(remote, copy, {batch_size: 100});
    return {ok: result.ok && result.doc_write_failures === 0,
            value: {docs_read: result.docs_read, docs_written: result.docs_written, failures: result.doc_write_failures}};
  });

  await step("pulled documents equal the pushed ones", async () => {
    const mine = await snapshot(local, true);
    const pulled = await snapshot(copy, true);
    const differing = mine.rows.filter((row, i) => !sameJSON(row, pulled.rows[i])).map(row => row.id);
    const large = await blobBytes(await copy.getAttachment("att-large", "large.bin"));
    const small = await blobBytes(await copy.getAttachment("att-text", "data.bin"));
    return {ok: sameJSON(mine.rows, pulled.rows) && equalBytes(large, largeBinary) && equalBytes(small, smallBinary),
            detail: JSON.stringify({differing: differing.slice(0, 5), first: pulled.rows.find(r => r.id === differing[0]) || null,
                                    rows: [mine.rows.length, pulled.rows.length], total_rows: [mine.total_rows, pulled.total_rows],
                                    large: equalBytes(large, largeBinary), small: equalBytes(small, smallBinary)})};
  });

  await step("a second push and pull move nothing (checkpoints)", async () => {
    const pushed = await local.replicate.to(remote);
    const pulled = await PouchDB.replicate(remote, copy);
    return {ok: pushed.docs_written === 0 && pulled.docs_written === 0 && pushed.docs_read === 0 && pulled.docs_read === 0,
            value: {pushed: [pushed.docs_read, pushed.docs_written], pulled: [pulled.docs_read, pulled.docs_written]}};
  });

  await step("incremental pull after server-side writes", async () => {
    const doc = await remote.get("doc-0010");
    doc.changed = "on the server";
    await remote.put(doc);
    await remote.put({_id: "server-new", n: -1});
    const result = await PouchDB.replicate(remote, copy);
    const got = await copy.get("doc-0010");
    return {ok: result.docs_written === 2 && got.changed === "on the server" && generation(got._rev) === 2,
            value: {docs_read: result.docs_read, docs_written: result.docs_written}};
  });

  await step("filtered pull: filter function with query_params", async () => {
    const target = localDB("filtered");
    const result = await PouchDB.replicate(remote, target, {filter: "app/by_type", query_params: {type: "odd"}});
    const info = await target.info();
    return {ok: result.ok && info.doc_count === 599, value: {docs_written: result.docs_written, doc_count: info.doc_count}};
  });

  await step("filtered pull: selector", async () => {
    const target = localDB("selector");
    const result = await PouchDB.replicate(remote, target, {selector: {type: "even", n: {$lt: 100}}});
    const info = await target.info();
    return {ok: result.ok && info.doc_count === 49, value: {docs_written: result.docs_written, doc_count: info.doc_count}};
  });

  await step("filtered pull: doc_ids", async () => {
    const target = localDB("ids");
    const result = await PouchDB.replicate(remote, target, {doc_ids: ["doc-0001", "doc-0007", "att-text", "nope"]});
    const ids = (await target.allDocs()).rows.map(r => r.id);
    return {ok: result.ok && sameJSON(ids, ["att-text", "doc-0001", "doc-0007"]), value: {docs_written: result.docs_written, ids}};
  });

  await step("live two-way sync", async () => {
    const sync = copy.sync(remote, {live: true, retry: true});
    const errors = [];
    sync.on("error", e => errors.push(String(e && (e.message || e.name))));
    const completed = new Promise(resolve => sync.on("complete", resolve));
    await remote.put({_id: "live-from-server", at: 1});
    await copy.put({_id: "live-from-client", at: 2});
    let arrivedHere = false, arrivedThere = false;
    for (let i = 0; i < 200 && !(arrivedHere && arrivedThere); i++) {
      arrivedHere = arrivedHere || !!(await copy.get("live-from-server").catch(() => null));
      arrivedThere = arrivedThere || !!(await remote.get("live-from-client").catch(() => null));
      if (!(arrivedHere && arrivedThere)) await sleep(100);
    }
    // A change while the feed is open travels too.
    const doc = await remote.get("live-from-server");
    doc.at = 3;
    await remote.put(doc);
    let updated = false;
    for (let i = 0; i < 200 && !updated; i++) {
      updated = (await copy.get("live-from-server")).at === 3;
      if (!updated) await sleep(100);
    }
    sync.cancel();
    await withTimeout(completed, 20, "sync complete after cancel");
    return {ok: arrivedHere && arrivedThere && updated && errors.length === 0, value: {arrivedHere, arrivedThere, updated},
            detail: errors.join("; ")};
  });

  await step("a live pull keeps up with 2 000 server writes", async () => {
    const follower = localDB("follower");
    const source = remoteDB("burst");
    const replication = PouchDB.replicate(source, follower, {live: true, retry: true});
    const errors = [];
    replication.on("error", e => errors.push(String(e && (e.message || e.name))));
    const completed = new Promise(resolve => replication.on("complete", resolve));
    for (let batch = 0; batch < 20; batch++) {
      const docs = [];
      for (let i = 0; i < 100; i++) docs.push({_id: "burst-" + String(batch * 100 + i).padStart(4, "0"), batch});
      await source.bulkDocs(docs);
    }
    let count = 0;
    for (let i = 0; i < 600 && count < 2000; i++) {
      count = (await follower.info()).doc_count;
      if (count < 2000) await sleep(100);
    }
    replication.cancel();
    await withTimeout(completed, 20, "replication complete after cancel");
    await source.destroy();
    return {ok: count === 2000 && errors.length === 0, value: {count}, detail: errors.join("; ")};
  });

  // Only against DocServer (the driver restarts it on the same port): a live sync with `retry` outlives
  // a restart of the server.
  if (parameters.get("restart") === "1") await step("DocServer restart: a live sync with retry resumes", async () => {
    const here = localDB("restart");
    const there = remoteDB("restart");
    await there.info();
    const sync = here.sync(there, {live: true, retry: true, back_off_function: delay => delay === 0 ? 200 : Math.min(delay * 2, 1000)});
    const completed = new Promise(resolve => sync.on("complete", resolve));
    await there.put({_id: "before-restart"});
    for (let i = 0; i < 200 && !(await here.get("before-restart").catch(() => null)); i++) await sleep(100);
    const restarted = await fetch("/restart?run=" + parameters.get("run"), {method: "POST"});
    await here.put({_id: "written-while-away"});
    let back = false, pulled = false;
    for (let i = 0; i < 600 && !(back && pulled); i++) {
      if (!back) back = !!(await there.get("written-while-away").catch(() => null));
      if (back && !pulled) {
        if (i % 10 === 0) await there.put({_id: "after-restart"}).catch(() => null);
        pulled = !!(await here.get("after-restart").catch(() => null));
      }
      if (!(back && pulled)) await sleep(100);
    }
    sync.cancel();
    await withTimeout(completed, 20, "sync complete after cancel");
    await there.destroy();
    return {ok: restarted.status === 204 && back && pulled, value: {back, pulled}};
  });

  await step("views: reduce, group, keys, include_docs", async () => {
    const grouped = await remote.query("app/by_type", {group: true});
    const sum = await remote.query("app/by_n", {reduce: true});
    const some = await remote.query("app/by_type", {reduce: false, key: "odd", include_docs: true, limit: 3, skip: 1});
    const keys = await remote.query("app/by_n", {reduce: false, keys: [5, 3, 99999]});
    const descending = await remote.query("app/by_n", {reduce: false, descending: true, limit: 2, startkey: 10});
    // A built-in reduce over values it cannot sum: CouchDB answers the error in the row, PouchDB throws.
    const badSum = await expectError(remote.query("app/bad_sum"));
    const value = {grouped: grouped.rows, sum: sum.rows, some: {total_rows: some.total_rows, offset: some.offset, ids: some.rows.map(r => r.id),
                   docs: some.rows.map(r => r.doc.n)}, keys: keys.rows.map(r => [r.key, r.id]), descending: descending.rows.map(r => r.key), badSum: badSum.status === "no error" ? "no error" : "threw"};
    return {ok: grouped.rows.length === 2 && some.rows.length === 3, value};
  });

  await step("Mango through pouchdb-find: createIndex, find, explain, getIndexes, deleteIndex", async () => {
    const created = await remote.createIndex({index: {fields: ["n"], name: "by-n", ddoc: "mango-n"}});
    const again = await remote.createIndex({index: {fields: ["n"], name: "by-n", ddoc: "mango-n"}});
    const found = await remote.find({selector: {n: {$gte: 10, $lt: 20}, type: "odd"}, sort: ["n"], fields: ["_id", "n"], limit: 3});
    const all = await remote.find({selector: {type: {$eq: "even"}, n: {$gt: 1190}}, fields: ["n"]});
    const explained = await remote.explain({selector: {n: {$gt: 5}}, limit: 2});
    const indexes = await remote.getIndexes();
    const index = indexes.indexes.find(i => i.name === "by-n");
    const deleted = await remote.deleteIndex(index);
    const bad = await expectError(remote.find({selector: {n: {$bogus: 1}}}));
    const value = {created: created.result, again: again.result, found: found.docs, all: all.docs.map(d => d.n).sort((a, b) => a - b),
                   index: explained.index && explained.index.name, indexes: indexes.indexes.map(i => [i.name, i.type, i.def]),
                   deleted: deleted.ok, bad};
    return {ok: created.result === "created" && again.result === "exists" && found.docs.length === 3 && deleted.ok, value};
  });

  await step("changes: since, limit, include_docs, filters", async () => {
    const first = await remote.changes({since: 0, limit: 5, include_docs: true});
    const next = await remote.changes({since: first.last_seq, limit: 5});
    const ids = await remote.changes({doc_ids: ["doc-0002", "conflicted"], style: "all_docs"});
    const filtered = await remote.changes({filter: "app/by_type", query_params: {type: "odd"}, limit: 3});
    const allFiltered = await remote.changes({filter: "app/by_type", query_params: {type: "odd"}});
    const selected = await remote.changes({selector: {n: {$lt: 3}}});
    const view = await remote.changes({filter: "_view", view: "app/by_type"});
    const everything = await remote.changes({style: "all_docs"});
    // CouchDB's feed interleaves its shards' feeds, so which documents a limited page holds is its
    // own: pages are compared by size, whole feeds as sets.
    const paged = first.results.concat(next.results).map(r => r.id);
    const value = {first: first.results.length, firstDocs: first.results.every(r => r.doc && r.doc._id === r.id), next: next.results.length,
                   ids: ids.results.map(r => [r.id, r.changes.length, !!r.deleted]).sort(), filtered: filtered.results.length,
                   allFiltered: allFiltered.results.map(r => r.id).sort(), selected: selected.results.map(r => r.id).sort(),
                   view: view.results.map(r => r.id).sort(),
                   everything: everything.results.map(r => [r.id, r.changes.length, !!r.deleted]).sort((a, b) => a[0] < b[0] ? -1 : 1)};
    return {ok: first.results.length === 5 && next.results.length === 5 && new Set(paged).size === 10 && ids.results.length === 2 &&
                allFiltered.results.length === 599, value};
  });

  await step("allDocs and get with their options", async () => {
    const shape = result => ({total_rows: result.total_rows, offset: result.offset,
                              rows: result.rows.map(r => r.error ? [r.key, r.error] : [r.id, r.key, generation(r.value.rev), !!r.value.deleted, r.doc ? r.doc.n : null])});
    const conflicted = await remote.get("conflicted", {revs_info: true, conflicts: true, deleted_conflicts: true, local_seq: true});
    const old = await remote.get("conflicted", {rev: "2-" + "a".repeat(32), revs: true});
    const specific = await remote.get("conflicted", {open_revs: ["2-" + "a".repeat(32), "9-" + "9".repeat(32)], latest: true});
    const value = {
      range: shape(await remote.allDocs({startkey: "doc-0100", endkey: "doc-0105", inclusive_end: false, include_docs: true})),
      descending: shape(await remote.allDocs({descending: true, startkey: "doc-0010", limit: 4, skip: 1})),
      key: shape(await remote.allDocs({key: "doc-0001", include_docs: true})),
      keys: shape(await remote.allDocs({keys: ["doc-0003", "doc-0004", "zzz", "doc-0003"], include_docs: true})),
      design: shape(await remote.allDocs({startkey: "_design/", endkey: "_design0"})),
      revsInfo: conflicted._revs_info.map(r => [generation(r.rev), r.status]),
      localSeq: typeof conflicted._local_seq,
      old: [old.side, old._revisions.start, old._revisions.ids.length],
      specific: specific.map(r => r.ok ? ["ok", r.ok._rev] : ["missing", r.missing]),
    };
    return {ok: value.range.rows.length === 5 && value.keys.rows.length === 4 && value.old[0] === "a", value};
  });

  await step("live changes feed sees a write", async () => {
    const seen = [];
    const feed = remote.changes({live: true, since: "now", include_docs: true});
    feed.on("change", change => seen.push(change.id));
    const done = new Promise(resolve => feed.on("complete", resolve));
    await sleep(300);
    await remote.put({_id: "live-feed-doc"});
    for (let i = 0; i < 200 && !seen.includes("live-feed-doc"); i++) await sleep(100);
    feed.cancel();
    await withTimeout(done, 20, "changes complete after cancel");
    return {ok: seen.includes("live-feed-doc"), value: {seen}};
  });

  await step("errors: status, name and reason", async () => {
    const doc = await remote.get("doc-0020");
    const value = {
      missing: await expectError(remote.get("no-such-doc")),
      deleted: await expectError(remote.get("doc-0004")),
      conflict: await expectError(remote.put({_id: "doc-0020", _rev: "1-" + "f".repeat(32)})),
      noRev: await expectError(remote.put({_id: "doc-0020"})),
      badId: await expectError(remote.put({_id: "_bogus"})),
      badRev: await expectError(remote.get("doc-0020", {rev: "not-a-rev"})),
      missingAttachment: await expectError(remote.getAttachment("doc-0020", "none.txt")),
      attachmentConflict: await expectError(remote.putAttachment("doc-0020", "x.txt", "1-" + "e".repeat(32), new Blob(["x"]), "text/plain")),
      removeStale: await expectError(remote.remove("doc-0020", "9-" + "e".repeat(32))),
      missingDB: await expectError(new PouchDB(base + "/no-such-db" + suffix, {auth, skip_setup: true}).info()),
    };
    const ok = value.missing.status === 404 && value.conflict.status === 409 && value.badId.status === 400 && !!doc;
    return {ok, value};
  });

  await step("bulkGet, revsDiff, allDocs keys", async () => {
    const doc = await remote.get("doc-0001");
    const bulk = await remote.bulkGet({docs: [{id: "doc-0001", rev: doc._rev}, {id: "nope"}, {id: "conflicted"}], revs: true});
    const shape = bulk.results.map(r => [r.id, r.docs.map(d => d.ok ? ["ok", generation(d.ok._rev), d.ok._revisions.ids.length] : ["error", d.error.error, d.error.reason])]);
    const diff = await remote.revsDiff({"doc-0001": [doc._rev, "9-" + "1".repeat(32)], "nope": ["1-" + "2".repeat(32)]});
    const keys = await remote.allDocs({keys: ["doc-0003", "doc-0004", "missing"]});
    const value = {bulk: shape, diff: Object.fromEntries(Object.entries(diff).map(([k, v]) => [k, v.missing])),
                   keys: keys.rows.map(r => r.error ? [r.key, r.error] : [r.id, generation(r.value.rev), !!r.value.deleted])};
    return {ok: bulk.results.length === 3 && Object.keys(diff).length === 2, value};
  });

  await step("attachments on the server: put, get, remove", async () => {
    const bytes = bytesOf(70000, 3);
    let put = await remote.putAttachment("server-att", "blob.bin", new Blob([bytes]), "application/octet-stream");
    put = await remote.putAttachment("server-att", "text.txt", put.rev, "aGVsbG8=", "text/plain");
    const read = await blobBytes(await remote.getAttachment("server-att", "blob.bin"));
    const text = await (await remote.getAttachment("server-att", "text.txt")).text();
    const removed = await remote.removeAttachment("server-att", "blob.bin", put.rev);
    const after = await remote.get("server-att");
    return {ok: equalBytes(read, bytes) && text === "hello" && removed.ok && Object.keys(after._attachments).length === 1,
            value: {generations: [generation(put.rev), generation(removed.rev)], left: Object.keys(after._attachments),
                    stub: {length: after._attachments["text.txt"].length, type: after._attachments["text.txt"].content_type, digest: after._attachments["text.txt"].digest}}};
  });

  await step("compact and viewCleanup", async () => {
    const compacted = await remote.compact();
    const cleaned = await remote.viewCleanup();
    return {ok: compacted.ok && cleaned.ok, value: {compacted: compacted.ok, cleaned: cleaned.ok}};
  });

  await step("push refused in part by validate_doc_update", async () => {
    const guarded = remoteDB("guarded");
    await guarded.put({_id: "_design/guard", validate_doc_update:
      "function (newDoc, oldDoc, userCtx) { if (newDoc.refuse) throw({forbidden: 'refused by guard'}); }"});
    const source = localDB("guarded");
    const docs = [];
    for (let i = 0; i < 10; i++) docs.push({_id: "g" + i, refuse: i % 4 === 1});
    await source.bulkDocs(docs);
    const result = await source.replicate.to(guarded);
    const ids = (await guarded.allDocs()).rows.map(r => r.id);
    await guarded.destroy();
    return {ok: result.docs_written === 7 && result.doc_write_failures === 3 && ids.length === 8,
            value: {docs_read: result.docs_read, docs_written: result.docs_written, failures: result.doc_write_failures, ids,
                    errors: (result.errors || []).map(e => [e.name || e.error, e.message || e.reason]).sort()}};
  });

  await step("many attachments, and attachments on conflicting branches, both ways", async () => {
    const source = localDB("branches");
    const target = remoteDB("branches");
    const back = localDB("branches-back");
    const docs = [];
    for (let i = 0; i < 40; i++) {
      docs.push({_id: "a" + i, _attachments: {
        "blob.bin": {content_type: "application/octet-stream", data: new Blob([bytesOf(20000 + i, i)])},
        "note.txt": {content_type: "text/plain", data: new Blob(["note " + i])}}});
    }
    await source.bulkDocs(docs);
    const b64 = bytes => btoa(String.fromCharCode.apply(null, bytes));
    const root = "0".repeat(31) + "1";
    await source.bulkDocs([
      {_id: "branched", _rev: "2-" + "e".repeat(32), _revisions: {start: 2, ids: ["e".repeat(32), root]},
       _attachments: {"left.bin": {content_type: "application/octet-stream", data: b64(bytesOf(5000, 21))}}},
      {_id: "branched", _rev: "2-" + "f".repeat(32), _revisions: {start: 2, ids: ["f".repeat(32), root]},
       _attachments: {"right.bin": {content_type: "application/octet-stream", data: b64(bytesOf(7000, 22))}}},
    ], {new_edits: false});
    const pushed = await source.replicate.to(target);
    const pulled = await PouchDB.replicate(target, back);
    const mine = await snapshot(source, true);
    const theirs = await snapshot(target, true);
    const returned = await snapshot(back, true);
    const leaves = await back.get("branched", {open_revs: "all", attachments: true, binary: true});
    const leafBytes = {};
    for (const leaf of leaves) {
      for (const [name, att] of Object.entries(leaf.ok._attachments)) leafBytes[name] = await blobBytes(att.data);
    }
    const blob7 = await blobBytes(await back.getAttachment("a7", "blob.bin"));
    const ok = pushed.doc_write_failures === 0 && pulled.doc_write_failures === 0 && sameJSON(mine.rows, theirs.rows) &&
      sameJSON(mine.rows, returned.rows) && equalBytes(leafBytes["left.bin"] || [], bytesOf(5000, 21)) &&
      equalBytes(leafBytes["right.bin"] || [], bytesOf(7000, 22)) && equalBytes(blob7, bytesOf(20007, 7));
    await target.destroy();
    return {ok, value: {pushed: [pushed.docs_read, pushed.docs_written], pulled: [pulled.docs_read, pulled.docs_written],
                        leaves: leaves.map(l => [l.ok._rev, Object.keys(l.ok._attachments)]).sort()},
            detail: JSON.stringify({pushed, pulled: pulled.errors, same: [sameJSON(mine.rows, theirs.rows), sameJSON(mine.rows, returned.rows)]})};
  });

  await step("a user signed in by cookie (POST /_session), PouchDB without credentials", async () => {
    const admin = {"Authorization": "Basic " + btoa(auth.username + ":" + auth.password), "Content-Type": "application/json"};
    const name = "pouch-user" + suffix;
    const users = await fetch(base + "/_users/org.couchdb.user:" + name, {method: "PUT", headers: admin,
      body: JSON.stringify({_id: "org.couchdb.user:" + name, name, password: "secret", roles: [], type: "user"})});
    const dbName = "private" + suffix;
    await fetch(base + "/" + dbName, {method: "PUT", headers: admin});
    await fetch(base + "/" + dbName + "/_security", {method: "PUT", headers: admin,
      body: JSON.stringify({admins: {names: [], roles: []}, members: {names: [name], roles: []}})});
    const anonymous = await expectError(new PouchDB(base + "/" + dbName, {skip_setup: true}).get("x"));
    const signIn = await fetch(base + "/_session", {method: "POST", credentials: "include", headers: {"Content-Type": "application/json"},
      body: JSON.stringify({name, password: "secret"})});
    const session = await signIn.json();
    const db = new PouchDB(base + "/" + dbName, {skip_setup: true});
    const written = await db.put({_id: "by-cookie", who: name});
    const source = localDB("cookie");
    await source.bulkDocs([{_id: "c1"}, {_id: "c2"}]);
    const sync = await source.sync(db);
    const read = await db.allDocs();
    const whoami = await (await fetch(base + "/_session", {credentials: "include"})).json();
    const signOut = await fetch(base + "/_session", {method: "DELETE", credentials: "include"});
    const afterSignOut = await expectError(new PouchDB(base + "/" + dbName, {skip_setup: true}).get("by-cookie"));
    await fetch(base + "/" + dbName, {method: "DELETE", headers: admin});
    const value = {users: users.status, anonymous: anonymous.status, signIn: [signIn.status, session.ok, session.name === name],
                   written: generation(written.rev), pushed: sync.push.docs_written, pulledBack: sync.pull.docs_written,
                   rows: read.rows.map(r => r.id), whoami: [whoami.userCtx.name === name, whoami.userCtx.roles],
                   signOut: signOut.status, afterSignOut: afterSignOut.status};
    return {ok: signIn.status === 200 && written.ok && read.rows.length === 3 && whoami.userCtx.name === name &&
                afterSignOut.status === 401, value};
  });

  // DocServer's channels (no CouchDB has them): a user limited to one channel replicates with PouchDB.
  if (parameters.get("channels") === "1") await step("DocServer channels: a user limited to a channel syncs with PouchDB", async () => {
    const admin = {"Authorization": "Basic " + btoa(auth.username + ":" + auth.password), "Content-Type": "application/json"};
    const name = "red-user" + suffix;
    await fetch(base + "/_users/org.couchdb.user:" + name, {method: "PUT", headers: admin,
      body: JSON.stringify({_id: "org.couchdb.user:" + name, name, password: "secret", roles: [], type: "user", channels: ["red"]})});
    const adminView = remoteDB("channels");
    const seeded = [];
    for (let i = 0; i < 30; i++) seeded.push({_id: "s" + String(i).padStart(2, "0"), channels: [i % 3 === 1 ? "blue" : "red"]});
    seeded.push({_id: "none"});
    await adminView.bulkDocs(seeded);
    const mine = new PouchDB(base + "/channels" + suffix, {auth: {username: name, password: "secret"}, skip_setup: true});
    const local = localDB("channels");
    const pulled = await PouchDB.replicate(mine, local);
    const ids = (await local.allDocs()).rows.map(r => r.id);
    const redIds = seeded.filter(d => d.channels && d.channels.includes("red")).map(d => d._id).sort();
    await local.bulkDocs([{_id: "from-red", channels: ["red"]}, {_id: "from-blue", channels: ["blue"]}]);
    const pushed = await local.replicate.to(mine);
    const again = await PouchDB.replicate(mine, local);
    const serverIds = (await adminView.allDocs()).rows.map(r => r.id);
    const blueRead = await expectError(mine.get("s01"));
    await adminView.destroy();
    const value = {pulled: pulled.docs_written, sameAsRed: sameJSON(ids, redIds), pushed: [pushed.docs_written, pushed.doc_write_failures],
                   errors: (pushed.errors || []).map(e => e.name || e.error), again: again.docs_written,
                   redOnServer: serverIds.includes("from-red"), blueOnServer: serverIds.includes("from-blue"), blueRead: blueRead.status};
    return {ok: value.sameAsRed && pulled.doc_write_failures === 0 && pushed.docs_written === 1 && pushed.doc_write_failures === 1 &&
                value.redOnServer && !value.blueOnServer && blueRead.status === 403 && again.docs_written === 0,
            value, detail: JSON.stringify({ids, redIds, pushed, pulled})};
  });

  await step("destroy the remote database", async () => {
    const destroyed = await remote.destroy();
    // PouchDB answers the info of a database that does not exist, rather than throwing.
    const after = await new PouchDB(base + "/pouch" + suffix, {auth, skip_setup: true}).info().catch(errorShape);
    return {ok: destroyed.ok && (after.error === "not_found" || after.status === 404),
            value: {destroyed: destroyed.ok, error: after.error || after.name, reason: after.reason}};
  });

  for (const db of [local, copy]) await db.destroy().catch(() => {});
}

run().catch(error => steps.push({name: "scenario", ok: false, value: null, detail: String(error && error.stack || error)}))
  .finally(() => fetch("/result?run=" + parameters.get("run"), {method: "POST", body: JSON.stringify(steps)}));
