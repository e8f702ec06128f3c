#!/usr/bin/env bash
# A full-length rehearsal of the real-data pipeline, and from it what the whole of AVA costs.
# Six videos as long as AVA's (1,802 s; keyframes every second over 902..1798), film-like (slow
# pans and zooms over scikit-image's photographs, a cut every 4 s, film grain), in the sizes and
# containers AVA holds: 1280x720 H.264 in mkv and mp4 (one whose container starts at 1.5 s),
# 640x360 H.264 in mkv and mp4 (one at 25 fps), 640x360 VP9 in webm. They are made once (cached
# in WORKDIR/videos), served by `avaprep serve --throttle` (each download at most THROTTLE bytes a
# second, as a link would), and run through pipelines/ava22-5fps-480p.toml's settings (downloads
# streamed into extraction, 8 at a time, videos deleted once extracted) up to validate, in four
# steps: annotations and plan, downloads with extraction, lists, full validation.
# Measured: each step's wall and CPU seconds and peak memory (GNU time), each video's extraction
# seconds (the stage's records; one core a video while several run), bytes per frame, the data
# directory's peak size (sampled every 2 s) and its file count. Then the whole of AVA (299
# videos; 157 GB of downloads) projected from these per-video costs for 2 and 16 cores, and the
# ratio of the measured extraction cost to the projection this replaces, which scaled the demo's
# 30 s clips to AVA (78.6 core-seconds a 720p video, at the demo's 193 Mpx/s a core).
#
#   scripts/bench/ava-rehearsal.sh [WORKDIR]   (env: THROTTLE=100000000; WORKDIR default
#                                              /tmp/avaprep-rehearsal; the videos take about an
#                                              hour to make on 2 cores, once)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WORK=${1:-/tmp/avaprep-rehearsal}
THROTTLE=${THROTTLE:-100000000}
(cd "$ROOT" && eval "$(scripts/setup.sh)" >/dev/null && cargo build --release --locked --quiet --bin avaprep)
AVAPREP="$ROOT/target/release/avaprep"
PYTHON="$ROOT/.venv/bin/python"
"$PYTHON" -c 'import skimage' 2>/dev/null ||
  "$PYTHON" -m pip install --disable-pip-version-check -q scikit-image >&2
mkdir -p "$WORK"
"$PYTHON" "$ROOT/scripts/bench/rehearsal_mirror.py" "$WORK/videos" "$WORK/mirror"

DATA="$WORK/data"
rm -rf "$DATA"
port_file="$WORK/serve.json"
"$AVAPREP" --json serve "$WORK/mirror" --port 0 --throttle "$THROTTLE" >"$port_file" 2>/dev/null &
server=$!
sampler=
trap 'kill $server ${sampler:-} 2>/dev/null || true' EXIT
for _ in $(seq 50); do
  grep -q '"url"' "$port_file" 2>/dev/null && break
  sleep 0.1
done
URL=$("$PYTHON" -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())["url"])' "$port_file")

step() {
  local until=$1
  /usr/bin/time -f "%e %U %S %M" -o "$WORK/time-$until" \
    "$AVAPREP" --data-dir "$DATA" --json run "$ROOT/pipelines/ava22-5fps-480p.toml" \
    --set "dataset=\"$WORK/mirror/manifest.toml\"" --set "fetch.base_url=[\"$URL\"]" \
    --set extract.delete_videos_after_extract=true --until "$until" >"$WORK/out-$until.jsonl"
}

sample_disk() {
  while true; do
    du -sb "$DATA" 2>/dev/null | cut -f1 >>"$WORK/disk-samples"
    sleep 2
  done
}

rm -f "$WORK/disk-samples"
step parse
sample_disk &
sampler=$!
step extract
step lists
step validate
kill "$sampler" 2>/dev/null || true
find "$DATA" -type f | wc -l >"$WORK/files"

exec "$PYTHON" - "$WORK" "$DATA" "$THROTTLE" <<'PY'
import json, os, sys

work, data, throttle = sys.argv[1], sys.argv[2], int(sys.argv[3])
cores = os.cpu_count()
steps = {}
for name in ["parse", "extract", "lists", "validate"]:
    wall, user, system, rss = open(f"{work}/time-{name}").read().split()
    steps[name] = (float(wall), float(user) + float(system), int(rss) * 1024)
    for line in open(f"{work}/out-{name}.jsonl"):
        record = json.loads(line)
        if record.get("type") == "summary" and not record["succeeded"]:
            sys.exit(f"the {name} step failed: see {work}/out-{name}.jsonl")
