#!/usr/bin/env python3
"""`_all_docs`, `_all_dbs`, `_changes` and documents read the same way by Apache CouchDB and by `docstore serve`.

Usage: COUCHDB_URL=http://admin:admin@127.0.0.1:5984 read_parity.py PATH_TO_DOCSTORE_BINARY [--queries N] [--seed S]

Does nothing (and says so) when COUCHDB_URL is not set. It stores the same documents in both servers
(ids that sort differently by byte and by CouchDB's collation, design documents, a deleted one) and asks
both random `_all_docs` queries (seeded): every parameter — `key`, `keys`, `startkey`/`start_key`,
`endkey`/`end_key` (also two spellings at once, where the last one counts), `startkey_docid`/`endkey_docid`,
`limit`, `skip`, `descending`, `inclusive_end`, `include_docs`, `conflicts`, `update_seq` — with values of
every JSON type, invalid booleans, numbers and JSON among them. It compares the status, the rows and
`total_rows`/`offset` of answers, and the error name of refusals; then `_all_dbs` with the same range
parameters over a few databases of each server; then `_changes` (normal and longpoll feeds) with random
`limit`, `descending`, `style`, `include_docs`, `conflicts`, `attachments`, `att_encoding_info`, `since`,
`filter` (`_doc_ids`, `_design`, `_selector`, `_view`, a design document's), `doc_ids`, `seq_interval`
and `timeout`, valid and not: the rows (sequences aside; in id order, and only counted where a limit
picks some, as a clustered CouchDB merges its shards' feeds) and the error names — where CouchDB fails
with a 500 (an integer parameter that is not one, an unknown style), DocServer must refuse with a 400.
A filter with `style=all_docs` is judged on each leaf of a conflicted document, as CouchDB does. Last,
`GET /db/doc` of documents with conflicts, deleted branches and attachments with random `rev`, `revs`,
`revs_info`, `conflicts`, `deleted_conflicts`, `meta`, `latest`, `local_seq`, `attachments`,
`att_encoding_info`, `atts_since` and `open_revs`: the whole answer (`_local_seq` aside), or for a 400
its error name (which of two wrong parameters CouchDB names first is not compared). Then `_bulk_get` (entries
with and without `id`, `rev` and `atts_since`, valid and not; `revs`, `latest`, `attachments`,
`att_encoding_info`), `_revs_diff` and `_missing_revs` (revisions offered twice among them) over documents with
conflicts, deleted branches, several roots and attachments, and attachment reads (`rev`, `Range`,
`Accept-Encoding`, HEAD): whole answers and, for attachments, the headers that describe the content.
It prints the figures and the first differences, and exits 1 if there is any difference.
"""
import base64
import json
import random
import re
import shutil
import sys
import pathlib
import urllib.parse

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from couchdb_replication_interop import quote_id, report_comparison, start_comparison, stop_docstore  # noqa: E402

DB = "dsi_all_docs_parity"
IDS = ["a", "b", "B", "c", "d-1", "d_2", "e", "\u00e9", "z", "_design/x", "_design/y", "0", "10", "9"]
BOUNDS = IDS + ["aa", "zz", "", "_design/", "_design0", "x"]
FLAGS = ["descending", "inclusive_end", "include_docs", "update_seq", "conflicts"]
KEYS = ["startkey", "endkey", "key", "start_key", "end_key", "startkey_docid", "endkey_docid", "start_key_doc_id",
        "end_key_doc_id", "limit", "skip", "keys"] + FLAGS


def random_parameters(rng):
    def key_value():
        if rng.random() < 0.75:
            return json.dumps(rng.choice(BOUNDS))
        return rng.choice(["3", "null", "true", "[1]", "{}", "\"\"", "notjson", "[\"a\"]"])
    parameters = []
    for name in KEYS:
        if rng.random() >= 0.18:
            continue
        if name in ("limit", "skip"):
            value = rng.choice(["0", "1", "2", "5", "-1", "x"])
        elif name in FLAGS:
            value = rng.choice(["true", "false", "yes"])
        elif "docid" in name or "doc_id" in name:
            value = rng.choice(BOUNDS)
        elif name == "keys":
            value = json.dumps([rng.choice(BOUNDS) for _ in range(rng.randrange(4))] + ([3] if rng.random() < 0.2 else []))
        else:
            value = key_value()
        parameters.append((name, value))
    rng.shuffle(parameters)
    return urllib.parse.urlencode(parameters)


