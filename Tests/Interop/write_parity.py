#!/usr/bin/env python3
"""Writes answered the same way by Apache CouchDB and by `docstore serve`.

Usage: COUCHDB_URL=http://admin:admin@127.0.0.1:5984 write_parity.py PATH_TO_DOCSTORE_BINARY [--cases N] [--seed S]

Does nothing (and says so) when COUCHDB_URL is not set. Each case writes a fresh document into the same
state on both servers — none, live, deleted, with a conflict, with a deleted branch, with an attachment —
then makes one random write: PUT (naming the winner, the tombstone, another leaf, an ancestor, an unknown
or a malformed revision, or none; a deletion; an attachment or a stub), POST, DELETE, `_bulk_docs` (also
`new_edits=false` with `_revisions`), COPY, or a standalone attachment's PUT (compressible or not, with or
without `Content-MD5`) or DELETE; then reads the document with its conflicts. It compares every
answer's status and JSON (revision ids included: both servers make them as CouchDB does). Left out, as
Docs/Server.md lists them: compressible attachments in replicated revisions, `_local` documents, attachment
data or stubs written to a document that is deleted or not there (CouchDB's revision ids and revpos for a
recreated document with attachments, its 500 or conflict there), COPY of a document with attachments over
another revision (revpos), a replicated revision id already in the tree on another branch, and uploads
sent `Content-Encoding: gzip` (CouchDB gives them their encoded length as `length`). It prints
the figures and the first differences, and exits 1 if there is any difference.
"""
import base64
import hashlib
import json
import random
import shutil
import sys
import pathlib
import urllib.parse

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from couchdb_replication_interop import report_comparison, start_comparison, stop_docstore  # noqa: E402

DB = "dsi_write_parity"
ATTACHMENT = {"content_type": "application/octet-stream", "data": "aGk="}


def setup(rng, doc_id):
    """Requests that put `doc_id` in a random state, and the revisions they are expected to make."""
    state = rng.choice(["none", "live", "deleted", "conflict", "deleted_branch", "attachment"])
    if state == "none":
        return state, []
    if state == "live":
        return state, [("PUT", "/%s/%s" % (DB, doc_id), {"v": 1})]
    if state == "attachment":
        return state, [("PUT", "/%s/%s" % (DB, doc_id), {"v": 1, "_attachments": {"a.bin": ATTACHMENT}})]
    if state == "deleted":
        return state, [("PUT", "/%s/%s" % (DB, doc_id), {"v": 1}), ("DELETE_WINNER", doc_id, None)]
    docs = [{"_id": doc_id, "_rev": "1-aaa", "v": 1}, {"_id": doc_id, "_rev": "1-ccc", "v": 3}]
    if state == "deleted_branch":
        docs = [{"_id": doc_id, "_rev": "1-aaa", "v": 1},
                {"_id": doc_id, "_rev": "2-bbb", "_deleted": True, "_revisions": {"start": 2, "ids": ["bbb", "aaa"]}},
                {"_id": doc_id, "_rev": "1-ccc", "v": 3}]
    return state, [("POST", "/%s/_bulk_docs" % DB, {"new_edits": False, "docs": docs})]


def revisions(couch, doc_id):
    """The document's revisions on CouchDB: the winner, the other leaves, an ancestor."""
    status, data, _ = couch.request("GET", "/%s/%s?open_revs=all&revs=true" % (DB, urllib.parse.quote(doc_id, safe="")))
    leaves, ancestors = [], []
    if status == 200:
        for entry in json.loads(data):
            doc = entry.get("ok")
            if doc:
                leaves.append(doc["_rev"])
                history = doc.get("_revisions", {})
                start = history.get("start", 0)
                ancestors += ["%d-%s" % (start - k, rev) for k, rev in enumerate(history.get("ids", []))][1:]
    return leaves, ancestors


def random_body(rng, attachments):
    body = {"v": rng.randrange(5)}
    roll = rng.random()
    if roll < 0.15:
        body["_deleted"] = True
    elif roll < 0.25 and attachments:
        body["_attachments"] = {"a.bin": dict(ATTACHMENT)}
    elif roll < 0.3 and attachments:
        body["_attachments"] = {"a.bin": {"stub": True}}
    elif roll < 0.33:
        body["_foo"] = 1
    return body


