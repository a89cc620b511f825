#!/usr/bin/env python3
"""DocStore against a real Apache CouchDB 3.3: CouchDB's own replicator pushing to and pulling from
`docstore serve` (one-shot and continuous), and `docstore replicate` CouchDB -> local -> CouchDB.

Usage: COUCHDB_URL=http://admin:admin@127.0.0.1:5984 couchdb_replication_interop.py PATH_TO_DOCSTORE_BINARY

Does nothing (and says so) when COUCHDB_URL is not set. Builds a corpus of its own in CouchDB that
goes beyond the recorded fixtures — several leaves with different attachments, deleted leaves with
attachments, an attachment added on a conflict branch, NFC and NFD ids, a 50 MB attachment, integers
beyond 64 bits, compressible attachments CouchDB stores gzip-encoded — then compares every database a
replication produced with the source: the same ids, the same leaves with their `_revisions`, bodies,
and for every attachment of every leaf the same content type, revpos, length, digest and decoded bytes.
Prints one line per check and a closing "N passed, M failed" line; exits non-zero if any failed.
Python standard library only.
"""
import base64
import hashlib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

PREFIX = "dsi_"
BIG_ATTACHMENT = 50 * 1024 * 1024


class Endpoint:
    """A CouchDB-API server: CouchDB itself or `docstore serve`."""

    def __init__(self, url):
        parts = urllib.parse.urlsplit(url)
        self.base = "%s://%s:%d" % (parts.scheme, parts.hostname, parts.port or 80)
        self.user, self.password = urllib.parse.unquote(parts.username or ""), urllib.parse.unquote(parts.password or "")
        self.auth = "Basic " + base64.b64encode(("%s:%s" % (self.user, self.password)).encode()).decode()

    def url(self, db):
        return "%s://%s:%s@%s/%s" % (self.base.split("://")[0], urllib.parse.quote(self.user), urllib.parse.quote(self.password),
                                     self.base.split("://")[1], db)

    def request(self, method, path, body=None, headers=None, timeout=600):
        headers = dict(headers or {})
        headers.setdefault("Accept", "application/json")
        headers["Authorization"] = self.auth
        data = body
        if isinstance(body, (dict, list)):
            data = json.dumps(body).encode()
            headers.setdefault("Content-Type", "application/json")
        request = urllib.request.Request(self.base + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return response.status, response.read(), dict(response.headers)
        except urllib.error.HTTPError as error:
            return error.code, error.read(), dict(error.headers)

    def json(self, method, path, body=None, expect=(200, 201, 202), **options):
        status, data, _ = self.request(method, path, body, **options)
        if status not in expect:
            raise AssertionError("%s %s -> %d %s" % (method, path, status, data[:300]))
        return json.loads(data) if data else None

    def recreate(self, db):
        self.request("DELETE", "/" + db)
        self.json("PUT", "/" + db)


def start_docstore(binary, data):
    """`docstore serve` on a free port of 127.0.0.1 with admin:secret and its data in `data`: the process
    and its Endpoint."""
    process = subprocess.Popen([binary, "serve", "--data", data, "--port", "0", "--admin", "admin:secret"],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    match = re.search(r"http://127\.0\.0\.1:(\d+)/", process.stdout.readline())
    if not match:
        stop_docstore(process)
        raise AssertionError("docstore serve did not start")
    return process, Endpoint("http://admin:secret@127.0.0.1:%s" % match.group(1))


def start_comparison(prefix, defaults):
    """The start of a script comparing CouchDB (COUCHDB_URL) with `docstore serve` (the binary in argv[1]):
    None, having said why, without COUCHDB_URL; else (couch, docstore, process, folder, options), with
    `docstore serve` started on data in a new temporary folder named from `prefix`, and options the
    integers given as `--name N` after the binary, else `defaults[name]`."""
    couch_url = os.environ.get("COUCHDB_URL")
    if not couch_url:
        print("COUCHDB_URL is not set: no CouchDB to compare with; nothing run.")
        return None
    args = sys.argv[1:]
    binary = os.path.abspath(args[0])
    options = {name: int(args[args.index("--" + name) + 1]) if "--" + name in args else default
               for name, default in defaults.items()}
    couch = Endpoint(couch_url)
    folder = tempfile.mkdtemp(prefix=prefix)
    process, docstore = start_docstore(binary, os.path.join(folder, "server"))
    return couch, docstore, process, folder, options


def report_comparison(figures, differences):
    """The end of a comparison script: each figure ("name": "same/asked"), the first differences (what,
    CouchDB's answer, DocStore's), the "N passed, M failed" line; the exit status, 1 if any differed."""
    for name, value in figures.items():
        print("%s: %s" % (name, value))
    for what, expected, actual in differences[:15]:
        print("DIFFERENCE %s\n  CouchDB:  %s\n  DocStore: %s" % (what, json.dumps(expected)[:600], json.dumps(actual)[:600]))
    print("%d passed, %d failed" % (sum(int(v.split("/")[0]) for v in figures.values()), len(differences)))
    return 1 if differences else 0


def stop_docstore(process):
    """Stops `docstore serve` as Ctrl-C does, or kills it after 15 s."""
    process.send_signal(signal.SIGINT)
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()


def quote_id(doc_id):
    return urllib.parse.quote(doc_id, safe="")


def att(data, content_type, revpos=None):
    entry = {"content_type": content_type, "data": base64.b64encode(data).decode()}
    if revpos is not None:
        entry["revpos"] = revpos
    return entry


def words(count, seed):
    rng = random.Random(seed)
    vocabulary = ["sofa", "chunk", "leaf", "stub", "gzip", "digest", "winner", "tombstone", "replica", "branch"]
    return " ".join(rng.choice(vocabulary) for _ in range(count)).encode()


def build_corpus(couch, db):
    """The source database: everything CouchDB's replicator and DocSync must carry exactly."""
    couch.recreate(db)
    docs = []
    for n in range(30):
        docs.append({"_id": "plain-%03d" % n, "n": n, "nested": {"list": [n, str(n), None, True], "deep": {"x": n * 1.5}}})
    # NFC and NFD spellings of one word are two documents; ids with /, space, + and astral characters.
    docs.append({"_id": "caf\u00e9", "form": "NFC"})
    docs.append({"_id": "cafe\u0301", "form": "NFD"})
    docs.append({"_id": "a/b c+d?\U0001F600", "form": "odd"})
    # Several revisions, with an attachment added in revision 2 and kept by stub.
    docs.append({"_id": "multi", "_rev": "3-c", "_revisions": {"start": 3, "ids": ["c", "b", "a"]}, "v": 3,
                 "_attachments": {"kept.txt": att(words(400, 1), "text/plain", revpos=2)}})
    # Conflicts: leaves with different attachments, a deleted leaf with an attachment, a leaf adding an
    # attachment on its branch, and a second root.
    docs += [
        {"_id": "fork", "_rev": "2-left", "_revisions": {"start": 2, "ids": ["left", "root"]}, "side": "left",
         "_attachments": {"left.json": att(json.dumps({"k": list(range(300))}).encode(), "application/json", revpos=2),
                          "shared.bin": att(bytes(range(256)) * 8, "application/octet-stream", revpos=1)}},
        {"_id": "fork", "_rev": "3-right", "_revisions": {"start": 3, "ids": ["right", "mid", "root"]}, "side": "right",
         "_attachments": {"right.png": att(bytes((i * 7) % 256 for i in range(5000)), "image/png", revpos=3),
                          "shared.bin": att(bytes(range(256)) * 8, "application/octet-stream", revpos=1)}},
        {"_id": "fork", "_rev": "2-gone", "_revisions": {"start": 2, "ids": ["gone", "root"]}, "_deleted": True,
         "_attachments": {"last-words.txt": att(words(200, 2), "text/plain", revpos=2)}},
        {"_id": "fork", "_rev": "1-other", "side": "second root", "_attachments": {"other.html": att(b"<p>" + words(300, 3) + b"</p>", "text/html", revpos=1)}},
        {"_id": "all-deleted", "_rev": "2-x", "_revisions": {"start": 2, "ids": ["x", "r"]}, "_deleted": True},
        {"_id": "all-deleted", "_rev": "2-y", "_revisions": {"start": 2, "ids": ["y", "r"]}, "_deleted": True,
         "_attachments": {"y.txt": att(b"deleted with bytes", "text/plain", revpos=2)}},
        {"_id": "tombstone-body", "_rev": "2-t", "_revisions": {"start": 2, "ids": ["t", "s"]}, "_deleted": True, "why": "kept"},
    ]
    interactive = [doc for doc in docs if "_rev" not in doc]
    replicated = [doc for doc in docs if "_rev" in doc]
    status, data, _ = couch.request("POST", "/%s/_bulk_docs" % db, {"docs": interactive})
    assert status == 201 and all(row.get("ok") for row in json.loads(data)), data
    status, data, _ = couch.request("POST", "/%s/_bulk_docs" % db, {"new_edits": False, "docs": replicated})
    assert status == 201 and json.loads(data) == [], data
    # Interactive writes: numbers CouchDB keeps exactly, and a compressible text CouchDB stores gzip.
    couch.json("PUT", "/%s/numbers" % db, b'{"big":18446744073709551617,"neg":-123456789012345678901234567890,"f":1.5e300,"i64":9223372036854775807}',
               headers={"Content-Type": "application/json"})
    couch.json("PUT", "/%s/texts" % db, {"_attachments": {"notes.txt": att(words(20000, 4), "text/plain"),
                                                          "empty.txt": att(b"", "text/plain"),
                                                          "data.json": att(json.dumps(list(range(5000))).encode(), "application/json")}})
    # A 50 MB attachment, uploaded as a standalone attachment.
    big = bytes(random.Random(5).getrandbits(8) for _ in range(1024 * 1024)) * (BIG_ATTACHMENT // (1024 * 1024))
    rev = couch.json("PUT", "/%s/big" % db, {"size": BIG_ATTACHMENT})["rev"]
    couch.json("PUT", "/%s/big/video.bin?rev=%s" % (db, rev), big, headers={"Content-Type": "application/octet-stream"})
    # Members named twice: CouchDB keeps each one's last value (`{"b":2,"a":3,…}`), and a replica must
    # hold the same body under the same revision.
    couch.json("PUT", "/%s/repeated-members" % db, b'{"a":1,"b":2,"a":3,"n":{"k":1,"k":[2]}}',
               headers={"Content-Type": "application/json"})
    # A design document (replicated as a plain document by both sides).
    couch.json("PUT", "/%s/_design/app" % db, {"views": {"by_n": {"map": "function (doc) { emit(doc.n, null); }"}}})


def snapshot(server, db):
    """Every document of `db` as {id: {rev: (body, revisions, attachments)}}, attachments decoded."""
    changes = server.json("GET", "/%s/_changes?style=all_docs" % db)
    result = {}
    for row in changes["results"]:
        doc_id = row["id"]
        status, data, headers = server.request("GET", "/%s/%s?open_revs=all&revs=true&attachments=true" % (db, quote_id(doc_id)))
        assert status == 200, (doc_id, status, data[:200])
        leaves = {}
        for entry in json.loads(data):
            doc = entry.get("ok")
            if doc is None:
                continue
            attachments = {}
            for name, meta in (doc.pop("_attachments", None) or {}).items():
                content = base64.b64decode(meta["data"]) if "data" in meta else None
                attachments[name] = (meta.get("content_type"), meta.get("revpos"), meta.get("digest"),
                                     hashlib.md5(content).hexdigest() if content is not None else "stub", len(content or b""))
            revisions = doc.pop("_revisions", None)
            rev = doc.pop("_rev")
            doc.pop("_id", None)
            leaves[rev] = (json.dumps(doc, sort_keys=True), json.dumps(revisions), attachments)
        result[doc_id] = leaves
    return result


def compare(expected, actual, digests=True):
    problems = []
    for doc_id in sorted(set(expected) | set(actual)):
        if doc_id not in actual:
            problems.append("missing document %r" % doc_id)
            continue
        if doc_id not in expected:
            problems.append("extra document %r" % doc_id)
            continue
        left, right = expected[doc_id], actual[doc_id]
        if set(left) != set(right):
            problems.append("%r leaves %s != %s" % (doc_id, sorted(left), sorted(right)))
            continue
        for rev in left:
            (body_a, revs_a, atts_a), (body_b, revs_b, atts_b) = left[rev], right[rev]
            if body_a != body_b:
                problems.append("%r %s body %s != %s" % (doc_id, rev, body_a[:120], body_b[:120]))
            if revs_a != revs_b:
                problems.append("%r %s _revisions differ" % (doc_id, rev))
            if set(atts_a) != set(atts_b):
                problems.append("%r %s attachments %s != %s" % (doc_id, rev, sorted(atts_a), sorted(atts_b)))
                continue
            for name in atts_a:
                a, b = atts_a[name], atts_b[name]
                if not digests:
                    a, b = a[:2] + a[3:], b[:2] + b[3:]
                if a != b:
                    problems.append("%r %s %r: %s != %s" % (doc_id, rev, name, a, b))
    return problems


def wait_for(condition, timeout, what):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if condition():
            return
        time.sleep(0.5)
    raise AssertionError("timed out waiting for %s" % what)


def couch_replicate(couch, source, target, continuous=False, create_target=True):
    body = {"source": source, "target": target, "create_target": create_target}
    if continuous:
        body["continuous"] = True
    status, data, _ = couch.request("POST", "/_replicate", body, timeout=900)
    answer = json.loads(data)
    if status >= 400 or not answer.get("ok"):
        raise AssertionError("_replicate %s -> %s: %d %s" % (source, target, status, data[:500]))
    failures = sum(entry.get("doc_write_failures", 0) for entry in answer.get("history", [])[:1])
    if failures:
        raise AssertionError("_replicate reported %d write failures" % failures)
    return answer


def main():
    run = start_comparison("docstore-couch-interop-", {})
    if run is None:
        return 0
    couch, docstore, process, folder, _ = run
    binary = os.path.abspath(sys.argv[1])
    version = couch.json("GET", "/")["version"]
    passed = failed = 0
    try:
        # CouchDB's replicator reaches docstore through the loopback address as well.
        source = PREFIX + "src"
        print("CouchDB %s at %s, docstore serve at %s" % (version, couch.base, docstore.base))
        build_corpus(couch, source)
        expected = snapshot(couch, source)
        local = os.path.join(folder, "local")

        def run(name, body):
            nonlocal passed, failed
            started = time.time()
            try:
                problems = body() or []
                if problems:
                    raise AssertionError("; ".join(problems[:8]) + (" (+%d more)" % (len(problems) - 8) if len(problems) > 8 else ""))
                passed += 1
                print("ok   %s (%.1f s)" % (name, time.time() - started))
            except Exception as error:  # noqa: BLE001 - every failure is reported
                failed += 1
                print("FAIL %s: %s" % (name, error))

        def replicate_cli(source_url, target_url):
            done = subprocess.run([binary, "replicate", source_url, target_url, "--create-target"],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=900)
            if done.returncode != 0:
                raise AssertionError("docstore replicate %s -> %s: %s" % (source_url, target_url, done.stdout[-500:]))

        run("CouchDB replicator pushes to docstore serve (one-shot)", lambda: (
            couch_replicate(couch, couch.url(source), docstore.url("pushed")),
            compare(expected, snapshot(docstore, "pushed")))[1])
        run("CouchDB replicator pulls from docstore serve (one-shot)", lambda: (
            couch.request("DELETE", "/" + PREFIX + "pulled"),
            couch_replicate(couch, docstore.url("pushed"), couch.url(PREFIX + "pulled")),
            compare(expected, snapshot(couch, PREFIX + "pulled")))[2])

        def continuous():
            couch.request("DELETE", "/" + PREFIX + "cont")
            docstore.recreate("cont")  # the pull starts at once, before the push could create it
            push = couch_replicate(couch, couch.url(source), docstore.url("cont"), continuous=True)
            pull = couch_replicate(couch, docstore.url("cont"), couch.url(PREFIX + "cont"), continuous=True)
            try:
                # Later writes on the source, with attachments and a conflict, flow through both.
                couch.json("PUT", "/%s/late-1" % source, {"late": 1, "_attachments": {"late.txt": att(words(3000, 9), "text/plain")}})
                status, data, _ = couch.request("POST", "/%s/_bulk_docs" % source, {"new_edits": False, "docs": [
                    {"_id": "fork", "_rev": "4-later", "_revisions": {"start": 4, "ids": ["later", "right", "mid", "root"]},
                     "side": "right, later", "_attachments": {"right.png": {"stub": True, "revpos": 3},
                                                              "added-later.txt": att(words(500, 10), "text/plain", revpos=4)}}]})
                assert status == 201 and json.loads(data) == [], data
                def arrived(server, db):
                    status, data, _ = server.request("GET", "/%s/fork?open_revs=all" % db)
                    leaves = [entry["ok"]["_rev"] for entry in json.loads(data) if "ok" in entry] if status == 200 else []
                    return server.request("GET", "/%s/late-1" % db)[0] == 200 and "4-later" in leaves
                wait_for(lambda: arrived(docstore, "cont"), 120, "the continuous push")
                wait_for(lambda: arrived(couch, PREFIX + "cont"), 120, "the continuous pull")
                # CouchDB's replicator writes its batches from several workers at once, so the latest
                # changes can arrive before earlier ones: both copies are compared until they match the
                # source, and their differences are the failure if they still do not after two minutes.
                final = snapshot(couch, source)
                problems = []
                def converged():
                    nonlocal problems
                    problems = compare(final, snapshot(docstore, "cont")) + compare(final, snapshot(couch, PREFIX + "cont"))
                    return not problems
                try:
                    wait_for(converged, 120, "both copies to match the source")
                except AssertionError:
                    pass
                return problems
            finally:
                for job in (push, pull):
                    couch.request("POST", "/_replicate", {"replication_id": job.get("_local_id"), "cancel": True})
        run("CouchDB replicator, continuous push to and pull from docstore serve", continuous)

        run("docstore replicate CouchDB -> local", lambda: (
            replicate_cli(couch.url(source), os.path.join(local, "copy")), [])[1])
        run("docstore replicate local -> CouchDB", lambda: (
            couch.request("DELETE", "/" + PREFIX + "roundtrip"),
            replicate_cli(os.path.join(local, "copy"), couch.url(PREFIX + "roundtrip")),
            compare(snapshot(couch, source), snapshot(couch, PREFIX + "roundtrip")))[2])
        run("docstore replicate local -> docstore serve -> CouchDB (DocSync both ways)", lambda: (
            couch.request("DELETE", "/" + PREFIX + "via_server"),
            replicate_cli(os.path.join(local, "copy"), docstore.url("from_local")),
            replicate_cli(docstore.url("from_local"), couch.url(PREFIX + "via_server")),
            compare(snapshot(couch, source), snapshot(couch, PREFIX + "via_server")))[3])
        run("a second docstore replicate moves nothing and stays equal", lambda: (
            replicate_cli(couch.url(source), os.path.join(local, "copy")),
            replicate_cli(os.path.join(local, "copy"), couch.url(PREFIX + "roundtrip")),
            compare(snapshot(couch, source), snapshot(couch, PREFIX + "roundtrip")))[2])

        def channels_from_couchdb():
            # DocSync narrows a pull from CouchDB by channels with a _selector on `channels` (CouchDB has no
            # bychannel filter); no channel named is everything.
            origin = PREFIX + "chan_src"
            couch.recreate(origin)
            couch.json("POST", "/%s/_bulk_docs" % origin, {"docs": [
                {"_id": "red", "channels": ["red"]}, {"_id": "blue", "channels": ["blue"]},
                {"_id": "both", "channels": ["red", "blue"]}, {"_id": "none"}]})
            problems = []
            for channels, wanted in (("red", ["both", "red"]), ("", ["blue", "both", "none", "red"])):
                target = os.path.join(local, "channels-" + (channels or "all"))
                done = subprocess.run([binary, "replicate", couch.url(origin), target, "--channels", channels],
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
                if done.returncode != 0:
                    problems.append("docstore replicate --channels %r: %s" % (channels, done.stdout[-300:]))
                    continue
                listed = subprocess.run([binary, "all", "--db", target], stdout=subprocess.PIPE, text=True, timeout=60)
                ids = sorted(row["id"] for row in json.loads(listed.stdout)["rows"])
                if ids != wanted:
                    problems.append("--channels %r pulled %s, not %s" % (channels, ids, wanted))
            return problems
        run("docstore replicate CouchDB -> local limited to channels (a _selector on CouchDB)", channels_from_couchdb)

        def mango_indexes():
            # An index made on CouchDB arrives in docstore serve and is listed as CouchDB lists it; one made
            # on docstore serve arrives in CouchDB, which lists it and answers a sorted _find through it.
            origin, back = PREFIX + "idx_src", PREFIX + "idx_back"
            couch.recreate(origin)
            couch.request("DELETE", "/" + back)
            couch.json("POST", "/%s/_bulk_docs" % origin, {"docs": [{"_id": "d%d" % n, "kind": "k%d" % (n % 3), "n": n} for n in range(12)]})
            couch.json("POST", "/%s/_index" % origin, {"index": {"fields": ["kind"], "partial_filter_selector": {"n": {"$gt": 2}}},
                                                       "ddoc": "fromcouch", "name": "byKind"})
            couch_replicate(couch, couch.url(origin), docstore.url("idx"))
            listed = lambda server, db: {(i["ddoc"], i["name"]): i for i in server.json("GET", "/%s/_index" % db)["indexes"]}
            problems = []
            from_couch = listed(couch, origin)[("_design/fromcouch", "byKind")]
            arrived = listed(docstore, "idx").get(("_design/fromcouch", "byKind"))
            if arrived != from_couch:
                problems.append("docstore lists the replicated index as %s, CouchDB as %s" % (arrived, from_couch))
            created = docstore.json("POST", "/idx/_index", {"index": {"fields": [{"n": "desc"}]}, "ddoc": "fromdocstore", "name": "byN"})
            if created != {"result": "created", "id": "_design/fromdocstore", "name": "byN"}:
                problems.append("docstore _index answered %s" % created)
            couch_replicate(couch, docstore.url("idx"), couch.url(back))
            in_couch = listed(couch, back)
            expected = {"ddoc": "_design/fromdocstore", "name": "byN", "type": "json", "partitioned": False, "def": {"fields": [{"n": "desc"}]}}
            if in_couch.get(("_design/fromdocstore", "byN")) != expected:
                problems.append("CouchDB lists the index made by docstore as %s" % in_couch.get(("_design/fromdocstore", "byN")))
            if ("_design/fromcouch", "byKind") not in in_couch:
                problems.append("the index made on CouchDB did not come back")
            found = couch.json("POST", "/%s/_find" % back, {"selector": {"n": {"$gte": 8}}, "sort": [{"n": "desc"}],
                                                            "use_index": ["fromdocstore", "byN"], "fields": ["_id"]})
            if [d["_id"] for d in found["docs"]] != ["d11", "d10", "d9", "d8"]:
                problems.append("CouchDB's _find through docstore's index answered %s" % found)
            return problems
        run("Mango index design documents replicate both ways and work on CouchDB", mango_indexes)

        def text_indexes():
            # CouchDB 3.3.3 without a search service refuses `_index` of type text (503) but stores and
            # replicates the design document that a search-enabled CouchDB writes: one written there is
            # built by docstore serve and answers $text; one made by docstore serve reaches CouchDB intact.
            origin, back = PREFIX + "text_src", PREFIX + "text_back"
            couch.recreate(origin)
            couch.request("DELETE", "/" + back)
            couch.json("POST", "/%s/_bulk_docs" % origin, {"docs": [
                {"_id": "t1", "title": "Green tea", "body": "Brew at 80 degrees"},
                {"_id": "t2", "title": "Black tea", "body": "Strong, for breakfast"},
                {"_id": "t3", "title": "Coffee", "body": "No tea here"}]})
            status, data, _ = couch.request("PUT", "/%s/_design/fromcouchtext" % origin, {"language": "query", "indexes": {"titles": {
                "index": {"default_analyzer": "keyword", "default_field": {}, "selector": {}, "partial_filter_selector": {},
                          "fields": [{"name": "title", "type": "string"}], "index_array_lengths": True},
                "analyzer": {"name": "perfield", "default": "keyword", "fields": {"$default": "standard"}}}}})
            assert status == 201, data
            couch_replicate(couch, couch.url(origin), docstore.url("textidx"))
            problems = []
            found = docstore.json("POST", "/textidx/_find", {"selector": {"$text": "tea"}, "use_index": ["fromcouchtext", "titles"], "fields": ["_id"]})
            if sorted(d["_id"] for d in found.get("docs", [])) != ["t1", "t2"]:
                problems.append("docstore's $text through the replicated text index answered %s" % found)
            created = docstore.json("POST", "/textidx/_index", {"index": {"fields": [{"name": "body", "type": "string"}]}, "type": "text",
                                                                "ddoc": "fromdocstoretext", "name": "bodies"})
            if created != {"result": "created", "id": "_design/fromdocstoretext", "name": "bodies"}:
                problems.append("docstore _index of type text answered %s" % created)
            couch_replicate(couch, docstore.url("textidx"), couch.url(back))
            mine = docstore.json("GET", "/textidx/_design/fromdocstoretext")
            theirs = couch.json("GET", "/%s/_design/fromdocstoretext" % back)
            if theirs.get("indexes") != mine.get("indexes") or theirs.get("language") != "query":
                problems.append("CouchDB holds the text index as %s, docstore as %s" % (theirs, mine))
            return problems
        run("text index design documents replicate both ways; docstore builds one written on CouchDB", text_indexes)

        def replicator_databases():
            # The same persistent replications written as documents into CouchDB's _replicator and into
            # docstore's: the documents, _scheduler/docs, _scheduler/jobs and _active_tasks have the same
            # members, and the replications do the same work.
            origin = PREFIX + "rep_src"
            couch.recreate(origin)
            couch.json("POST", "/%s/_bulk_docs" % origin, {"docs": [{"_id": "r%d" % n, "n": n} for n in range(7)]})
            problems = []
            servers = {"CouchDB": (couch, PREFIX + "rep_t"), "docstore": (docstore, "rep_t")}
            seen = {}
            for name, (server, prefix) in servers.items():
                for suffix in ("1", "2"):
                    couch.request("DELETE", "/" + PREFIX + "rep_t" + suffix)
                    docstore.request("DELETE", "/rep_t" + suffix)
                for doc_id in ("dsi_one", "dsi_cont"):
                    status, data, _ = server.request("GET", "/_replicator/" + doc_id)
                    if status == 200:
                        server.request("DELETE", "/_replicator/%s?rev=%s" % (doc_id, json.loads(data)["_rev"]))
                server.json("PUT", "/_replicator/dsi_one", {"source": couch.url(origin), "target": couch.url(PREFIX + "rep_t1"), "create_target": True})
                server.json("PUT", "/_replicator/dsi_cont", {"source": couch.url(origin), "target": couch.url(PREFIX + "rep_t2"),
                                                             "create_target": True, "continuous": True})
                wait_for(lambda: server.json("GET", "/_replicator/dsi_one").get("_replication_state") == "completed", 120,
                         "%s completing dsi_one" % name)
                def running():
                    entry = server.json("GET", "/_scheduler/docs/_replicator/dsi_cont")
                    return entry.get("state") == "running" and (entry.get("info") or {}).get("docs_written") == 7
                wait_for(running, 120, "%s running dsi_cont" % name)
                jobs = [job for job in server.json("GET", "/_scheduler/jobs")["jobs"] if job.get("doc_id") == "dsi_cont"]
                tasks = [task for task in server.json("GET", "/_active_tasks") if task.get("doc_id") == "dsi_cont"]
                seen[name] = {
                    "completed document": server.json("GET", "/_replicator/dsi_one"),
                    "_replication_stats": server.json("GET", "/_replicator/dsi_one")["_replication_stats"],
                    "_scheduler/docs completed": server.json("GET", "/_scheduler/docs/_replicator/dsi_one"),
                    "_scheduler/docs running": server.json("GET", "/_scheduler/docs/_replicator/dsi_cont"),
                    "_scheduler/jobs": jobs[0] if jobs else {},
                    "_scheduler/jobs info": jobs[0]["info"] if jobs else {},
                    "_active_tasks": tasks[0] if tasks else {},
                    "_replicator/_security": server.json("GET", "/_replicator/_security"),
                }
                for doc_id in ("dsi_one", "dsi_cont"):
                    rev = server.json("GET", "/_replicator/" + doc_id)["_rev"]
                    server.json("DELETE", "/_replicator/%s?rev=%s" % (doc_id, rev))
            for what in seen["CouchDB"]:
                theirs, mine = seen["CouchDB"][what], seen["docstore"][what]
                if what == "_replicator/_security":
                    if theirs != mine:
                        problems.append("%s: CouchDB %s, docstore %s" % (what, theirs, mine))
                    continue
                missing, extra = set(theirs) - set(mine), set(mine) - set(theirs)
                if missing or extra:
                    problems.append("%s: docstore lacks %s, has more %s" % (what, sorted(missing), sorted(extra)))
            for what in ("_replication_stats", "_scheduler/jobs info"):
                for key in ("docs_written", "docs_read", "revisions_checked", "missing_revisions_found", "doc_write_failures",
                            "bulk_get_docs", "bulk_get_attempts"):
                    if seen["CouchDB"][what].get(key) != seen["docstore"][what].get(key):
                        problems.append("%s.%s: CouchDB %s, docstore %s" % (what, key, seen["CouchDB"][what].get(key), seen["docstore"][what].get(key)))
            for what in ("_scheduler/docs completed", "_scheduler/docs running"):
                for key in ("state", "error_count"):
                    if seen["CouchDB"][what].get(key) != seen["docstore"][what].get(key):
                        problems.append("%s.%s: CouchDB %s, docstore %s" % (what, key, seen["CouchDB"][what].get(key), seen["docstore"][what].get(key)))
            # A database holding documents with CouchDB's state members replicates into docstore.
            couch.recreate(PREFIX + "rep_states")
            couch.json("PUT", "/%s/state" % (PREFIX + "rep_states"), {"source": "x", "_replication_state": "completed",
                                                                        "_replication_state_time": "2026-11-24T12:53:01Z", "_replication_stats": {"docs_written": 1}})
            couch_replicate(couch, couch.url(PREFIX + "rep_states"), docstore.url("rep_states"))
            copied = docstore.json("GET", "/rep_states/state")
            if copied.get("_replication_stats") != {"docs_written": 1}:
                problems.append("a document with _replication_* members arrived in docstore as %s" % copied)
            return problems
        run("_replicator documents, _scheduler and _active_tasks as CouchDB's", replicator_databases)

        def persistent_restart():
            # A continuous _replicator job pulling from CouchDB (string sequences) into docstore survives
            # a restart of the docstore process (SIGTERM) and resumes from its checkpoint.
            nonlocal process, docstore
            origin = PREFIX + "rep_restart"
            couch.recreate(origin)
            couch.json("POST", "/%s/_bulk_docs" % origin, {"docs": [{"_id": "p%d" % n, "n": n} for n in range(6)]})
            docstore.request("DELETE", "/restarted")
            docstore.json("PUT", "/_replicator/dsi_restart", {"source": couch.url(origin), "target": "restarted",
                                                              "create_target": True, "continuous": True})
            def job():
                jobs = [j for j in docstore.json("GET", "/_scheduler/jobs")["jobs"] if j.get("doc_id") == "dsi_restart"]
                return jobs[0] if jobs else {}
            wait_for(lambda: (job().get("info") or {}).get("docs_written") == 6 and
                     (job().get("info") or {}).get("checkpointed_source_seq") == (job().get("info") or {}).get("through_seq"), 120,
                     "the first six documents and their checkpoint")
            checkpointed = job()["info"]["checkpointed_source_seq"]
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=15)
            couch.json("POST", "/%s/_bulk_docs" % origin, {"docs": [{"_id": "q%d" % n, "n": n} for n in range(3)]})
            process, docstore = start_docstore(binary, os.path.join(folder, "server"))
            wait_for(lambda: docstore.json("GET", "/restarted").get("doc_count") == 9, 120, "the three written while docstore was down")
            problems = []
            # As CouchDB's, the figures go on from the checkpoint: 6 + 3. From the beginning, the job
            # would have found only the 3 new ones missing.
            info = job().get("info") or {}
            if info.get("missing_revisions_found") != 9 or info.get("docs_written") != 9:
                problems.append("after the restart the job found %s missing revisions and wrote %s, not 9 and 9 (checkpoint %s): %s"
                                % (info.get("missing_revisions_found"), info.get("docs_written"), checkpointed, info))
            rev = docstore.json("GET", "/_replicator/dsi_restart")["_rev"]
            docstore.json("DELETE", "/_replicator/dsi_restart?rev=%s" % rev)
            return problems
        run("a persistent docstore job pulling from CouchDB survives a docstore restart and resumes from its checkpoint", persistent_restart)

        def users_both_ways():
            # A user made on each side signs in on the other once CouchDB's replicator has copied the
            # `_users` documents: the same password hashes, and CouchDB's `_design/_auth` rules hold.
            def signs_in(server, name, password):
                probe = Endpoint("%s://%s:%s@%s" % (server.base.split("://")[0], urllib.parse.quote(name),
                                                     urllib.parse.quote(password), server.base.split("://")[1]))
                status, data, _ = probe.request("GET", "/_session")
                return status == 200 and (json.loads(data).get("userCtx") or {}).get("name") == name
            problems = []
            couch_user, docstore_user = "dsi-couch-user", "dsi-docstore-user"
            for server, name in ((couch, couch_user), (docstore, docstore_user), (couch, docstore_user), (docstore, couch_user)):
                status, data, _ = server.request("GET", "/_users/org.couchdb.user:" + name)
                if status == 200:
                    server.request("DELETE", "/_users/org.couchdb.user:%s?rev=%s" % (name, json.loads(data)["_rev"]))
            couch.json("PUT", "/_users/org.couchdb.user:" + couch_user,
                       {"name": couch_user, "type": "user", "roles": ["readers"], "password": "from couch"})
            docstore.json("PUT", "/_users/org.couchdb.user:" + docstore_user,
                          {"name": docstore_user, "type": "user", "roles": ["writers"], "password": "from docstore"})
            for source, target in ((couch, docstore), (docstore, couch)):
                couch_replicate(couch, source.url("_users"), target.url("_users"), create_target=False)
            for server, name, password in ((docstore, couch_user, "from couch"), (couch, docstore_user, "from docstore"),
                                           (couch, couch_user, "from couch"), (docstore, docstore_user, "from docstore")):
                if not signs_in(server, name, password):
                    problems.append("%s does not sign in at %s" % (name, server.base))
            stored = docstore.json("GET", "/_users/org.couchdb.user:" + docstore_user)
            if "password" in stored or stored.get("password_scheme") != "pbkdf2":
                problems.append("docstore stored %s" % stored)
            for server, name in ((couch, couch_user), (couch, docstore_user), (docstore, couch_user), (docstore, docstore_user)):
                rev = server.json("GET", "/_users/org.couchdb.user:" + name)["_rev"]
                server.json("DELETE", "/_users/org.couchdb.user:%s?rev=%s" % (name, rev))
            return problems
        run("users made on CouchDB and on docstore sign in on both after replicating _users", users_both_ways)
    finally:
        stop_docstore(process)
        for db in ("src", "pulled", "cont", "roundtrip", "via_server", "idx_src", "idx_back", "rep_src", "rep_t1", "rep_t2", "rep_states", "rep_restart"):
            couch.request("DELETE", "/" + PREFIX + db)
        shutil.rmtree(folder, ignore_errors=True)
    print("%d passed, %d failed" % (passed, failed))
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