CHANGES_DB = "dsi_changes_parity"
CHANGES_IDS = ["a", "b", "c", "d", "e", "_design/x"]
CHANGES_PARAMETERS = [
    ("limit", ["0", "1", "3", "-1", "x"]), ("descending", ["true", "false", "yes"]), ("style", ["all_docs", "main_only", "bad"]),
    ("include_docs", ["true", "false", "x"]), ("conflicts", ["true", "false", "x"]), ("attachments", ["true", "false"]),
    ("att_encoding_info", ["true", "false"]), ("since", ["0", "now", "x", "-1"]),
    ("filter", ["_doc_ids", "_design", "_selector", "_view", "bad", "x/y", "f/odd", "f/none", "nope/odd"]),
    ("view", ["f/ys", "f/none", "x"]), ("doc_ids", ['["a","c"]', '["zz"]', "notjson", '"a"']), ("feed", ["normal", "longpoll", "bad"]),
    ("timeout", ["0", "10"]), ("seq_interval", ["1", "x", "0"]),
]


def random_changes_parameters(rng):
    parameters = [(name, rng.choice(values)) for name, values in CHANGES_PARAMETERS if rng.random() < 0.22]
    if ("feed", "longpoll") in parameters and not any(name == "timeout" for name, _ in parameters):
        parameters.append(("timeout", "0"))
    rng.shuffle(parameters)
    return parameters


def changes_answer(status, data, query):
    try:
        answer = json.loads(data)
    except ValueError:
        return status, data[:80]
    if status >= 400:
        return status, answer.get("error")
    rows = []
    for row in answer.get("results", []):
        row = dict(row)
        row.pop("seq", None)
        if isinstance(row.get("doc"), dict):
            row["doc"].pop("_rev", None)
        rows.append(row)
    rows.sort(key=lambda row: row.get("id", ""))
    limit = query.get("limit", "")
    if limit.isdigit() and int(limit) > 0:
        # Which rows a limit takes follows the feed's order, which a clustered CouchDB does not keep.
        return status, len(rows), "pending" in answer
    return status, rows, "pending" in answer


DOCS_DB = "dsi_doc_parity"
DOC_PARAMETERS = [
    ("rev", ["1-aaa", "2-bbb", "2-ccc", "3-ddd", "9-zzz", "bad", "2-y", "1-x", "+2-bbb", "0-aaa", "02-y"]), ("revs", ["true", "false", "x"]),
    ("revs_info", ["true", "false"]), ("conflicts", ["true", "false"]), ("deleted_conflicts", ["true"]), ("meta", ["true", "x"]),
    ("latest", ["true", "false"]), ("local_seq", ["true"]), ("attachments", ["true", "false"]), ("att_encoding_info", ["true"]),
    ("atts_since", ['["1-x"]', '["2-y"]', "bad", "[]", '"x"']),
    ("open_revs", ["all", '["1-aaa","2-bbb","9-z"]', '["2-ccc"]', "bad", '["bad"]', "[]", '"x"', '["3-ddd","02-bbb","1-aaa","0-x"]']),
]


def document_answer(status, data):
    try:
        answer = json.loads(data)
    except ValueError:
        return status, data[:100]
    if status >= 400:
        return status, answer.get("error"), answer.get("reason")

    def clean(value):
        if isinstance(value, dict):
            value.pop("_local_seq", None)  # each server's own sequence
            return {k: clean(v) for k, v in value.items()}
        if isinstance(value, list):
            return [clean(v) for v in value]
        return value
    return status, clean(answer)


def normalised(status, data):
    try:
        answer = json.loads(data)
    except ValueError:
        return status, data[:100]
    if isinstance(answer, dict):
        if status >= 400:
            return status, {"error": answer.get("error")}
        answer.pop("update_seq", None)
        for row in answer.get("rows", []):
            if isinstance(row, dict) and isinstance(row.get("doc"), dict):
                row["doc"].pop("_rev", None)
    return status, answer

