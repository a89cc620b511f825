#!/usr/bin/env python3
"""Independent check of DocServer's HTTP API with the `couchdb` client library from PyPI.

Usage: couchdb_client_test.py PATH_TO_DOCSTORE_BINARY

Starts `docstore serve` on a free port over a temporary folder, then creates a database, writes,
reads, updates and deletes documents, lists _all_docs, follows _changes and round-trips attachments
through the library. Prints one line per check and a closing "interop: N passed, M failed" line;
exits non-zero if any check failed.
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import traceback

import base64
import urllib.request

import couchdb
from prometheus_client.parser import text_string_to_metric_families

checks = []


def check(name):
    def register(function):
        checks.append((name, function))
        return function
    return register


@check("server welcome and version")
def welcome(server, db):
    assert server.version(), "no version"
    assert "db" in server, "database not listed"


@check("create, read, update documents")
def crud(server, db):
    doc_id, rev = db.save({"_id": "ada", "name": "Ada", "born": 1815})
    assert doc_id == "ada" and rev.startswith("1-"), (doc_id, rev)
    doc = db["ada"]
    assert doc["name"] == "Ada" and doc["born"] == 1815, doc
    doc["name"] = "Ada Lovelace"
    db.save(doc)
    assert db["ada"]["name"] == "Ada Lovelace"
    assert db["ada"].rev.startswith("2-")
    generated_id, _ = db.save({"generated": True})
    assert len(generated_id) == 32, generated_id


@check("stale update is a conflict")
def conflict(server, db):
    db.save({"_id": "c", "v": 1})
    stale = dict(db["c"])
    fresh = db["c"]
    fresh["v"] = 2
    db.save(fresh)
    try:
        db.save(stale)
    except couchdb.http.ResourceConflict:
        return
    raise AssertionError("expected a conflict")


@check("delete, then 404 not_found")
def delete(server, db):
    db.save({"_id": "gone", "x": 1})
    db.delete(db["gone"])
    try:
        db["gone"]
    except couchdb.http.ResourceNotFound as error:
        assert "deleted" in str(error), error
        return
    raise AssertionError("expected not found")


@check("_all_docs with options")
def all_docs(server, db):
    for key in ["k1", "k2", "k3"]:
        db.save({"_id": key})
    rows = list(db.view("_all_docs", startkey="k1", endkey="k2", include_docs=True))
    assert [row.id for row in rows] == ["k1", "k2"], rows
    assert rows[0].doc["_id"] == "k1"
    assert len(db) >= 3


@check("_changes feed")
def changes(server, db):
    result = db.changes(since=0)
    ids = [row["id"] for row in result["results"]]
    assert "ada" in ids and "k3" in ids, ids
    assert "gone" in ids and [r for r in result["results"] if r["id"] == "gone"][0].get("deleted") is True
    later = db.changes(since=result["last_seq"])
    assert later["results"] == [], later
    db.save({"_id": "after"})
    assert [row["id"] for row in db.changes(since=result["last_seq"])["results"]] == ["after"]


@check("attachments put, get, delete")
def attachments(server, db):
    db.save({"_id": "photo"})
    doc = db["photo"]
    db.put_attachment(doc, b"\x00\x01binary\xff", filename="data.bin", content_type="application/octet-stream")
    doc = db["photo"]
    assert doc["_attachments"]["data.bin"]["length"] == 9, doc["_attachments"]
    assert db.get_attachment("photo", "data.bin").read() == b"\x00\x01binary\xff"
    db.delete_attachment(doc, "data.bin")
    assert db.get_attachment("photo", "data.bin") is None


@check("bulk update")
def bulk(server, db):
    # As CouchDB 3.3: a reserved id fails the whole request with 400, and nothing is written.
    try:
        db.update([{"_id": "b1"}, {"_id": "b2"}, {"_id": "_bad"}])
        raise AssertionError("a bulk update with a reserved id was accepted")
    except couchdb.http.ServerError as error:
        assert error.args[0][0] == 400 and error.args[0][1][0] == "illegal_docid", error
    assert "b1" not in db
    results = db.update([{"_id": "b1"}, {"_id": "b2"}, {"_id": "b1"}])
    assert results[0][0] is True and results[1][0] is True, results
    assert results[2][0] is False and isinstance(results[2][2], couchdb.http.ResourceConflict), results


@check("wrong password is refused")
def auth(server, db):
    url = server.resource.url.replace("admin:secret@", "admin:wrong@")
    try:
        couchdb.Server(url).version()
        couchdb.Server(url)["db"]
    except couchdb.http.Unauthorized:
        return
    raise AssertionError("expected 401")


def prometheus_samples(server):
    """The server's /_node/_local/_prometheus, parsed by prometheus_client: {(name, labels): value}."""
    url = server.resource.url.replace("admin:secret@", "") + "_node/_local/_prometheus"
    request = urllib.request.Request(url, headers={
        "Authorization": "Basic " + base64.b64encode(b"admin:secret").decode()})
    with urllib.request.urlopen(request) as response:
        assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4"), response.headers["Content-Type"]
        text = response.read().decode()
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


@check("prometheus metrics parse and move under load")
def prometheus(server, db):
    before = prometheus_samples(server)
    for n in range(20):
        db.save({"_id": "metric-%d" % n, "n": n})
        db["metric-%d" % n]
    after = prometheus_samples(server)
    requests = ("couchdb_httpd_requests_total", ())
    assert after[requests] >= before.get(requests, 0) + 40, (before.get(requests), after[requests])
    created = ("docstore_http_requests_total", (("route", "/{db}/{docid}"), ("status", "201")))
    assert after[created] >= before.get(created, 0) + 20, after.get(created)
    reads = ("couchdb_database_reads_total", ())
    assert after[reads] >= before.get(reads, 0) + 20, after.get(reads)
    assert after[("couchdb_open_databases_total", ())] >= 1
    assert any(name == "docstore_http_request_duration_seconds_bucket" for name, _ in after), "no duration histogram"
    # A replication run by the server (the client's own `replicate`, i.e. POST /_replicate) moves the
    # replication series.
    answer = server.replicate(db.name, db.name + "-copy", create_target=True)
    assert answer["ok"] and answer["history"][0]["docs_written"] >= 20, answer
    replicated = prometheus_samples(server)
    written = ("docstore_replication_docs_written_total", ())
    assert replicated[written] >= after.get(written, 0) + 20, (after.get(written), replicated.get(written))
    starts = ("couchdb_couch_replicator_jobs_starts_total", ())
    assert replicated[starts] >= after.get(starts, 0) + 1, replicated.get(starts)


def main():
    binary = os.path.abspath(sys.argv[1])
    folder = tempfile.mkdtemp(prefix="docstore-interop-")
    process = subprocess.Popen([binary, "serve", "--data", folder, "--port", "0", "--admin", "admin:secret"],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    passed = failed = 0
    try:
        line = process.stdout.readline()
        match = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
        if not match:
            print("interop: the server did not start: %r" % line)
            print("interop: 0 passed, 1 failed")
            return 1
        server = couchdb.Server("http://admin:secret@127.0.0.1:%s/" % match.group(1))
        db = server.create("db")
        for name, function in checks:
            try:
                function(server, db)
                passed += 1
                print("ok   %s" % name)
            except Exception:
                failed += 1
                print("FAIL %s" % name)
                traceback.print_exc(file=sys.stdout)
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            failed += 1
            print("FAIL server did not stop on SIGINT")
        shutil.rmtree(folder, ignore_errors=True)
    print("interop: %d passed, %d failed" % (passed, failed))
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
