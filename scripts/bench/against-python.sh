# Sourced by the benchmarks that compare avaprep with a Python reference: builds the release
# binaries and defines AVAPREP, TRAINER, PY and `field KEY` (the value of KEY in the JSON line on stdin that
# has it). Expects ROOT to be the repository.
(cd "$ROOT" && eval "$(scripts/setup.sh)" >/dev/null && cargo build --release --locked --quiet)
AVAPREP="$ROOT/target/release/avaprep"
# The trainer executable holds the loader and training-step measurements.
TRAINER="$ROOT/target/release/avaprep-train"
PY="$ROOT/.venv/bin/python"
field() {
  "$PY" -c 'import json, sys; print(next(r[sys.argv[1]] for r in map(json.loads, sys.stdin) if sys.argv[1] in r))' "$1"
}
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); both sides on cores 0,1"