PROTOCOL_DB = "dsi_bulk_get_parity"
PROTOCOL_IDS = ["plain", "conf", "delbranch", "deleted", "long", "three", "_design/d", "att", "missing", "_local/x", "", "_bad",
                "_design/", "_local/"]
PROTOCOL_REVS = ["1-aaa", "2-bbb", "1-ccc", "2-ddd", "5-e5", "3-e3", "1-e1", "1-zzz", "bad", "0-aaa", "", "2-aaa", "1-", "+2-bbb",
                 "02-bbb", "1-a", "3-aaa", "-1-a"]


def protocol_setup(server):
    """Documents with conflicts, deleted branches, several roots, a long history and attachments (one
    compressed, written by a client so both servers store them alike); their attachments' revisions."""
    server.recreate(PROTOCOL_DB)
    server.json("POST", "/%s/_bulk_docs" % PROTOCOL_DB, {"new_edits": False, "docs": [
        {"_id": "plain", "_rev": "1-aaa", "v": 1},
        {"_id": "conf", "_rev": "1-aaa", "v": 1},
        {"_id": "conf", "_rev": "2-bbb", "v": 2, "_revisions": {"start": 2, "ids": ["bbb", "aaa"]}},
        {"_id": "conf", "_rev": "1-ccc", "v": 3},
        {"_id": "delbranch", "_rev": "1-aaa", "v": 1},
        {"_id": "delbranch", "_rev": "2-bbb", "_deleted": True, "_revisions": {"start": 2, "ids": ["bbb", "aaa"]}},
        {"_id": "delbranch", "_rev": "1-ccc", "v": 3},
        {"_id": "deleted", "_rev": "1-aaa", "v": 1},
        {"_id": "deleted", "_rev": "2-ddd", "_deleted": True, "_revisions": {"start": 2, "ids": ["ddd", "aaa"]}},
        {"_id": "long", "_rev": "5-e5", "v": 5, "_revisions": {"start": 5, "ids": ["e5", "e4", "e3", "e2", "e1"]}},
        {"_id": "three", "_rev": "1-zzz"},
        {"_id": "three", "_rev": "3-aaa", "_revisions": {"start": 3, "ids": ["aaa", "b", "a"]}},
        {"_id": "three", "_rev": "2-mmm", "_revisions": {"start": 2, "ids": ["mmm", "a"]}},
        {"_id": "three", "_rev": "2-c", "_deleted": True, "_revisions": {"start": 2, "ids": ["c", "a"]}},
        {"_id": "three", "_rev": "1-8b2bc181373a348640d43d7830d6abbc"},
        {"_id": "three", "_rev": "1-b"},
        {"_id": "_design/d", "_rev": "1-aaa", "views": {}}]}, expect=(201,))
    hello = base64.b64encode(b"hello world " * 20).decode()
    rev = server.json("PUT", "/%s/att" % PROTOCOL_DB, {"v": 1, "_attachments": {"a.txt": {"content_type": "text/plain", "data": hello}}})["rev"]
    rev = server.json("PUT", "/%s/att/b.bin?rev=%s" % (PROTOCOL_DB, rev), bytes(range(256)) * 4,
                      headers={"Content-Type": "application/octet-stream"})["rev"]
    server.json("PUT", "/%s/att" % PROTOCOL_DB, {"v": 2, "_rev": rev, "_attachments": {
        "a.txt": {"stub": True}, "b.bin": {"stub": True}, "c.txt": {"content_type": "text/plain", "data": base64.b64encode(b"third").decode()}}})
    server.json("PUT", "/%s/_local/x" % PROTOCOL_DB, {"v": 1})
    return [entry["rev"] for entry in server.json("GET", "/%s/att?revs_info=true" % PROTOCOL_DB)["_revs_info"]]


def random_bulk_get(rng, revisions):
    """A `_bulk_get` query string and body: entries with and without `id`, `rev`, `atts_since`, valid or not."""
    parameters = [(name, rng.choice(["true", "false", "x"])) for name in ("revs", "latest", "attachments", "att_encoding_info")
                  if rng.random() < 0.4]
    if rng.random() < 0.04:
        return urllib.parse.urlencode(parameters), rng.choice([{}, {"docs": []}, {"docs": [1, "x", {}]}, {"docs": [{"rev": "1-aaa"}]}])
    docs = []
    for _ in range(rng.randrange(1, 4)):
        item = {}
        if rng.random() < 0.95:
            item["id"] = rng.choice(PROTOCOL_IDS)
        if rng.random() < 0.6:
            item["rev"] = rng.choice(revisions)
        if rng.random() < 0.2:
            item["atts_since"] = rng.choice([[rng.choice(revisions)], [], "x", [revisions[-1]], [revisions[-1], "bad"]])
        docs.append(item)
    return urllib.parse.urlencode(parameters), {"docs": docs}


