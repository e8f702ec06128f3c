"""Opens video files in a headless browser, as a browser-based annotator (VIA) shows them.

Usage: video_clock.py chromium|firefox VIDEO...

Serves the videos' folder over HTTP on 127.0.0.1 (so the page may read the pictures back, and
seek), loads each video into a <video> element and prints one JSON object a line: {"video",
"change_at": the earliest instant on the element's timeline (its currentTime, the clock VIA
stores region times on) that shows a picture other than the first frame's, found by seeking,
"width", "height": videoWidth and videoHeight (the picture as shown, which VIA's pixel coordinates
are in)}. A clip whose first second is one flat colour and whose next is another thus tells where
the browser puts the file's second 1.
"""

import functools
import http.server
import json
import os
import re
import sys
import threading

from browser_check import Browser
from firefox import Firefox

# Seeks by halves between 0 (the first frame's picture) and near the end (another), comparing the
# picture's centre, until the change is known to a tenth of a millisecond. A picture counts once
# two reads 20 ms apart agree: "seeked" may fire before the new frame is drawn. The two instants
# found are read again after a longer wait, so a picture read too early fails the probe instead
# of moving the answer.
CHANGE_JS = """async (src) => {
  const video = document.createElement('video');
  video.muted = true;
  video.preload = 'auto';
  const loaded = new Promise((resolve, reject) => {
    video.addEventListener('loadeddata', resolve, {once: true});
    video.addEventListener('error', () => reject('cannot play: error ' + (video.error && video.error.code)));
  });
  video.src = src;
  document.body.appendChild(video);
  await loaded;
  const canvas = document.createElement('canvas');
  canvas.width = canvas.height = 8;
  const context = canvas.getContext('2d', {willReadFrequently: true});
  const pause = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
  const picture = async () => {
    let last = null;
    for (let tries = 0; tries < 100; tries++) {
      await pause(20);
      if (video.readyState < 2) continue;
      context.clearRect(0, 0, 8, 8);
      context.drawImage(video, 0, 0, 8, 8);
      const now = Array.from(context.getImageData(4, 4, 1, 1).data);
      if (now[3] === 255 && last && now.every((value, i) => value === last[i])) return now.slice(0, 3);
      last = now;
    }
    throw src + ': no steady picture at ' + video.currentTime;
  };
  const seek = async (t, settle = 0) => {
    await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(src + ': no seek to ' + t + ' within 10 s'), 10000);
      video.addEventListener('seeked', () => { clearTimeout(timer); resolve(); }, {once: true});
      video.currentTime = t;
    });
    await pause(settle);
    return picture();
  };
  const differs = (a, b) => a.some((value, i) => Math.abs(value - b[i]) > 64);
  const first = await seek(0);
  let before = 0, after = video.duration - 0.1;
  if (!differs(await seek(after), first)) throw src + ': the picture never changes';
  while (after - before > 1e-4) {
    const middle = (before + after) / 2;
    if (differs(await seek(middle), first)) after = middle; else before = middle;
  }
  if (differs(await seek(before, 500), first) || !differs(await seek(after, 500), first)) {
    throw src + ': the pictures at ' + before + ' and ' + after + ' s changed when read again';
  }
  return {change_at: after, width: video.videoWidth, height: video.videoHeight};
}"""

PAGE = b"<!doctype html><html><body></body></html>"


class Files(http.server.SimpleHTTPRequestHandler):
    """The folder's files, with byte ranges (browsers seek in a video by asking for them), and
    an empty page at /."""

    extensions_map = {".mp4": "video/mp4", ".mkv": "video/x-matroska", ".webm": "video/webm"}

    def do_GET(self):
        if self.path == "/":
            return self.reply(200, "text/html", PAGE)
        path = self.translate_path(self.path)
        if not os.path.isfile(path):
            return self.send_error(404)
        with open(path, "rb") as file:
            body = file.read()
        wanted = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
        if not wanted:
            return self.reply(200, self.guess_type(path), body)
        first = int(wanted[1])
        if first >= len(body):
            return self.reply(416, self.guess_type(path), b"", f"bytes */{len(body)}")
        last = min(int(wanted[2]) if wanted[2] else len(body) - 1, len(body) - 1)
        self.reply(206, self.guess_type(path), body[first : last + 1], f"bytes {first}-{last}/{len(body)}")

    def reply(self, status, kind, body, content_range=None):
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Accept-Ranges", "bytes")
        if content_range:
            self.send_header("Content-Range", content_range)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass

    def handle_one_request(self):
        # A browser drops a range it no longer wants when it seeks elsewhere: not an error.
        try:
            super().handle_one_request()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True


def chromium_changes(root, names):
    browser = Browser()
    try:
        browser.open_url(root, ("Page",))
        for name in names:
            expression = f"({CHANGE_JS})({json.dumps(name)}).then(JSON.stringify)"
            answer = browser.send(
                "Runtime.evaluate", {"expression": expression, "awaitPromise": True, "returnByValue": True}
            )["result"]
            if "exceptionDetails" in answer:
                raise RuntimeError(f"{name}: {answer['exceptionDetails']}")
            yield json.loads(answer["result"]["value"])
    finally:
        browser.close()


def firefox_changes(root, names):
    browser = Firefox()
    try:
        browser.open_url(root)
        script = f"const done = arguments[1]; ({CHANGE_JS})(arguments[0]).then(done, (e) => done({{error: String(e)}}));"
        for name in names:
            seen = browser.run_async(script, [name])
            if "error" in seen:
                raise RuntimeError(f"{name}: {seen['error']}")
            yield seen
    finally:
        browser.close()


BROWSERS = {"chromium": chromium_changes, "firefox": firefox_changes}


def main(browser, videos):
    folders = {os.path.dirname(os.path.abspath(video)) for video in videos}
    if len(folders) != 1:
        sys.exit("the videos must share one folder")
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(Files, directory=folders.pop())
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        root = f"http://127.0.0.1:{server.server_address[1]}/"
        names = [os.path.basename(video) for video in videos]
        for name, seen in zip(names, BROWSERS[browser](root, names)):
            print(json.dumps({"video": name, **seen}), flush=True)
    finally:
        server.shutdown()


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] not in BROWSERS:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2:])
