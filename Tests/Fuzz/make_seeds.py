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
    for body in sorted(set(json_bodies), key=len)[:120]:
        seed("json", body)
    for text in ['{"a":[1,2.5e-3,-0,true,false,null,"\\u00e9\\ud83d\\ude00"]}', '"x"', "1e308", "[[[[[]]]]]",
                 '{"_id":"a","_rev":"1-x","b":{"c":[{}]}}', '{"docs":[{"_id":"a","v":1},{"_id":"b","_deleted":true}]}']:
        seed("json", text)
    for body in sorted(set(multipart_bodies), key=len)[:20]:
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
    for document in sorted(documents, key=len)[:40]:
        seed("revisions", document)
    for text in ["1-967a00dff5e02add41819138abb3284d", "12-abc", "0-", "1-", "-1-a", "99999999999999999999-a",
                 '{"_id":"x","_rev":"3-c","_revisions":{"start":3,"ids":["c","b","a"]},"v":1}',
                 '{"_id":"x","_deleted":true,"_rev":"2-b"}', '{"_id":"_design/d","views":{}}']:
        seed("revisions", text)
    for target, count in sorted(written.items()):
        print("%s: %d seeds" % (target, count))


if __name__ == "__main__":
    main()
