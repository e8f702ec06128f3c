#!/usr/bin/env bash
# The main job on the embedded default dataset, with no internet: installs what is missing, builds
# avaprep, makes a synthetic miniature of AVA (real videos, AVA-format annotations), serves it over
# HTTP on 127.0.0.1, and runs pipelines/demo.toml against it. Re-running skips what is done.
set -euo pipefail
cd "$(dirname "$0")/.."
eval "$(scripts/setup.sh)"
cargo build --release --locked
avaprep=target/release/avaprep
data=data/demo

if [ ! -f "$data/mirror/manifest.toml" ]; then
  "$avaprep" synth --out "$data/mirror" --video-count 12 --seed 1
fi

# The server prints its URL as a JSON record; port 0 lets the system choose a free port.
server_log=$(mktemp)
"$avaprep" --json serve "$data/mirror" --port 0 >"$server_log" &
server=$!
trap 'kill $server 2>/dev/null; rm -f "$server_log"' EXIT
for _ in $(seq 50); do
  url=$(sed -n 's/.*"url":"\([^"]*\)".*/\1/p' "$server_log")
  [ -n "$url" ] && break
  sleep 0.1
done
[ -n "$url" ] || { echo "demo: the mirror server did not start" >&2; exit 1; }

# fetch -> parse -> extract -> lists -> validate -> train -> eval; a re-run redoes only what changed.
"$avaprep" --data-dir "$data" run pipelines/demo.toml --set "fetch.base_url=[\"$url\"]"
echo
"$avaprep" --data-dir "$data" status pipelines/demo.toml --set "fetch.base_url=[\"$url\"]"
echo
# The page to look at: counts, boxes per class, validation, keyframes with boxes and detections.
"$avaprep" --data-dir "$data" report
