#!/usr/bin/env bash
# Start-up cost of the data tool: whole-process wall time and peak memory of `avaprep --version`
# and `avaprep validate --help`, against the trainer `avaprep-train --version`, which loads
# libtorch and the CUDA libraries as the single binary did before the split. The commands
# alternate, RUNS rounds; medians and ranges are printed. Also checks that the data tool links
# no torch or CUDA library (ldd).
#
#   scripts/bench/startup.sh            (env: RUNS=21)
#
# Targets: data tool under 50 ms and 40 MB; ldd lists no libtorch/libc10/libcuda*.
set -euo pipefail

RUNS=${RUNS:-21}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
(cd "$ROOT" && eval "$(scripts/setup.sh)" >/dev/null && cargo build --release --locked --quiet)
BIN="$ROOT/target/release"

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(free -g | awk '/Mem:/ {print $2}') GB"
linked=$(ldd "$BIN/avaprep" | awk '{print $1}' | grep -E '^lib(torch|c10|cuda|cudart|cublas|cudnn|nvrtc)' || true)
if [ -n "$linked" ]; then
  echo "FAIL: avaprep links $linked" >&2
  exit 1
fi
echo "ldd avaprep: $(ldd "$BIN/avaprep" | wc -l) libraries, none of them torch or CUDA"

measured=$(mktemp)
trap 'rm -f "$measured"' EXIT
declare -A wall rss
commands=("avaprep --version" "avaprep validate --help" "avaprep-train --version")
for _ in $(seq "$RUNS"); do
  for command in "${commands[@]}"; do
    # shellcheck disable=SC2086
    /usr/bin/time -o "$measured" -f "%e %M" $BIN/$command >/dev/null 2>&1
    read -r seconds kilobytes <"$measured"
    wall[$command]+="$seconds "
    rss[$command]+="$kilobytes "
  done
done

summary() { # values... -> "median (min-max)"
  printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {printf "%s (%s-%s)", v[int((NR+1)/2)], v[1], v[NR]}'
}
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }

printf '%-26s %-24s %s\n' command "wall s, median (range)" "peak RSS KB, median (range)"
for command in "${commands[@]}"; do
  # shellcheck disable=SC2086
  printf '%-26s %-24s %s\n' "$command" "$(summary ${wall[$command]})" "$(summary ${rss[$command]})"
done
# shellcheck disable=SC2086
data_rss=$(median ${rss["avaprep --version"]})
# shellcheck disable=SC2086
trainer_rss=$(median ${rss["avaprep-train --version"]})
awk -v a="$data_rss" -v b="$trainer_rss" 'BEGIN {printf "peak memory, avaprep --version / avaprep-train --version: %.3f\n", a / b}'
