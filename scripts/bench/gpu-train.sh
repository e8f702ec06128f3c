#!/usr/bin/env bash
# Training speed of avaprep's trainer on one GPU, side by side with PyTorch eager, on AVA-sized data.
# For each precision (bf16 autocast and fp32), in the same run, the two sides taking turns:
#   - avaprep: `avaprep-train bench train`, the trainer's own step (forward, BCE, the loss read back,
#     backward, SGD) on its loader's batches of DATA_DIR's train split, WARMUP untimed steps then
#     STEPS timed ones; it reports the share of the time spent waiting for the loader;
#   - PyTorch: scripts/bench/gpu_train_reference.py, pytorchvideo's create_slowfast_with_roi_head
#     with the weights avaprep starts from (as scripts/export_checkpoint.py exports them), the same
#     optimizer settings and loss, fed avaprep's first two batches from GPU memory: the anchor;
#   - both with dropout off (its random draws differ between the two), so they must agree on the
#     first step's logits and the first two steps' losses (the second after an update): to 1e-4 in
#     fp32, 2e-2 in bf16; the script fails otherwise.
# Then avaprep's loader alone with every core (`bench loader`), the GPU's utilisation and memory
# while each side trains (nvidia-smi, every 200 ms), the largest batch in BATCHES whose training
# stays under 8 GB (an RTX 2080 / 2070 class card; the recipe reaches its batch of 64 by gradient
# accumulation, and updates once every 8 batches where both sides here update every batch), and
# one AVA epoch (AVA_CLIPS train clips) and the ava-r50 recipe's 20 epochs projected at avaprep's
# clips/s. It prints each figure, the medians over ROUNDS and the ratios avaprep / PyTorch.
#
#   scripts/bench/gpu-train.sh DATA_DIR   (env: PRESET=ava-r50 STEPS=300 WARMUP=20 ROUNDS=2
#                                          PRECISIONS="bf16 fp32" BATCHES="8 12 16 24 32"
#                                          AVA_CLIPS=210455 SETS="" COPIES=1
#                                          TRAINER=target/release/avaprep-train
#                                          PY=.venv/bin/python NO_BUILD=; DEVICE=cpu to
#                                          force the CPU)
#
# DATA_DIR holds extracted frames and their index; for a figure worth quoting, at least 2,000 train
# clips of 480p frames, such as the rehearsal's (scripts/bench/ava-rehearsal.sh leaves them in
# WORKDIR/data), or the demo's 168 taken COPIES=12 times (scripts/bench/replicate_dataset.py: each
# video again under 12 ids, its frames links to the demo's; made where no FFmpeg is, from the
# demo's 46 MB of 480p frames). On a GPU machine without Rust or FFmpeg, run it from the folder
# scripts/bench/gpu-bundle.sh makes (NO_BUILD=1 TRAINER=... PY=python3 PYTHONPATH=...).
# Without a GPU (or with DEVICE=cpu) it runs on the CPU in fp32 only, with no memory or
# utilisation figures: `PRESET=synthetic-tiny STEPS=2 WARMUP=2 ROUNDS=1` on a small dataset is
# the test suite's check that both sides build the same model, loss and optimizer.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DATA=${1:?usage: scripts/bench/gpu-train.sh DATA_DIR}
PRESET=${PRESET:-ava-r50}
STEPS=${STEPS:-300}
WARMUP=${WARMUP:-20}
ROUNDS=${ROUNDS:-2}
BATCHES=${BATCHES:-8 12 16 24 32}
# AVA 2.2's train keyframes (a clip each): the annotated ranges of its 235 train videos.
AVA_CLIPS=${AVA_CLIPS:-210455}
# Extra trainer settings, e.g. SETS="crop_size=160"; the batch is the script's to set.
read -r -a EXTRA <<<"${SETS:-}"
if [[ " ${SETS:-} " == *" batch_size="* ]]; then
  echo "gpu-train: SETS may not set batch_size: the script measures batch 8 and sweeps BATCHES" >&2
  exit 2
