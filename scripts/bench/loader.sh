#!/usr/bin/env bash
# Benchmark of avaprep's training loader against pytorchvideo's AVA loader (pytorchvideo.data.Ava
# with a torch DataLoader) on the same extracted frames, same machine, same run, one after the
# other, both pinned to cores 0 and 1.
#
#   scripts/bench/loader.sh [DATA_DIR]        (default data/demo; env: PASSES=3)
#
# Each loads PASSES epochs of the train keyframes with the training work: 16 frames at 5 fps
# around each keyframe, JPEG decode, short side jittered in [256, 320], random 224 crop, flip with
# p = 0.5 (boxes follow), normalisation, batches of 8; avaprep on 2 loader threads, pytorchvideo on
# 2 DataLoader workers of one thread each. Where the two differ: loader_reference.py's docstring.
# Prints clips/s of both and their ratio; the target is avaprep >= 3x pytorchvideo.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DATA=${1:-$ROOT/data/demo}
PASSES=${PASSES:-3}
# On a fresh clone the default dataset is the demo's: make it first (about 10 minutes).
if [[ -z "${1:-}" && ! -d "$DATA/frame_index" ]]; then
  "$ROOT/scripts/demo.sh" >&2
fi
if [[ ! -d "$DATA/frame_index" ]]; then
  echo "loader: $DATA/frame_index is missing; make the demo dataset with scripts/demo.sh" \
    "(or run avaprep's pipeline up to extract on DATA_DIR)" >&2
  exit 1
fi
source "$ROOT/scripts/bench/against-python.sh"
ours=$(taskset -c 0,1 "$TRAINER" --json --data-dir "$DATA" bench loader --passes "$PASSES" --threads 2)
ref=$(taskset -c 0,1 "$PY" "$ROOT/scripts/bench/loader_reference.py" --data-dir "$DATA" --passes "$PASSES" --json)
ours_rate=$(field clips_per_second <<<"$ours")
ref_rate=$(field clips_per_second <<<"$ref")
echo "avaprep: $(field clips <<<"$ours") clips in $(field seconds <<<"$ours") s;" \
  "pytorchvideo: $(field clips <<<"$ref") clips in $(field seconds <<<"$ref") s ($PASSES passes over $DATA)"
awk -v o="$ours_rate" -v r="$ref_rate" 'BEGIN {
  printf "loader: avaprep %.1f clips/s, pytorchvideo %.1f clips/s, ratio %.2f (target >= 3)\n", o, r, o / r
}'
