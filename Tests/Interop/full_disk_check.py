#!/usr/bin/env python3
"""A real full disk under `docstore serve` (Docs/Reliability.md).

The data folder is a 4 MiB tmpfs. Documents, then an attachment, then a replication into it fill it:
each must be refused with 507 `insufficient_storage` (never a 500, never a hang), and every write
acknowledged before must still read back. The file system is then grown (space freed): the same
database takes the refused writes, and after the server stops both SQLite files pass
`PRAGMA integrity_check`.

Mounting needs root and a machine that allows it (not every container does); where the mount is
refused the check says so and exits 0 — `swift test` covers the same paths with a file-size limit
(DiskFullTests, DiskFullReplicationTests).

Usage: full_disk_check.py <docstore binary>
"""
import json
import os
import pathlib
import sqlite3
import subprocess
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from couchdb_replication_interop import start_docstore, stop_docstore  # noqa: E402


def json_answer(docstore, method, path, body=None, content_type=None):
    """`docstore`'s status and JSON answer to one request."""
    status, data, _ = docstore.request(method, path, body, headers={"Content-Type": content_type} if content_type else None,
                                       timeout=60)
    return status, json.loads(data or b"null")


def main():
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    binary = os.path.abspath(sys.argv[1])
    mount = tempfile.mkdtemp(prefix="docstore-full-")
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", mount], capture_output=True).returncode != 0:
        print("full_disk_check: this machine does not allow a tmpfs mount here; not run (swift test covers the paths)")
        os.rmdir(mount)
        return
    failures, passed = [], [0]

    def check(condition, message):
        print(("ok   " if condition else "FAIL ") + message)
        if condition:
            passed[0] += 1
        else:
            failures.append(message)

    data = os.path.join(mount, "data")
    server, docstore = start_docstore(binary, data)

    def request(method, path, body=None, content_type=None):
        return json_answer(docstore, method, path, body, content_type)

    try:
        check(request("PUT", "/db")[0] == 201, "database created on a 4 MiB file system")
        check(request("PUT", "/source")[0] == 201, "a replication source on the same server")
        status, _ = request("POST", "/source/_bulk_docs", {"docs": [{"_id": "s%03d" % n, "pad": "s" * 1000} for n in range(300)]})
        check(status == 201, "300 documents in the source")
        acknowledged = {}
        refused = None
        for batch in range(2000):
            docs = [{"_id": "b%04d-%02d" % (batch, n), "pad": "x" * 1000} for n in range(20)]
            status, answer = request("POST", "/db/_bulk_docs", {"docs": docs})
            if status != 201:
                refused = (batch, status, answer)
                break
            for row in answer:
                acknowledged[row["id"]] = row["rev"]
        check(refused is not None and refused[1] == 507 and refused[2].get("error") == "insufficient_storage",
              "a write that finds the disk full: %s" % (refused,))
        check(len(acknowledged) > 500, "%d documents acknowledged before" % len(acknowledged))
        missing = [doc_id for doc_id, rev in acknowledged.items() if request("GET", "/db/" + doc_id)[1].get("_rev") != rev]
        check(not missing, "every acknowledged document reads back (%d missing)" % len(missing))
        status, answer = request("GET", "/db/%s-00" % ("b%04d" % refused[0]))
        check(status == 404, "the refused batch left nothing")
        status, answer = request("PUT", "/db/attached/big.bin", os.urandom(1 << 20), "application/octet-stream")
        check(status == 507 and answer.get("error") == "insufficient_storage", "an attachment that does not fit: %d %s" % (status, answer))
        status, answer = request("POST", "/_replicate", {"source": "source", "target": "db"})
        check(status == 502 and "No room left" in answer.get("reason", ""),
              "a replication into the full disk fails, naming it: %d %s" % (status, answer))
        check(request("GET", "/")[0] == 200, "the server goes on answering")

        # Space freed: the file system grows, and the same database takes the refused writes.
        subprocess.run(["mount", "-o", "remount,size=64m", mount], check=True)
        docs = [{"_id": "b%04d-%02d" % (refused[0], n), "pad": "x" * 1000} for n in range(20)]
        status, answer = request("POST", "/db/_bulk_docs", {"docs": docs})
        check(status == 201 and all(row.get("ok") for row in answer), "the refused batch is written once there is room")
        status, answer = request("PUT", "/db/attached/big.bin", os.urandom(1 << 20), "application/octet-stream")
        check(status == 201, "so is the attachment")
        status, answer = request("GET", "/db")
        status, answer = request("POST", "/_replicate", {"source": "source", "target": "db"})
        check(status == 200 and answer.get("ok") is True, "the replication completes once there is room")
        status, answer = request("GET", "/db")
        check(answer.get("doc_count") == len(acknowledged) + 21 + 300, "doc_count %s" % answer.get("doc_count"))
    finally:
        stop_docstore(server)
    try:
        for name in ("db.sqlite", "db.sqlite-idx"):
            path = os.path.join(data, name)
            if os.path.exists(path):
                connection = sqlite3.connect(path)
                result = connection.execute("PRAGMA integrity_check").fetchall()
                connection.close()
                check(result == [("ok",)], "%s passes integrity_check" % name)
    finally:
        if subprocess.run(["umount", mount]).returncode != 0:
            subprocess.run(["umount", "-l", mount])
        os.rmdir(mount)
    print("full_disk_check: %d passed, %d failed" % (passed[0], len(failures)))
    if failures:
        sys.exit(1)


if __name__ == "__main__":
    main()
