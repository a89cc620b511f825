#!/usr/bin/env python3
"""Records Apache CouchDB's answers to the conformance cases into
Tests/Fixtures/couchdb-3.3.3/conformance.json, which CouchDBConformanceTests replays against DocServer.

Each case runs in a database of its own ({db} in paths): its setup requests first (each must succeed),
then the request whose status and body are recorded. Bodies are sent as the raw text written here, so a
case can send JSON that a JSON library would not write (duplicate member names).

    COUCHDB_URL=http://admin:admin@127.0.0.1:5984 python3 Tests/Interop/conformance_record.py

Without COUCHDB_URL it says so and exits 0: nothing to record against.
"""
import base64
import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
OUTPUT = os.path.join(HERE, "..", "Fixtures", "couchdb-3.3.3", "conformance.json")

# Two leaves of one document (`conflicted`) and a document with a deleted conflicting leaf (`healed`).
CONFLICTS = json.dumps({"new_edits": False, "docs": [
    {"_id": "conflicted", "_rev": "1-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "v": "a"},
    {"_id": "conflicted", "_rev": "1-bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", "v": "b"},
    {"_id": "healed", "_rev": "1-cccccccccccccccccccccccccccccccc", "v": "c"},
    {"_id": "healed", "_rev": "1-dddddddddddddddddddddddddddddddd", "_deleted": True},
    {"_id": "plain", "_rev": "1-eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee", "v": "e"},
]})

DESIGN = json.dumps({
    "views": {
        "twice": {"map": "function(doc) { if (doc.k) { emit(doc.k, 'multiple values!'); emit(doc.k, 'crayon!'); } }"},
        "by_k": {"map": "function(doc) { if (doc.k) emit(doc.k, 1); }"},
        "sum": {"map": "function(doc) { if (doc.k) emit(doc.k, 1); }", "reduce": "_sum"},
        "deleted_conflicts": {"map": "function(doc) { emit(doc._id, doc._deleted_conflicts || null); }"},
        "conflicts": {"map": "function(doc) { emit(doc._id, doc._conflicts || null); }"},
        "only_conflicted": {"map": "function(doc) { if (doc._conflicts) emit(doc._id, null); }"},
    },
    "filters": {
        "conflicted": "function(doc, req) { return !!doc._conflicts; }",
        "throws": "function(doc, req) { if (doc.k === 'b') throw 'bad filter'; return true; }",
    },
    "shows": {
        "conflicts": "function(doc, req) { return {json: {conflicts: doc ? (doc._conflicts || null) : 'no doc'}}; }",
        "json_only": "function(doc, req) { provides('json', function() { return {json: {ok: 1}}; }); }",
    },
})

# Views whose reduce fails are in design documents of their own: CouchDB builds a design document's
# views together, so one failing reduce fails the others' queries too.
BOOM = json.dumps({"views": {"boom": {"map": "function(doc) { if (doc.k) emit(doc.k, 1); }",
                                      "reduce": "function(keys, values, rereduce) { throw 'boom'; }"}}})
STATS = json.dumps({"views": {
    "arrays": {"map": "function(doc) { if (doc.s) emit(doc._id, doc.s); }", "reduce": "_stats"},
}})
STATS_NULL_ROWS = json.dumps({"views": {
    "values": {"map": "function(doc) { if (doc.t !== undefined) emit(doc._id, doc.t); }", "reduce": "_stats"},
}})

KEYED = json.dumps({"docs": [
    {"_id": "a", "k": "a"}, {"_id": "b", "k": "b"}, {"_id": "c", "k": "c"}, {"_id": "d", "k": "d"},
    {"_id": "s1", "s": [1, 2]}, {"_id": "s2", "s": [3, None]}, {"_id": "s3", "s": [None, 4]},
    {"_id": "t1", "t": 1}, {"_id": "t2", "t": None}, {"_id": "t3", "t": [1, 2]},
]})

SEED = [("PUT", "/{db}/_design/d", DESIGN), ("PUT", "/{db}/_design/boom", BOOM), ("PUT", "/{db}/_design/stats", STATS),
        ("PUT", "/{db}/_design/stats_rows", STATS_NULL_ROWS), ("POST", "/{db}/_bulk_docs", KEYED)]
SEED_CONFLICTS = SEED + [("POST", "/{db}/_bulk_docs", CONFLICTS)]

CASES = [
    # JavaScript functions see what CouchDB gives them.
    {"name": "filter sees _conflicts", "setup": SEED_CONFLICTS,
     "request": ("GET", "/{db}/_changes?filter=d/conflicted", None)},
    {"name": "_view filter sees _conflicts", "setup": SEED_CONFLICTS,
     "request": ("GET", "/{db}/_changes?filter=_view&view=d/only_conflicted", None)},
    {"name": "show sees _conflicts", "setup": SEED_CONFLICTS,
     "request": ("GET", "/{db}/_design/d/_show/conflicts/conflicted", None)},
    {"name": "map sees _deleted_conflicts", "setup": SEED_CONFLICTS,
     "request": ("GET", "/{db}/_design/d/_view/deleted_conflicts?key=%22healed%22", None)},
    {"name": "map sees _conflicts", "setup": SEED_CONFLICTS,
     "request": ("GET", "/{db}/_design/d/_view/conflicts?key=%22conflicted%22", None)},
    # Rows one document emits under one key come in the order of their values.
    {"name": "one key twice, ordered by value", "setup": SEED,
     "request": ("GET", "/{db}/_design/d/_view/twice?key=%22a%22", None)},
    {"name": "one key twice, descending", "setup": SEED,
     "request": ("GET", "/{db}/_design/d/_view/twice?key=%22a%22&descending=true", None)},
    # Functions that throw.
    {"name": "reduce that throws", "setup": SEED,
     "request": ("GET", "/{db}/_design/boom/_view/boom", None)},
    {"name": "reduce that throws, grouped", "setup": SEED,
     "request": ("GET", "/{db}/_design/boom/_view/boom?group=true", None)},
    {"name": "filter that throws", "setup": SEED,
     "request": ("GET", "/{db}/_changes?filter=d/throws", None)},
    # Built-in reduces.
    {"name": "_stats over arrays with nulls", "setup": SEED,
     "request": ("GET", "/{db}/_design/stats/_view/arrays", None)},
    {"name": "_stats over arrays with nulls, grouped", "setup": SEED,
     "request": ("GET", "/{db}/_design/stats/_view/arrays?group=true", None)},
    {"name": "_stats over null and array rows", "setup": SEED,
     "request": ("GET", "/{db}/_design/stats_rows/_view/values", None)},
    # offset and total_rows.
    {"name": "offset with keys", "setup": SEED,
     "request": ("GET", "/{db}/_design/d/_view/by_k?keys=%5B%22c%22%2C%22b%22%5D", None)},
    {"name": "offset with keys, descending", "setup": SEED,
     "request": ("GET", "/{db}/_design/d/_view/by_k?keys=%5B%22c%22%2C%22b%22%5D&descending=true", None)},
    {"name": "offset with keys, none found", "setup": SEED,
     "request": ("GET", "/{db}/_design/d/_view/by_k?keys=%5B%22zz%22%5D", None)},
    {"name": "offset with keys, all skipped", "setup": SEED,
     "request": ("GET", "/{db}/_design/d/_view/by_k?keys=%5B%22c%22%5D&skip=1", None)},
    {"name": "offset with keys, first skipped", "setup": SEED,
     "request": ("GET", "/{db}/_design/d/_view/by_k?keys=%5B%22b%22%2C%22c%22%5D&skip=1", None)},
    {"name": "sorted=false", "setup": SEED,
     "request": ("GET", "/{db}/_design/d/_view/by_k?sorted=false&startkey=%22b%22", None)},
    # Query parameters as CouchDB reads them.
    {"name": "inclusive_end=TRUE", "setup": SEED,
     "request": ("GET", "/{db}/_design/d/_view/by_k?endkey=%22b%22&inclusive_end=TRUE", None)},
    {"name": "inclusive_end=False", "setup": SEED,
     "request": ("GET", "/{db}/_design/d/_view/by_k?endkey=%22b%22&inclusive_end=False", None)},
    {"name": "group=false with group_level", "setup": SEED,
     "request": ("GET", "/{db}/_design/d/_view/sum?group=false&group_level=1", None)},
    {"name": "malformed keys", "setup": SEED,
     "request": ("GET", "/{db}/_design/d/_view/by_k?keys=%5B1", None)},
    {"name": "keys not an array", "setup": SEED,
     "request": ("GET", "/{db}/_design/d/_view/by_k?keys=%7B%7D", None)},
    {"name": "a path below a view", "setup": SEED,
     "request": ("GET", "/{db}/_design/d/_view/by_k/extra", None)},
    # Duplicate member names: the last one is kept, where it stands, and the revision is CouchDB's.
    {"name": "duplicate members stored", "setup": [],
     "request": ("PUT", "/{db}/dup", '{"a": 1, "b": 2, "a": 3}')},
    {"name": "duplicate members read", "setup": [("PUT", "/{db}/dup", '{"a": 1, "b": 2, "a": 3}')],
     "request": ("GET", "/{db}/dup", None)},
    {"name": "duplicate members in _bulk_docs", "setup": [],
     "request": ("POST", "/{db}/_bulk_docs", '{"docs": [{"_id": "x", "n": {"k": 1, "k": [2]}, "n": {"k": 3, "j": 4, "k": 5}}]}')},
    {"name": "duplicate members in _bulk_docs, read", "setup": [
        ("POST", "/{db}/_bulk_docs", '{"docs": [{"_id": "x", "n": {"k": 1, "k": [2]}, "n": {"k": 3, "j": 4, "k": 5}}]}')],
     "request": ("GET", "/{db}/x", None)},
    # A `_security` object with names or roles that are no strings: CouchDB 3.3.3 crashes (500); DocServer
    # refuses it (400), a documented difference.
    {"name": "_security with a number as a name", "setup": [],
     "request": ("PUT", "/{db}/_security", '{"admins": {"names": [1], "roles": []}, "members": {"names": [], "roles": []}}')},
    {"name": "_security with a boolean as a role", "setup": [],
     "request": ("PUT", "/{db}/_security", '{"members": {"roles": [true]}}')},
    # The log level of a running node: a PUT answers the level before; a word CouchDB does not know is
    # kept as written (and logged at as `info`).
    {"name": "log level set", "setup": [("PUT", "/_node/_local/_config/log/level", '"info"')],
     "request": ("PUT", "/_node/_local/_config/log/level", '"warning"')},
    {"name": "log level read", "setup": [("PUT", "/_node/_local/_config/log/level", '"warning"')],
     "request": ("GET", "/_node/_local/_config/log/level", None)},
    {"name": "log level unknown word", "setup": [("PUT", "/_node/_local/_config/log/level", '"info"')],
     "request": ("PUT", "/_node/_local/_config/log/level", '"loud"')},
    # A show that cannot give what Accept asks for.
    {"name": "show not acceptable", "setup": SEED,
     "request": ("GET", "/{db}/_design/d/_show/json_only", None, {"Accept": "text/csv"})},
]


def record_tasks(send):
    """What `_active_tasks` lists while CouchDB works: an `indexer` task during a view build, then a
    `view_compaction` and a `database_compaction` task, each as first seen with its progress started."""
    db = "conformance_tasks"
    send("DELETE", "/" + db)
    send("PUT", "/" + db)
    for start in range(0, 30000, 5000):
        send("POST", f"/{db}/_bulk_docs", json.dumps({"docs": [{"n": n} for n in range(start, start + 5000)]}))
    slow = "function(doc) { var x = 0; for (var i = 0; i < 20000; i++) x += i; emit(doc.n, x); }"
    send("PUT", f"/{db}/_design/slow", json.dumps({"views": {"v": {"map": slow}, "w": {"map": "function(doc) { emit(doc._id, null); }"}}}))

    def watch(kind, start, wanted=lambda task: True):
        import threading
        worker = threading.Thread(target=start)
        worker.start()
        # CouchDB answers a compaction at once and works on: the task is looked for until it shows.
        found, deadline = None, time.time() + 120
        while found is None and time.time() < deadline:
            _, _, text = send("GET", "/_active_tasks")
            found = next((task for task in json.loads(text) if task.get("type") == kind and wanted(task)), None)
        worker.join()
        assert found, f"no {kind} task seen"
        return found

    tasks = {"indexer": watch("indexer", lambda: send("GET", f"/{db}/_design/slow/_view/v?limit=1"), lambda t: t["changes_done"] > 0)}
    # Garbage for the compactions: every document updated twice, the views brought up to date between.
    for _ in range(2):
        _, _, text = send("GET", f"/{db}/_all_docs?include_docs=true")
        docs = [dict(row["doc"], m=1) for row in json.loads(text)["rows"] if not row["id"].startswith("_design/")]
        for start in range(0, len(docs), 5000):
            send("POST", f"/{db}/_bulk_docs", json.dumps({"docs": docs[start:start + 5000]}))
        send("GET", f"/{db}/_design/slow/_view/v?limit=1")
    tasks["view_compaction"] = watch("view_compaction", lambda: send("POST", f"/{db}/_compact/slow", "{}"), lambda t: "phase" in t)
    tasks["database_compaction"] = watch("database_compaction", lambda: send("POST", f"/{db}/_compact", "{}"))
    send("DELETE", "/" + db)
    for kind, task in tasks.items():
        print(f"{kind}: {json.dumps(task)}")
    return tasks


def main():
    base = os.environ.get("COUCHDB_URL")
    if not base:
        print("COUCHDB_URL is not set: nothing to record against")
        return 0
    parsed = urllib.parse.urlsplit(base)
    origin = f"{parsed.scheme}://{parsed.hostname}:{parsed.port or 5984}"
    auth = "Basic " + base64.b64encode(f"{parsed.username}:{parsed.password}".encode()).decode()

    def send(method, path, body=None, headers=None):
        request = urllib.request.Request(origin + path, method=method, data=body.encode() if body is not None else None)
        request.add_header("Authorization", auth)
        request.add_header("Accept", "application/json")
        if body is not None:
            request.add_header("Content-Type", "application/json")
        for name, value in (headers or {}).items():
            request.add_header(name, value)
        try:
            with urllib.request.urlopen(request) as response:
                return response.status, response.headers.get("Content-Type", ""), response.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.headers.get("Content-Type", ""), error.read().decode()

    recorded = []
    for number, case in enumerate(CASES):
        db = f"conformance_{number}"
        send("DELETE", "/" + db)
        status, _, text = send("PUT", "/" + db)
        assert status == 201, (db, status, text)
        for method, path, body in case["setup"]:
            status, _, text = send(method, path.replace("{db}", db), body)
            assert status < 300, (case["name"], path, status, text)
        method, path, body, *rest = case["request"]
        headers = rest[0] if rest else {}
        status, content_type, text = send(method, path.replace("{db}", db), body, headers)
        # A feed's last_seq and a sequence are CouchDB's opaque strings: kept, the replay compares shapes.
        recorded.append({
            "name": case["name"],
            "setup": [{"method": m, "path": p, "body": b} for m, p, b in case["setup"]],
            "request": {"method": method, "path": path, "body": body, "headers": headers},
            "status": status,
            "content_type": content_type.split(";")[0],
            "body": text,
        })
        send("DELETE", "/" + db)
        print(f"{status} {case['name']}: {text.strip()[:160]}")
    send("PUT", "/_node/_local/_config/log/level", '"info"')
    tasks = record_tasks(send)
    with open(OUTPUT, "w") as output:
        json.dump({"couchdb": "3.3.3", "cases": recorded, "active_tasks": tasks}, output, indent=1, ensure_ascii=False)
        output.write("\n")
    print(f"wrote {len(recorded)} cases to {os.path.relpath(OUTPUT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
