"""Open a page in headless Chromium over the DevTools protocol (no playwright): collect console
messages, JavaScript exceptions and failed loads, run a check in the page, take a screenshot."""

from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import websocket  # websocket-client

CHROMIUM = ("chromium", "chromium-browser", "google-chrome")


def chromium_path() -> str | None:
    return next((p for p in (shutil.which(c) for c in CHROMIUM) if p), None)


@dataclass
class PageResult:
    errors: list[str] = field(default_factory=list)  # console errors, exceptions, failed loads
    console: list[str] = field(default_factory=list)
    check: Any = None
    screenshot: Path | None = None


class _Cdp:
    def __init__(self, ws_url: str) -> None:
        self.ws = websocket.create_connection(ws_url, timeout=30, suppress_origin=True)
        self.next_id = 0
        self.events: list[dict[str, Any]] = []

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        my = self.next_id
        self.ws.send(json.dumps({"id": my, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == my:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return dict(msg.get("result", {}))
            self.events.append(msg)

    def wait_for(self, method: str, timeout: float = 30.0) -> None:
        end = time.monotonic() + timeout
        while not any(e.get("method") == method for e in self.events):
            if time.monotonic() > end:
                raise TimeoutError(method)
            self.events.append(json.loads(self.ws.recv()))

    def drain(self, seconds: float) -> None:
        self.ws.settimeout(seconds)
        try:
            while True:
                self.events.append(json.loads(self.ws.recv()))
        except websocket.WebSocketTimeoutException:
            pass
        finally:
            self.ws.settimeout(30)


def open_page(url: str, *, check_js: str, screenshot: Path | None = None,
              width: int = 1200, height: int = 900) -> PageResult:
    exe = chromium_path()
    if exe is None:
        raise RuntimeError("chromium not found: apt-get install chromium (.ci/run does)")
    profile = tempfile.mkdtemp(prefix="rg-chromium-")
    log = Path(profile) / "stderr.log"  # a file, not a pipe: chromium never blocks on it
    with log.open("w") as err:
        proc = subprocess.Popen(
            [exe, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-dev-shm-usage", "--remote-debugging-port=0",
             f"--user-data-dir={profile}", f"--window-size={width},{height}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=err)
    try:
        port = _devtools_port(proc, log)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as r:
            pages = [t for t in json.load(r) if t.get("type") == "page"]
        cdp = _Cdp(pages[0]["webSocketDebuggerUrl"])
        for domain in ("Page", "Runtime", "Log", "Network"):
            cdp.call(f"{domain}.enable")
        cdp.call("Page.navigate", url=url)
        cdp.wait_for("Page.loadEventFired")
        cdp.drain(0.5)  # late console messages
        out = PageResult()
        value = cdp.call("Runtime.evaluate", expression=check_js, returnByValue=True)
        out.check = value.get("result", {}).get("value")
        if screenshot is not None:
            metrics = cdp.call("Page.getLayoutMetrics")
            size = metrics.get("cssContentSize") or metrics["contentSize"]
            shot = cdp.call("Page.captureScreenshot", format="png", captureBeyondViewport=True,
                            clip={"x": 0, "y": 0, "width": size["width"],
                                  "height": size["height"], "scale": 1})
            screenshot.write_bytes(base64.b64decode(shot["data"]))
            out.screenshot = screenshot
        _collect(cdp.events, out)
        cdp.ws.close()
        return out
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(profile, ignore_errors=True)


def _devtools_port(proc: subprocess.Popen[bytes], log: Path) -> int:
    end = time.monotonic() + 30
    text = ""
    while time.monotonic() < end:
        text = log.read_text(errors="replace")
        m = re.search(r"DevTools listening on ws://[^:]+:(\d+)/", text)
        if m:
            return int(m.group(1))
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    raise RuntimeError("chromium did not start: " + text[-500:])


def _collect(events: list[dict[str, Any]], out: PageResult) -> None:
    for e in events:
        method, p = e.get("method"), e.get("params", {})
        if method == "Runtime.consoleAPICalled":
            text = " ".join(str(a.get("value", a.get("description", ""))) for a in p["args"])
            out.console.append(f"{p['type']}: {text}")
            if p["type"] in ("error", "assert"):
                out.errors.append(f"console.{p['type']}: {text}")
        elif method == "Runtime.exceptionThrown":
            out.errors.append(f"exception: {p['exceptionDetails'].get('text')}")
        elif method == "Log.entryAdded" and p["entry"]["level"] == "error":
            out.errors.append(f"log: {p['entry']['text']} {p['entry'].get('url', '')}")
        elif method == "Network.loadingFailed":
            out.errors.append(f"load failed: {p.get('errorText')}")