def operation(rng, state, doc_id, leaves, ancestors):
    quoted = urllib.parse.quote(doc_id, safe="")
    named = rng.choice([None, None] + leaves + leaves + ancestors + ["1-unknown", "bad"])
    kind = rng.choice(["put", "put", "post", "delete", "bulk", "bulk", "replicated", "copy", "attachment"])
    if kind == "attachment" and state in ("none", "deleted"):
        kind = "put"
    body = random_body(rng, attachments=state not in ("none", "deleted"))
    if named == "bad":
        body.pop("_foo", None)  # one fault a body (which CouchDB names first follows the member order)
    if kind == "put":
        if named:
            body["_rev"] = named
        return "PUT", "/%s/%s" % (DB, quoted), body, {}
    if kind == "post":
        body["_id"] = doc_id
        if named:
            body["_rev"] = named
        return "POST", "/%s" % DB, body, {}
    if kind == "delete":
        return "DELETE", "/%s/%s%s" % (DB, quoted, "?rev=" + named if named else ""), None, {}
    if kind == "bulk":
        body["_id"] = doc_id
        if named:
            body["_rev"] = named
        return "POST", "/%s/_bulk_docs" % DB, {"docs": [body, {"_id": doc_id + "-other", "v": 1}]}, {}
    if kind == "attachment":
        # A standalone attachment: deleted, or uploaded (a compressible type is stored gzip; a Content-MD5
        # vouches for the bytes as sent).
        name = rng.choice(["a.bin", "n.txt"])
        where = "/%s/%s/%s%s" % (DB, quoted, name, "?rev=" + named if named else "")
        if rng.random() < 0.25:
            return "DELETE", where, None, {}
        content = rng.choice([b"", b"hello", b"hello world " * 30])
        headers = {"Content-Type": rng.choice(["text/plain", "application/octet-stream", "application/json"])}
        if rng.random() < 0.3:
            headers["Content-MD5"] = base64.b64encode(hashlib.md5(content).digest()).decode()
        return "PUT", where, content, headers
    if kind == "replicated":
        body.pop("_foo", None)
        body.pop("_attachments", None)
        generation = rng.randrange(1, 4)
        body.update({"_id": doc_id, "_rev": "%d-%s" % (generation, rng.choice(["xxx", "yyy", "zzz"]))})
        if rng.random() < 0.6:
            parents = [rng.choice(["aaa", "ccc", "p"]) if k == generation - 2 else "q%d" % k for k in range(generation - 1)]
            body["_revisions"] = {"start": generation, "ids": [body["_rev"].split("-")[1]] + parents}
        return "POST", "/%s/_bulk_docs" % DB, {"new_edits": False, "docs": [body]}, {}
    destination = rng.choice([doc_id + "-copy", doc_id])
    if destination == doc_id and named and state != "attachment":
        destination += "?rev=" + named
    return "COPY", "/%s/%s" % (DB, quoted), None, {"Destination": destination}


def answer(server, method, path, body, headers):
    status, data, _ = server.request(method, path, body, headers=headers)
    try:
        return status, json.loads(data)
    except ValueError:
        return status, data[:100].decode(errors="replace")


def main():
    run = start_comparison("docstore-write-parity-", {"cases": 400, "seed": 5})
    if run is None:
        return 0
    couch, docstore, process, folder, options = run
    rng = random.Random(options["seed"])
    differences = []
    same = 0
    try:
        for server in (couch, docstore):
            server.recreate(DB)
        for case in range(options["cases"]):
            doc_id = "w%d" % case
            state, steps = setup(rng, doc_id)
            for method, path, body in steps:
                if method == "DELETE_WINNER":
                    for server in (couch, docstore):
                        rev = json.loads(server.request("GET", "/%s/%s" % (DB, doc_id))[1])["_rev"]
                        server.request("DELETE", "/%s/%s?rev=%s" % (DB, doc_id, rev))
                    continue
                for server in (couch, docstore):
                    server.request(method, path, body)
            leaves, ancestors = revisions(couch, doc_id)
            if state == "deleted":
                status, data, _ = couch.request("GET", "/%s/%s?open_revs=all" % (DB, doc_id))
                leaves = [entry["ok"]["_rev"] for entry in json.loads(data) if "ok" in entry]
            method, path, body, headers = operation(rng, state, doc_id, leaves, ancestors)
            read = "/%s/%s?conflicts=true&deleted_conflicts=true&revs_info=true" % (DB, doc_id)
            results = []
            for server in (couch, docstore):
                results.append((answer(server, method, path, body, headers), answer(server, "GET", read, None, {})))
            if results[0] == results[1]:
                same += 1
            else:
                shown = body.decode(errors="replace")[:40] if isinstance(body, bytes) else json.dumps(body)
                differences.append(("%s (%s) %s %s %s %s" % (doc_id, state, method, path, shown, json.dumps(headers)), results[0], results[1]))
    finally:
        stop_docstore(process)
        shutil.rmtree(folder, ignore_errors=True)
        couch.request("DELETE", "/" + DB)

    return report_comparison({"writes identical": "%d/%d" % (same, options["cases"])}, differences)


if __name__ == "__main__":
    sys.exit(main())
