#!/usr/bin/env python3
"""Records Apache CouchDB's answers to a set of Mango selectors over a small corpus.

Run with COUCHDB_URL set (http://admin:admin@127.0.0.1:5984). It creates the database
`docstore_mango_parity`, stores the corpus, asks `_find` every selector of the set (limit 1000,
no index, so CouchDB's own matcher decides) and writes Tests/Fixtures/mango/selectors.json:
the corpus, and for each selector either the sorted ids that matched or the HTTP status and
error name. `MangoSelectorTests` replays that file against DocStore's `MangoSelector`.
"""
import json, os, sys, urllib.parse, urllib.request, urllib.error, base64, pathlib

CORPUS = [
    {"_id": "n5", "v": 5, "kind": "number"},
    {"_id": "f5", "v": 5.0, "kind": "number"},
    {"_id": "neg", "v": -7, "kind": "number"},
    {"_id": "big", "v": 12345678901, "kind": "number"},
    {"_id": "frac", "v": 2.5, "kind": "number"},
    {"_id": "s", "v": "abc", "kind": "string"},
    {"_id": "S", "v": "ABC", "kind": "string"},
    {"_id": "e", "v": "", "kind": "string"},
    {"_id": "u", "v": "été", "kind": "string"},
    {"_id": "nul", "v": None, "kind": "null"},
    {"_id": "t", "v": True, "kind": "boolean"},
    {"_id": "fa", "v": False, "kind": "boolean"},
    {"_id": "arr", "v": [1, 7], "kind": "array"},
    {"_id": "arrs", "v": ["abc", "x"], "kind": "array"},
    {"_id": "empty", "v": [], "kind": "array"},
    {"_id": "nested", "v": [[1, 7]], "kind": "array"},
    {"_id": "objs", "v": [{"name": "a", "n": 1}, {"name": "b", "n": 2}], "kind": "array"},
    {"_id": "obj", "v": {"a": 1, "b": {"c": "deep"}}, "kind": "object"},
    {"_id": "dot", "v": {"a.b": 3}, "kind": "object"},
    {"_id": "miss", "kind": "none"},
    {"_id": "Zed", "v": "zed", "kind": "string"},
    {"_id": "apple", "v": "Apple", "kind": "string"},
]

