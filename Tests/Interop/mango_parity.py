#!/usr/bin/env python3
"""Randomized Mango parity: the same queries asked of Apache CouchDB and of `docstore serve`.

Usage: COUCHDB_URL=http://admin:admin@127.0.0.1:5984 mango_parity.py PATH_TO_DOCSTORE_BINARY [--queries N] [--seed S]

Does nothing (and says so) when COUCHDB_URL is not set. It stores one generated corpus in both servers
(the same revisions, written with new_edits=false), makes the same json indexes in both (explicit
design documents and names), then asks both the same random queries: selectors of every operator,
nested and combined, with sorts, fields, limits, skips, use_index, and a share of invalid ones. Per
query it compares
- the HTTP status and, for an error, its `error` name;
- for an answer, the documents in order (each as returned, `fields` applied) and the warning;
- for a valid query, `_explain`'s chosen index, its key range and direction;
- for a sorted or limited query, the pages a client gets by following bookmarks (the bookmarks
  themselves differ by design: Docs/Queries.md, "Bookmarks").
It prints the figures and the first differences, and exits 1 if there is any difference.
"""
import json
import random
import shutil
import sys
import pathlib

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from couchdb_replication_interop import start_comparison, stop_docstore  # noqa: E402

DB = "dsi_mango_parity"
FIELDS = ["a", "b", "c", "tags", "o.x", "o.y", "items", "d", "_id"]
VALUES = [None, False, True, -1, 0, 1, 2, 2.5, 3, 10, 100, "", "a", "B", "abc", "b", "zeta", "é", [], [1], ["a", "b"],
          {"x": 1}, {}]
INDEXES = [
    ("ib", "b", {"fields": ["b"]}),
    ("ic", "c-b", {"fields": ["c", "b"]}),
    ("ia", "a-desc", {"fields": [{"a": "desc"}]}),
    ("ix", "o.x", {"fields": ["o.x"]}),
    ("ip", "partial-b", {"fields": ["b"], "partial_filter_selector": {"c": {"$gt": "b"}}}),
    ("iid", "id-c", {"fields": ["_id", "c"]}),
]
SORTABLE = [["b"], ["c", "b"], ["a"], ["o.x"], ["_id"], ["_id", "c"], ["d"]]


def corpus(rng, count):
    docs = []
    for n in range(count):
        doc = {"_id": "d%03d" % n, "_rev": "1-%032x" % rng.getrandbits(128)}
        if rng.random() < 0.9:
            doc["a"] = rng.choice(VALUES)
        if rng.random() < 0.85:
            doc["b"] = rng.choice([rng.randint(-5, 120), round(rng.uniform(-5, 120), 2), rng.choice(VALUES)])
        if rng.random() < 0.85:
            doc["c"] = rng.choice(["a", "abc", "b", "B", "c", "zeta", "é", "", "Apple", "apple", rng.choice(VALUES)])
        if rng.random() < 0.7:
            doc["tags"] = rng.sample(["red", "green", "blue", "x", "y"], rng.randint(0, 4))
        if rng.random() < 0.7:
            doc["o"] = {k: v for k, v in (("x", rng.choice([rng.randint(0, 9), rng.choice(VALUES)])),
                                          ("y", rng.choice(["p", "q", None]))) if rng.random() < 0.8}
        if rng.random() < 0.5:
            doc["items"] = [{"n": rng.randint(0, 5), "s": rng.choice(["p", "q"])} for _ in range(rng.randint(0, 3))]
        if rng.random() < 0.2:
            doc["d"] = rng.choice(VALUES)
        docs.append(doc)
    return docs


def value(rng):
    return rng.choice(VALUES + [rng.randint(-5, 120)])


def condition(rng, field):
    """An operator expression (or a plain value) fit for `field`."""
    kind = rng.randrange(19)
    if kind == 0:
        return value(rng)
    if kind <= 5:
        return {rng.choice(["$eq", "$ne", "$gt", "$gte", "$lt", "$lte"]): value(rng)}
    if kind == 6:
        low = rng.randint(-5, 60)
        return {"$gte": low, "$lt": low + rng.randint(1, 60)}
    if kind == 7:
        return {rng.choice(["$in", "$nin"]): [value(rng) for _ in range(rng.randint(0, 3))]}
    if kind == 8:
        return {"$exists": rng.random() < 0.5}
    if kind == 9:
        return {"$type": rng.choice(["null", "boolean", "number", "string", "array", "object"])}
    if kind == 10:
        return {"$size": rng.randint(0, 3)}
    if kind == 11:
        return {"$mod": [rng.choice([2, 3, 5, -3]), rng.randint(-1, 2)]}
    if kind == 12:
        return {"$regex": rng.choice(["^a", "b", "^[A-Z]", "c$", "(?i)^a", "^$", "e.a"])}
    if kind == 13:
        return {"$all": rng.sample(["red", "green", "blue", "x"], rng.randint(0, 2))}
    if kind == 14:
        return {"$elemMatch": rng.choice([{"$eq": "red"}, {"n": {"$gt": 2}}, {"s": "p", "n": {"$lt": 3}}, {"$gt": "m"}])}
    if kind == 15:
        return {"$allMatch": rng.choice([{"s": "p"}, {"n": {"$gte": 1}}, {"$ne": "x"}])}
    if kind == 16:
        return {"$keyMapMatch": rng.choice([{"$eq": "x"}, {"$regex": "^y"}])}
    if kind == 17:
        return {"$not": condition(rng, field)}
    return {"$gt": value(rng), "$lte": value(rng)}


