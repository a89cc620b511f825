#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpora (Tests/Fixtures/fuzz/<target>/) from the recorded CouchDB
traffic and the Mango fixtures: JSON bodies as CouchDB sent them, multipart answers, selectors and
sorts, full-text queries, documents with `_revisions`. Files named `regression-*` are inputs a fuzzer
once broke; this script leaves them alone.

Usage: make_seeds.py   (from the package root)
"""
import base64
import glob
import hashlib
import json
import os
import re

ROOT = "Tests/Fixtures/fuzz"
written = {}


def seed(target, data):
    if isinstance(data, str):
        data = data.encode()
    folder = os.path.join(ROOT, target)
    os.makedirs(folder, exist_ok=True)
    name = "seed-" + hashlib.sha1(data).hexdigest()[:12]
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data)
    written[target] = written.get(target, 0) + 1


def bodies():
    for path in sorted(glob.glob("Tests/Fixtures/couchdb-3.3.3/*.ndjson")):
        for line in open(path):
            exchange = json.loads(line)
            for key, headers in (("req_body_b64", "req_headers"), ("resp_body_b64", "resp_headers")):
                if exchange.get(key):
                    content_type = dict((k.lower(), v) for k, v in exchange.get(headers, [])).get("content-type", "")
                    yield content_type, base64.b64decode(exchange[key])


def main():
    for folder in glob.glob(os.path.join(ROOT, "*")):
        for old in glob.glob(os.path.join(folder, "seed-*")):
            os.remove(old)
    json_bodies, multipart_bodies = [], []
    for content_type, body in bodies():
        if content_type.startswith("application/json") and 2 < len(body) <= 4096:
            json_bodies.append(body)
        elif content_type.startswith("multipart/") and len(body) <= 8192:
            boundary = re.search(r'boundary="?([^";]+)"?', content_type)
            if boundary:
                multipart_bodies.append(body.replace(boundary.group(1).encode(), b"b0und"))
    for body in sorted(set(json_bodies), key=lambda item: (len(item), item))[:120]:
        seed("json", body)
    for text in ['{"a":[1,2.5e-3,-0,true,false,null,"\\u00e9\\ud83d\\ude00"]}', '"x"', "1e308", "[[[[[]]]]]",
                 '{"_id":"a","_rev":"1-x","b":{"c":[{}]}}', '{"docs":[{"_id":"a","v":1},{"_id":"b","_deleted":true}]}']:
        seed("json", text)
    for body in sorted(set(multipart_bodies), key=lambda item: (len(item), item))[:20]:
        seed("multipart", body)
    seed("multipart", b"--b0und\r\nContent-Type: application/json\r\n\r\n{\"_id\":\"a\"}\r\n--b0und\r\n"
                      b"Content-Disposition: attachment; filename=\"a.txt\"\r\n\r\nhello\r\n--b0und--\r\n")
    seed("multipart", b"\r\n--b0und\r\n\r\n\r\n--b0und--")

    fixtures = json.load(open("Tests/Fixtures/mango/selectors.json"))
    for case in fixtures["cases"][:60]:
        seed("mango", json.dumps({"selector": case["selector"], "sort": case.get("sort", [{"v": "asc"}])}))
    plans = json.load(open("Tests/Fixtures/mango/plans.json"))
    for case in (plans.get("cases") or [])[:30]:
        query = case.get("query") or case.get("request") or case
        seed("mango", json.dumps(query))

    for text in ["tea", "\"green tea\" OR beans", "apple AND (pie OR NOT crumble)", "title:tea*", "NEAR/3(a b)",
                 "a -b +c", "(((x)))", "\"unbalanced", "café naïve", "x AND", ""]:
        seed("full-text", text)

    documents = set()
    for _, body in bodies():
        for match in re.finditer(rb'\{"_id":"[^"]*","_rev":"[^"]*"[^\n]*?"_revisions":\{"start":\d+,"ids":\[[^\]]*\]\}\}', body):
            try:
                json.loads(match.group(0))
            except ValueError:
                continue
            documents.add(match.group(0))
    for document in sorted(documents, key=lambda item: (len(item), item))[:40]:
        seed("revisions", document)
    for text in ["1-967a00dff5e02add41819138abb3284d", "12-abc", "0-", "1-", "-1-a", "99999999999999999999-a",
                 '{"_id":"x","_rev":"3-c","_revisions":{"start":3,"ids":["c","b","a"]},"v":1}',
                 '{"_id":"x","_deleted":true,"_rev":"2-b"}', '{"_id":"_design/d","views":{}}']:
        seed("revisions", text)
    # Whole requests as CouchDB's clients sent them (the administrator's credentials where they had
    # some), and requests at the starting data of the HTTP target's server (InProcessServer.swift).
    admin = "Basic " + base64.b64encode(b"admin:admin").decode()
    requests, queries = set(), set()
    for path in sorted(glob.glob("Tests/Fixtures/couchdb-3.3.3/*.ndjson")):
        for line in open(path):
            exchange = json.loads(line)
            body = base64.b64decode(exchange.get("req_body_b64") or "")
            if len(body) > 4096:
                continue
            head = "%s %s HTTP/1.1\r\n" % (exchange["method"], exchange["target"])
            for name, value in exchange.get("req_headers", []):
                head += "%s: %s\r\n" % (name, admin if name.lower() == "authorization" else value)
            requests.add(head.encode() + b"\r\n" + body)
            if "?" in exchange["target"]:
                queries.add(exchange["target"].split("?", 1)[1])
    for request in sorted(requests, key=lambda item: (len(item), item))[:120]:
        seed("http", request)
    auth = "Authorization: " + admin + "\r\n"
    for line, body in [
            ("GET /fuzzdb/_design/d/_view/sum?group=true", ""),
            ("GET /fuzzdb/_design/d/_view/count?group_level=1&startkey=[[\"a\"]]", ""),
            ("POST /fuzzdb/_design/d/_view/map", '{"keys":[1,"a",null]}'),
            ("GET /fuzzdb/_design/d/_view/distinct", ""),
            ("GET /fuzzdb/_design/d/_show/doc/doc01?x=1", ""),
            ("GET /fuzzdb/_design/d/_list/rows/map?limit=3", ""),
            ("POST /fuzzdb/_design/d/_update/touch/doc02", ""),
            ("GET /fuzzdb/_changes?filter=d/even&odd=1&include_docs=true", ""),
            ("GET /fuzzdb/_changes?filter=_view&view=d/map&style=all_docs", ""),
            ("POST /fuzzdb/_find", '{"selector":{"k":{"$gt":0}},"sort":[{"k":"asc"}],"limit":3}'),
            ("POST /fuzzdb/_explain", '{"selector":{"v":{"$in":[1,2]}}}'),
            ("POST /fuzzdb/_index", '{"index":{"fields":["v"]},"name":"v"}'),
            ("POST /fuzzdb/_bulk_docs", '{"docs":[{"_id":"x","forbidden":true},{"_id":"y","v":1}],"new_edits":true}'),
            ("POST /fuzzdb/_bulk_get?revs=true", '{"docs":[{"id":"doc01"},{"id":"nope"}]}'),
            ("POST /fuzzdb/_revs_diff", '{"doc01":["1-a","2-b"]}'),
            ("PUT /fuzzdb/att/a.txt", "hello"),
            ("GET /fuzzdb/doc01?revs_info=true&open_revs=all", ""),
            ("DELETE /fuzzdb/doc03?rev=1-x", ""),
            ("POST /fuzzdb/_purge", '{"doc04":["1-x"]}'),
            ("PUT /fuzzdb/_local/l", '{"a":1}'),
            ("POST /_replicate", '{"source":"fuzzdb","target":"copy","create_target":true}'),
            ("PUT /_replicator/r", '{"source":"fuzzdb","target":"copy2","create_target":true}'),
            ("GET /_scheduler/docs", ""),
            ("GET /_node/_local/_config", ""),
            ("POST /_session", "name=admin&password=admin"),
            ("GET /_all_dbs?limit=2&descending=true", ""),
            ("GET /fuzzdb/_all_docs?keys=[\"doc01\",\"x\"]&include_docs=true", ""),
            ("COPY /fuzzdb/doc05", ""),
            ("GET /_uuids?count=3", "")]:
        seed("http", line + " HTTP/1.1\r\n" + auth + "Content-Type: application/json\r\n\r\n" + body)
    alice = "Authorization: Basic " + base64.b64encode(b"alice:alice").decode() + "\r\n"
    for line in ["GET /fuzzdb/_all_docs?include_docs=true", "GET /fuzzdb/_changes", "GET /fuzzdb/doc01",
                 "GET /fuzzdb/_design/d/_view/map?reduce=false", "GET /fuzzdb/_design/d/_show/doc/doc01"]:
        seed("http", line + " HTTP/1.1\r\n" + alice + "\r\n")
    for query in sorted(queries)[:40]:
        seed("query-string", query)
    for query in ["", "limit=2&descending=true", "group=true", "group_level=1&reduce=true", "reduce=false&include_docs=true",
                  "key=%22a%22", "keys=%5B1%2C%22a%22%5D", "startkey=%5B%22a%22%5D&endkey=%5B%22b%22%2C%7B%7D%5D&inclusive_end=false",
                  "startkey_docid=doc03&skip=2", "stale=ok", "update=lazy", "update_seq=true", "sorted=false",
                  "feed=longpoll&timeout=100&since=now", "feed=continuous&heartbeat=50", "filter=_selector&selector=%7B%22v%22%3A1%7D",
                  "filter=_doc_ids&doc_ids=%5B%22doc01%22%5D", "filter=d/even&odd=1", "filter=_view&view=d/map",
                  "style=all_docs&conflicts=true&attachments=true", "since=3&limit=0", "limit=-1", "skip=99999999999999999999",
                  "a+b=c%20d&a+b=e", "%ZZ", "x=%C3", "callback=f"]:
        seed("query-string", query)
    for target, count in sorted(written.items()):
        print("%s: %d seeds" % (target, count))


if __name__ == "__main__":
    main()
