#!/usr/bin/env bash
# A short real training of SlowFast R50 8x8 at 224x224 on a GPU, on the synthetic miniature's frames:
# one epoch in fp16 and one in bf16 autocast, each printing clips/s and peak GPU memory; sized to
# finish in a few minutes.
#
#   scripts/gpu-check.sh [DATA_DIR]
#
# DATA_DIR (default data/demo) must hold extracted frames, as scripts/demo.sh leaves them; on a GPU
# node without FFmpeg, prepare it on another machine and copy it over. The binary is the
# trainer-only build (no FFmpeg needed); it uses this machine's torch 2.11 libraries.
set -euo pipefail
cd "$(dirname "$0")/.."
data=${1:-data/demo}
[ -f "$data/work/videos.json" ] || { echo "gpu-check: $data has no extracted dataset (run scripts/demo.sh first)" >&2; exit 1; }
if [ -x .venv/bin/python ]; then
  eval "$(scripts/setup.sh)"
else
  # A GPU node with its own torch 2.11 in the default python3.
  torch_dir=$(python3 -c 'import os, torch; print(os.path.dirname(torch.__file__))')
  export LIBTORCH=$torch_dir LIBTORCH_CXX11_ABI=1 AVAPREP_TORCH_LIB=$torch_dir/lib
fi
export LD_LIBRARY_PATH=$AVAPREP_TORCH_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
cargo build --release --locked -p avaprep-train -p avaprep-cli --no-default-features
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader

# One epoch in each mixed precision, each with its own peak-memory monitor.
for precision in fp16 bf16; do
  peak_log=$(mktemp)
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 >"$peak_log" &
  monitor=$!
  run=$(mktemp -d)
  target/release/avaprep --data-dir "$data" train --preset ava-r50 --run-dir "$run" \
    --set 'device="cuda"' --set "precision=\"$precision\"" --set crop_size=224 --set batch_size=8 \
    --set epochs=1 --set eval_every=1 --set box_threshold=0.5
  kill $monitor 2>/dev/null || true
  echo "$precision: peak GPU memory $(sort -n "$peak_log" | tail -1) MiB"
  grep -h '"type":"epoch"' "$run/metrics.jsonl" | tail -1
  rm -rf "$peak_log" "$run"
done
