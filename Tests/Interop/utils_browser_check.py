#!/usr/bin/env python3
"""The web administration page (/_utils/) used in a real browser: headless Chromium, driven through its
DevTools protocol over a pipe (`--remote-debugging-pipe`: no WebSocket library needed).

Usage: utils_browser_check.py PATH_TO_DOCSTORE_BINARY [SCREENSHOT_FOLDER]

Starts `docstore serve` on a free port over a temporary folder, with a database `shared` holding
documents in channels `blue` and `red` and a user `bob` who reads `blue` only. In the browser, as the
administrator: signs in, creates a database, adds a document and edits it, sees a conflict, uploads an
attachment, runs a Mango query and its explanation, creates an index, queries a JavaScript view, starts
a replication in `_replicator` and watches it complete, and opens the activity page's chart; then, at
phone width, a document and the database list; then signs in as bob and sees only bob's channel. Every
step is checked against the server over HTTP too. The page must throw no script error and break no
Content-Security-Policy rule. A screenshot of each page goes to SCREENSHOT_FOLDER (default
test-output/utils-page). Prints one line per check and "utils: N passed, M failed"; exits non-zero if
any check failed.
"""
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

from browser_support import Tally, start_serve, stop_serve


class Browser:
    """Headless Chromium with one page, spoken to in DevTools protocol messages (JSON, NUL-terminated)
    on file descriptors 3 (commands) and 4 (answers and events)."""

    def __init__(self, chromium, profile):
        commands_read, self.commands = os.pipe()
        self.answers, answers_write = os.pipe()

        def descriptors():
            os.dup2(commands_read, 3)
            os.dup2(answers_write, 4)
            os.set_inheritable(3, True)
            os.set_inheritable(4, True)

        self.process = subprocess.Popen(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe", "--no-first-run",
             "--user-data-dir=" + profile, "--window-size=1280,900", "about:blank"],
            preexec_fn=descriptors, close_fds=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(commands_read)
        os.close(answers_write)
        self.buffer = b""
        self.next_id = 0
        self.events = []
        self.session = None
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.send(domain + ".enable")

    def send(self, method, params=None, timeout=60):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if self.session:
            message["sessionId"] = self.session
        os.write(self.commands, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self.receive(deadline)
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError("%s: %s" % (method, reply["error"]))
                return reply.get("result", {})
            if "method" in reply:
                self.events.append(reply)

    def receive(self, deadline):
        while b"\0" not in self.buffer:
            if time.monotonic() > deadline:
                raise TimeoutError("Chromium did not answer in time")
            chunk = os.read(self.answers, 1 << 20)
            if not chunk:
                raise RuntimeError("Chromium closed its pipe")
            self.buffer += chunk
        message, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(message)

    def evaluate(self, expression):
        result = self.send("Runtime.evaluate", {"expression": expression, "awaitPromise": True, "returnByValue": True})
        if "exceptionDetails" in result:
            raise RuntimeError("script failed: %s" % result["exceptionDetails"].get("exception", {}).get("description"))
        return result["result"].get("value")

    def wait_for(self, expression, timeout=20):
        """Polls `expression` until it is truthy (the page's state, not a fixed delay); its value."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError("waited %d s for %s" % (timeout, expression))
            time.sleep(0.1)

    def navigate(self, url):
        self.send("Page.navigate", {"url": url})

    def go(self, fragment):
        """Shows the page's `#/…` route as a click on a link would (the page reloads where it is on it)."""
        if self.evaluate("location.hash") == fragment:
            self.send("Page.reload")
            self.wait_for("document.readyState === 'complete' && !!document.querySelector('main h1')")
        else:
            self.evaluate("location.hash = %s" % json.dumps(fragment))

    def type_into(self, selector, text):
        """Focuses the field and types `text` as keyboard input would (the field is emptied first)."""
        self.evaluate("(() => { const e = document.querySelector(%s); e.focus(); e.select && e.select(); "
                      "e.value = ''; return true; })()" % json.dumps(selector))
        self.send("Input.insertText", {"text": text})

    def click(self, selector):
        self.wait_for("!!document.querySelector(%s)" % json.dumps(selector))
        self.evaluate("document.querySelector(%s).click()" % json.dumps(selector))

    def screenshot(self, path):
        data = self.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True})["data"]
        with open(path, "wb") as file:
            file.write(base64.b64decode(data))

    def problems(self):
        """Script errors, security (CSP) messages and other errors but failed requests, so far."""
        found = []
        for event in self.events:
            if event["method"] == "Runtime.exceptionThrown":
                found.append("exception: " + json.dumps(event["params"]["exceptionDetails"])[:300])
            elif event["method"] == "Log.entryAdded":
                entry = event["params"]["entry"]
                # Answers with an error status (a refused document, a wrong password) are the page's to
                # show, and logged by the browser as network errors; anything else at error level counts.
                if entry.get("source") != "network" and (entry.get("level") == "error" or entry.get("source") in ("security", "javascript")):
                    found.append("%s: %s" % (entry.get("source"), entry.get("text")))
        return found

    def close(self):
        try:
            self.send("Browser.close", timeout=10)
        except Exception:
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()


