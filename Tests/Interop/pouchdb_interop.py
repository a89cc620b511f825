#!/usr/bin/env python3
"""PouchDB, a real client, against `docstore serve` — and, with COUCHDB_URL, against Apache CouchDB in
the same run, compared step by step.

Usage: POUCHDB_DIST=FOLDER [COUCHDB_URL=http://admin:admin@127.0.0.1:5984] pouchdb_interop.py PATH_TO_DOCSTORE_BINARY

FOLDER holds PouchDB's browser build, `pouchdb.js` and `pouchdb.find.js` (its `dist/` folder; the
release tags of github.com/pouchdb/pouchdb carry it: `git show 9.0.0:dist/pouchdb.js`). Nothing of
PouchDB is part of this project.

Headless Chromium loads `pouchdb_page.js` from a page server on 127.0.0.1 (another origin than the
database servers, as a web app is), and PouchDB — on the browser's IndexedDB — pushes ~1 200
documents with updates, deletions, a conflicted document and attachments (3 KB and 300 KB) to the
server, pulls them into a fresh database and compares both sides, replicates again through its
checkpoints, filters (function, selector, doc_ids), syncs live both ways, follows 2 000 server writes
live, has a push refused in part by validate_doc_update, moves attachments of conflicting branches, queries views, runs Mango
through pouchdb-find, reads `_changes` (once and live), provokes errors, calls `_bulk_get` and
`_revs_diff`, writes attachments on the server, signs a user in by cookie, compacts and destroys;
against DocServer it also syncs as a user limited to one channel, and keeps a live sync with `retry`
going while the driver restarts `docstore serve` on its port. Each step checks itself
(PouchDB's own data against the server's); against CouchDB too, each step's comparable `value` must
equal CouchDB's. `docstore serve` runs with `--cors-origin` naming the page's origin; a CouchDB is given
the same CORS settings through its configuration API. Prints one line per check and
"pouchdb: N passed, M failed"; exits non-zero if any check failed.
"""
import base64
import http.server
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import urllib.parse
import urllib.request
import uuid

from browser_support import Tally, start_serve

HERE = os.path.dirname(os.path.abspath(__file__))


class PageServer:
    """Serves the page and PouchDB's files, and receives the scenario's outcome (POST /result)."""

    def __init__(self, dist, restart=None):
        self.results = {}
        # Called for POST /restart: stops and starts the database server on its port.
        self.restart = restart
        self.arrived = threading.Condition()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                path = urllib.parse.urlparse(self.path).path
                files = {"/": None, "/pouchdb.js": os.path.join(dist, "pouchdb.js"),
                         "/pouchdb.find.js": os.path.join(dist, "pouchdb.find.js"),
                         "/pouchdb_page.js": os.path.join(HERE, "pouchdb_page.js")}
                if path not in files:
                    self.send_error(404)
                    return
                if files[path] is None:
                    body = (b'<!doctype html><html><body><script src="/pouchdb.js"></script>'
                            b'<script src="/pouchdb.find.js"></script><script src="/pouchdb_page.js"></script></body></html>')
                    kind = "text/html"
                else:
                    with open(files[path], "rb") as handle:
                        body = handle.read()
                    kind = "application/javascript"
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self):
                if urllib.parse.urlparse(self.path).path == "/restart":
                    outer.restart()
                    self.send_response(204)
                    self.end_headers()
                    return
                query = urllib.parse.parse_qs(urllib.parse.urlparse(self.path).query)
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with outer.arrived:
                    outer.results[query.get("run", [""])[0]] = json.loads(body)
                    outer.arrived.notify_all()
                self.send_response(204)
                self.end_headers()

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.origin = "http://127.0.0.1:%d" % self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def wait(self, run, timeout):
        with self.arrived:
            self.arrived.wait_for(lambda: run in self.results, timeout=timeout)
            return self.results.get(run)


