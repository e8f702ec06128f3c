#!/usr/bin/env bash
# Frame extraction on film-like content, against the ffmpeg CLI, the decode-only floor and an exact
# Python extractor, same machine, same run, alternating.
#
#   scripts/bench/extract-natural.sh [WORKDIR]      (env: SECONDS_LONG=60 ROUNDS=3 FPS=5 HEIGHT=480)
#
# Makes (once, cached in WORKDIR) five videos that look like films: slow pans and zooms over the
# natural photographs scikit-image ships, a cut every 4 s, film grain; H.264 High with B-frames at
# 1280x720 (3 Mbit/s), 854x480 (1.5) and 640x360 (0.9), VP9 at 854x480 (1.2) and MPEG-4 Part 2
# with B-frames at 854x480 (2). For each video, one at a time, every frame of the whole video at
# FPS, scaled to HEIGHT (no upscaling), times
#   ffmpeg   the ffmpeg CLI, -threads 1: fps=FPS,scale=-2:'min(HEIGHT,ih)' -q:v 2;
#   floor    the ffmpeg CLI decoding every frame to null, -threads 1;
#   python   PyAV + Pillow, exact (the frame nearest each instant), quality 90;
#   avaprep  `avaprep extract --quality 2 --ranges segment --jobs 1` (a video alone: frame threads).
# Wall and CPU seconds (user + system of the process and its threads): medians of ROUNDS rounds,
# each starting with the next tool, and their range. Then, on 40 frames spread over each video,
# PSNR (luma, and all samples) against the source frame each shows, scaled as the extractors scale
# (swscale bicubic to full-range 4:2:0), and bytes per frame: avaprep, the Python extractor, and
# on the very same frames libav's mjpeg encoder at -q:v 2 (avaprep's encoder) and libjpeg-turbo
# (Pillow's, from the same planes) at qualities 86 to 94. Before that, all five videos two at a
# time: avaprep --jobs 2 against the ffmpeg CLI under xargs -P 2.
set -euo pipefail

WORK=${1:-/tmp/avaprep-bench-natural}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
(cd "$ROOT" && eval "$(scripts/setup.sh)" >/dev/null && cargo build --release --locked --quiet --bin avaprep)
PYTHON="$ROOT/.venv/bin/python"
# The photographs come with scikit-image; Pillow and PyAV are already in the venv.
"$PYTHON" -c 'import skimage' 2>/dev/null ||
  "$PYTHON" -m pip install --disable-pip-version-check -q scikit-image >&2
mkdir -p "$WORK"
echo "machine: $(nproc) cores; ffmpeg $(ffmpeg -version | head -1 | awk '{print $3}')"
exec "$PYTHON" "$ROOT/scripts/bench/extract_natural.py" "$WORK" "$ROOT/target/release/avaprep" \
  "${SECONDS_LONG:-60}" "${ROUNDS:-3}" "${FPS:-5}" "${HEIGHT:-480}"
