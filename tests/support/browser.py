"""One headless Chromium for a whole test session, driven over the DevTools protocol on a pipe.

Each page is loaded in a fresh tab of that browser, as ``chromium --headless --dump-dom
--virtual-time-budget=N`` would load it in a fresh process: the page runs until its virtual time
budget is spent (network fetches pause the clock, so ``<script src>`` data files are in), then
the DOM is serialized. What the page logs (console calls, uncaught exceptions, the browser's own
log entries: a blocked load, a failed fetch) is collected per tab, as the ``INFO:CONSOLE`` lines
of ``--enable-logging=stderr`` were. A browser launch costs about a second of CPU; the viewer
tests loaded 9 pages and took 3 screenshots, each in its own process.

``--remote-debugging-pipe`` makes Chromium read commands from file descriptor 3 and write replies
and events to descriptor 4, as JSON texts ending in a NUL byte: no port, no websocket library.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import select
import subprocess
from pathlib import Path

WINDOW = (1400, 1600)


class BrowserError(RuntimeError):
    """The browser answered a command with an error, or went away."""


class Browser:
    """A headless Chromium process; :meth:`load` opens a page in a new tab."""

    def __init__(self, binary: str, profile: Path, timeout: float = 120):
        self.timeout = timeout
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()
        # Chromium wants the pipe on descriptors 3 and 4 exactly; move both ends above any
        # descriptor the child could be handed first, then into place in the child.
        hi_r = fcntl.fcntl(to_child_r, fcntl.F_DUPFD, 10)
        hi_w = fcntl.fcntl(from_child_w, fcntl.F_DUPFD, 10)
        for fd in (to_child_r, from_child_w):
            os.close(fd)

        def place_pipe():
            os.dup2(hi_r, 3)
            os.dup2(hi_w, 4)

        self.proc = subprocess.Popen(
            [
                binary,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
                f"--user-data-dir={profile}",
                f"--window-size={WINDOW[0]},{WINDOW[1]}",
                "--remote-debugging-pipe",
                "about:blank",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=(3, 4),
            preexec_fn=place_pipe,
        )
        os.close(hi_r)
        os.close(hi_w)
        self._buf = b""
        self._next_id = 0
        self._events: list[dict] = []

    # -- the protocol ------------------------------------------------------------------------------
    def _read_message(self) -> dict:
        while b"\0" not in self._buf:
            if not select.select([self._from_child], [], [], self.timeout)[0]:
                raise BrowserError(f"no word from the browser in {self.timeout} s")
            chunk = os.read(self._from_child, 1 << 16)
            if not chunk:
                raise BrowserError(f"the browser closed its pipe (exit code {self.proc.poll()})")
            self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        return json.loads(raw)

    def send(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        """The result of one command (in tab ``session``); events read meanwhile are kept."""
        self._next_id += 1
        msg = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._to_child, json.dumps(msg).encode() + b"\0")
        while True:
            reply = self._read_message()
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            if "method" in reply:
                self._events.append(reply)

    def _wait_for(self, method: str, session: str) -> None:
        while True:
            for i, e in enumerate(self._events):
                if e["method"] == method and e.get("sessionId") == session:
                    del self._events[i]
                    return
            self._events.append(self._read_message())

    # -- pages -------------------------------------------------------------------------------------
    def load(
        self, url: str, budget_ms: int = 15_000, screenshot: Path | None = None
    ) -> tuple[str, list[str]]:
        """(the DOM after ``budget_ms`` of virtual time, what the page logged) of ``url`` in a new
        tab; with ``screenshot``, a PNG of the window written there."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        try:
            for domain in ("Page", "Runtime", "Log"):
                self.send(f"{domain}.enable", session=session)
            self.send(
                "Emulation.setDeviceMetricsOverride",
                {"width": WINDOW[0], "height": WINDOW[1], "deviceScaleFactor": 1, "mobile": False},
                session,
            )
            # the clock starts paused so nothing runs before the budget is set, as in headless mode
            self.send("Emulation.setVirtualTimePolicy", {"policy": "pause"}, session)
            self.send("Page.navigate", {"url": url}, session)
            self.send(
                "Emulation.setVirtualTimePolicy",
                {"policy": "pauseIfNetworkFetchesPending", "budget": budget_ms},
                session,
            )
            self._wait_for("Emulation.virtualTimeBudgetExpired", session)
            dom = self.send(
                "Runtime.evaluate",
                {"expression": "document.documentElement.outerHTML", "returnByValue": True},
                session,
            )["result"]["value"]
            if screenshot is not None:
                png = self.send("Page.captureScreenshot", {"format": "png"}, session)["data"]
                screenshot.write_bytes(base64.b64decode(png))
            return dom, self._logged(session)
        finally:
            self.send("Target.closeTarget", {"targetId": target})

    def _logged(self, session: str) -> list[str]:
        """What tab ``session`` logged, one line each; the tab's other events are dropped."""
        lines, rest = [], []
        for e in self._events:
            if e.get("sessionId") != session:
                rest.append(e)
                continue
            p = e.get("params", {})
            if e["method"] == "Runtime.consoleAPICalled":
                args = " ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", []))
                lines.append(f"console.{p.get('type')}: {args}")
            elif e["method"] == "Runtime.exceptionThrown":
                d = p.get("exceptionDetails", {})
                lines.append(f"uncaught: {d.get('exception', {}).get('description') or d.get('text')}")
            elif e["method"] == "Log.entryAdded":
                entry = p.get("entry", {})
                lines.append(
                    f"{entry.get('source')} {entry.get('level')}: {entry.get('text')} {entry.get('url', '')}"
                )
        self._events = rest
        return lines

    def close(self) -> None:
        with contextlib.suppress(BrowserError, OSError):
            self.send("Browser.close")
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._to_child)
        os.close(self._from_child)