def random_offers(rng, revisions):
    """A `_revs_diff` body: ids with lists of revisions (some twice), now and then a value of another type.
    Revisions DocStore cannot hold (`0-aaa`, `1-`) are left out: Docs/Server.md lists that difference."""
    usable = [rev for rev in revisions if rev not in ("0-aaa", "1-")]
    body = {}
    for _ in range(rng.randrange(0, 4)):
        body[rng.choice(PROTOCOL_IDS)] = [rng.choice(usable) for _ in range(rng.randrange(0, 4))] \
            if rng.random() < 0.93 else rng.choice(["1-aaa", 3, None])
    return body


def plain_answer(response):
    status, data = response[:2]
    try:
        answer = json.loads(data)
    except ValueError:
        return status, data[:100]
    return (status, answer.get("error"), answer.get("reason")) if status >= 400 and isinstance(answer, dict) else (status, answer)


def attachment_answer(response):
    """Status, the headers that describe the content, and the bytes (or the error name)."""
    status, data, headers = response
    described = {k.lower(): v for k, v in headers.items()
                 if k.lower() in ("content-type", "content-encoding", "content-range", "content-length", "accept-ranges", "content-md5")}
    if status >= 400:
        try:
            return status, described, json.loads(data).get("error")
        except ValueError:
            return status, described, data[:100]
    boundary = re.search(r'multipart/byteranges; boundary="([^"]+)"', described.get("content-type", ""))
    if boundary:
        # Several ranges: CouchDB sends them chunked, with a header of their own; the parts compared.
        return status, "multipart/byteranges", data.replace(boundary.group(1).encode(), b"BOUNDARY").hex()
    return status, described, data.hex()


def compare_protocol_reads(couch, docstore, rng, count, differences, figures):
    """`_bulk_get`, `_revs_diff`, `_missing_revs` and attachment reads (`rev`, `Range`, `Accept-Encoding`,
    HEAD) on both servers: the whole answers, where CouchDB fails with a 500 a 400 of DocServer's."""
    revisions = None
    for server in (couch, docstore):
        revisions = PROTOCOL_REVS + protocol_setup(server)
    tally = {"_bulk_get": [0, 0], "_revs_diff": [0, 0], "_missing_revs": [0, 0], "attachment reads": [0, 0]}
    json_headers = {"Content-Type": "application/json"}
    for _ in range(count):
        pick = rng.random()
        if pick < 0.45:
            kind = "_bulk_get"
            query, body = random_bulk_get(rng, revisions)
            method, path, body, headers, reader = "POST", "/%s/_bulk_get?%s" % (PROTOCOL_DB, query), body, None, plain_answer
        elif pick < 0.7:
            kind = rng.choice(["_revs_diff", "_missing_revs"])
            body = random_offers(rng, revisions)
            if rng.random() < 0.04:
                body = rng.choice([[], "x", 1])
            method, path, body, headers, reader = "POST", "/%s/%s" % (PROTOCOL_DB, kind), json.dumps(body).encode(), json_headers, plain_answer
        else:
            kind = "attachment reads"
            name = rng.choice(["a.txt", "b.bin", "c.txt", "nope", "a.txt/x"])
            doc_id = rng.choice(["att", "att", "att", "plain", "missing", "deleted"])
            parameters = [("rev", rng.choice(revisions[-3:] + ["1-aaa", "bad", "9-abc", "+2-bbb"]))] if rng.random() < 0.5 else []
            headers = {}
            if rng.random() < 0.35:
                headers["Range"] = rng.choice(["bytes=0-4", "bytes=5-", "bytes=-3", "bytes=0-0,2-3", "bytes=1000-2000", "bytes=x",
                                               "bytes=3-1", "items=0-1", "bytes=0-99999", "bytes=0-", "bytes=2-3,0-"])
            if rng.random() < 0.35:
                headers["Accept-Encoding"] = rng.choice(["gzip", "identity", "deflate", "gzip;q=0"])
            method = rng.choice(["GET", "GET", "HEAD"])
            path = "/%s/%s/%s?%s" % (PROTOCOL_DB, quote_id(doc_id), name, urllib.parse.urlencode(parameters))
            body, reader = None, attachment_answer
        expected = reader(couch.request(method, path, body, headers=headers))
        actual = reader(docstore.request(method, path, body, headers=headers))
        tally[kind][1] += 1
        if expected == actual or (expected[0] == 500 and actual[0] == 400):
            tally[kind][0] += 1
        else:
            differences.append(("%s %s %s %s" % (method, path, body if isinstance(body, (bytes, type(None))) else json.dumps(body), headers or ""),
                                expected, actual))
    for kind, (same, asked) in tally.items():
        figures["%s identical" % kind] = "%d/%d" % (same, asked)


