"""Headless Chromium for the report tests, driven over the DevTools protocol on a pipe.

`--remote-debugging-pipe` speaks CDP over file descriptors 3 (commands in) and 4 (events and
answers out), NUL-separated JSON: no port, no websocket package. The network is closed three
ways: Chromium runs in an empty network namespace when `unshare -n` works (root, as CI is), every
host name resolves to nothing and the proxy is a closed loopback port, and the page's Network
domain is set offline. Every request the page makes is still recorded (Network.requestWillBeSent),
so a test can say that none but the report's own file:// URL was asked for.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--no-default-browser-check",
         "--disable-extensions", "--disable-default-apps", "--mute-audio", "--hide-scrollbars",
         "--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=127.0.0.1:9", "--proxy-bypass-list=<-loopback>",
         "--remote-debugging-pipe"]


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        p = shutil.which(name)
        if p:
            return p
    return None


def why_no_chromium() -> str:
    apt = shutil.which("apt-get")
    if apt:
        return "chromium is not installed (apt-get install -y chromium; .ci/run installs it)"
    return "chromium is not installed and apt-get is unavailable on this machine to install it"


def _netns_ok() -> bool:
    unshare = shutil.which("unshare")
    if not unshare:
        return False
    try:
        return subprocess.run([unshare, "-n", "true"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


class Browser:
    """One Chromium process; open() loads a page in a fresh tab and answers what the test asks."""

    def __init__(self, binary: str, *, timeout: float = 60.0):
        self.binary = binary
        self.timeout = timeout
        self.profile = tempfile.mkdtemp(prefix="ncdoc-chromium-")
        self.isolated = _netns_ok()
        cmd = ([shutil.which("unshare"), "-n"] if self.isolated else []) + [
            binary, *FLAGS, f"--user-data-dir={self.profile}", "about:blank"]
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()

        def fds():                  # the browser reads commands on fd 3 and writes answers on fd 4
            a = fcntl.fcntl(to_browser_r, fcntl.F_DUPFD, 10)      # out of the way of 3 and 4 first
            b = fcntl.fcntl(from_browser_w, fcntl.F_DUPFD, 10)
            os.dup2(a, 3)
            os.dup2(b, 4)

        # pass_fds keeps 3 and 4 open: subprocess closes every other descriptor after preexec_fn
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, preexec_fn=fds,
                                     pass_fds=(3, 4, to_browser_r, from_browser_w))
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buf = b""
        self._next = 0
        self.events: list[dict] = []

    # ------------------------------------------------------------ protocol

    def _read_message(self, deadline: float) -> dict:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("chromium did not answer in time")
            ready, _, _ = select.select([self._from_browser], [], [], left)
            if ready:
                chunk = os.read(self._from_browser, 1 << 20)
                if not chunk:
                    err = self.proc.stderr.read().decode(errors="replace")[-2000:] if self.proc.stderr else ""
                    raise RuntimeError(f"chromium closed the pipe: {err}")
                self._buf += chunk
        msg, self._buf = self._buf.split(b"\0", 1)
        return json.loads(msg)

    def send(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        self._next += 1
        mid = self._next
        msg = {"id": mid, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._to_browser, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            got = self._read_message(deadline)
            if got.get("id") == mid:
                if "error" in got:
                    raise RuntimeError(f"{method}: {got['error']}")
                return got.get("result", {})
            self.events.append(got)

    def wait_event(self, method: str, session: str, since: int) -> dict:
        deadline = time.monotonic() + self.timeout
        while True:
            for ev in self.events[since:]:
                if ev.get("method") == method and ev.get("sessionId") == session:
                    return ev
            since = len(self.events)
            self.events.append(self._read_message(deadline))

    # ------------------------------------------------------------ pages

    def open(self, url: str, *, width: int = 1280, height: int = 900, print_media: bool = False) -> "Page":
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        self.send("Network.enable", {}, session)
        self.send("Network.emulateNetworkConditions", {"offline": True, "latency": 0, "downloadThroughput": -1,
                                                        "uploadThroughput": -1}, session)
        self.send("Page.enable", {}, session)
        self.send("Emulation.setDeviceMetricsOverride", {"width": width, "height": height, "deviceScaleFactor": 1,
                                                         "mobile": False}, session)
        if print_media:
            self.send("Emulation.setEmulatedMedia", {"media": "print"}, session)
        mark = len(self.events)
        self.send("Page.navigate", {"url": url}, session)
        self.wait_event("Page.loadEventFired", session, mark)
        return Page(self, session, target, mark)

    def close(self) -> None:
        try:
            self.send("Browser.close")
        except Exception:
            pass
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=15)
        for fd in (self._to_browser, self._from_browser):
            try:
                os.close(fd)
            except OSError:
                pass
        if self.proc.stderr:
            self.proc.stderr.close()
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> "Browser":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Page:
    def __init__(self, browser: Browser, session: str, target: str, mark: int):
        self.b, self.session, self.target, self.mark = browser, session, target, mark

    def eval(self, expression: str):
        res = self.b.send("Runtime.evaluate", {"expression": expression, "returnByValue": True}, self.session)
        if "exceptionDetails" in res:
            raise RuntimeError(f"page script failed: {res['exceptionDetails']}")
        return res["result"].get("value")

    def requests(self) -> list[str]:
        """Every URL the page asked for since it was opened (the document itself included)."""
        return [ev["params"]["request"]["url"] for ev in self.b.events[self.mark:]
                if ev.get("method") == "Network.requestWillBeSent" and ev.get("sessionId") == self.session]

    def screenshot(self, path: str) -> str:
        """The whole page at the viewport's width, as PNG."""
        data = self.b.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True}, self.session)
        with open(path, "wb") as fh:
            fh.write(base64.b64decode(data["data"]))
        return path

    def close(self) -> None:
        self.b.send("Target.closeTarget", {"targetId": self.target})