def selector(rng, depth=0):
    parts = {}
    for _ in range(rng.randint(1, 3)):
        roll = rng.random()
        if depth < 2 and roll < 0.12:
            parts[rng.choice(["$and", "$or", "$nor"])] = [selector(rng, depth + 1) for _ in range(rng.randint(1, 3))]
        elif depth < 2 and roll < 0.17:
            parts["$not"] = selector(rng, depth + 1)
        elif roll < 0.19:
            # Neither side has a text index: CouchDB 3.3.3 lets `$text` hold for every document (its
            # matcher believes the index), refuses it negated or on a field, and never reads the query.
            text = rng.choice(["red", "green AND", "(x", 5, True, ["a"], None])
            if rng.random() < 0.2:
                parts[rng.choice(FIELDS)] = {"$text": text}
            else:
                parts["$text"] = text
        else:
            field = rng.choice(FIELDS)
            if field == "o.x" and rng.random() < 0.3:
                parts["o"] = {"x": condition(rng, field)}
            else:
                parts[field] = condition(rng, field)
    return parts


def invalid_query(rng):
    good = {"selector": {"b": {"$gt": 1}}}
    broken = rng.choice([
        {"selector": 5}, {"selector": {"b": {"$foo": 1}}}, {"selector": {"b": {"$in": 3}}}, {"selector": {"$or": {}}},
        {"selector": {"b": {"$size": -1}}}, {"selector": {"b": {"$regex": "("}}}, {"selector": {"b": {"$mod": [0, 1]}}},
        {"limit": -1}, {"limit": "x"}, {"skip": -2}, {"skip": "y"}, {"sort": "b"}, {"sort": [{"b": "up"}]},
        {"sort": [{"b": "asc", "c": "asc"}]}, {"sort": [{"c": "asc"}, {"b": "desc"}]}, {"sort": ["nothere"]},
        {"sort": [5]}, {"fields": "b"}, {"fields": [1]}, {"use_index": 5}, {"bookmark": "!!"}, {"bookmark": 5},
        {"conflicts": "yes"}, {"execution_stats": 1}, {"r": "x"}, {"unknown_key": 1}, {},
    ])
    query = dict(good)
    query.update(broken)
    if broken == {}:
        del query["selector"]
    return query


def random_query(rng):
    if rng.random() < 0.12:
        return invalid_query(rng)
    query = {"selector": selector(rng)}
    if rng.random() < 0.35:
        sort = rng.choice(SORTABLE)
        direction = rng.choice(["asc", "desc"])
        query["sort"] = [field if direction == "asc" and rng.random() < 0.5 else {field: direction} for field in sort]
        # A sort needs its fields in the selector to use an index that gives it; CouchDB adds nothing.
        if rng.random() < 0.8:
            query["selector"].setdefault(sort[0], {"$gt": None})
    if rng.random() < 0.3:
        query["fields"] = rng.sample(["_id", "a", "b", "c", "o.x", "o", "items.0.n", "tags", "_rev"], rng.randint(1, 4))
    if rng.random() < 0.5:
        query["limit"] = rng.choice([0, 1, 3, 10, 1000])
    if rng.random() < 0.2:
        query["skip"] = rng.randint(0, 20)
    if rng.random() < 0.1:
        ddoc, name, _ = rng.choice(INDEXES)
        query["use_index"] = rng.choice([ddoc, [ddoc, name], "_design/" + ddoc, "nosuch"])
    return query


def find(server, query):
    status, data, _ = server.request("POST", "/%s/_find" % DB, query)
    body = json.loads(data) if data else {}
    return status, body


def warnings(answer, query):
    """The warnings of an answer. CouchDB counts the documents its shards examined only from the shards
    that finished, and a query that reaches its limit stops them early: so "examined is high" is
    compared only when the answer is shorter than its limit."""
    lines = (answer.get("warning") or "").split("\n")
    if len(answer["docs"]) >= query.get("limit", 25):
        lines = [line for line in lines if not line.startswith("The number of documents examined is high")]
    return [line for line in lines if line]


