#!/usr/bin/env bash
# What a real-data pipeline will cost, extrapolated from what the demo measured (the figures at
# the top of pipelines/ava22-*.toml and in the README's table): bytes per 480p frame at -q:v 2 and
# the extractor's decode rate per core, from the demo's frames and its extract stage's records,
# scaled to AVA's counts (299 trainval videos, 157 GB; 901 s segments at 5 fps; 27,030 source
# frames per segment, 720p assumed; decoded share from the extraction benchmark's 720p video).
#
#   scripts/bench/ava-estimate.sh [DATA_DIR]   (default data/demo, made by scripts/demo.sh)
#
# The synthetic shapes compress and decode more easily than film: read the frame bytes as a low
# estimate (budget up to twice) and the times as lower bounds.
set -euo pipefail
cd "$(dirname "$0")/../.."
DATA=${1:-data/demo}
[ -f "$DATA/.avaprep/state/extract.json" ] || {
  echo "ava-estimate: $DATA has no extraction; run scripts/demo.sh first" >&2
  exit 1
}
python3 - "$DATA" <<'PY'
import csv, json, os, sys

data = sys.argv[1]
items = json.load(open(f"{data}/.avaprep/state/extract.json"))["state"]["items"]
decoded_pixels = seconds = 0.0
for record in items.values():
    counts = record["counts"]
    per_frame = counts["segment_source_pixels"] / counts["segment_source_frames"]
    decoded_pixels += counts["source_frames_decoded"] * per_frame
    seconds += record["seconds"]
rate = decoded_pixels / seconds  # source pixels decoded per second on one core
kept = sum(record["files"] for record in items.values())
segment_frames = sum(record["counts"]["segment_source_frames"] for record in items.values())
segment_pixels = sum(record["counts"]["segment_source_pixels"] for record in items.values())
written_pixels = sum(record["counts"]["pixels_written"] for record in items.values())
print(f"demo extraction: {kept} of {segment_frames} source frames kept "
      f"({segment_frames / kept:.1f}x fewer), {segment_pixels / written_pixels:.1f}x fewer pixels")
trained = f"{data}/work/train.json"
if os.path.exists(trained):
    run = json.load(open(trained))
    if run.get("best"):
        print(f"demo training: best val mAP {run['best'][0]:.4f} (epoch {run['best'][1]}), {run['stop']}")

frames_480 = bytes_480 = 0
for name in os.listdir(f"{data}/frame_index"):
    rows = list(csv.DictReader(open(f"{data}/frame_index/{name}")))
    if rows and rows[0]["height"] == "480":
        video = name.removesuffix(".csv")
        for row in rows:
            frame = f"{data}/frames/{video}/{video}_{int(row['frame']):06d}.jpg"
            bytes_480 += os.path.getsize(frame)
            frames_480 += 1
per_frame = bytes_480 / frames_480

AVA_VIDEOS, AVA_GB, SEGMENT_S, FPS = 299, 157, 901, 5
SOURCE_FRAMES = 27_030  # a 901 s segment at ~30 fps
DECODED_SHARE = 13_718 / 22_525  # frames decoded of the 720p benchmark video's, at 5 fps
PIXELS_720P = 1280 * 720
print(f"demo: {frames_480} frames at 480p, {per_frame / 1e3:.1f} KB each; "
      f"decoding {rate / 1e6:.0f} Mpx/s per core ({decoded_pixels / 1e6:.0f} Mpx in {seconds:.1f} s of extraction)")
for name, videos in (("ava22-5fps-480p", AVA_VIDEOS), ("ava22-subset20", 20)):
    frames = videos * SEGMENT_S * FPS
    decode_s = videos * SOURCE_FRAMES * DECODED_SHARE * PIXELS_720P / rate
    print(f"{name}: download {AVA_GB * videos / AVA_VIDEOS:.1f} GB; "
          f"{frames:,} frames x {per_frame / 1e3:.1f} KB = {frames * per_frame / 1e9:.1f} GB; "
          f"extraction {decode_s / 2 / 3600:.2f} h on 2 cores, {decode_s / 16 / 3600:.2f} h on 16")
PY
