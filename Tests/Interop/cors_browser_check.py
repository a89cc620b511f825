#!/usr/bin/env python3
"""CORS proven in a real browser: headless Chromium loads a page from one origin that syncs with
`docstore serve` on another through `fetch` calls.

Usage: cors_browser_check.py PATH_TO_DOCSTORE_BINARY

Starts three servers over temporary folders — one with `--cors-origin` naming the page's origin, one
with `--cors-origin '*'` and one without — and a static web server for the page (127.0.0.1 on a third port: another origin). The page
creates a database, writes a document with HTTP Basic credentials, reads it back and follows
`_changes`, every `fetch` with `credentials: "include"` as PouchDB sends them, then writes what it saw into the DOM, which Chromium's `--dump-dom` prints. The server
without CORS must be refused by the browser. Prints one line per check and a closing
"cors: N passed, M failed" line; exits non-zero if any check failed.
"""
import functools
import http.server
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading

from browser_support import Tally, start_serve

PAGE = """<!doctype html>
<html><body><pre id="result">pending</pre><script>
const base = "http://127.0.0.1:%(port)d";
const headers = {"Authorization": "Basic " + btoa("admin:pw"), "Content-Type": "application/json"};
const fetch = (url, options) => window.fetch(url, Object.assign({headers, credentials: "include"}, options || {}));
async function sync() {
  const steps = [];
  let r = await fetch(base + "/browserdb", {method: "PUT"});
  steps.push("create " + r.status);
  r = await fetch(base + "/browserdb/note", {method: "PUT", body: JSON.stringify({text: "from the page"})});
  const written = await r.json();
  steps.push("write " + r.status + " " + written.rev.split("-")[0]);
  steps.push("etag " + (r.headers.get("ETag") !== null));
  r = await fetch(base + "/browserdb/note");
  steps.push("read " + (await r.json()).text);
  r = await fetch(base + "/browserdb/_changes?since=0");
  steps.push("changes " + (await r.json()).results.map(c => c.id).join(","));
  return steps.join("|");
}
sync().then(text => { document.getElementById("result").textContent = "ok|" + text; })
      .catch(error => { document.getElementById("result").textContent = "blocked|" + error; });
</script></body></html>
"""


def browser_result(chromium, url):
    """What the page wrote into #result, once its scripts are done."""
    output = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=20000",
                             "--dump-dom", url], capture_output=True, text=True, timeout=120).stdout
    match = re.search(r'<pre id="result">([^<]*)</pre>', output)
    return match.group(1) if match else "no result in: " + output[:500]


def main():
    binary = os.path.abspath(sys.argv[1])
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        print("cors: Chromium is not installed (apt-get install chromium)")
        print("cors: 0 passed, 1 failed")
        return 1
    pages = tempfile.mkdtemp(prefix="docstore-cors-page-")
    class QuietHandler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    handler = functools.partial(QuietHandler, directory=pages)
    page_server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    page_origin = "http://127.0.0.1:%d" % page_server.server_address[1]
    threading.Thread(target=page_server.serve_forever, daemon=True).start()

    folders = [tempfile.mkdtemp(prefix="docstore-cors-") for _ in range(3)]
    allowed, allowed_port = start_serve(binary, folders[0], ["--cors-origin", page_origin])
    closed, closed_port = start_serve(binary, folders[1], [])
    star, star_port = start_serve(binary, folders[2], ["--cors-origin", "*"])
    tally = Tally("cors")
    check = tally.check

    try:
        for name, port in [("allowed", allowed_port), ("closed", closed_port), ("star", star_port)]:
            with open(os.path.join(pages, name + ".html"), "w") as page:
                page.write(PAGE % {"port": port})
        seen = browser_result(chromium, page_origin + "/allowed.html")
        expected = "ok|create 201|write 201 1|etag true|read from the page|changes note"
        check("a page of an allowed origin syncs with docstore serve", seen == expected, seen)
        seen = browser_result(chromium, page_origin + "/star.html")
        check("with --cors-origin '*' any page syncs, credentials included", seen == expected, seen)
        seen = browser_result(chromium, page_origin + "/closed.html")
        check("a server without --cors-origin is refused by the browser", seen.startswith("blocked|TypeError"), seen)
    finally:
        for process in (allowed, closed, star):
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
        page_server.shutdown()
        for folder in folders + [pages]:
            shutil.rmtree(folder, ignore_errors=True)
    return tally.report()


if __name__ == "__main__":
    sys.exit(main())
