#!/usr/bin/env bash
# Benchmark of one CPU training step of avaprep's SlowFast detector against pytorchvideo's
# create_slowfast_with_roi_head in PyTorch, same shapes, same machine, same run, one after the
# other, both pinned to cores 0 and 1 with 2 intra-op threads.
#
#   scripts/bench/train-step.sh        (env: FRAMES=16 SIZE=112 BATCH=2 STEPS=5 WARMUP=2)
#
# A step is forward, BCE with logits, backward and a Nesterov SGD update on random clips (FRAMES
# fast frames, FRAMES/4 slow) with 2 random boxes per clip, in train mode; the median of STEPS
# timed steps after WARMUP untimed ones, for R18 and R50. Reference: train_step_reference.py.
# Prints the medians and their ratio; the target is avaprep <= 1.1x PyTorch.
set -euo pipefail

FRAMES=${FRAMES:-16}
SIZE=${SIZE:-112}
BATCH=${BATCH:-2}
STEPS=${STEPS:-5}
WARMUP=${WARMUP:-2}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
source "$ROOT/scripts/bench/against-python.sh"
for depth in 18 50; do
  ours=$(taskset -c 0,1 "$AVAPREP" --json bench train-step --model "r$depth" --frames "$FRAMES" \
    --size "$SIZE" --batch "$BATCH" --boxes-per-clip 2 --steps "$STEPS" --warmup "$WARMUP" --threads 2)
  ref=$(taskset -c 0,1 "$PY" "$ROOT/scripts/bench/train_step_reference.py" --depth "$depth" \
    --frames "$FRAMES" --height "$SIZE" --width "$SIZE" --batch "$BATCH" --boxes-per-clip 2 \
    --steps "$STEPS" --warmup "$WARMUP" --threads 2 --json)
  echo "  r$depth steps (s): avaprep $(field steps <<<"$ours"), pytorch $(field steps <<<"$ref")"
  awk -v d="$depth" -v s="${SIZE}x${SIZE}x$FRAMES" -v b="$BATCH" \
      -v o="$(field median_step_seconds <<<"$ours")" -v r="$(field median_step_seconds <<<"$ref")" 'BEGIN {
    printf "train-step r%s %s batch %s: avaprep %.3f s, pytorch %.3f s, ratio %.2f (target <= 1.1)\n",
      d, s, b, o, r, o / r
  }'
done