labels = {"parse": "annotations + plan", "extract": "downloads + extraction",
          "lists": "frame lists", "validate": "validation (every frame)"}
print(f"machine: {cores} cores; downloads at most {throttle / 1e6:.0f} MB/s each, 8 at a time")
print(f"{'step':<26} {'wall s':>9} {'CPU s':>9} {'peak memory':>12}")
for name, (wall, cpu, rss) in steps.items():
    print(f"{labels[name]:<26} {wall:>9.1f} {cpu:>9.1f} {rss / 2**20:>9.0f} MiB")

state = json.load(open(f"{data}/.avaprep/state/extract.json"))["state"]
plan = json.load(open(f"{data}/work/videos.json"))
frames = frame_bytes = 0
print(f"{'video':<13} {'source':<24} {'frames':>7} {'KB/frame':>9} {'extract s':>10}")
per_video = []
for video in plan["videos"]:
    vid = video["id"]
    record = state["items"][vid]
    files = [f"{data}/frames/{vid}/{name}" for name in os.listdir(f"{data}/frames/{vid}")]
    size = sum(os.path.getsize(path) for path in files)
    frames += len(files)
    frame_bytes += size
    counts = record["counts"]
    source_pixels = counts["segment_source_pixels"] / counts["segment_source_frames"]
    kind = f"{video['file_name'].split('.')[1]} {'720p' if source_pixels > 600_000 else '360p'}"
    per_video.append((record["seconds"], source_pixels > 600_000))
    print(f"{vid:<13} {kind:<24} {len(files):>7} {size / len(files) / 1e3:>9.1f} {record['seconds']:>10.1f}")
samples = [int(line) for line in open(f"{work}/disk-samples") if line.strip()]
print(f"frames: {frames}, {frame_bytes / frames / 1e3:.1f} KB each; data directory at most "
      f"{max(samples) / 1e9:.2f} GB while downloading and extracting, {int(open(f'{work}/files').read())} files at the end")

# The whole of AVA (and the 20-video subset pipeline) from these per-video costs.
AVA_VIDEOS, AVA_GB = 299, 157
videos = len(per_video)
frames_per_video = frames / videos
wall, cpu, _ = steps["extract"]
cpu_per_video = cpu / videos
cpu_720 = sum(seconds for seconds, hd in per_video if hd) / max(1, sum(hd for _, hd in per_video))
efficiency = cpu / (wall * cores)
validate_rate = frames / steps["validate"][0]
print(f"extraction: {cpu_per_video:.0f} core-seconds a video (this mix, with its download), "
      f"{cpu_720:.0f} s a 720p video; cores kept busy: {efficiency:.2f}")
for name, count in (("ava22-5fps-480p", AVA_VIDEOS), ("ava22-subset20", 20)):
    total_frames = round(count * frames_per_video)
    hours = lambda per_video, n: per_video * count / (n * efficiency) / 3600
    print(f"{name} ({count} videos): download {AVA_GB * count / AVA_VIDEOS:.1f} GB "
          f"({AVA_GB * count / AVA_VIDEOS * 1e9 / 100e6 / 60:.0f} min at 100 MB/s); "
          f"{total_frames:,} frames x {frame_bytes / frames / 1e3:.1f} KB = {total_frames * frame_bytes / frames / 1e9:.1f} GB; "
          f"extraction {hours(cpu_per_video, 2):.2f} h on 2 cores, {hours(cpu_per_video, 16):.2f} h on 16 "
          f"(all 720p: {hours(cpu_720, 2):.2f} h, {hours(cpu_720, 16):.2f} h); "
          f"lists {steps['lists'][0] * count / videos / 60:.1f} min; full validation "
          f"{total_frames / validate_rate / 60:.0f} min on {cores} cores")
print(f"disk while preparing: frames, plus the videos in flight (8 at AVA's mean size: "
      f"{8 * AVA_GB / AVA_VIDEOS:.1f} GB) with streaming and deletion")
print(f"ratio: measured 720p extraction / the demo-based estimate (78.6 core-seconds): {cpu_720 / 78.6:.2f}")
PY
