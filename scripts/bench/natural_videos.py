"""Test videos that look like films: slow pans and zooms over natural photographs (the sample
images scikit-image ships), a cut every few seconds, film grain, encoded by the ffmpeg CLI at a
film-like bitrate. Used by scripts/bench/extract-natural.sh.

    natural_videos.py OUT_DIR SECONDS     (writes the videos below that are not there yet)
"""

import os
import subprocess
import sys

import cv2
import numpy as np
from skimage import data

FPS = 25
SCENE_SECONDS = 4
IMAGES = ["astronaut", "coffee", "chelsea", "rocket", "hubble_deep_field", "immunohistochemistry"]
X264 = ["-c:v", "libx264", "-preset", "medium", "-profile:v", "high", "-tune", "film", "-bf", "3", "-g", "250"]

# name, width, height, encoder arguments (bitrates as streaming services use for film at that size)
VIDEOS = [
    ("h264_720.mp4", 1280, 720, X264 + ["-b:v", "3M", "-maxrate", "4.5M", "-bufsize", "6M"]),
    ("h264_480.mp4", 854, 480, X264 + ["-b:v", "1.5M", "-maxrate", "2.25M", "-bufsize", "3M"]),
    ("h264_360.mp4", 640, 360, X264 + ["-b:v", "0.9M", "-maxrate", "1.35M", "-bufsize", "1.8M"]),
    ("vp9_480.webm", 854, 480,
     ["-c:v", "libvpx-vp9", "-b:v", "1.2M", "-deadline", "good", "-cpu-used", "4", "-row-mt", "1", "-g", "250"]),
    ("mpeg4_480.mp4", 854, 480, ["-c:v", "mpeg4", "-b:v", "2M", "-bf", "2", "-g", "250"]),
]


def images():
    loaded = []
    for name in IMAGES:
        image = getattr(data, name)()
        if image.ndim == 2:
            image = np.stack([image] * 3, axis=-1)
        loaded.append(np.ascontiguousarray(image[..., :3]).astype(np.uint8))
    return loaded


def scene_transform(image, width, height, progress, rng_state):
    """The affine map from output pixels to image pixels at `progress` (0..1) of a scene: a
    window of the output's aspect that moves and zooms across the image."""
    start_zoom, end_zoom, start_xy, end_xy = rng_state
    ih, iw = image.shape[:2]
    zoom = start_zoom + (end_zoom - start_zoom) * progress
    # The window's size in image pixels: the largest of the output's aspect, shrunk by the zoom.
    win_w = min(iw, ih * width / height) / zoom
    win_h = win_w * height / width
    cx = start_xy[0] + (end_xy[0] - start_xy[0]) * progress
    cy = start_xy[1] + (end_xy[1] - start_xy[1]) * progress
    left = cx * (iw - win_w)
    top = cy * (ih - win_h)
    scale = win_w / width
    return np.array([[1 / scale, 0, -left / scale], [0, 1 / scale, -top / scale]], dtype=np.float64)


def write_video(path, width, height, seconds, encoder_args, pictures):
    rng = np.random.default_rng(7)
    # Grain: a bank of noise larger than the frame, read at a random offset each frame.
    grain = rng.normal(0.0, 4.0, size=(height + 64, width + 64)).astype(np.float32)
    tmp = path + ".part" + os.path.splitext(path)[1]
    encoder = subprocess.Popen(
        ["ffmpeg", "-nostdin", "-y", "-loglevel", "error", "-f", "rawvideo", "-pix_fmt", "rgb24",
         "-s", f"{width}x{height}", "-r", str(FPS), "-i", "-", *encoder_args, "-pix_fmt", "yuv420p", tmp],
        stdin=subprocess.PIPE,
    )
    frames_per_scene = FPS * SCENE_SECONDS
    scene = None
    for n in range(int(seconds * FPS)):
        if n % frames_per_scene == 0:
            image = pictures[(n // frames_per_scene) % len(pictures)]
            scene = (image, (rng.uniform(1.0, 1.3), rng.uniform(1.3, 1.8), rng.uniform(0, 1, 2), rng.uniform(0, 1, 2)))
        image, motion = scene
        progress = (n % frames_per_scene) / frames_per_scene
        matrix = scene_transform(image, width, height, progress, motion)
        frame = cv2.warpAffine(image, matrix, (width, height), flags=cv2.INTER_CUBIC, borderMode=cv2.BORDER_REFLECT)
        dy, dx = rng.integers(0, 64, 2)
        noise = grain[dy:dy + height, dx:dx + width, None]
        frame = np.clip(frame.astype(np.float32) + noise, 0, 255).astype(np.uint8)
        encoder.stdin.write(frame.tobytes())
    encoder.stdin.close()
    if encoder.wait() != 0:
        sys.exit(f"ffmpeg failed on {path}")
    os.replace(tmp, path)


def main():
    out_dir, seconds = sys.argv[1], float(sys.argv[2])
    os.makedirs(out_dir, exist_ok=True)
    pictures = images()
    for name, width, height, args in VIDEOS:
        path = os.path.join(out_dir, name)
        if not os.path.exists(path):
            print(f"making {name} ({width}x{height}, {seconds:g} s)", file=sys.stderr)
            write_video(path, width, height, seconds, args, pictures)


if __name__ == "__main__":
    main()
