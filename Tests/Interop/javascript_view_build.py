#!/usr/bin/env python3
"""The same JavaScript view built over the same documents by Apache CouchDB and by `docstore serve`.

Usage: COUCHDB_URL=http://admin:admin@127.0.0.1:5984 javascript_view_build.py PATH_TO_DOCSTORE_BINARY [--n 100000]

Does nothing (and says so) when COUCHDB_URL is not set. Loads N generated documents into a fresh
database of each server (`_bulk_docs` in batches), saves one design document with a map and a `_sum`
reduce, then times the first query of the view (which builds it: CouchDB through couchjs, DocServer in
JavaScriptCore in process), interleaved, and checks that both answers are the same. Prints both times
and their ratio; exits 1 if the answers differ.
"""
import json
import shutil
import sys
import time
import pathlib

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from couchdb_replication_interop import start_comparison, stop_docstore  # noqa: E402

DB = "dsi_js_view_build"
DESIGN = {"views": {"by_city": {
    "map": "function(doc) { if (doc.type === 'person' && doc.address) { emit([doc.address.city, doc.age], doc.score); } }",
    "reduce": "_sum"}}}
CITIES = ["Paris", "Lyon", "Berlin", "Zürich", "Kraków", "Oslo", "Lisboa", "Québec", "Tokyo", "Seoul"]


def documents(start, count):
    for n in range(start, start + count):
        yield {"_id": "p%07d" % n, "type": "person" if n % 10 else "company", "name": "name %d" % n,
               "age": 18 + n % 60, "score": (n * 7919) % 1000,
               "address": {"city": CITIES[n % len(CITIES)], "street": "%d main street" % (n % 500)},
               "tags": ["t%d" % (n % 7), "t%d" % (n % 11)]}


def main():
    run = start_comparison("docstore-js-build-", {"n": 100_000})
    if run is None:
        return 0
    couch, docstore, process, folder, options = run
    total = options["n"]
    try:
        for server in (couch, docstore):
            server.recreate(DB)
            for start in range(0, total, 5000):
                batch = list(documents(start, min(5000, total - start)))
                server.json("POST", "/%s/_bulk_docs" % DB, {"docs": batch})
            server.json("PUT", "/%s/_design/app" % DB, DESIGN)
        times, answers = {}, {}
        for name, server in (("CouchDB", couch), ("DocServer", docstore)):
            started = time.monotonic()
            answers[name] = server.json("GET", "/%s/_design/app/_view/by_city?group_level=1" % DB)
            times[name] = time.monotonic() - started
        same = answers["CouchDB"] == answers["DocServer"]
        print("n=%d couchdb_secs=%.2f docserver_secs=%.2f speedup=%.1fx answers_identical=%s"
              % (total, times["CouchDB"], times["DocServer"], times["CouchDB"] / times["DocServer"], same))
        if not same:
            print("CouchDB:   %s\nDocServer: %s" % (json.dumps(answers["CouchDB"])[:500], json.dumps(answers["DocServer"])[:500]))
        return 0 if same else 1
    finally:
        stop_docstore(process)
        for server in (couch,):
            server.request("DELETE", "/" + DB)
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
