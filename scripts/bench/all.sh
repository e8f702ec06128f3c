#!/usr/bin/env bash
# Runs every benchmark in scripts/bench/ in one go and writes BENCHMARKS.md from what they print:
# for each, what it compares and on what input (the script's own header), the machine, the
# command that reproduces it, and its output: the medians of its alternating rounds with their
# spread, and its ratios against the named baseline. A benchmark that measures each side once is
# run RUNS times, each run kept, so the spread shows across runs.
#
#   scripts/bench/all.sh            (env: RUNS=3 OUT=BENCHMARKS.md; ONLY="validate loader" runs
#                                    only those and replaces only their sections)
#
# Run it on an idle machine: the ratios hold across machines, the absolute times do not.
set -euo pipefail
cd "$(dirname "$0")/../.."
RUNS=${RUNS:-3}
OUT=${OUT:-BENCHMARKS.md}
# name, times to run it: the ones marked 1 alternate both sides over several rounds themselves.
benches=(startup:1 annotations:"$RUNS" validate:1 extract:1 extract-natural:1 fetch:1 loader:"$RUNS" train-step:1 ava-rehearsal:1 ava-fullsize:1 fresh-clone:1)

eval "$(scripts/setup.sh)" >/dev/null
cargo build --release --locked --quiet
# The loader benchmark reads the demo's frames.
[ -d data/demo/frame_index ] || scripts/demo.sh >&2

log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT

header() {
  # The script's leading comment, without its shebang.
  sed -n '2,/^[^#]/p' "$1" | grep '^#' | sed 's/^# \{0,1\}//'
}

machine="$(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs),"
machine+=" $(free -g | awk '/^Mem:/ {print $2}') GB memory,"
machine+=" FFmpeg $(ffmpeg -version | awk 'NR==1 {print $3}'), $(uname -sr)"

{
  echo "# Benchmarks"
  echo
  echo "Written by \`scripts/bench/all.sh\` on $(date -u +%Y-%m-%d); every figure the README quotes is"
  echo "here. Each benchmark measures avaprep and its named baseline in the same run, alternating, and"
  echo "prints the ratio; re-run one (its command is under its heading) to check a figure on another"
  echo "machine. The ratios, not the absolute times, carry over."
  echo
  echo "Machine: $machine."
} >"$log/head.md"

for entry in "${benches[@]}"; do
  name=${entry%%:*} times=${entry##*:}
  if [ -n "${ONLY:-}" ] && [[ " $ONLY " != *" $name "* ]]; then
    continue
  fi
  script=scripts/bench/$name.sh
  {
    echo
    echo "## $name"
    echo
    header "$script"
    echo
    echo "Run by \`scripts/bench/all.sh\` on $(date -u +%Y-%m-%d): $machine."
    echo
    echo "Command: \`$script\`$([ "$times" -gt 1 ] && echo " (run $times times here; each run below)")"
    echo
    echo '```text'
  } >"$log/$name.md"
  for run in $(seq "$times"); do
    echo "bench: $name, run $run of $times" >&2
    [ "$times" -gt 1 ] && echo "# run $run" >>"$log/$name.md"
    if ! "$script" 2>"$log/$name.err" | tee -a "$log/$name.md" >&2; then
      echo "bench: $name failed:" >&2
      cat "$log/$name.err" >&2
      exit 1
    fi
  done
  echo '```' >>"$log/$name.md"
done

# The file's heading stays (a new file gets one); each benchmark that ran replaces its section where
# it stands, except fresh-clone, whose runs accumulate (the spread between days is the point); every
# other section (the table of quoted figures, what the tests check, a benchmark not run this time,
# a GPU run) stays as it is; a benchmark new to the file goes at the end.
python3 - "$OUT" "$log" "${benches[@]%%:*}" <<'PY'
import os, re, sys

out, log, names = sys.argv[1], sys.argv[2], sys.argv[3:]


def measured(name):
    path = os.path.join(log, name + ".md")
    return open(path).read().strip("\n") if os.path.exists(path) else None


old = open(out).read() if os.path.exists(out) else ""
ACCUMULATED = {"fresh-clone"}
parts = re.split(r"(?m)^(?=## )", old)
sections = []
for part in parts[1:]:
    name = part.split("\n", 1)[0][3:].strip()
    new = measured(name)
    if new and name in ACCUMULATED:
        new = part.strip("\n") + "\n\n" + new.split("\n", 1)[1].strip("\n")
    sections.append((name, new or part.strip("\n")))
present = {name for name, _ in sections}
sections += [(name, measured(name)) for name in names if name not in present and measured(name)]
head = (parts[0] if old else open(os.path.join(log, "head.md")).read()).strip("\n")
with open(out + ".tmp", "w") as file:
    file.write("\n\n".join([head] + [text for _, text in sections]) + "\n")
PY
mv "$OUT.tmp" "$OUT"
echo "bench: wrote $OUT" >&2
