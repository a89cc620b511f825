#!/usr/bin/env python3
"""DocServer against Apache CouchDB over HTTP: the same client, the same documents, the two servers
interleaved in each round on the same machine.

Operations (N documents of 600-1000 bytes, like docstore-bench's corpus):
  bulk_docs    POST _bulk_docs, 1 000 documents a request, into a new database
  changes      GET _changes?since=0 (all N rows), read to the end
  all_docs     GET _all_docs?include_docs=true, read to the end
  get_single   N/10 random GETs of documents, one connection, one after another
  get_16       N random GETs over 16 connections (4 processes x 4 threads)
  replicate    POST _replicate of the database into a new one on the same server

Each server's rate per operation is the median of the rounds; the ratio is DocServer's rate over
CouchDB's. Needs COUCHDB_URL (http://admin:admin@127.0.0.1:5984) and a `docstore` binary (a release
build measures what users run).

Usage: COUCHDB_URL=... couchdb_perf_compare.py <docstore binary> [--n 20000] [--rounds 3]
"""
import argparse
import base64
import http.client
import json
import multiprocessing
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

WORDS = ["lorem", "ipsum", "dolor", "sit", "amet", "consectetur", "adipiscing", "elit", "sed", "do",
         "eiusmod", "tempor", "incididunt", "ut", "labore", "et", "dolore", "magna", "aliqua", "enim"]
CITIES = ["Paris", "Lyon", "Berlin", "Zürich", "Kraków", "Oslo", "Lisboa", "Québec", "Tokyo", "Seoul"]
OPERATIONS = ["bulk_docs", "changes", "all_docs", "get_single", "get_16", "replicate"]


def corpus(n, seed=0xD0C5):
    rng = random.Random(seed)
    docs = []
    for k in range(n):
        bio = ""
        length = 250 + rng.randrange(300)
        while len(bio) < length:
            bio += rng.choice(WORDS) + " "
        docs.append({
            "_id": "user-%d-%d" % (k, rng.randrange(1_000_000)),
            "type": "admin" if k % 5 == 0 else "user",
            "name": "%s %s" % (rng.choice(WORDS).capitalize(), rng.choice(WORDS).capitalize()),
            "email": "user%d@example.com" % k,
            "age": 18 + rng.randrange(70),
            "score": rng.randrange(1_000_000),
            "rating": rng.randrange(50_000) / 10_000,
            "active": rng.randrange(3) != 0,
            "tags": [rng.choice(["red", "green", "blue", "swift", "linux"]) for _ in range(2 + rng.randrange(5))],
            "address": {"street": "%d %s street" % (rng.randrange(300), rng.choice(WORDS)),
                        "city": rng.choice(CITIES),
                        "geo": {"lat": rng.randrange(180_000) / 1000 - 90, "lon": rng.randrange(360_000) / 1000 - 180}},
            "counts": {"views": rng.randrange(100_000), "likes": rng.randrange(5_000)},
            "bio": bio,
        })
    return docs


class Server:
    """A server's address and credentials, with a keep-alive connection per thread."""

    def __init__(self, name, url):
        parsed = urllib.parse.urlsplit(url)
        self.name = name
        self.url = url.rstrip("/")
        self.host, self.port = parsed.hostname, parsed.port
        credentials = "%s:%s" % (urllib.parse.unquote(parsed.username or ""), urllib.parse.unquote(parsed.password or ""))
        self.auth = "Basic " + base64.b64encode(credentials.encode()).decode()
        self.local = threading.local()

    def connection(self):
        if getattr(self.local, "connection", None) is None:
            self.local.connection = http.client.HTTPConnection(self.host, self.port, timeout=600)
        return self.local.connection

    def request(self, method, path, body=None, expect=(200, 201, 202)):
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Authorization": self.auth, "Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        for attempt in range(2):
            connection = self.connection()
            try:
                connection.request(method, path, body=data, headers=headers)
                response = connection.getresponse()
                payload = response.read()
                break
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                # A keep-alive connection the server closed while idle: once more on a new one.
                connection.close()
                self.local.connection = None
                if attempt == 1:
                    raise
        if response.status not in expect:
            raise RuntimeError("%s %s %s -> %d %s" % (self.name, method, path, response.status, payload[:300]))
        return payload


class RawConnection:
    """A lean keep-alive HTTP/1.1 client for the GET loops: http.client's own per-request work
    (~0.4 ms here) would otherwise be most of what a single-client GET measures."""

    def __init__(self, server):
        self.server = server
        self.socket = socket.create_connection((server.host, server.port))
        self.socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buffer = b""

    def get(self, path):
        self.socket.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\nAuthorization: %s\r\nAccept: application/json\r\n\r\n"
                             % (path, self.server.host, self.server.auth)).encode())
        while b"\r\n\r\n" not in self.buffer:
            self.receive()
        head, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        status = int(lines[0].split()[1])
        length, chunked = None, False
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                length = int(value)
            elif name == b"transfer-encoding" and b"chunked" in value.lower():
                chunked = True
        if chunked:
            body = b""
            while True:
                while b"\r\n" not in self.buffer:
                    self.receive()
                size_line, _, self.buffer = self.buffer.partition(b"\r\n")
                size = int(size_line.split(b";")[0], 16)
                while len(self.buffer) < size + 2:
                    self.receive()
                body += self.buffer[:size]
                self.buffer = self.buffer[size + 2:]
                if size == 0:
                    break
        else:
            while len(self.buffer) < (length or 0):
                self.receive()
            body, self.buffer = self.buffer[:length or 0], self.buffer[length or 0:]
        if status != 200:
            raise RuntimeError("%s GET %s -> %d %s" % (self.server.name, path, status, body[:200]))
        return body

    def receive(self):
        data = self.socket.recv(262144)
        if not data:
            raise ConnectionError("%s closed the connection" % self.server.name)
        self.buffer += data


