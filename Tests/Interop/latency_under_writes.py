#!/usr/bin/env python3
"""Tail latency while large writes run: `docstore serve` — and, with COUCHDB_URL, Apache CouchDB in the
same run, one server after the other — under the same load.

Four writers run for --seconds: two PUT documents of --doc-mb MB (a string of that size), two upload
attachments of --attachment-mb MB alone (`PUT /db/doc/file`), each on a connection of its own. A fifth
client asks for one small document again and again, each time on a fresh connection. Printed per server:
the small reads' count and p50/p99/max latency, and the writes' throughput in MB/s. A measurement, not a
test: the figures go to Docs/Performance.md; the exit status is non-zero only when a request failed.

Usage: latency_under_writes.py <docstore binary> [--seconds S] [--doc-mb N] [--attachment-mb N]
"""
import argparse
import base64
import http.client
import os
import random
import shutil
import sys
import tempfile
import threading
import time
import urllib.parse

from browser_support import start_serve, stop_serve

DATABASE = "latency_probe"


class Server:
    """A CouchDB-compatible server at `url` (credentials in it)."""

    def __init__(self, name, url):
        parts = urllib.parse.urlsplit(url)
        self.name = name
        self.host, self.port = parts.hostname, parts.port or 5984
        self.auth = "Basic " + base64.b64encode(f"{parts.username}:{parts.password}".encode()).decode()

    def request(self, method, path, body=None, content_type="application/json", connection=None):
        """Status and body of one request, on `connection` or on a fresh one."""
        fresh = connection is None
        connection = connection or http.client.HTTPConnection(self.host, self.port, timeout=300)
        try:
            headers = {"Authorization": self.auth}
            if body is not None:
                headers["Content-Type"] = content_type
            connection.request(method, path, body=body, headers=headers)
            response = connection.getresponse()
            return response.status, response.read()
        finally:
            if fresh:
                connection.close()


def percentile(values, share):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] if ordered else float("nan")


def probe(server, seconds, doc_mb, attachment_mb):
    """The figures of one server under the load; raises when a request fails."""
    server.request("DELETE", "/" + DATABASE)
    status, body = server.request("PUT", "/" + DATABASE)
    assert status == 201, (server.name, status, body[:200])
    status, body = server.request("PUT", f"/{DATABASE}/small", b'{"small": true}')
    assert status == 201, (server.name, status, body[:200])
    rng = random.Random(7)
    letters = "abcdefghijklmnopqrstuvwxyz"
    document = ('{"data": "' + "".join(rng.choice(letters) for _ in range(1024)) * (doc_mb * 1024) + '"}').encode()
    attachment = bytes(rng.getrandbits(8) for _ in range(1 << 20)) * attachment_mb
    deadline = time.monotonic() + seconds
    written = [0] * 4
    failures = []

    def writer(number):
        connection = http.client.HTTPConnection(server.host, server.port, timeout=300)
        count = 0
        try:
            while time.monotonic() < deadline and not failures:
                count += 1
                if number < 2:
                    status, body = server.request("PUT", f"/{DATABASE}/big-{number}-{count}", document, connection=connection)
                    size = len(document)
                else:
                    status, body = server.request("PUT", f"/{DATABASE}/file-{number}-{count}/data.bin", attachment,
                                                  content_type="application/octet-stream", connection=connection)
                    size = len(attachment)
                if status not in (201, 202):
                    failures.append(f"writer {number}: {status} {body[:200]!r}")
                    return
                written[number] += size
        except Exception as error:  # noqa: BLE001 - reported as the probe's failure
            failures.append(f"writer {number}: {error}")
        finally:
            connection.close()

    writers = [threading.Thread(target=writer, args=(number,)) for number in range(4)]
    started = time.monotonic()
    for thread in writers:
        thread.start()
    latencies = []
    while time.monotonic() < deadline and not failures:
        begin = time.perf_counter()
        status, body = server.request("GET", f"/{DATABASE}/small")
        latencies.append((time.perf_counter() - begin) * 1000)
        if status != 200:
            failures.append(f"reader: {status} {body[:200]!r}")
    for thread in writers:
        thread.join()
    elapsed = time.monotonic() - started
    server.request("DELETE", "/" + DATABASE)
    if failures:
        raise RuntimeError("; ".join(failures))
    return {"reads": len(latencies), "p50": percentile(latencies, 0.50), "p99": percentile(latencies, 0.99),
            "max": max(latencies), "mb_per_s": sum(written) / elapsed / 1e6}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("binary")
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--doc-mb", type=int, default=6)
    parser.add_argument("--attachment-mb", type=int, default=50)
    options = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="docstore-latency-")
    process, port = start_serve(os.path.abspath(options.binary), os.path.join(folder, "data"), ["--log-level", "warning"])
    servers = [Server("docstore", f"http://admin:pw@127.0.0.1:{port}")]
    if os.environ.get("COUCHDB_URL"):
        servers.append(Server("couchdb", os.environ["COUCHDB_URL"]))
    failed = False
    try:
        for server in servers:
            try:
                figures = probe(server, options.seconds, options.doc_mb, options.attachment_mb)
            except Exception as error:  # noqa: BLE001 - every server is measured
                failed = True
                print(f"{server.name}: FAILED {error}")
                continue
            print(f"{server.name}: small GETs n={figures['reads']} p50={figures['p50']:.1f} ms p99={figures['p99']:.1f} ms "
                  f"max={figures['max']:.1f} ms; writes {figures['mb_per_s']:.0f} MB/s "
                  f"({options.doc_mb} MB documents, {options.attachment_mb} MB attachments, {options.seconds:g} s)")
    finally:
        stop_serve(process, timeout=30)
        shutil.rmtree(folder, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
