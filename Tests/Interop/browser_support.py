"""What the interop scripts that start their own server share (the browser checks,
latency_under_writes.py): a `docstore serve` on a free port, started and stopped, and the tally of
their checks."""
import re
import signal
import subprocess


def start_serve(binary, folder, extra=(), port=0):
    """`docstore serve` over `folder` on `port` (0: a free one), administrator admin:pw; the process and its port."""
    process = subprocess.Popen([binary, "serve", "--data", folder, "--port", str(port), "--admin", "admin:pw"] + list(extra),
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    match = re.search(r"http://127\.0\.0\.1:(\d+)/", process.stdout.readline())
    if not match:
        process.kill()
        raise RuntimeError("docstore serve did not start")
    return process, int(match.group(1))


def stop_serve(process, timeout=10):
    """Stops `docstore serve` as Ctrl-C does (killed if it has not ended within `timeout` seconds);
    whether it ended on its own."""
    process.send_signal(signal.SIGINT)
    try:
        process.wait(timeout=timeout)
        return True
    except subprocess.TimeoutExpired:
        process.kill()
        return False


class Tally:
    """Prints one line per check and, at the end, "<label>: N passed, M failed"."""

    def __init__(self, label):
        self.label = label
        self.passed = self.failed = 0

    def check(self, name, condition, detail=""):
        if condition:
            self.passed += 1
            print("ok   %s" % name)
        else:
            self.failed += 1
            print("FAIL %s: %s" % (name, detail))

    def report(self):
        """The closing line; the exit status (non-zero if any check failed)."""
        print("%s: %d passed, %d failed" % (self.label, self.passed, self.failed))
        return 0 if self.failed == 0 else 1
