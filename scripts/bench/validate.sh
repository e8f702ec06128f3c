#!/usr/bin/env bash
# Speed of `avaprep validate` on a dataset in PySlowFast's layout: VIDEOS videos of FRAMES frames
# each (854x480 JPEGs of moving test-pattern content made by the ffmpeg CLI at -q:v 2, about AVA's
# 480p frames), a list row per frame, ground-truth boxes at one keyframe a second.
#
# Measured in the same run, alternating, median of ROUNDS, warm page cache:
#   - avaprep validate --quick   every frame's existence and size record, 1 in 64 decoded
#   - avaprep validate           every frame decoded
#   - the baseline: a Python check such as a user writes (os.path.isfile on every listed frame,
#     then PIL's decode of each), single process
# Prints frames/s of each, the ratios, and the time a full check of AVA at 5 fps (1.35 M frames)
# would take at these rates on this machine.
#
#   scripts/bench/validate.sh        (env: VIDEOS=8 FRAMES=1500 ROUNDS=3)
set -euo pipefail

VIDEOS=${VIDEOS:-8}
FRAMES=${FRAMES:-1500}
ROUNDS=${ROUNDS:-3}
AVA_FRAMES=1350000
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$ROOT" && eval "$(scripts/setup.sh)" >/dev/null && cargo build --release --locked --quiet --bin avaprep)
BIN="$ROOT/target/release/avaprep"
PY="$ROOT/.venv/bin/python"

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(free -g | awk '/Mem:/ {print $2}') GB"
echo "dataset: $VIDEOS videos x $FRAMES frames, 854x480"

# One video's frames, then the same bytes under every video's name (decoding cost is per frame).
ffmpeg -v error -f lavfi -i "testsrc2=size=854x480:rate=5" -frames:v "$FRAMES" -q:v 2 "$work/%06d.jpg"
"$PY" - "$work" "$VIDEOS" "$FRAMES" "$ROOT" <<'PY'
import os, shutil, sys
work, videos, frames, root = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
names = [f"benchvideo{v}" for v in range(videos)]
for d in ("frames", "frame_lists", "annotations"):
    os.makedirs(os.path.join(work, d), exist_ok=True)
header = "original_vido_id video_id frame_id path labels\n"
lists = {"train.csv": header, "val.csv": header}
boxes = {"ava_train_v2.2.csv": "", "ava_val_v2.2.csv": "", "ava_val_predicted_boxes.csv": ""}
for number, name in enumerate(names):
    folder = os.path.join(work, "frames", name)
    os.makedirs(folder)
    split = "val" if number == len(names) - 1 else "train"
    for k in range(1, frames + 1):
        os.link(os.path.join(work, f"{k:06d}.jpg"), os.path.join(folder, f"{name}_{k:06d}.jpg"))
        lists[f"{split}.csv"] += f"{name} {number} {k - 1} {name}/{name}_{k:06d}.jpg \"\"\n"
    for second in range(902, 900 + frames // 5 - 2):
        row = f"{name},{second},0.100,0.200,0.500,0.900"
        boxes[f"ava_{split}_v2.2.csv"] += row + ",12,0\n"
        if split == "val":
            boxes["ava_val_predicted_boxes.csv"] += row + ",,0.950000\n"
for name, text in lists.items():
    open(os.path.join(work, "frame_lists", name), "w").write(text)
for name, text in boxes.items():
    open(os.path.join(work, "annotations", name), "w").write(text)
open(os.path.join(work, "annotations", "ava_val_excluded_timestamps_v2.2.csv"), "w").write("")
shutil.copy(os.path.join(root, "tests/data/ava/ava_action_list_v2.2_for_activitynet_2019.pbtxt"),
            os.path.join(work, "annotations"))
for k in range(1, frames + 1):
    os.remove(os.path.join(work, f"{k:06d}.jpg"))
PY

cat >"$work/baseline.py" <<'PY'
import os, sys, time
from PIL import Image
frame_dir, list_dir = sys.argv[1], sys.argv[2]
paths = []
for name in ("train.csv", "val.csv"):
    with open(os.path.join(list_dir, name)) as f:
        f.readline()
        paths += [os.path.join(frame_dir, line.split()[3]) for line in f]
paths = sorted(set(paths))
missing = [p for p in paths if not os.path.isfile(p)]
sizes = set()
for p in paths:
    with Image.open(p) as image:
        image.load()
        sizes.add(image.size)
print(len(paths), len(missing), len(sizes))
PY

# Seconds of one run of a command, on stdout; its own output discarded.
seconds() {
  local start end
  start=$(date +%s.%N)
  "$@" >/dev/null 2>&1 || { echo "failed: $*" >&2; exit 1; }
  end=$(date +%s.%N)
  echo "$end - $start" | bc -l
}
# The lists cover FRAMES / 5 seconds from 900, not AVA's whole segment: say so, or row-counts fails.
segment_end=$((900 + FRAMES / 5))
args=(validate --frame-dir "$work/frames" --frame-list-dir "$work/frame_lists" --annotation-dir "$work/annotations" --list-fps 5 --segment-start 900 --segment-end "$segment_end")
"$BIN" "${args[@]}" >/dev/null # warm the page cache; must pass
quick=() full=() base=()
for _ in $(seq "$ROUNDS"); do
  quick+=("$(seconds "$BIN" "${args[@]}" --quick)")
  full+=("$(seconds "$BIN" "${args[@]}")")
  base+=("$(seconds "$PY" "$work/baseline.py" "$work/frames" "$work/frame_lists")")
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
spread() { printf '%s\n' "$@" | sort -g | awk 'NR==1 {lo=$1} {hi=$1} END {printf "%.2f-%.2f", lo, hi}'; }
total=$((VIDEOS * FRAMES))
q=$(median "${quick[@]}") f=$(median "${full[@]}") b=$(median "${base[@]}")
rate() { echo "$total / $1" | bc -l | xargs printf '%.0f'; }
minutes() { echo "$AVA_FRAMES / ($total / $1) / 60" | bc -l | xargs printf '%.1f'; }
echo "frames: $total; median of $ROUNDS alternating rounds (spread in brackets)"
printf 'avaprep validate --quick   %6.2f s (%s s)  %7s frames/s   AVA 5 fps: %5s min\n' "$q" "$(spread "${quick[@]}")" "$(rate "$q")" "$(minutes "$q")"
printf 'avaprep validate (full)    %6.2f s (%s s)  %7s frames/s   AVA 5 fps: %5s min\n' "$f" "$(spread "${full[@]}")" "$(rate "$f")" "$(minutes "$f")"
printf 'baseline: Python + PIL     %6.2f s (%s s)  %7s frames/s   AVA 5 fps: %5s min\n' "$b" "$(spread "${base[@]}")" "$(rate "$b")" "$(minutes "$b")"
printf 'ratio full / baseline (time): %.2f\n' "$(echo "$f / $b" | bc -l)"
printf 'ratio quick / baseline (time): %.3f\n' "$(echo "$q / $b" | bc -l)"