def get_worker(args):
    """A process of the 16-connection GET: 4 threads, each its own connection."""
    name, url, db, ids = args
    server = Server(name, url)
    slices = [ids[k::4] for k in range(4)]

    def run(part):
        connection = RawConnection(server)
        for doc_id in part:
            connection.get("/%s/%s" % (db, urllib.parse.quote(doc_id, safe="")))

    threads = [threading.Thread(target=run, args=(part,)) for part in slices]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return len(ids)


def measure(server, docs, round_number, pool):
    """Runs every operation once against `server`; returns {operation: (count, seconds)}."""
    db = "perf-%d" % round_number
    copy = "perf-%d-copy" % round_number
    for name in (db, copy):
        server.request("DELETE", "/" + name, expect=(200, 202, 404))
    server.request("PUT", "/" + db)
    results = {}
    started = time.perf_counter()
    for start in range(0, len(docs), 1000):
        server.request("POST", "/%s/_bulk_docs" % db, {"docs": docs[start:start + 1000]})
    results["bulk_docs"] = (len(docs), time.perf_counter() - started)

    started = time.perf_counter()
    rows = json.loads(server.request("GET", "/%s/_changes?since=0" % db))["results"]
    results["changes"] = (len(rows), time.perf_counter() - started)
    assert len(rows) == len(docs), (server.name, len(rows))

    started = time.perf_counter()
    rows = json.loads(server.request("GET", "/%s/_all_docs?include_docs=true" % db))["rows"]
    results["all_docs"] = (len(rows), time.perf_counter() - started)
    assert len(rows) == len(docs)

    rng = random.Random(round_number)
    ids = [doc["_id"] for doc in docs]
    singles = [rng.choice(ids) for _ in range(len(docs) // 10)]
    connection = RawConnection(server)
    started = time.perf_counter()
    for doc_id in singles:
        connection.get("/%s/%s" % (db, urllib.parse.quote(doc_id, safe="")))
    results["get_single"] = (len(singles), time.perf_counter() - started)

    many = [rng.choice(ids) for _ in range(len(docs))]
    started = time.perf_counter()
    done = sum(pool.map(get_worker, [(server.name, server.url, db, many[k::4]) for k in range(4)]))
    results["get_16"] = (done, time.perf_counter() - started)

    started = time.perf_counter()
    server.request("POST", "/_replicate", {"source": "%s/%s" % (server.url, db), "target": "%s/%s" % (server.url, copy),
                                           "create_target": True})
    results["replicate"] = (len(docs), time.perf_counter() - started)
    copied = json.loads(server.request("GET", "/" + copy))["doc_count"]
    assert copied == len(docs), (server.name, copied)

    for name in (db, copy):
        server.request("DELETE", "/" + name, expect=(200, 202, 404))
    return results


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("binary")
    parser.add_argument("--n", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    couch_url = os.environ.get("COUCHDB_URL")
    if not couch_url:
        print("COUCHDB_URL is not set: nothing to compare with")
        return 0

    data = tempfile.mkdtemp(prefix="docstore-perf-")
    port = free_port()
    process = subprocess.Popen([options.binary, "serve", "--data", data, "--port", str(port), "--admin", "admin:admin",
                                "--log-level", "warning"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        docstore = Server("docstore", "http://admin:admin@127.0.0.1:%d" % port)
        for _ in range(200):
            try:
                docstore.request("GET", "/")
                break
            except OSError:
                docstore.local.connection = None
                time.sleep(0.05)
        couch = Server("couchdb", couch_url)
        couch.request("GET", "/")
        docs = corpus(options.n)
        timings = {"couchdb": {op: [] for op in OPERATIONS}, "docstore": {op: [] for op in OPERATIONS}}
        with multiprocessing.Pool(4) as pool:
            for round_number in range(options.rounds):
                # Interleaved, and the order alternates, so that neither always runs on a warmer machine.
                order = [couch, docstore] if round_number % 2 == 0 else [docstore, couch]
                for server in order:
                    for op, (count, seconds) in measure(server, docs, round_number, pool).items():
                        timings[server.name][op].append(count / seconds)
                    server.local.connection = None
        print("n=%d rounds=%d" % (options.n, options.rounds))
        for op in OPERATIONS:
            ours, theirs = statistics.median(timings["docstore"][op]), statistics.median(timings["couchdb"][op])
            print("op=%s docstore_per_sec=%.0f couchdb_per_sec=%.0f ratio=%.2f" % (op, ours, theirs, ours / theirs))
    finally:
        process.terminate()
        process.wait(timeout=30)
        shutil.rmtree(data, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
