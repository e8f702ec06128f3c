"""Opens a video file in headless Chromium, as a browser-based annotator (VIA) shows it.

Usage: video_clock.py VIDEO

Loads the video into a <video> element of a page beside it and prints one JSON object once its
first frame is ready: {"first_frame_time": the element's currentTime then (the instant on the
media timeline that VIA stores as a region's time), "width", "height": videoWidth and
videoHeight (the picture as shown, which VIA's pixel coordinates are in)}.
"""

import json
import os
import sys
import tempfile

from browser_check import Browser

FIRST_FRAME_JS = """new Promise((resolve, reject) => {
  const video = document.createElement('video');
  video.muted = true;
  video.preload = 'auto';
  video.addEventListener('loadeddata', () => resolve(JSON.stringify({
    first_frame_time: video.currentTime, width: video.videoWidth, height: video.videoHeight})));
  video.addEventListener('error', () => reject('cannot play: error ' + (video.error && video.error.code)));
  video.src = %s;
  document.body.appendChild(video);
})"""


def first_frame(video):
    folder = os.path.dirname(os.path.abspath(video))
    # A page in the video's folder: a file:// page may load the files beside it.
    with tempfile.NamedTemporaryFile("w", suffix=".html", dir=folder, delete=False) as page:
        page.write("<!doctype html><html><body></body></html>")
    browser = Browser()
    try:
        browser.open(page.name, ("Page",))
        expression = FIRST_FRAME_JS % json.dumps(os.path.basename(video))
        answer = browser.send(
            "Runtime.evaluate", {"expression": expression, "awaitPromise": True, "returnByValue": True}
        )["result"]
        if "exceptionDetails" in answer:
            raise RuntimeError(f"{video}: {answer['exceptionDetails']}")
        return json.loads(answer["result"]["value"])
    finally:
        browser.close()
        os.unlink(page.name)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    print(json.dumps(first_frame(sys.argv[1])))
