#!/usr/bin/env python3
"""Records which index Apache CouchDB's Mango planner chooses, and its key range, for a set of queries.

Run with COUCHDB_URL set. It builds the database `docstore_mango_plans` with the corpus of
mango_selector_record.py and the indexes below (explicit design documents and names, so DocStore can
make the same ones), asks `_explain` for each query, and writes Tests/Fixtures/mango/plans.json: per
query the chosen index (`ddoc`, `name`) with `start_key`/`end_key`/`direction`, or the error.
`QueryPlannerTests` replays it against DocStore's planner.
"""
import sys, pathlib
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from mango_selector_record import connect, corpus_database, write_fixture  # noqa: E402

INDEXES = [
    {"ddoc": "a", "name": "kind", "index": {"fields": ["kind"]}},
    {"ddoc": "a", "name": "kind-v", "index": {"fields": ["kind", "v"]}},
    {"ddoc": "b", "name": "v-desc", "index": {"fields": [{"v": "desc"}]}},
    {"ddoc": "c", "name": "partial-kind", "index": {"fields": ["kind"], "partial_filter_selector": {"v": {"$gt": 0}}}},
    {"ddoc": "d", "name": "id-kind", "index": {"fields": ["_id", "kind"]}},
    {"ddoc": "e", "name": "obj", "index": {"fields": ["v.a", "kind"]}},
]

QUERIES = [
    {"selector": {}},
    {"selector": {"kind": "number"}},
    {"selector": {"kind": {"$gt": "a"}}},
    {"selector": {"kind": "number", "v": {"$gt": 1}}},
    {"selector": {"kind": "number", "v": {"$gt": 1, "$lte": 7}}},
    {"selector": {"v": {"$gt": 1}}},
    {"selector": {"v": {"$gt": 5, "$lt": 5}}},
    {"selector": {"v": {"$gte": 5, "$lte": 5}}},
    {"selector": {"v": 5, "kind": "number"}},
    {"selector": {"v": {"$ne": 5}}},
    {"selector": {"v": {"$in": [5]}}},
    {"selector": {"_id": {"$gt": "a"}}},
    {"selector": {"_id": "s"}},
    {"selector": {"_id": {"$gt": "a"}, "kind": "string"}},
    {"selector": {"v.a": 1, "kind": "object"}},
    {"selector": {"$or": [{"kind": "number"}, {"kind": "string"}]}},
    {"selector": {"$and": []}},
    {"selector": {"$or": []}},
    {"selector": {"kind": {"$exists": False}}},
    {"selector": {"kind": "x"}, "sort": ["kind"]},
    {"selector": {"kind": "x"}, "sort": [{"kind": "desc"}]},
    {"selector": {"kind": "x"}, "sort": ["v"]},
    {"selector": {"v": {"$gt": 0}}, "sort": ["v"]},
    {"selector": {"v": {"$gt": 0}}, "sort": [{"v": "desc"}]},
    {"selector": {"kind": "x", "v": {"$gt": 0}}, "sort": ["kind", "v"]},
    {"selector": {"kind": "x", "v": {"$gt": 0}}, "sort": ["v"]},
    {"selector": {"kind": {"$gt": "x"}, "v": {"$gt": 0}}, "sort": ["v"]},
    {"selector": {"_id": {"$gt": "a"}}, "sort": ["_id"]},
    {"selector": {"kind": "x"}, "sort": ["_id"]},
    {"selector": {"other": 1}, "sort": ["other"]},
    {"selector": {"kind": "x"}, "use_index": "c"},
    {"selector": {"kind": "x"}, "use_index": ["c", "partial-kind"]},
    {"selector": {"kind": "x"}, "use_index": ["a", "kind-v"]},
    {"selector": {"kind": "x"}, "use_index": "nothere"},
    {"selector": {"kind": "x", "v": 1}, "use_index": "a"},
    {"selector": {"kind": "x", "v": 1}, "use_index": ["a", "kind"]},
]


# Queries asked of _find only: limits, skips, fields, conflicts-free projections, sorts.
FIND_ONLY = [
    {"selector": {"kind": "number"}, "fields": ["_id", "v"], "limit": 2},
    {"selector": {"v": {"$gt": 0}}, "sort": [{"v": "desc"}], "fields": ["_id"], "limit": 3, "skip": 1},
    {"selector": {"v": {"$gt": 0}}, "sort": ["v"], "fields": ["_id", "v"]},
    {"selector": {"kind": {"$in": ["array", "object"]}}, "fields": ["v.0", "v.a", "v.b.c", "_id"]},
    {"selector": {"_id": {"$gte": "a", "$lt": "n"}}, "sort": [{"_id": "desc"}], "fields": ["_id"]},
    {"selector": {"kind": "string"}, "skip": 2, "limit": 2},
    {"selector": {"kind": "string"}, "limit": 0},
    {"selector": {"v": {"$exists": False}}},
    {"selector": {"kind": {"$gt": "n"}}, "sort": ["kind"], "fields": ["_id", "kind"]},
    {"selector": {"kind": "number", "v": {"$lt": 100}}, "sort": [{"kind": "desc"}, {"v": "desc"}], "fields": ["_id"]},
    {"selector": {"kind": "number"}, "sort": ["kind", {"v": "desc"}]},
    {"selector": {"kind": "x"}, "sort": "kind"},
]


def main():
    call, version = connect()
    if call is None:
        return 0
    db = corpus_database(call, "docstore_mango_plans")
    for index in INDEXES:
        status, answer = call("POST", db + "/_index", index)
        assert status == 200, answer
    cases = []
    for query in QUERIES + FIND_ONLY:
        case = {"query": query}
        if query in QUERIES:
            status, answer = call("POST", db + "/_explain", query)
            if status == 200:
                args = answer["mrargs"]
                case.update({"ddoc": answer["index"]["ddoc"], "name": answer["index"]["name"],
                             "start_key": args["start_key"], "end_key": args["end_key"], "direction": args["direction"]})
            else:
                case.update({"status": status, "error": answer.get("error")})
        # What _find answers: the documents in order (without _rev, which only CouchDB's hash names)
        # and the warning.
        status, answer = call("POST", db + "/_find", dict({"limit": 1000}, **query))
        if status == 200:
            case["docs"] = [{k: v for k, v in d.items() if k != "_rev"} for d in answer["docs"]]
            case["warning"] = answer.get("warning")
            case["has_bookmark"] = answer.get("bookmark") not in (None, "nil")
        else:
            case["find_error"] = answer.get("error")
        cases.append(case)
    write_fixture("plans.json", "plans", version, {"couchdb": version, "indexes": INDEXES, "cases": cases})
    return 0


if __name__ == "__main__":
    sys.exit(main())
