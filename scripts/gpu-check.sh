#!/usr/bin/env bash
# Real trainings on a GPU, on the synthetic miniature's frames, sized to finish in a few minutes:
#   1. SlowFast R50 8x8 at 224x224 (the ava-r50 preset), three epochs in fp16 and three in bf16
#      autocast, each printing the last epoch's clips/s and the peak GPU memory;
#   2. the demo's training (synthetic-tiny, 40 epochs, patience 6) with the default device and
#      precision, which must pick the GPU, printing its time and val mAP.
# It fails when a training fails or libtorch prints a warning (a training prints none).
#
#   scripts/gpu-check.sh [DATA_DIR]
#
# DATA_DIR (default data/demo) must hold extracted frames, as scripts/demo.sh leaves them. Only the
# trainer runs here, so a GPU node needs neither FFmpeg nor Rust: where cargo is missing, copy over
# the folder scripts/bench/gpu-bundle.sh makes (the trainer, built against torch 2.11, and the
# dataset) and run TRAINER=BUNDLE/avaprep-train scripts/gpu-check.sh BUNDLE/data; the trainer then
# loads the node's own torch 2.11 libraries.
set -euo pipefail
# Relative paths are the caller's; the script then works from the repository root.
data=$(realpath -m "${1:-$(dirname "$0")/../data/demo}")
trainer=$(realpath -m "${TRAINER:-$(dirname "$0")/../target/release/avaprep-train}")
cd "$(dirname "$0")/.."
[ -f "$data/work/videos.json" ] || { echo "gpu-check: $data has no extracted dataset (run scripts/demo.sh first)" >&2; exit 1; }
if [ -x .venv/bin/python ]; then
  eval "$(scripts/setup.sh)"
else
  # A GPU node with its own torch 2.11 in the default python3.
  torch_dir=$(python3 -c 'import os, torch; assert torch.__version__.startswith("2.11."), f"torch {torch.__version__}, where the trainer links 2.11"; print(os.path.dirname(torch.__file__))')
  export LIBTORCH=$torch_dir LIBTORCH_CXX11_ABI=1 AVAPREP_TORCH_LIB=$torch_dir/lib
fi
export LD_LIBRARY_PATH=$AVAPREP_TORCH_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
if [ -z "${TRAINER:-}" ] && command -v cargo >/dev/null 2>&1; then
  cargo build --release --locked -p avaprep-train
fi
[ -x "$trainer" ] || { echo "gpu-check: $trainer is missing (build it with scripts/setup.sh's environment: cargo build --release -p avaprep-train, or make a bundle with scripts/bench/gpu-bundle.sh)" >&2; exit 1; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader

# Runs the trainer with a peak-memory monitor beside it; prints wall time, peak memory and the
# last epoch's record.
train_with_monitor() {
  local label=$1
  shift
  local peak_log output run started
  peak_log=$(mktemp)
  output=$(mktemp)
  run=$(mktemp -d)
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 >"$peak_log" &
  local monitor=$!
  started=$(date +%s%N)
  local status=0
  "$trainer" --data-dir "$data" train --run-dir "$run/run" "$@" 2>&1 | tee "$output" || status=$?
  local milliseconds=$((($(date +%s%N) - started) / 1000000))
  kill $monitor 2>/dev/null || true
  if [ "$status" -ne 0 ]; then
    echo "gpu-check: $label: the trainer failed (exit $status)" >&2
    rm -rf "$peak_log" "$output" "$run"
    return "$status"
  fi
  echo "$label: $((milliseconds / 1000)).$(printf %03d $((milliseconds % 1000))) s, peak GPU memory $(sort -n "$peak_log" | tail -1) MiB"
  grep -h '"type":"epoch"' "$run/run/metrics.jsonl" | tail -1
  local warnings
  warnings=$(grep -c '] Warning:' "$output" || true)
  rm -rf "$peak_log" "$output" "$run"
  if [ "$warnings" -gt 0 ]; then
    echo "gpu-check: $label: libtorch printed $warnings warnings" >&2
    return 1
  fi
}

for precision in fp16 bf16; do
  train_with_monitor "ava-r50 224 $precision" --preset ava-r50 \
    --set 'device="cuda"' --set "precision=\"$precision\"" --set crop_size=224 --set batch_size=8 \
    --set epochs=3 --set eval_every=3 --set box_threshold=0.5
done
# The demo's settings, as pipelines/demo.toml gives them.
train_with_monitor "demo training (synthetic-tiny, default device)" --preset synthetic-tiny \
  --set epochs=40 --set patience=6
