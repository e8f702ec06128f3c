#!/usr/bin/env bash
# Everything the GPU runs need, in one folder under 64 MiB to copy to a GPU machine that has a
# CUDA build of torch 2.11 in its python3 but no Rust, FFmpeg or pytorchvideo:
#   OUT/avaprep-train  the trainer, stripped (it loads the machine's own torch libraries);
#   OUT/python/        the packages the PyTorch side imports beyond torch, torchvision and their
#                      requirements (pytorchvideo, fvcore, safetensors, ...), found by importing
#                      it here (scripts/bench/reference_packages.py);
#   OUT/data/          DATA_DIR's dataset, only what the trainer reads: its plan, annotations,
#                      frame index and frames.
#
#   scripts/bench/gpu-bundle.sh DATA_DIR OUT      (DATA_DIR: data/demo after scripts/demo.sh;
#                                                  env: TRAINER, NO_BUILD as gpu-train.sh's)
#
# Then, on the GPU machine, from a checkout of the repository with OUT beside it:
#   TRAINER=OUT/avaprep-train scripts/gpu-check.sh OUT/data
#   NO_BUILD=1 TRAINER=OUT/avaprep-train PY=python3 PYTHONPATH=OUT/python COPIES=12 \
#     scripts/bench/gpu-train.sh OUT/data
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DATA=${1:?usage: scripts/bench/gpu-bundle.sh DATA_DIR OUT}
OUT=${2:?usage: scripts/bench/gpu-bundle.sh DATA_DIR OUT}
OUT=${OUT%/}
LIMIT_MIB=64
[ -f "$DATA/work/videos.json" ] || { echo "gpu-bundle: $DATA has no extracted dataset (run scripts/demo.sh first)" >&2; exit 1; }
[ ! -e "$OUT" ] || { echo "gpu-bundle: $OUT exists; give a new folder" >&2; exit 1; }
# What the trainer reads of a data directory. Links are followed: a replicated dataset's frames
# are links to another's, which would not travel.
data_parts=("$DATA/work/videos.json" "$DATA/annotations" "$DATA/frame_index" "$DATA/frames")
data_mib=$(du -smcL "${data_parts[@]}" | tail -1 | cut -f1)
if [ "$data_mib" -gt $((LIMIT_MIB - 16)) ]; then
  echo "gpu-bundle: what the trainer reads of $DATA takes $data_mib MiB: with the trainer and" \
    "the packages, over the $LIMIT_MIB MiB that can be copied (the demo's take 46 MiB)" >&2
  exit 1
fi
TRAINER=${TRAINER:-$ROOT/target/release/avaprep-train}
if [ -z "${NO_BUILD:-}" ]; then
  (cd "$ROOT" && eval "$(scripts/setup.sh)" >/dev/null && cargo build --release --locked --quiet -p avaprep-train)
fi

# Built beside OUT and renamed at the end, so a folder named OUT is always a whole bundle.
staging=$(mktemp -d "$(dirname "$OUT")/.gpu-bundle.XXXXXX")
trap 'rm -rf "$staging"' EXIT
mkdir -p "$staging/data/work"
strip -o "$staging/avaprep-train" "$TRAINER"
cp -L "${data_parts[0]}" "$staging/data/work/"
cp -rL "${data_parts[@]:1}" "$staging/data/"

"$ROOT/.venv/bin/python" "$ROOT/scripts/bench/reference_packages.py" bundle "$staging/python"

mib=$(du -sm "$staging" | cut -f1)
if [ "$mib" -gt "$LIMIT_MIB" ]; then
  echo "gpu-bundle: $mib MiB, over the $LIMIT_MIB MiB that can be copied to the GPU machine" >&2
  exit 1
fi
mv "$staging" "$OUT"
echo "gpu-bundle: $OUT, $mib MiB ($(find "$OUT/data/frames" -name '*.jpg' | wc -l) frames)"