SELECTORS = [
    {}, {"v": 5}, {"v": 5.0}, {"v": "abc"}, {"v": None}, {"v": True}, {"v": [1, 7]}, {"v": 7},
    {"v": {"a": 1}}, {"v": {"$eq": {"a": 1, "b": {"c": "deep"}}}}, {"v.b.c": "deep"}, {"v": {"b": {"c": "deep"}}},
    {"v.a\\.b": 3}, {"v.0": 1}, {"v.1.name": "b"}, {"v.5": {"$exists": False}}, {"v.x": {"$exists": False}},
    {"v": {"$gt": 5}}, {"v": {"$gte": 5}}, {"v": {"$lt": 5}}, {"v": {"$lte": 5}}, {"v": {"$ne": 5}},
    {"v": {"$gt": "abc"}}, {"v": {"$lt": "abc"}}, {"v": {"$gt": "a", "$lt": "b"}}, {"v": {"$gt": None}},
    {"v": {"$lte": None}}, {"v": {"$gt": []}}, {"v": {"$gte": {}}}, {"v": {"$lt": True}}, {"v": {"$ne": None}},
    {"v": {"$in": [5, "abc"]}}, {"v": {"$in": [7]}}, {"v": {"$in": []}}, {"v": {"$nin": [5, "abc"]}},
    {"v": {"$nin": []}}, {"v": {"$nin": [7]}}, {"v": {"$in": [[1, 7]]}},
    {"v": {"$exists": True}}, {"v": {"$exists": False}},
    {"v": {"$type": "number"}}, {"v": {"$type": "string"}}, {"v": {"$type": "null"}}, {"v": {"$type": "boolean"}},
    {"v": {"$type": "array"}}, {"v": {"$type": "object"}}, {"v": {"$type": "date"}},
    {"v": {"$size": 2}}, {"v": {"$size": 0}}, {"v": {"$size": 1}},
    {"v": {"$mod": [2, 1]}}, {"v": {"$mod": [2, -1]}}, {"v": {"$mod": [5, 0]}}, {"v": {"$mod": [-2, -1]}},
    {"v": {"$regex": "^a"}}, {"v": {"$regex": "b"}}, {"v": {"$regex": "(?i)^a"}}, {"v": {"$regex": "^$"}}, {"v": {"$regex": "t."}},
    {"v": {"$all": [1]}}, {"v": {"$all": [1, 7]}}, {"v": {"$all": [[1, 7]]}}, {"v": {"$all": []}}, {"v": {"$all": [1.0]}},
    {"v": {"$elemMatch": {"$gt": 5}}}, {"v": {"$elemMatch": {"name": "b"}}}, {"v": {"$elemMatch": {"name": "b", "n": 1}}},
    {"v": {"$elemMatch": {"n": {"$gte": 1}}}}, {"v": {"$allMatch": {"$gt": 0}}}, {"v": {"$allMatch": {"n": {"$gt": 0}}}},
    {"v": {"$keyMapMatch": {"$eq": "a"}}}, {"v": {"$keyMapMatch": {"$regex": "\\."}}},
    {"$and": [{"kind": "number"}, {"v": {"$gt": 0}}]}, {"$or": [{"v": 5}, {"v": "abc"}]},
    {"$nor": [{"v": 5}, {"kind": "string"}]}, {"$not": {"v": 5}}, {"v": {"$not": {"$gt": 5}}},
    {"$not": {"v": {"$exists": True}}}, {"$not": {"v": {"$regex": "^a"}}}, {"v": {"$not": {"$in": [5]}}},
    {"$not": {"$or": [{"kind": "number"}, {"kind": "string"}]}}, {"$not": {"$not": {"v": 5}}},
    {"kind": "number", "v": {"$lt": 3}}, {"kind": {"$in": ["array", "object"]}, "v": {"$size": 2}},
    {"_id": {"$gt": "Zed"}}, {"_id": {"$lt": "a"}}, {"_id": {"$gte": "apple", "$lt": "f"}}, {"_id": {"$regex": "^[A-Z]"}},
    {"v": {"$gt": 5, "$lt": 100}}, {"v": {"$eq": 5, "$type": "number"}},
    # malformed
    {"v": {"$foo": 1}}, {"v": {"$in": 5}}, {"v": {"$nin": {}}}, {"v": {"$size": -1}}, {"v": {"$size": 1.5}},
    {"$and": {}}, {"$or": 5}, {"$nor": "x"}, {"$not": 5}, {"v": {"$regex": "("}}, {"v": {"$regex": 5}},
    {"": 5}, {"v": {"$exists": "yes"}}, {"v": {"$type": 5}}, {"$default": {"$gt": 1}}, {"v": {"$elemMatch": 5}},
    {"v": {"$allMatch": []}}, {"v": {"$keyMapMatch": 1}}, {"v": {"$mod": [2]}}, {"v": {"$mod": [2.5, 1]}},
    {"v": {"$all": 1}}, {"v": {"$where": "x"}}, {"v": {"$near": [1, 2]}},
]

def connect():
    """A function calling the CouchDB of COUCHDB_URL, and its version; (None, None) without one."""
    url = os.environ.get("COUCHDB_URL")
    if not url:
        print("COUCHDB_URL is not set: no CouchDB to record from; nothing run.")
        return None, None
    parsed = urllib.parse.urlparse(url)
    base = f"{parsed.scheme}://{parsed.hostname}:{parsed.port}"
    auth = "Basic " + base64.b64encode(f"{parsed.username}:{parsed.password}".encode()).decode()

    def call(method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(base + path, data=data, method=method,
                                         headers={"Authorization": auth, "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"{}")

    return call, call("GET", "/")[1].get("version")


def corpus_database(call, name):
    """The database `name` made anew with the corpus in it; its path."""
    db = "/" + name
    call("DELETE", db)
    call("PUT", db)
    status, _ = call("POST", db + "/_bulk_docs", {"docs": CORPUS})
    assert status == 201, status
    return db


def write_fixture(name, what, version, content):
    """Writes Tests/Fixtures/mango/`name` and says so."""
    out = pathlib.Path(__file__).resolve().parent.parent / "Fixtures" / "mango" / name
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(content, indent=1, ensure_ascii=False) + "\n")
    print(f"recorded {len(content['cases'])} {what} from CouchDB {version} into {out}")


def main():
    call, version = connect()
    if call is None:
        return 0
    db = corpus_database(call, "docstore_mango_parity")
    cases = []
    for selector in SELECTORS:
        status, answer = call("POST", db + "/_find", {"selector": selector, "limit": 1000})
        if status == 200:
            cases.append({"selector": selector, "ids": sorted(d["_id"] for d in answer["docs"])})
        else:
            cases.append({"selector": selector, "status": status, "error": answer.get("error")})
    write_fixture("selectors.json", "selectors", version, {"couchdb": version, "corpus": CORPUS, "cases": cases})
    return 0

if __name__ == "__main__":
    sys.exit(main())