def main():
    run = start_comparison("docstore-read-parity-", {"queries": 600, "seed": 11})
    if run is None:
        return 0
    couch, docstore, process, folder, options = run
    rng = random.Random(options["seed"])
    differences = []
    figures = {}
    databases = ["dsi_adp_%s" % name for name in ("a", "b", "c", "d")]
    try:
        for server in (couch, docstore):
            server.recreate(DB)
            server.json("POST", "/%s/_bulk_docs" % DB, {"docs": [{"_id": doc_id, "n": k} for k, doc_id in enumerate(IDS)]})
            rev = server.json("GET", "/%s/e" % DB)["_rev"]
            server.json("DELETE", "/%s/e?rev=%s" % (DB, rev))
            for name in databases:
                server.recreate(name)

        same = 0
        for _ in range(options["queries"]):
            query = random_parameters(rng)
            path = "/%s/_all_docs?%s" % (DB, query)
            expected = normalised(*couch.request("GET", path)[:2])
            actual = normalised(*docstore.request("GET", path)[:2])
            if expected != actual:
                differences.append(("GET " + path, expected, actual))
            else:
                same += 1
        figures["_all_docs queries identical"] = "%d/%d" % (same, options["queries"])

        same = 0
        count = options["queries"] // 6
        for _ in range(count):
            parameters = []
            for name in ("startkey", "endkey", "key", "start_key", "end_key", "startkey_docid", "endkey_docid"):
                if rng.random() < 0.25:
                    value = rng.choice(databases + ["dsi_adp_", "dsi_adp_bb", "zz"])
                    parameters.append((name, value if "docid" in name else json.dumps(value) if rng.random() < 0.85 else "3"))
            for name in ("descending", "inclusive_end"):
                if rng.random() < 0.25:
                    parameters.append((name, rng.choice(["true", "false"])))
            rng.shuffle(parameters)
            path = "/_all_dbs?" + urllib.parse.urlencode(parameters)
            # Each server has databases of its own: only this script's count.
            answers = []
            for server in (couch, docstore):
                status, data = server.request("GET", path)[:2]
                names = json.loads(data)
                answers.append((status, [n for n in names if n.startswith("dsi_adp_")] if isinstance(names, list) else names.get("error")))
            if answers[0] != answers[1]:
                differences.append(("GET " + path, answers[0], answers[1]))
            else:
                same += 1
        figures["_all_dbs queries identical"] = "%d/%d" % (same, count)

        same, count = 0, options["queries"] // 2
        for server in (couch, docstore):
            server.recreate(CHANGES_DB)
            server.json("POST", "/%s/_bulk_docs" % CHANGES_DB,
                        {"docs": [{"_id": doc_id, "n": k, "t": "x" if k % 2 else "y"} for k, doc_id in enumerate(CHANGES_IDS)]})
            server.json("POST", "/%s/_bulk_docs" % CHANGES_DB, {"new_edits": False, "docs": [{"_id": "a", "_rev": "1-zzz", "n": 99}]})
            rev = server.json("GET", "/%s/b" % CHANGES_DB)["_rev"]
            server.json("DELETE", "/%s/b?rev=%s" % (CHANGES_DB, rev))
            rev = server.json("GET", "/%s/c" % CHANGES_DB)["_rev"]
            server.json("PUT", "/%s/c" % CHANGES_DB, {"_rev": rev, "n": 5, "_attachments": {"f.txt": {"content_type": "text/plain", "data": "aGVsbG8="}}})
            server.json("PUT", "/%s/_design/f" % CHANGES_DB, {"filters": {"odd": "function(doc, req) { return doc.n % 2 == 1; }"},
                                                             "views": {"ys": {"map": "function(doc) { if (doc.t == 'y') emit(doc._id); }"}}})
        for _ in range(count):
            query = random_changes_parameters(rng)
            path = "/%s/_changes?%s" % (CHANGES_DB, urllib.parse.urlencode(query))
            expected = changes_answer(*couch.request("GET", path)[:2], dict(query))
            actual = changes_answer(*docstore.request("GET", path)[:2], dict(query))
            if expected[0] >= 500 or (dict(query).get("style") == "bad" and actual[0] == 400):
                # CouchDB crashes on an unknown style where it has rows to write (and answers where it has
                # none); DocServer refuses it.
                agree = 400 <= actual[0] < 500
            else:
                agree = expected == actual
            if agree:
                same += 1
            else:
                differences.append(("GET " + path, expected, actual))
        figures["_changes queries identical"] = "%d/%d" % (same, count)

        same, count = 0, options["queries"] // 2
        for server in (couch, docstore):
            server.recreate(DOCS_DB)
            # Replicated revisions, conflicts, a deleted branch; attachments of a type no server
            # compresses (a replicated revision keeps its bytes here, CouchDB gzips compressible ones).
            server.json("POST", "/%s/_bulk_docs" % DOCS_DB, {"new_edits": False, "docs": [
                {"_id": "a", "_rev": "1-aaa", "v": 1},
                {"_id": "a", "_rev": "2-bbb", "v": 2, "_revisions": {"start": 2, "ids": ["bbb", "aaa"]}},
                {"_id": "a", "_rev": "2-ccc", "v": 3, "_revisions": {"start": 2, "ids": ["ccc", "aaa"]}},
                {"_id": "a", "_rev": "3-ddd", "_deleted": True, "_revisions": {"start": 3, "ids": ["ddd", "ccc", "aaa"]}},
                {"_id": "b", "_rev": "1-x", "v": 1, "_attachments": {"t.bin": {"content_type": "application/octet-stream", "data": "aGVsbG8="}}},
                {"_id": "b", "_rev": "2-y", "v": 2, "_revisions": {"start": 2, "ids": ["y", "x"]}, "_attachments": {
                    "t.bin": {"content_type": "application/octet-stream", "data": "aGVsbG8="},
                    "u.bin": {"content_type": "application/octet-stream", "data": "d29ybGQ="}}},
                {"_id": "c", "_rev": "1-c", "v": 1},
                {"_id": "c", "_rev": "2-d", "_deleted": True, "_revisions": {"start": 2, "ids": ["d", "c"]}}]},
                        expect=(201,))
            server.json("PUT", "/%s/t" % DOCS_DB, {"_attachments": {"t.txt": {"content_type": "text/plain", "data": "aGVsbG8="}}})
        for _ in range(count):
            parameters = [(name, rng.choice(values)) for name, values in DOC_PARAMETERS if rng.random() < 0.2]
            rng.shuffle(parameters)
            path = "/%s/%s?%s" % (DOCS_DB, rng.choice(["a", "b", "c", "t", "zz"]), urllib.parse.urlencode(parameters))
            expected = document_answer(*couch.request("GET", path)[:2])
            actual = document_answer(*docstore.request("GET", path)[:2])
            if expected == actual or (expected[0] == actual[0] == 400 and expected[1] == actual[1]):
                same += 1
            else:
                differences.append(("GET " + path, expected, actual))
        figures["document reads identical"] = "%d/%d" % (same, count)

        compare_protocol_reads(couch, docstore, rng, options["queries"] // 2, differences, figures)
    finally:
        stop_docstore(process)
        shutil.rmtree(folder, ignore_errors=True)
        for name in [DB, CHANGES_DB, DOCS_DB, PROTOCOL_DB] + databases:
            couch.request("DELETE", "/" + name)

    return report_comparison(figures, differences)


if __name__ == "__main__":
    sys.exit(main())
