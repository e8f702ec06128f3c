#!/usr/bin/env bash
# Start-up cost of the data tool: whole-process wall time and peak memory, median of RUNS rounds in
# which the commands alternate:
#   - avaprep --version, avaprep validate --help: the default data tool (links FFmpeg's libav)
#   - the same two of the build without FFmpeg (`--no-default-features`: what a CI job that only
#     validates installs)
#   - a three-line C program that links the same libav and does nothing: the floor of any program
#     that links this machine's FFmpeg
#   - avaprep-train --version: the trainer, which loads libtorch and the CUDA libraries as the
#     single binary did before the split (the baseline)
# Also checks that the data tool links no torch or CUDA library (ldd).
#
#   scripts/bench/startup.sh            (env: RUNS=31)
#
# Targets: data tool under 50 ms and 40 MB; ldd lists no libtorch/libc10/libcuda*.
set -euo pipefail

RUNS=${RUNS:-31}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(
  cd "$ROOT" && eval "$(scripts/setup.sh)" >/dev/null
  cargo build --release --locked --quiet
  # Its own target folder, so the default build's binaries stay as they are.
  cargo build --release --locked --quiet -p avaprep-cli --no-default-features --target-dir target/no-ffmpeg
)
BIN="$ROOT/target/release"
LEAN="$ROOT/target/no-ffmpeg/release/avaprep"
cat >"$work/libav_floor.c" <<'C'
#include <libavformat/avformat.h>
int main(int argc, char **argv) { if (argc > 9) avformat_network_init(); return 0; }
C
# shellcheck disable=SC2046
cc -O2 "$work/libav_floor.c" -o "$work/libav-floor" $(pkg-config --cflags --libs libavformat libavcodec libswscale libavutil)

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(free -g | awk '/Mem:/ {print $2}') GB"
linked=$(ldd "$BIN/avaprep" | awk '{print $1}' | grep -E '^lib(torch|c10|cuda|cudart|cublas|cudnn|nvrtc)' || true)
if [ -n "$linked" ]; then
  echo "FAIL: avaprep links $linked" >&2
  exit 1
fi
echo "ldd avaprep: $(ldd "$BIN/avaprep" | wc -l) libraries, none of them torch or CUDA; without FFmpeg: $(ldd "$LEAN" | wc -l)"

python3 - "$RUNS" <<PY
import os, statistics, sys, time
runs = int(sys.argv[1])
commands = {
    "avaprep --version": ["$BIN/avaprep", "--version"],
    "avaprep validate --help": ["$BIN/avaprep", "validate", "--help"],
    "no-FFmpeg build --version": ["$LEAN", "--version"],
    "no-FFmpeg validate --help": ["$LEAN", "validate", "--help"],
    "C program linking libav": ["$work/libav-floor"],
    "avaprep-train --version": ["$BIN/avaprep-train", "--version"],
}
null = os.open(os.devnull, os.O_WRONLY)
wall = {name: [] for name in commands}
rss = {name: [] for name in commands}
for _ in range(runs):
    for name, argv in commands.items():
        started = time.perf_counter()
        pid = os.posix_spawn(argv[0], argv, os.environ, file_actions=[
            (os.POSIX_SPAWN_DUP2, null, 1), (os.POSIX_SPAWN_DUP2, null, 2)])
        _, status, usage = os.wait4(pid, 0)
        wall[name].append((time.perf_counter() - started) * 1000)
        rss[name].append(usage.ru_maxrss / 1024)
        assert os.waitstatus_to_exitcode(status) == 0, f"{name} failed"
print(f"{'command':<27} {'wall ms, median (range)':<26} peak RSS MB, median")
for name in commands:
    w = sorted(wall[name])
    print(f"{name:<27} {statistics.median(w):6.1f} ({w[0]:.1f}-{w[-1]:.1f}){'':<8} {statistics.median(rss[name]):6.1f}")
data = statistics.median(wall["avaprep --version"])
floor = statistics.median(wall["C program linking libav"])
trainer = statistics.median(wall["avaprep-train --version"])
print(f"ratio avaprep --version / avaprep-train --version (baseline): {data / trainer:.3f} wall, "
      f"{statistics.median(rss['avaprep --version']) / statistics.median(rss['avaprep-train --version']):.3f} memory")
print(f"ratio avaprep --version / the libav floor: {data / floor:.2f}")
PY
