"""Headless Debian Chromium driven over the DevTools protocol on a pipe (tests only).

`--remote-debugging-pipe` makes Chromium read protocol messages from fd 3 and write them to
fd 4, NUL-terminated JSON: no websocket library, no Node, no open debugging port. The tests use
it to measure the page as a reader sees it (element boxes), read what the page fetched from the
network layer, and take screenshots.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any, Optional

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--no-first-run", "--hide-scrollbars"]


def dump_dom(url: str, profile: Path, budget_ms: int = 5000) -> subprocess.CompletedProcess:
    """The page's DOM after budget_ms of virtual time (timers run, fetches answered): stdout."""
    if CHROMIUM is None:
        raise ChromiumError("chromium is not installed (apt-packages.txt)")
    return subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}",
                           f"--virtual-time-budget={budget_ms}", "--dump-dom", url],
                          capture_output=True, text=True, timeout=90)


class ChromiumError(RuntimeError):
    """The browser answered a command with an error, died, or did not answer in time."""


class Browser:
    """One headless Chromium with one page; `call` sends a command to that page."""

    def __init__(self, profile: Path, width: int = 1440, height: int = 1000,
                 timeout: float = 20.0) -> None:
        if CHROMIUM is None:
            raise ChromiumError("chromium is not installed (apt-packages.txt)")
        self.timeout = timeout
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()

        def wire_pipes() -> None:  # in the child: the protocol's fixed descriptors 3 and 4
            high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (to_browser_r, from_browser_w)]
            os.dup2(high[0], 3)
            os.dup2(high[1], 4)

        self.log = profile.with_suffix(".log")
        log = self.log.open("wb")

        self.proc = subprocess.Popen(
            [CHROMIUM, *FLAGS, "--remote-debugging-pipe", f"--user-data-dir={profile}",
             f"--window-size={width},{height}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log,
            preexec_fn=wire_pipes, close_fds=False)
        log.close()
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []
        self.session: Optional[str] = None
        targets = self.call("Target.getTargets", session=False)["targetInfos"]
        page = next(t for t in targets if t["type"] == "page")
        self.session = self.call("Target.attachToTarget", {"targetId": page["targetId"],
                                                           "flatten": True},
                                 session=False)["sessionId"]
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})

    def _read_message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            readable, _, _ = select.select([self._from_browser], [], [],
                                           max(0.0, deadline - time.monotonic()))
            if not readable:
                raise ChromiumError("chromium did not answer in time")
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                stderr = self.log.read_text(errors="replace")[-2000:]
                raise ChromiumError(f"chromium closed the protocol pipe:\n{stderr}")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def call(self, method: str, params: Optional[dict[str, Any]] = None, *,
             session: bool = True) -> dict[str, Any]:
        """Send one command and return its result; events met on the way are kept in .events."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = self.session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise ChromiumError(f"{method}: {reply['error']}")
                return reply["result"]
            if "method" in reply:
                self.events.append(reply)

    def wait_event(self, method: str) -> dict[str, Any]:
        """The first event called method, kept or still to come; it is taken off .events."""
        deadline = time.monotonic() + self.timeout
        while True:
            for event in self.events:
                if event["method"] == method:
                    self.events.remove(event)
                    return event
            message = self._read_message(deadline)
            if "method" in message:
                self.events.append(message)

    def goto(self, url: str) -> None:
        """Open url in the page and wait for its load event (scripts with defer have run)."""
        self.call("Page.enable")
        self.events = [e for e in self.events if e["method"] != "Page.loadEventFired"]
        self.call("Page.navigate", {"url": url})
        self.wait_event("Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (promises awaited)."""
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                "awaitPromise": True})
        if "exceptionDetails" in result:
            raise ChromiumError(f"page script failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 15.0, interval: float = 0.1) -> Any:
        """Poll a JavaScript expression until it is truthy; returns its value."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise ChromiumError(f"timed out waiting for {expression}")
            time.sleep(interval)

    def screenshot(self, path: Path) -> Path:
        """A PNG of the whole page (not only the window) written to path."""
        data = self.call("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True})
        path.write_bytes(base64.b64decode(data["data"]))
        return path

    def close(self) -> None:
        try:
            self.call("Browser.close", session=False)
        except ChromiumError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self._to_browser, self._from_browser):
            os.close(fd)

    def __enter__(self) -> "Browser":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# For every element matching `figures`, the text of the element matching `labels` a reader pairs
# it with: the nearest one on the same line to its left, else the nearest one straight above it.
# Only boxes are compared, so a layout that drifts labels away from their numbers is caught even
# when the markup order is right.
_PAIRS_JS = """
(([figures, labels, scope]) => {
  const box = (el) => el.getBoundingClientRect();
  const overlap = (a0, a1, b0, b1) => Math.min(a1, b1) - Math.max(a0, b0);
  const out = [];
  for (const root of document.querySelectorAll(scope)) {
    const names = [...root.querySelectorAll(labels)].map((el) => [el, box(el)]);
    for (const figure of root.querySelectorAll(figures)) {
      const f = box(figure);
      if (!f.width || !f.height) continue;
      let best = null, bestDistance = Infinity;
      for (const [label, l] of names) {
        const sameLine = overlap(l.top, l.bottom, f.top, f.bottom) > 0.5 * Math.min(l.height, f.height)
                         && l.right <= f.left + 1;
        const above = overlap(l.left, l.right, f.left, f.right) > 0 && l.bottom <= f.top + 1;
        if (!sameLine && !above) continue;
        const distance = sameLine ? f.left - l.right : 1e4 + f.top - l.bottom;
        if (distance < bestDistance) { best = label; bestDistance = distance; }
      }
      out.push({scope: root.id || root.dataset.name || "", label: best ? best.textContent.trim() : null,
                figure: figure.textContent.trim()});
    }
  }
  return out;
})
"""


def label_pairs(browser: Browser, figures: str, labels: str, scope: str = "body") -> list[dict]:
    """[{scope, label, figure}] for every visible figure under each `scope` element (by id)."""
    return browser.evaluate(f"{_PAIRS_JS}({json.dumps([figures, labels, scope])})")
