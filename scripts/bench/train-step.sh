#!/usr/bin/env bash
# Benchmark of one CPU training step of avaprep's SlowFast detector against pytorchvideo's
# create_slowfast_with_roi_head in PyTorch, same shapes, same machine, same run, one after the
# other, both pinned to cores 0 and 1 with 2 intra-op threads.
#
#   scripts/bench/train-step.sh   (env: FRAMES=16 SIZE=112 BATCH=2 STEPS=8 WARMUP=2 ROUNDS=2)
#
# A step is forward, BCE with logits, backward and a Nesterov SGD update on random clips (FRAMES
# fast frames, FRAMES/4 slow) with 2 random boxes per clip, in train mode, for R18 and R50.
# Reference: train_step_reference.py. The two sides take turns for ROUNDS rounds of STEPS timed
# steps (after WARMUP untimed ones), so a slow spell of a shared machine hits both; the median of
# each side's timed steps and their ratio are printed; the target is avaprep <= 1.1x PyTorch.
set -euo pipefail

FRAMES=${FRAMES:-16}
SIZE=${SIZE:-112}
BATCH=${BATCH:-2}
STEPS=${STEPS:-8}
ROUNDS=${ROUNDS:-2}
WARMUP=${WARMUP:-2}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
source "$ROOT/scripts/bench/against-python.sh"
median() { tr ',' '\n' | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
steps() { field steps | tr -d '[] '; }
# avaprep names its R50 preset after its 8x8 Kinetics recipe; the network is the same.
for pair in 18:r18 50:r50-8x8; do
  depth=${pair%%:*} model=${pair#*:}
  ours=() ref=()
  for _ in $(seq "$ROUNDS"); do
    ours+=("$(taskset -c 0,1 "$TRAINER" --json bench train-step --model "$model" --frames "$FRAMES" \
      --size "$SIZE" --batch "$BATCH" --boxes-per-clip 2 --steps "$STEPS" --warmup "$WARMUP" \
      --threads 2 | steps)")
    ref+=("$(taskset -c 0,1 "$PY" "$ROOT/scripts/bench/train_step_reference.py" --depth "$depth" \
      --frames "$FRAMES" --height "$SIZE" --width "$SIZE" --batch "$BATCH" --boxes-per-clip 2 \
      --steps "$STEPS" --warmup "$WARMUP" --threads 2 --json | steps)")
  done
  echo "  r$depth steps (s): avaprep ${ours[*]}; pytorch ${ref[*]}"
  awk -v d="$depth" -v s="${SIZE}x${SIZE}x$FRAMES" -v b="$BATCH" \
      -v o="$(IFS=,; median <<<"${ours[*]}")" -v r="$(IFS=,; median <<<"${ref[*]}")" 'BEGIN {
    printf "train-step r%s %s batch %s: avaprep %.3f s, pytorch %.3f s, ratio %.2f (target <= 1.1)\n",
      d, s, b, o, r, o / r
  }'
done
