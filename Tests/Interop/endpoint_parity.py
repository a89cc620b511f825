#!/usr/bin/env python3
"""Every endpoint with every method answered alike by Apache CouchDB and by `docstore serve`.

Usage: COUCHDB_URL=http://admin:admin@127.0.0.1:5984 endpoint_parity.py PATH_TO_DOCSTORE_BINARY

Does nothing (and says so) when COUCHDB_URL is not set. It makes the same database on both servers (a
document with an attachment, a design document with a view, a list, a show and an update, a local
document), then sends each server's and database's endpoint GET, HEAD, POST, PUT, DELETE, COPY, PATCH and
OPTIONS (POST and PUT with `{}`, COPY to a new id) in the same order to both, and compares the status and
the error name of each answer. The endpoints DocServer does not serve, and the few answers it gives on
purpose otherwise, are listed in EXCUSED with the reason (Docs/Server.md, "Differences from CouchDB").
It prints the figures and the first differences, and exits 1 if there is any difference.
"""
import json
import shutil
import sys
import pathlib

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from couchdb_replication_interop import report_comparison, start_comparison, stop_docstore  # noqa: E402

DB = "dsi_endpoint_parity"
METHODS = ["GET", "HEAD", "POST", "PUT", "DELETE", "COPY", "PATCH", "OPTIONS"]
SERVER_PATHS = ["/", "/_all_dbs", "/_dbs_info", "/_db_updates", "/_active_tasks", "/_uuids", "/_up", "/_session", "/_membership",
                "/_scheduler/jobs", "/_scheduler/docs", "/_node/_local", "/_node/_local/_config", "/_node/_local/_stats",
                "/_node/_local/_system", "/_replicate", "/_nope"]
DATABASE_PATHS = ["", "/_all_docs", "/_design_docs", "/_local_docs", "/_bulk_docs", "/_bulk_get", "/_changes", "/_revs_diff",
                  "/_missing_revs", "/_find", "/_index", "/_explain", "/_security", "/_revs_limit", "/_purge", "/_compact",
                  "/_purged_infos_limit", "/_view_cleanup", "/_ensure_full_commit", "/_partition/p/_all_docs", "/doc", "/doc/att.txt", "/doc/_x",
                  "/_local/l", "/_design/d", "/_design/d/_info", "/_design/d/_view/v", "/_design/d/_show/s",
                  "/_design/d/_list/l/v", "/_design/d/_update/u", "/_design/d/_nope", "/_nope", "/_design", "/_local",
                  "/_all_docs/queries", "/_design_docs/queries", "/_local_docs/queries", "/_design/d/_view/v/queries"]
# (method or "*", path) → why DocServer answers otherwise.
EXCUSED = {
    ("*", "/{db}/_shards"): "no shards: a DocStore database is one SQLite file",
    ("*", "/{db}/_sync_shards"): "no shards",
    ("*", "/_cluster_setup"): "no cluster",
    ("*", "/_reshard"): "no shards (400)",
    ("*", "/_search_analyze"): "not served",
    ("*", "/favicon.ico"): "not served (a database name to DocServer)",
    ("*", "/_utils"): "DocServer's own page; the CouchDB built here has no Fauxton",
    ("PUT", "/{db}/_revs_limit"): "CouchDB 500 on `{}`, DocServer 400",
    ("COPY", "/{db}/_local/l"): "COPY of a local document is a 405 (CouchDB copies it)",
    ("POST", "/_replicate"): "CouchDB 500 on `{}` (no _replicator database here), DocServer 400",
}
for method in ("GET", "HEAD", "DELETE", "COPY", "PATCH", "OPTIONS"):
    EXCUSED[(method, "/_replicate")] = "CouchDB reads the body before the method (400 Missing request body), DocServer 405"
EXTRA_PATHS = ["/{db}/_shards", "/{db}/_sync_shards", "/_cluster_setup", "/_reshard", "/_search_analyze",
               "/{db}/_index/_bulk_delete", "/favicon.ico", "/_utils"]


def setup(server):
    server.recreate(DB)
    server.json("PUT", "/%s/doc" % DB, {"v": 1})
    server.json("PUT", "/%s/_design/d" % DB, {
        "views": {"v": {"map": "function(doc) { emit(doc._id, 1); }"}}, "filters": {"f": "function() { return true; }"},
        "shows": {"s": "function(doc) { return 'x'; }"}, "lists": {"l": "function() { send('x'); }"},
        "updates": {"u": "function(doc) { return [null, 'x']; }"}})
    rev = server.json("GET", "/%s/doc" % DB)["_rev"]
    server.json("PUT", "/%s/doc/att.txt?rev=%s" % (DB, rev), b"hello", headers={"Content-Type": "text/plain"})
    server.json("PUT", "/%s/_local/l" % DB, {"v": 1})


def answer(server, method, path):
    body = b"{}" if method in ("POST", "PUT") else None
    headers = {"Content-Type": "application/json"} if body else {}
    if method == "COPY":
        headers["Destination"] = "copied"
    status, data, _ = server.request(method, path, body, headers=headers, timeout=30)
    try:
        parsed = json.loads(data)
        name = parsed.get("error") if isinstance(parsed, dict) else None
    except ValueError:
        name = None
    return status, name


def main():
    run = start_comparison("docstore-endpoint-parity-", {})
    if run is None:
        return 0
    couch, docstore, process, folder, _ = run
    differences = []
    same = asked = excused = 0
    try:
        for server in (couch, docstore):
            setup(server)
        paths = SERVER_PATHS + ["/{db}" + path for path in DATABASE_PATHS] + EXTRA_PATHS
        for template in paths:
            path = template.replace("{db}", DB)
            for method in METHODS:
                # The database itself is not deleted or made again; every other request goes to both.
                if template == "/{db}" and method in ("PUT", "DELETE"):
                    continue
                expected, actual = answer(couch, method, path), answer(docstore, method, path)
                if (method, template) in EXCUSED or ("*", template) in EXCUSED:
                    excused += 1
                    continue
                asked += 1
                if expected == actual:
                    same += 1
                else:
                    differences.append(("%s %s" % (method, path), expected, actual))
    finally:
        stop_docstore(process)
        shutil.rmtree(folder, ignore_errors=True)
        couch.request("DELETE", "/" + DB)
    print("excused (listed differences): %d" % excused)
    return report_comparison({"endpoint and method answers identical": "%d/%d" % (same, asked)}, differences)


if __name__ == "__main__":
    sys.exit(main())