def explain_summary(server, query):
    status, data, _ = server.request("POST", "/%s/_explain" % DB, query)
    if status != 200:
        return status, json.loads(data).get("error")
    plan = json.loads(data)
    index = plan["index"]
    return status, (index.get("ddoc"), index.get("name"), index.get("type"), plan.get("mrargs", {}).get("start_key"),
                    plan.get("mrargs", {}).get("end_key"), plan.get("mrargs", {}).get("direction"))


def pages(server, query):
    """Every page a client reads by following bookmarks, three documents at a time."""
    paged = dict(query, limit=3)
    paged.pop("skip", None)
    seen = []
    for _ in range(200):
        status, body = find(server, paged)
        if status != 200:
            return seen + [("error", status, body.get("error"))]
        if not body["docs"]:
            return seen
        seen.append([doc.get("_id", doc) for doc in body["docs"]])
        paged["bookmark"] = body["bookmark"]
    return seen + ["(stopped after 200 pages)"]


def main():
    run = start_comparison("docstore-mango-parity-", {"queries": 1000, "seed": 3303})
    if run is None:
        return 0
    couch, docstore, process, folder, options = run
    count, seed = options["queries"], options["seed"]
    rng = random.Random(seed)
    version = couch.json("GET", "/")["version"]
    figures = {"queries": 0, "answered": 0, "errors": 0, "explained": 0, "paged": 0, "documents": 0, "couchdb_500": 0,
               "differences": 0}
    differences, crashes = [], []
    try:
        docs = corpus(rng, 400)
        for server in (couch, docstore):
            server.recreate(DB)
            server.json("POST", "/%s/_bulk_docs" % DB, {"docs": docs, "new_edits": False})
            for ddoc, name, index in INDEXES:
                server.json("POST", "/%s/_index" % DB, {"ddoc": ddoc, "name": name, "index": index, "type": "json"})
        print("CouchDB %s at %s, docstore serve at %s: %d documents, %d indexes, %d queries (seed %d)"
              % (version, couch.base, docstore.base, len(docs), len(INDEXES), count, seed))

        def differ(what, query, expected, actual):
            figures["differences"] += 1
            differences.append("%s\n  query:   %s\n  CouchDB: %s\n  DocStore: %s" % (
                what, json.dumps(query, ensure_ascii=False), str(expected)[:400], str(actual)[:400]))

        for _ in range(count):
            query = random_query(rng)
            figures["queries"] += 1
            (expected_status, expected), (actual_status, actual) = find(couch, query), find(docstore, query)
            if expected_status == 500:
                # A crash in CouchDB (e.g. `$not` of `$nin`, `use_index: 5`): not something to copy.
                figures["couchdb_500"] += 1
                # Where CouchDB fails, DocStore says why with a 400 (Docs/Queries.md).
                if actual_status != 400:
                    figures["differences"] += 1
                    differences.append("CouchDB 500, DocStore %d\n  query:   %s" % (actual_status, json.dumps(query)))
                crashes.append("%s -> CouchDB 500 %s; DocStore %d %s" % (json.dumps(query), expected.get("reason", "")[:80],
                                                                        actual_status, actual.get("error", "")))
                continue
            if expected_status != actual_status or (expected_status != 200 and expected.get("error") != actual.get("error")):
                differ("status", query, (expected_status, expected), (actual_status, actual))
                continue
            if expected_status != 200:
                figures["errors"] += 1
                continue
            figures["answered"] += 1
            figures["documents"] += len(expected["docs"])
            if expected["docs"] != actual["docs"]:
                differ("documents", query, [d.get("_id", d) for d in expected["docs"]], [d.get("_id", d) for d in actual["docs"]])
                continue
            if warnings(expected, query) != warnings(actual, query):
                differ("warning", query, expected.get("warning"), actual.get("warning"))
                continue
            expected_plan, actual_plan = explain_summary(couch, query), explain_summary(docstore, query)
            figures["explained"] += 1
            if expected_plan != actual_plan:
                differ("explain", query, expected_plan, actual_plan)
                continue
            if "sort" in query or query.get("limit", 25) < 25:
                figures["paged"] += 1
                expected_pages, actual_pages = pages(couch, query), pages(docstore, query)
                if expected_pages != actual_pages:
                    differ("bookmark pages", query, expected_pages, actual_pages)
    finally:
        stop_docstore(process)
        couch.request("DELETE", "/" + DB)
        shutil.rmtree(folder, ignore_errors=True)
    for crash in crashes[:5]:
        print("COUCHDB-500 " + crash)
    for difference in differences[:15]:
        print("DIFF " + difference)
    print(" ".join("%s=%d" % item for item in figures.items()))
    return 0 if figures["differences"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