def main():
    binary = os.path.abspath(sys.argv[1])
    shots = os.path.abspath(sys.argv[2] if len(sys.argv) > 2 else "test-output/utils-page")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        print("utils: Chromium is not installed (apt-get install chromium)")
        print("utils: 0 passed, 1 failed")
        return 1
    os.makedirs(shots, exist_ok=True)
    folder = tempfile.mkdtemp(prefix="docstore-utils-")
    profile = tempfile.mkdtemp(prefix="docstore-utils-chromium-")
    upload = os.path.join(folder, "hello.txt")
    with open(upload, "w") as file:
        file.write("hello from the page\n")
    server, port = start_serve(binary, os.path.join(folder, "data"), ["--log-level", "warning"])
    base = "http://127.0.0.1:%d" % port
    auth = "Basic " + base64.b64encode(b"admin:pw").decode()

    def http(method, path, body=None, credentials=auth):
        request = urllib.request.Request(base + path, method=method, data=None if body is None else json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json", **({"Authorization": credentials} if credentials else {})})
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"null")

    tally = Tally("utils")
    check = tally.check

    def step(name, work):
        """A step whose failure (a timeout waiting for the page, say) fails its check and goes on."""
        try:
            work()
            return True
        except Exception as error:
            check(name, False, error)
            return False

    browser = None
    anonymous = None  # the second server, open to everyone
    try:
        # What bob may see: the blue documents of `shared`, not the red ones.
        http("PUT", "/shared")
        http("POST", "/shared/_bulk_docs", {"docs": [
            {"_id": "blue-1", "channels": ["blue"], "n": 1}, {"_id": "blue-2", "channels": ["blue"], "n": 2},
            {"_id": "red-1", "channels": ["red"], "n": 3}]})
        http("PUT", "/_users/org.couchdb.user:bob", {"name": "bob", "password": "bobpw", "type": "user", "roles": [], "channels": ["blue"]})

        browser = Browser(chromium, profile)
        page = base + "/_utils"

        # Sign in.
        def sign_in(name, password):
            browser.wait_for("!!document.querySelector('#signin-form')")
            browser.type_into("#signin-name", name)
            browser.type_into("#signin-password", password)
            browser.click("#signin-submit")

        def sign_in_page():
            browser.navigate(page)
            browser.wait_for("!!document.querySelector('#signin-form')")
            browser.screenshot(os.path.join(shots, "01-sign-in.png"))
        if step("the sign-in form appears at /_utils", sign_in_page):
            check("/_utils moves to /_utils/ and shows the sign-in form", browser.evaluate("location.pathname") == "/_utils/")

        def databases():
            sign_in("admin", "pw")
            browser.wait_for("!!document.querySelector('tr[data-database=\"shared\"]')")
            browser.screenshot(os.path.join(shots, "02-databases.png"))
        if step("sign in as the administrator", databases):
            check("signed in, the database list shows `shared`", "admin" in browser.evaluate("document.querySelector('#user-name').textContent"))

        # Create a database.
        def create_database():
            browser.type_into("#new-database", "notes")
            browser.click("#create-database button[type=submit]")
            browser.wait_for("location.hash === '#/db/notes' && !!document.querySelector('#new-document')")
        if step("create a database", create_database):
            check("a database created on the page exists", http("GET", "/notes")[0] == 200)

        # Add a document, then edit it.
        def add_document():
            browser.click("#new-document")
            browser.wait_for("!!document.querySelector('#document-json')")
            browser.type_into("#document-json", json.dumps({"_id": "first", "title": "Hello", "tags": ["a"]}))
            browser.click("#save-document")
            browser.wait_for("(document.querySelector('#document-rev') || {}).textContent?.startsWith('1-')")
        if step("add a document", add_document):
            status, doc = http("GET", "/notes/first")
            check("a document added on the page is stored", status == 200 and doc.get("title") == "Hello", doc)

        def edit_document():
            current = json.loads(browser.evaluate("document.querySelector('#document-json').value"))
            current["title"] = "Hello again"
            browser.type_into("#document-json", json.dumps(current))
            browser.click("#save-document")
            browser.wait_for("(document.querySelector('#document-rev') || {}).textContent?.startsWith('2-')")
            browser.screenshot(os.path.join(shots, "03-document.png"))
        if step("edit the document", edit_document):
            status, doc = http("GET", "/notes/first")
            check("an edit on the page is a new revision", doc.get("title") == "Hello again" and doc["_rev"].startswith("2-"), doc)

        # A conflict made over HTTP is shown, and choosing the losing revision resolves it.
        losing = "2-" + "0" * 31 + "1"
        http("POST", "/notes/_bulk_docs", {"new_edits": False, "docs": [
            {"_id": "first", "_rev": losing, "title": "From elsewhere", "tags": ["a", "b"], "_revisions": {"start": 2, "ids": [losing[2:], http("GET", "/notes/first?revs=true")[1]["_revisions"]["ids"][-1]]}}]})
        winner = http("GET", "/notes/first")[1]["_rev"]
        conflict = losing if winner != losing else http("GET", "/notes/first?conflicts=true")[1]["_conflicts"][0]

        def show_conflict():
            browser.go("#/db/notes/doc/first")
            browser.wait_for("(document.querySelector('#document-conflicts') || {}).textContent?.includes(%s)" % json.dumps(conflict))
            browser.screenshot(os.path.join(shots, "04-conflict.png"))
        check("a conflicting revision is listed on the document's page", step("show a conflict", show_conflict))

        def choose_revision():
            browser.go("#/db/notes/doc/first/rev/" + conflict)
            browser.wait_for("(document.querySelector('#document-rev') || {}).textContent === %s" % json.dumps(conflict))
            browser.click("#save-document")
            browser.wait_for("location.hash === '#/db/notes/doc/first' && (document.querySelector('#document-conflicts') || {}).textContent === 'none'")
        if step("choose a conflicting revision", choose_revision):
            doc = http("GET", "/notes/first?conflicts=true")[1]
            chosen = "From elsewhere" if conflict == losing else "Hello again"
            check("choosing a revision keeps its content and leaves no conflict", doc.get("title") == chosen and "_conflicts" not in doc, doc)

        # An attachment.
        def attach():
            node = browser.send("DOM.getDocument")["root"]["nodeId"]
            field = browser.send("DOM.querySelector", {"nodeId": node, "selector": "#attachment-file"})["nodeId"]
            browser.send("DOM.setFileInputFiles", {"nodeId": field, "files": [upload]})
            browser.click("#upload-attachment button[type=submit]")
            browser.wait_for("!!document.querySelector('tr[data-attachment=\"hello.txt\"]')")
        if step("upload an attachment", attach):
            request = urllib.request.Request(base + "/notes/first/hello.txt", headers={"Authorization": auth})
            with urllib.request.urlopen(request, timeout=30) as response:
                check("an attachment uploaded on the page is stored byte for byte", response.read() == b"hello from the page\n")

        # Mango: a query, its explanation, an index.
        def mango():
            browser.go("#/db/notes/query")
            browser.wait_for("!!document.querySelector('#mango-query')")
            browser.type_into("#mango-query", json.dumps({"selector": {"tags": {"$elemMatch": {"$eq": "a"}}}, "execution_stats": True}))
            browser.click("#mango-run")
            browser.wait_for("(document.querySelector('#mango-count') || {}).textContent === '1 document'")
            browser.screenshot(os.path.join(shots, "05-mango-query.png"))
            browser.click("#mango-explain-button")
            browser.wait_for("!!document.querySelector('#mango-explain')")
            browser.screenshot(os.path.join(shots, "06-mango-explain.png"))
        check("a Mango query finds the document, and _explain answers", step("Mango query", mango))

        def index():
            browser.go("#/db/notes/indexes")
            browser.wait_for("!!document.querySelector('#index-fields')")
            for name, ddoc, kind in [("by-title", "", "json"), ("words", "search", "text")]:
                browser.type_into("#index-fields", "title")
                browser.type_into("#index-name", name)
                browser.type_into("#index-ddoc", ddoc)
                browser.evaluate("document.querySelector('#index-type').value = %s" % json.dumps(kind))
                browser.click("#create-index button[type=submit]")
                browser.wait_for("!!document.querySelector('tr[data-index=%s]')" % json.dumps(name))
            browser.screenshot(os.path.join(shots, "07-indexes.png"))
        if step("create an index", index):
            names = {entry["name"]: entry["type"] for entry in http("GET", "/notes/_index")[1]["indexes"]}
            check("a json and a full-text index created on the page exist", names.get("by-title") == "json" and names.get("words") == "text", names)

        # A JavaScript view.
        http("PUT", "/notes/_design/app", {"views": {"by_title": {"map": "function (doc) { if (doc.title) emit(doc.title, 1); }", "reduce": "_count"}}})

        def view():
            browser.go("#/db/notes/views")
            browser.wait_for("(document.querySelector('#view-name') || {}).value === 'app/by_title'")
            browser.evaluate("document.querySelector('#view-reduce').value = 'false'")
            browser.click("#view-run")
            browser.wait_for("(document.querySelector('#view-count') || {}).textContent?.startsWith('1 rows of 1')")
            browser.screenshot(os.path.join(shots, "08-views.png"))
        check("a JavaScript view is queried with its options", step("query a view", view))

        def full_text():
            browser.evaluate("document.querySelector('#view-picker').value = 'search/words'; document.querySelector('#view-picker').dispatchEvent(new Event('change'))")
            browser.type_into("#view-full-text", "elsewhere")
            browser.click("#view-run")
            browser.wait_for("(document.querySelector('#view-count') || {}).textContent?.startsWith('1 rows of 1')")
            if browser.evaluate("document.querySelector('#view-output tbody a').textContent") != "first":
                raise AssertionError("the search did not find `first`")
            browser.screenshot(os.path.join(shots, "08-views-full-text.png"))
        check("a full-text index is searched from the views page", step("full-text search", full_text))

        # A replication, watched until it completes.
        def replication():
            browser.go("#/replication")
            browser.wait_for("!!document.querySelector('#replication-source')")
            browser.type_into("#replication-source", "notes")
            browser.type_into("#replication-target", "notes-copy")
            browser.type_into("#replication-id", "copy-notes")
            browser.click("#start-replication")
            browser.wait_for("!!document.querySelector('tr[data-replication=\"copy-notes\"]')")
            browser.screenshot(os.path.join(shots, "09-replication-started.png"))
            browser.wait_for("!!document.querySelector('tr[data-replication=\"copy-notes\"] [data-state=\"completed\"]')", timeout=60)
            browser.screenshot(os.path.join(shots, "10-replication-completed.png"))
        if step("start a replication and watch it complete", replication):
            status, doc = http("GET", "/notes-copy/first")
            check("the replication the page started completed and copied the document", status == 200 and "title" in doc, doc)

        def activity():
            browser.go("#/activity")
            browser.wait_for("document.querySelectorAll('#metrics polyline').length >= 1", timeout=30)
            browser.screenshot(os.path.join(shots, "11-activity.png"))
        check("the activity page charts the server's Prometheus figures", step("activity", activity))

        # A view building for some seconds shows on the activity page as CouchDB's `indexer` task.
        def indexing():
            http("PUT", "/busy")
            for start in range(0, 20000, 5000):
                http("POST", "/busy/_bulk_docs", {"docs": [{"n": n} for n in range(start, start + 5000)]})
            http("PUT", "/busy/_design/slow", {"views": {"v": {
                "map": "function(doc) { var x = 0; for (var i = 0; i < 300000; i++) x += i % 7; emit(doc.n, x); }"}}})
            build = threading.Thread(target=lambda: http("GET", "/busy/_design/slow/_view/v?limit=1"))
            build.start()
            try:
                browser.wait_for("!!document.querySelector('tr[data-type=\"indexer\"]')", timeout=60)
                browser.screenshot(os.path.join(shots, "11-activity-indexing.png"))
                row = browser.evaluate("document.querySelector('tr[data-type=\"indexer\"]').textContent")
                # Every document and the design document changed since the view's last update.
                if "busy _design/slow" not in row or " of 20001" not in row:
                    raise AssertionError("the indexer row says %r" % row)
            finally:
                build.join()
        check("an index build shows on the activity page with its progress", step("indexing", indexing))

        # Phone width: nothing wider than the screen.
        def phone():
            browser.send("Emulation.setDeviceMetricsOverride", {"width": 390, "height": 844, "deviceScaleFactor": 2, "mobile": True})
            browser.go("#/db/notes/doc/first")
            browser.wait_for("!!document.querySelector('#document-json')")
            browser.screenshot(os.path.join(shots, "12-phone-document.png"))
            wide = browser.evaluate("document.documentElement.scrollWidth")
            browser.go("#/")
            browser.wait_for("!!document.querySelector('tr[data-database=\"notes\"]')")
            browser.screenshot(os.path.join(shots, "13-phone-databases.png"))
            wide = max(wide, browser.evaluate("document.documentElement.scrollWidth"))
            if wide > 390:
                raise AssertionError("the page is %d px wide at 390 px" % wide)
            browser.send("Emulation.clearDeviceMetricsOverride")
        check("at phone width (390 px) the page fits the screen", step("phone width", phone))

        # A user limited to channels sees only those.
        def channel_user():
            browser.click("#sign-out")
            sign_in("bob", "bobpw")
            browser.wait_for("!!document.querySelector('tr[data-database=\"shared\"]')")
            browser.go("#/db/shared")
            browser.wait_for("document.querySelectorAll('tr[data-id]').length > 0")
            browser.screenshot(os.path.join(shots, "14-channel-user.png"))
            seen = browser.evaluate("[...document.querySelectorAll('tr[data-id]')].map(row => row.dataset.id)")
            if seen != ["blue-1", "blue-2"]:
                raise AssertionError("bob sees %s" % seen)
            browser.go("#/db/shared/doc/red-1")
            browser.wait_for("!!document.querySelector('main .error')")
            if "403" not in browser.evaluate("document.querySelector('main .error').textContent"):
                raise AssertionError("a red document was not refused")
            browser.go("#/replication")
            browser.wait_for("!!document.querySelector('#replications-note')")
            if browser.evaluate("!!document.querySelector('#new-replication') || location.hash !== '#/replication'"):
                raise AssertionError("bob was offered replication, or sent away from the page")
        check("a user limited to channels sees only its channel's documents", step("channel user", channel_user))

        # A server open to everyone (`--allow-anonymous`): the page works without a sign-in, as Fauxton
        # does in CouchDB's "admin party".
        def open_to_everyone():
            nonlocal anonymous
            browser.click("#sign-out")
            browser.wait_for("!!document.querySelector('#signin-form')")
            anonymous, open_port = start_serve(binary, os.path.join(folder, "open"), ["--log-level", "warning", "--allow-anonymous"])
            urllib.request.urlopen(urllib.request.Request("http://127.0.0.1:%d/everyone" % open_port, method="PUT"), timeout=30)
            browser.navigate("http://127.0.0.1:%d/_utils/" % open_port)
            browser.wait_for("!!document.querySelector('tr[data-database=\"everyone\"]')")
            browser.screenshot(os.path.join(shots, "15-open-to-everyone.png"))
            if browser.evaluate("!!document.querySelector('#signin-form') || location.hash.startsWith('#/signin')"):
                raise AssertionError("the page asked to sign in")
            header = browser.evaluate("document.querySelector('#user-name').textContent")
            if "everyone" not in header or browser.evaluate("document.querySelector('#sign-out').offsetParent !== null"):
                raise AssertionError("the header says %r, with a sign-out button" % header)
            browser.go("#/db/everyone")
            browser.wait_for("!!document.querySelector('#new-document')")
        check("with --allow-anonymous the page lists databases and opens them without a sign-in",
              step("open to everyone", open_to_everyone))

        problems = browser.problems()
        check("no script error and no Content-Security-Policy violation on any page", not problems, problems[:5])
        check("screenshots saved", len([name for name in os.listdir(shots) if name.endswith(".png")]) >= 17, os.listdir(shots))
    finally:
        if browser:
            browser.close()
        for process in (server, anonymous):
            if process is not None:
                stop_serve(process)
        shutil.rmtree(folder, ignore_errors=True)
        shutil.rmtree(profile, ignore_errors=True)
    print("screenshots in %s" % shots)
    return tally.report()


if __name__ == "__main__":
    sys.exit(main())