fi
TRAINER=${TRAINER:-$ROOT/target/release/avaprep-train}
PY=${PY:-$ROOT/.venv/bin/python}
# The setup makes .venv (the default PY) on a fresh machine.
if [ -z "${NO_BUILD:-}" ]; then
  (cd "$ROOT" && eval "$(scripts/setup.sh)" >/dev/null && cargo build --release --locked --quiet -p avaprep-train)
fi
# Before any GPU time is spent: the PyTorch side imports (what it imports, not only the packages'
# names: pytorchvideo's own __init__ imports nothing), and its torch is the one the trainer is
# built against. Then one libtorch for both sides: the trainer loads that Python's torch libraries
# (the library path the build recorded is the build machine's).
torch_lib=$("$PY" -c '
import os, sys
sys.path.insert(0, os.path.join(sys.argv[1], "scripts"))
import torch, torchvision, safetensors.torch
from pytorchvideo.models.slowfast import create_slowfast_with_roi_head
import export_checkpoint
assert torch.__version__.startswith("2.11."), f"torch {torch.__version__}, where the trainer links 2.11"
print(os.path.join(os.path.dirname(torch.__file__), "lib"))' "$ROOT") || {
  echo "gpu-train: $PY cannot run the PyTorch side (above); scripts/bench/gpu-bundle.sh makes a" \
    "folder of the packages it needs beyond torch and torchvision, to put on PYTHONPATH" >&2
  exit 1
}
export LD_LIBRARY_PATH=$torch_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
if [ "${DEVICE:-}" != cpu ] && command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  DEVICE=cuda PRECISIONS=${PRECISIONS:-bf16 fp32}
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
else
  DEVICE=cpu PRECISIONS=fp32
  echo "no GPU: the CPU, fp32 only; no memory or utilisation figures"
fi
WORK=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$WORK"' EXIT
if [ "${COPIES:-1}" -gt 1 ]; then
  "$PY" "$ROOT/scripts/bench/replicate_dataset.py" "$DATA" "$WORK/data" --copies "$COPIES"
  DATA=$WORK/data
fi
field() { "$PY" -c 'import json, sys; print(next(r[sys.argv[1]] for r in map(json.loads, sys.stdin) if sys.argv[1] in r))' "$1"; }
median() { tr ' ' '\n' | sort -g | awk '{ v[NR] = $1 } END { print (v[int((NR + 1) / 2)] + v[int(NR / 2) + 1]) / 2 }'; }

# Runs a command with nvidia-smi sampling beside it; the samples go to $WORK/$1.gpu.
sampled() {
  local name=$1
  shift
  if [ "$DEVICE" = cuda ]; then
    nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader,nounits -lms 200 \
      >"$WORK/$name.gpu" &
    local monitor=$!
    "$@"
    kill "$monitor" 2>/dev/null || true
    wait "$monitor" 2>/dev/null || true
  else
    "$@"
  fi
}

# "utilisation median %, peak MiB" of a sampled run.
gpu_figures() {
  [ -s "$WORK/$1.gpu" ] || { echo "n/a"; return; }
  local busy peak
  busy=$(cut -d, -f1 "$WORK/$1.gpu" | median)
  peak=$(cut -d, -f2 "$WORK/$1.gpu" | sort -n | tail -1)
  printf 'GPU %.0f%% busy (median), peak %d MiB' "$busy" "$peak"
}

