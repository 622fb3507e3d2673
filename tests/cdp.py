"""Headless Chromium driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`): no port, no
download, and every request the page makes is seen as a `Network.requestWillBeSent` event.

The pipe protocol: Chromium reads JSON messages from fd 3 and writes its own to fd 4, each ended by a NUL byte.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import queue
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from lifeline import tied


def chromium_binary() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


class Browser:
    def __init__(self, binary: str, profile: Path) -> None:
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()

        def plumb() -> None:  # in the child, before exec: the pipe ends become fds 3 and 4
            a, b = os.dup(to_child_r), os.dup(from_child_w)
            os.dup2(a, 3)
            os.dup2(b, 4)

        self.process = subprocess.Popen(
            tied([binary, "--headless", "--remote-debugging-pipe", "--no-sandbox", "--disable-gpu",
             "--no-first-run", "--no-default-browser-check", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--disable-extensions", "--disable-default-apps",
             "--metrics-recording-only", "--mute-audio", f"--user-data-dir={profile}", "about:blank"]),
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=plumb, close_fds=False,
        )
        os.close(to_child_r)
        os.close(from_child_w)
        self._next = 0
        self._replies: dict[int, dict[str, Any]] = {}
        self._inbox: queue.Queue[dict[str, Any]] = queue.Queue()
        self.events: list[dict[str, Any]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        buffer = b""
        while True:
            chunk = os.read(self._from_child, 65536)
            if not chunk:
                return
            buffer += chunk
            while b"\0" in buffer:
                message, _, buffer = buffer.partition(b"\0")
                self._inbox.put(json.loads(message))

    def _pump(self, deadline: float) -> None:
        message = self._inbox.get(timeout=max(deadline - time.monotonic(), 0.01))
        if "id" in message:
            self._replies[message["id"]] = message
        else:
            self.events.append(message)

    def call(self, method: str, params: dict[str, Any] | None = None, session: str | None = None,
             timeout: float = 60) -> dict[str, Any]:
        self._next += 1
        message: dict[str, Any] = {"id": self._next, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._to_child, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while self._next not in self._replies:
            self._pump(deadline)
        reply = self._replies.pop(self._next)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    def wait_for(self, method: str, timeout: float = 60) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            for event in self.events:
                if event.get("method") == method:
                    return event
            self._pump(deadline)

    def open_page(self, width: int, height: int, mobile: bool) -> str:
        """A new tab with the network watched and the given viewport; returns its session id."""
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for method in ("Network.enable", "Page.enable", "Runtime.enable"):
            self.call(method, session=session)
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 2, "mobile": mobile}, session)
        return session

    def evaluate(self, session: str, expression: str) -> Any:
        reply = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True}, session)
        if "exceptionDetails" in reply:
            raise RuntimeError(f"{expression}: {reply['exceptionDetails']}")
        return reply["result"].get("value")

    def requested_urls(self) -> list[str]:
        return [e["params"]["request"]["url"] for e in self.events if e.get("method") == "Network.requestWillBeSent"]

    def console_errors(self) -> list[str]:
        found = []
        for event in self.events:
            if event.get("method") == "Runtime.exceptionThrown":
                found.append(json.dumps(event["params"]["exceptionDetails"])[:300])
            if event.get("method") == "Runtime.consoleAPICalled" and event["params"].get("type") == "error":
                found.append(json.dumps(event["params"]["args"])[:300])
        return found

    def pdf(self, session: str) -> bytes:
        return base64.b64decode(self.call("Page.printToPDF", {"printBackground": True}, session)["data"])

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.call("Browser.close", timeout=5)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self._to_child)
        self._reader.join(timeout=5)  # the child gone, its end of the pipe reads EOF
        if not self._reader.is_alive():
            os.close(self._from_child)
