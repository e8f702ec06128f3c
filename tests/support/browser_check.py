"""Opens an HTML page from disk in headless Chromium and reports what a person would see.

Usage: browser_check.py PAGE SCREENSHOT_PNG

Drives Debian's Chromium over the DevTools protocol on a pipe (no port, no network): loads
file://PAGE, waits for its load event, asks the page for every <img> and whether it decoded,
collects console messages, uncaught exceptions and failed loads, and saves a full-page
screenshot. Prints one JSON object: {"images": [...], "broken": [...], "errors": [...],
"screenshot": {"path", "width", "height"}}.
"""

import base64
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
TIMEOUT_S = 60
WIDTH = 1280

IMAGES_JS = """JSON.stringify([...document.images].map(i => ({
  src: i.getAttribute('src'), ok: i.complete && i.naturalWidth > 0,
  width: i.naturalWidth, height: i.naturalHeight})))"""


class Browser:
    def __init__(self):
        self.profile = tempfile.mkdtemp(prefix="avaprep-chromium-")
        to_browser_r, self.to_browser = os.pipe()
        self.from_browser, from_browser_w = os.pipe()

        def wire():
            # DevTools over a pipe: the browser reads fd 3 and writes fd 4. Copied out of the way
            # first, since either end may itself be fd 3 or 4.
            read_end, write_end = os.dup(to_browser_r), os.dup(from_browser_w)
            os.dup2(read_end, 3)
            os.dup2(write_end, 4)

        self.process = subprocess.Popen(
            [
                CHROMIUM,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
                "--hide-scrollbars",
                f"--user-data-dir={self.profile}",
                f"--window-size={WIDTH},900",
                "--remote-debugging-pipe",
                "about:blank",
            ],
            preexec_fn=wire,
            close_fds=False,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_browser_r)
        os.close(from_browser_w)
        self.buffer = b""
        self.next_id = 0
        self.events = []
        self.session = None

    def send(self, method, params=None, session=True):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session and self.session:
            message["sessionId"] = self.session
        os.write(self.to_browser, json.dumps(message).encode() + b"\0")
        return self.wait(lambda m: m.get("id") == self.next_id)

    def wait(self, matches):
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline:
            while b"\0" in self.buffer:
                raw, self.buffer = self.buffer.split(b"\0", 1)
                message = json.loads(raw)
                if "method" in message:
                    self.events.append(message)
                if matches(message):
                    if "error" in message:
                        raise RuntimeError(f"DevTools: {message['error']}")
                    return message
            # Waits no longer than the deadline: a page that never answers fails, not hangs.
            ready, _, _ = select.select([self.from_browser], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                break
            chunk = os.read(self.from_browser, 1 << 16)
            if not chunk:
                raise RuntimeError("Chromium closed the DevTools pipe")
            self.buffer += chunk
        raise TimeoutError("no answer from Chromium within %d s" % TIMEOUT_S)

    def open(self, page, domains):
        """Opens the file PAGE in a new tab, with the DevTools DOMAINS enabled, once it has loaded."""
        self.open_url("file://" + os.path.abspath(page), domains)

    def open_url(self, url, domains):
        """Opens URL in a new tab, with the DevTools DOMAINS enabled, once it has loaded."""
        target = self.send("Target.createTarget", {"url": "about:blank"}, session=False)
        attached = self.send(
            "Target.attachToTarget",
            {"targetId": target["result"]["targetId"], "flatten": True},
            session=False,
        )
        self.session = attached["result"]["sessionId"]
        for domain in domains:
            self.send(f"{domain}.enable")
        self.send("Page.navigate", {"url": url})
        self.wait(lambda m: m.get("method") == "Page.loadEventFired")

    def close(self):
        try:
            self.send("Browser.close", session=False)
        except (RuntimeError, OSError, TimeoutError):
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
        shutil.rmtree(self.profile, ignore_errors=True)


def errors_of(events):
    """Console errors and warnings, uncaught exceptions and failed loads, as text."""
    found = []
    for event in events:
        method, params = event["method"], event.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "warning", "assert"):
            texts = [str(arg.get("value", arg.get("description", ""))) for arg in params.get("args", [])]
            found.append(f"console.{params['type']}: {' '.join(texts)}")
        elif method == "Runtime.exceptionThrown":
            found.append(f"exception: {params['exceptionDetails'].get('text', '')}")
        elif method == "Log.entryAdded" and params["entry"].get("level") in ("error", "warning"):
            entry = params["entry"]
            found.append(f"log {entry.get('source')}: {entry.get('text')} {entry.get('url', '')}".strip())
    return found


def check(page, screenshot):
    browser = Browser()
    try:
        browser.open(page, ("Page", "Runtime", "Log"))
        images = json.loads(
            browser.send("Runtime.evaluate", {"expression": IMAGES_JS, "returnByValue": True})["result"]["result"]["value"]
        )
        metrics = browser.send("Page.getLayoutMetrics")["result"]
        height = min(int(metrics["cssContentSize"]["height"]) + 1, 16000)
        browser.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": WIDTH, "height": height, "deviceScaleFactor": 1, "mobile": False},
        )
        shot = browser.send("Page.captureScreenshot", {"format": "png"})["result"]["data"]
        with open(screenshot, "wb") as out:
            out.write(base64.b64decode(shot))
        return {
            "images": images,
            "broken": [image["src"] for image in images if not image["ok"]],
            "errors": errors_of(browser.events),
            "screenshot": {"path": screenshot, "width": WIDTH, "height": height},
        }
    finally:
        browser.close()


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    print(json.dumps(check(sys.argv[1], sys.argv[2])))