ours_train() { # precision batch steps warmup [dump]
  local dump=()
  [ -n "${5:-}" ] && dump=(--dump "$5")
  "$TRAINER" --data-dir "$DATA" --json bench train --preset "$PRESET" --steps "$3" --warmup "$4" \
    --set device=\""$DEVICE"\" --set precision=\""$1"\" --set batch_size="$2" --set dropout=0.0 \
    "${EXTRA[@]/#/--set=}" "${dump[@]}"
}

for precision in $PRECISIONS; do
  ours=() ref=() dump="$WORK/dump-$precision"
  for round in $(seq "$ROUNDS"); do
    # The first round writes what the PyTorch side reads; every round reads it.
    sampled "ours-$precision-$round" ours_train "$precision" 8 "$STEPS" "$WARMUP" \
      "$([ "$round" = 1 ] && echo "$dump")" >"$WORK/ours-$precision-$round.json"
    sampled "ref-$precision-$round" "$PY" "$ROOT/scripts/bench/gpu_train_reference.py" "$dump" \
      --device "$DEVICE" --precision "$precision" --steps "$STEPS" --warmup "$WARMUP" --json \
      >"$WORK/ref-$precision-$round.json"
    o=$(field clips_per_second <"$WORK/ours-$precision-$round.json")
    r=$(field clips_per_second <"$WORK/ref-$precision-$round.json")
    ours+=("$o") ref+=("$r")
    printf '  %s round %d: avaprep %.2f clips/s (%s; loader wait %.0f%%), pytorch %.2f clips/s (%s)\n' \
      "$precision" "$round" "$o" "$(gpu_figures "ours-$precision-$round")" \
      "$(awk -v w="$(field loader_wait_share <"$WORK/ours-$precision-$round.json")" 'BEGIN { print 100 * w }')" \
      "$r" "$(gpu_figures "ref-$precision-$round")"
  done
  losses_ours=$(field first_losses <"$WORK/ours-$precision-1.json" | tr -d '[] ')
  losses_ref=$(field first_losses <"$WORK/ref-$precision-1.json" | tr -d '[] ')
  logits=$(field first_logits_max_difference <"$WORK/ref-$precision-1.json")
  clips=$(field train_clips <"$WORK/ours-$precision-1.json")
  batch=$(field batch <"$WORK/ours-$precision-1.json")
  o=$(median <<<"${ours[*]}") r=$(median <<<"${ref[*]}")
  tolerance=$([ "$precision" = fp32 ] && echo 1e-4 || echo 2e-2)
  awk -v p="$precision" -v d="$DEVICE" -v o="$o" -v r="$r" -v ours="$losses_ours" \
      -v ref="$losses_ref" -v logits="$logits" -v t="$tolerance" -v n="$clips" -v b="$batch" \
      -v ava="$AVA_CLIPS" 'BEGIN {
    split(ours, a, ","); split(ref, z, ",")
    printf "gpu-train %s on %s, batch %d, %d train clips: avaprep %.2f clips/s, pytorch %.2f clips/s, ratio %.2f (target >= 1)\n", p, d, b, n, o, r, o / r
    printf "  first steps: losses avaprep %.6f, %.6f, pytorch %.6f, %.6f; logits differ by at most %.2e (each at most %s)\n", a[1], a[2], z[1], z[2], logits, t
    printf "  projected at avaprep'"'"'s rate: one AVA epoch (%d clips) %.2f h, the ava-r50 recipe (20 epochs) %.1f h\n", ava, ava / o / 3600, 20 * ava / o / 3600
    number = "^-?[0-9.]+([eE][-+]?[0-9]+)?$"
    agree = logits ~ number && logits + 0 <= t
    for (i = 1; i <= 2; i++) {
      if (!(a[i] ~ number && z[i] ~ number)) agree = 0
      diff = a[i] - z[i]; if (diff < 0) diff = -diff
      if (!(diff <= t)) agree = 0
    }
    if (!agree) { print "gpu-train: the two sides disagree on the first steps (or a loss is not a number)" > "/dev/stderr"; exit 1 }
  }'
done

loader=$("$TRAINER" --data-dir "$DATA" --json bench loader --preset "$PRESET" --threads "$(nproc)" \
  "${EXTRA[@]/#/--set=}" | field clips_per_second)
printf 'loader alone, %d threads: %.1f clips/s\n' "$(nproc)" "$loader"

if [ "$DEVICE" = cuda ]; then
  fits=none
  for batch in $BATCHES; do
    if ! sampled "batch-$batch" ours_train bf16 "$batch" 5 2 >/dev/null 2>&1; then
      echo "  batch $batch: failed (out of memory?)"
      break
    fi
    peak=$(awk -F', ' '$2 > p { p = $2 } END { print p + 0 }' "$WORK/batch-$batch.gpu")
    echo "  batch $batch in bf16: peak $peak MiB"
    [ "$peak" -le 8192 ] && fits=$batch
  done
  echo "largest batch under 8 GB in bf16: $fits"
fi
