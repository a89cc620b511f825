#!/usr/bin/env python3
"""Load check of `docstore serve` on the loopback interface (bounded in time and size).

500 `_changes?feed=continuous` listeners, 16 writers and 4 point readers run for LOAD_SECONDS (default 30)
against one database. Afterwards every listener must have seen every written document, every write
must be readable, and the p50/p99 of the point reads are printed.

Usage: load_check.py <docstore binary> [--listeners N] [--writers N] [--seconds S]
"""
import argparse
import asyncio
import base64
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time

AUTH = "Basic " + base64.b64encode(b"admin:admin").decode()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Connection:
    """One keep-alive HTTP/1.1 connection: request/response with Content-Length or chunked bodies."""

    def __init__(self, port):
        self.port = port
        self.reader = self.writer = None

    async def open(self):
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)

    async def request(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else b""
        head = "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % (
            method, path, AUTH, len(data))
        self.writer.write(head.encode() + data)
        await self.writer.drain()
        status_line = await self.reader.readline()
        status = int(status_line.split()[1])
        length, chunked = 0, False
        while True:
            line = await self.reader.readline()
            if line in (b"\r\n", b""):
                break
            name, _, value = line.decode().partition(":")
            if name.lower() == "content-length":
                length = int(value)
            elif name.lower() == "transfer-encoding" and "chunked" in value.lower():
                chunked = True
        if chunked:
            payload = b""
            while True:
                size = int((await self.reader.readline()).strip(), 16)
                if size == 0:
                    await self.reader.readline()
                    break
                payload += await self.reader.readexactly(size)
                await self.reader.readline()
        else:
            payload = await self.reader.readexactly(length)
        return status, payload


async def listener(port, seen, stop):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(("GET /load/_changes?feed=continuous&since=0&heartbeat=5000 HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                  "Authorization: %s\r\n\r\n" % AUTH).encode())
    await writer.drain()
    while not stop.is_set():
        try:
            line = await asyncio.wait_for(reader.readline(), timeout=1)
        except asyncio.TimeoutError:
            continue
        if not line:
            raise RuntimeError("a continuous feed ended")
        # Chunked framing: size lines are hex digits, row lines are JSON objects. The id is read
        # without parsing the row: 500 listeners of a release build's writes are millions of rows,
        # and this one Python thread must keep up with them.
        start = line.find(b'"id":"')
        if start >= 0 and line.lstrip().startswith(b"{"):
            start += 6
            seen.add(line[start:line.index(b'"', start)].decode())
    writer.close()


async def writer_task(port, index, written, stop):
    connection = Connection(port)
    await connection.open()
    n = 0
    while not stop.is_set():
        doc_id = "w%02d-%06d" % (index, n)
        status, payload = await connection.request("PUT", "/load/" + doc_id, {"writer": index, "n": n, "text": "x" * 200})
        if status != 201:
            raise RuntimeError("PUT %s answered %d %s" % (doc_id, status, payload[:200]))
        written.append(doc_id)
        n += 1


async def point_reader(port, written, latencies, stop):
    connection = Connection(port)
    await connection.open()
    while not stop.is_set():
        if not written:
            await asyncio.sleep(0.01)
            continue
        doc_id = random.choice(written)
        started = time.perf_counter()
        status, _ = await connection.request("GET", "/load/" + doc_id)
        latencies.append(time.perf_counter() - started)
        if status != 200:
            raise RuntimeError("GET %s answered %d" % (doc_id, status))


async def main_async(port, listeners, writers, seconds):
    setup = Connection(port)
    await setup.open()
    status, payload = await setup.request("PUT", "/load")
    assert status == 201, payload
    stop_writing, stop_listening = asyncio.Event(), asyncio.Event()
    seen_sets = [set() for _ in range(listeners)]
    listener_tasks = [asyncio.create_task(listener(port, seen, stop_listening)) for seen in seen_sets]
    await asyncio.sleep(1)
    written, latencies = [], []
    workers = [asyncio.create_task(writer_task(port, i, written, stop_writing)) for i in range(writers)]
    workers += [asyncio.create_task(point_reader(port, written, latencies, stop_writing)) for _ in range(4)]
    started = time.time()
    await asyncio.sleep(seconds)
    stop_writing.set()
    await asyncio.gather(*workers)
    wrote_for = time.time() - started
    expected = set(written)
    # A change is lost if it never arrives, not if this client is slow to read it: the wait ends when
    # every listener has every change, or when no listener has read a row for 15 s.
    quiet_since, last_total = time.time(), -1
    while time.time() - quiet_since < 15 and any(not expected <= seen for seen in seen_sets):
        for task in listener_tasks:
            if task.done() and task.exception():
                raise task.exception()
        total = sum(len(seen) for seen in seen_sets)
        if total != last_total:
            quiet_since, last_total = time.time(), total
        await asyncio.sleep(0.5)
    stop_listening.set()
    await asyncio.gather(*listener_tasks, return_exceptions=True)
    missing = [len(expected - seen) for seen in seen_sets if not expected <= seen]
    final = Connection(port)  # the setup connection has been idle longer than the server keeps one
    await final.open()
    status, payload = await final.request("GET", "/load")
    count = json.loads(payload)["doc_count"]
    latencies.sort()
    p50 = latencies[len(latencies) // 2] * 1000 if latencies else float("nan")
    p99 = latencies[int(len(latencies) * 0.99)] * 1000 if latencies else float("nan")
    print("wrote %d documents in %.1f s with %d writers (%.0f/s); doc_count %d" % (len(expected), wrote_for, writers, len(expected) / wrote_for, count))
    print("%d continuous listeners: %d saw every change%s" % (listeners, listeners - len(missing),
                                                             "" if not missing else "; the others missed %s" % missing[:10]))
    print("point reads: %d, p50 %.2f ms, p99 %.2f ms" % (len(latencies), p50, p99))
    return not missing and count == len(expected)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("binary")
    parser.add_argument("--listeners", type=int, default=500)
    parser.add_argument("--writers", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=float(os.environ.get("LOAD_SECONDS", "30")))
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="docstore-load-")
    port = free_port()
    # The server's warnings go to a file: a pipe nobody reads would stop the server once it filled.
    log = tempfile.TemporaryFile(mode="w+")
    server = subprocess.Popen([args.binary, "serve", "--data", folder, "--port", str(port), "--admin", "admin:admin",
                               "--log-level", "warning"], stdout=subprocess.DEVNULL, stderr=log)
    ok = False
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        ok = asyncio.run(main_async(port, args.listeners, args.writers, args.seconds))
    finally:
        server.terminate()
        server.wait(timeout=30)
        shutil.rmtree(folder, ignore_errors=True)
        if not ok:
            log.seek(0)
            lines = log.read().splitlines()
            print("the server's last warnings (%d lines):" % len(lines))
            for line in lines[-20:]:
                print("  " + line)
    print("load check: %s" % ("passed" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
