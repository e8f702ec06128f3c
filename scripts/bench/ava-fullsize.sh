#!/usr/bin/env bash
# State at full size: a data directory shaped like the whole of AVA (299 trainval videos, 235 train
# and 64 val, 4,505 frames each: 1,346,995 frames, PySlowFast's lists of 8.08 M rows, the state of
# every stage), and the time and peak memory of what a user runs on it against the targets: a
# no-op `run` under 10 s, `status`, `validate --quick` under 60 s, `lists` (made again after a
# list was deleted) and `report`, each under 1 GB.
# The directory is made (once, kept in WORKDIR) by the pipeline itself, so its state is what a
# real run leaves: 299 files of one video of 1,802 s (426x240 test pattern at 5 fps, hard links
# to it, downloaded from `avaprep serve`), AVA-format annotations with a keyframe every second
# over 902..1798, extracted at 5 fps and 240 px high (426x240 JPEGs: the file counts and sizes of
# the lists and state are AVA's; the frames are smaller than 480p ones, so decoding a sample is
# quicker than on AVA's frames, which the output says).
#
#   scripts/bench/ava-fullsize.sh [WORKDIR]   (WORKDIR default /tmp/avaprep-fullsize; making it
#                                             takes about half an hour on 2 cores and 25 GB)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WORK=${1:-/tmp/avaprep-fullsize}
(cd "$ROOT" && eval "$(scripts/setup.sh)" >/dev/null && cargo build --release --locked --quiet --bin avaprep)
AVAPREP="$ROOT/target/release/avaprep"
PYTHON="$ROOT/.venv/bin/python"
# rehearsal_mirror.py imports natural_videos.py, which loads scikit-image (not in setup.sh's venv).
"$PYTHON" -c 'import skimage' 2>/dev/null ||
  "$PYTHON" -m pip install --disable-pip-version-check -q scikit-image >&2
mkdir -p "$WORK"
DATA="$WORK/data"
SOURCE="$WORK/source.mp4"
if [ ! -f "$SOURCE" ]; then
  ffmpeg -nostdin -y -loglevel error -f lavfi -i testsrc2=size=426x240:rate=5 -t 1802 \
    -c:v libx264 -preset ultrafast -pix_fmt yuv420p "$SOURCE.part.mp4"
  mv "$SOURCE.part.mp4" "$SOURCE"
fi
[ -f "$WORK/mirror/manifest.toml" ] || "$PYTHON" "$ROOT/scripts/bench/rehearsal_mirror.py" --shape-of-ava "$SOURCE" "$WORK/mirror"

port_file="$WORK/serve.json"
"$AVAPREP" --json serve "$WORK/mirror" --port 0 >"$port_file" 2>/dev/null &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
for _ in $(seq 50); do
  grep -q '"url"' "$port_file" 2>/dev/null && break
  sleep 0.1
done
URL=$("$PYTHON" -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())["url"])' "$port_file")

pipeline=(run "$ROOT/pipelines/ava22-5fps-480p.toml" --set "dataset=\"$WORK/mirror/manifest.toml\""
  --set "fetch.base_url=[\"$URL\"]" --set extract.height=240 --set extract.delete_videos_after_extract=true
  --set validate.quick=true --until validate)
if [ ! -f "$WORK/made" ]; then
  echo "fullsize: making the data directory (299 videos through the pipeline)" >&2
  "$AVAPREP" --data-dir "$DATA" "${pipeline[@]}" >&2
  touch "$WORK/made"
fi

measure() {
  local name=$1
  shift
  /usr/bin/time -f "%e %M" -o "$WORK/time" "$AVAPREP" --data-dir "$DATA" "$@" >"$WORK/out-$name" 2>&1 || {
    echo "fullsize: $name failed:" >&2
    cat "$WORK/out-$name" >&2
    exit 1
  }
  read -r wall rss <"$WORK/time"
  echo "$name $wall $rss"
}

{
  measure "no-op run" "${pipeline[@]}"
  measure "status" status "${pipeline[@]:1:11}"
  measure "validate --quick" validate --quick
  rm "$DATA/frame_lists/train.csv"
  measure "lists (made again)" lists
  measure "report" report
} >"$WORK/measured"

exec "$PYTHON" - "$WORK" "$DATA" <<'PY'
import json, os, sys

work, data = sys.argv[1], sys.argv[2]
files = sum(len(names) for _, _, names in os.walk(f"{data}/frames"))
rows = sum(1 for split in ("train", "val") for _ in open(f"{data}/frame_lists/{split}.csv")) - 2
state = sum(os.path.getsize(f"{data}/.avaprep/state/{name}") for name in os.listdir(f"{data}/.avaprep/state"))
print(f"data directory: {len(os.listdir(f'{data}/frames'))} videos, {files:,} frames, {rows:,} list rows, "
      f"state files {state / 1e6:.1f} MB")
targets = {"no-op run": 10.0, "validate --quick": 60.0}
print(f"{'command':<20} {'wall s':>8} {'peak memory':>12}  target")
for line in open(f"{work}/measured"):
    *name, wall, rss = line.split()
    name = " ".join(name)
    wall, rss = float(wall), int(rss) * 1024
    target = targets.get(name)
    verdict = f"wall under {target:.0f} s: {wall / target:.2f} of it" if target else ""
    memory = f"memory under 1 GB: {rss / 2**30:.2f} of it"
    print(f"{name:<20} {wall:>8.2f} {rss / 2**20:>8.0f} MiB  {memory}{'; ' + verdict if verdict else ''}")
no_op = open(f"{work}/out-no-op run").read()
print("no-op run: " + ("nothing redone" if "up to date" in no_op and "now," not in no_op else "REDID WORK"))
print("frames are 426x240 here (AVA's at 480p decode about 4x slower): validate --quick's decoding of "
      "1 frame in 64 takes a larger share on AVA's frames")
PY