def run_scenario(chromium, pages, server_url, user, password, docserver=False):
    """The steps PouchDB went through against `server_url`, or None if the page never reported; for
    `docserver`, also DocServer's steps: a user limited to channels, a restart."""
    run = uuid.uuid4().hex[:8]
    flag = "1" if docserver else "0"
    query = urllib.parse.urlencode({"server": server_url, "user": user, "password": password, "suffix": "-" + run, "run": run,
                                    "channels": flag, "restart": flag})
    profile = tempfile.mkdtemp(prefix="docstore-pouchdb-browser-")
    # The page posts its outcome to /result?run=…: the page's own script adds the run from its query.
    browser = subprocess.Popen([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=" + profile,
                                "--remote-debugging-port=0", pages.origin + "/?" + query],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        return pages.wait(run, timeout=600)
    finally:
        browser.kill()
        browser.wait()
        shutil.rmtree(profile, ignore_errors=True)


def enable_couchdb_cors(couchdb_url, origin):
    """CouchDB's CORS settings for the page's origin, as `docstore serve --cors-origin` has them."""
    parts = urllib.parse.urlsplit(couchdb_url)
    netloc = parts.hostname + (":%d" % parts.port if parts.port else "")
    base = urllib.parse.urlunsplit((parts.scheme, netloc, "", "", ""))
    token = base64.b64encode(("%s:%s" % (parts.username, parts.password)).encode()).decode()
    settings = [("chttpd", "enable_cors", "true"), ("cors", "origins", origin), ("cors", "credentials", "true"),
                ("cors", "methods", "GET, PUT, POST, HEAD, DELETE"),
                ("cors", "headers", "accept, authorization, content-type, origin, referer")]
    for section, key, value in settings:
        request = urllib.request.Request("%s/_node/_local/_config/%s/%s" % (base, section, key), method="PUT",
                                         data=json.dumps(value).encode(),
                                         headers={"Authorization": "Basic " + token, "Content-Type": "application/json"})
        urllib.request.urlopen(request).read()
    return base, parts.username, parts.password


def main():
    binary = os.path.abspath(sys.argv[1])
    tally = Tally("pouchdb")
    dist = os.environ.get("POUCHDB_DIST")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not dist or not os.path.exists(os.path.join(dist, "pouchdb.js")):
        tally.check("POUCHDB_DIST names a folder with pouchdb.js and pouchdb.find.js", False, repr(dist))
        return tally.report()
    if not chromium:
        tally.check("Chromium is installed (apt-get install chromium)", False)
        return tally.report()
    folder = tempfile.mkdtemp(prefix="docstore-pouchdb-")
    serving = {}

    def restart():
        """`docstore serve` stopped and started again over the same folder, on the same port."""
        serving["process"].terminate()
        serving["process"].wait()
        serving["process"], _ = start_serve(binary, folder, ["--cors-origin", pages.origin], port=serving["port"])

    pages = PageServer(dist, restart)
    serving["process"], serving["port"] = start_serve(binary, folder, ["--cors-origin", pages.origin])
    port = serving["port"]
    try:
        ours = run_scenario(chromium, pages, "http://127.0.0.1:%d" % port, "admin", "pw", docserver=True)
        theirs = None
        couchdb_url = os.environ.get("COUCHDB_URL")
        if couchdb_url:
            try:
                base, user, password = enable_couchdb_cors(couchdb_url, pages.origin)
                theirs = run_scenario(chromium, pages, base, user, password)
            except OSError as error:
                tally.check("CouchDB at COUCHDB_URL answers", False, str(error))
                theirs = []
            tally.check("the scenario reported against CouchDB", theirs is not None)
        tally.check("the scenario reported against DocServer", ours is not None)
        if ours is None:
            return tally.report()
        reference = {step["name"]: step for step in theirs or []}
        for step in ours:
            tally.check("DocServer: " + step["name"], step["ok"], step.get("detail") or json.dumps(step["value"])[:600])
            if theirs is None:
                continue
            couch = reference.get(step["name"])
            if couch is None and step["name"].startswith("DocServer "):
                continue
            if couch is None:
                tally.check("CouchDB ran: " + step["name"], False, "no such step in CouchDB's run")
                continue
            if not couch["ok"]:
                print("note CouchDB itself fails %s: %s" % (step["name"], couch.get("detail") or json.dumps(couch["value"])[:400]))
            same = couch["value"] == step["value"]
            detail = ""
            if not same:
                detail = "\n  DocServer: %s\n  CouchDB:   %s" % (json.dumps(step["value"], sort_keys=True)[:1500],
                                                                json.dumps(couch["value"], sort_keys=True)[:1500])
            tally.check("same as CouchDB: " + step["name"], same, detail)
    finally:
        serving["process"].terminate()
        serving["process"].wait()
        shutil.rmtree(folder, ignore_errors=True)
    return tally.report()


if __name__ == "__main__":
    sys.exit(main())
