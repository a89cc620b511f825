#!/usr/bin/env python3
"""`_all_docs` and `_all_dbs` read the same way by Apache CouchDB and by `docstore serve`.

Usage: COUCHDB_URL=http://admin:admin@127.0.0.1:5984 all_docs_parity.py PATH_TO_DOCSTORE_BINARY [--queries N] [--seed S]

Does nothing (and says so) when COUCHDB_URL is not set. It stores the same documents in both servers
(ids that sort differently by byte and by CouchDB's collation, design documents, a deleted one) and asks
both random `_all_docs` queries (seeded): every parameter — `key`, `keys`, `startkey`/`start_key`,
`endkey`/`end_key` (also two spellings at once, where the last one counts), `startkey_docid`/`endkey_docid`,
`limit`, `skip`, `descending`, `inclusive_end`, `include_docs`, `conflicts`, `update_seq` — with values of
every JSON type, invalid booleans, numbers and JSON among them. It compares the status, the rows and
`total_rows`/`offset` of answers, and the error name of refusals; then `_all_dbs` with the same range
parameters over a few databases of each server. It prints the figures and the first differences, and
exits 1 if there is any difference.
"""
import json
import random
import shutil
import sys
import pathlib
import urllib.parse

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from couchdb_replication_interop import start_comparison, stop_docstore  # noqa: E402

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


def main():
    run = start_comparison("docstore-all-docs-parity-", {"queries": 600, "seed": 11})
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
    finally:
        stop_docstore(process)
        shutil.rmtree(folder, ignore_errors=True)
        for name in [DB] + databases:
            couch.request("DELETE", "/" + name)

    for name, value in figures.items():
        print("%s: %s" % (name, value))
    for what, expected, actual in differences[:15]:
        print("DIFFERENCE %s\n  CouchDB:  %s\n  DocStore: %s" % (what, json.dumps(expected)[:600], json.dumps(actual)[:600]))
    print("%d passed, %d failed" % (sum(int(v.split("/")[0]) for v in figures.values()), len(differences)))
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
