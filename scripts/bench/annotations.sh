#!/usr/bin/env bash
# Benchmark: the strict ground-truth reader on a generated 1,000,000-row file (the real train file
# has ~0.9 M rows). Prints rows/s; the target is well under a second for the million rows.
set -euo pipefail
cd "$(dirname "$0")/../.."
eval "$(scripts/setup.sh)" >/dev/null
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
cargo test --release --locked --quiet --lib bench_parse_ground_truth_1m -- --ignored --nocapture 2>&1 |
  grep -E "parsed|test result"
