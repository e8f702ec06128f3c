#!/usr/bin/env bash
# The newcomer's two commands, timed as a newcomer runs them: each in its own clone of HEAD in an
# empty temporary folder (no target/, no .venv/, no data/), with its own empty TMPDIR (no test
# data left in /tmp by an earlier run), one after the other. Cargo's and pip's download caches
# stay, as on a machine that has fetched the crates and wheels before (this machine has no
# internet but the registries). Each command's targets, from the README: the demo within 13
# minutes and at val mAP >= 0.7, the test command within 25 minutes, every test passing.
#
#   scripts/bench/fresh-clone.sh [demo] [test]        (default: both)
#
# Prints, for each command, its exit status, wall time and CPU time (user + system, by GNU time,
# which scripts/setup.sh installs); for the demo, its val mAP. The logs stay in the temporary
# folder it names; each clone goes once its command is done (a clone's build, Python packages and
# test data take 6 to 13 GB, and a few runs left behind fill the disk).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
commands=("$@")
[ ${#commands[@]} -gt 0 ] || commands=(demo test)
for command in "${commands[@]}"; do
  case "$command" in
    demo | test) ;;
    *) echo "fresh-clone: unknown command '$command' (demo or test)" >&2; exit 2 ;;
  esac
done
[ -x /usr/bin/time ] || { echo "fresh-clone: GNU time is missing (scripts/setup.sh installs it)" >&2; exit 1; }
work=$(mktemp -d)
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(free -g | awk '/Mem:/ {print $2}') GB"
echo "commit: $(git -C "$ROOT" log -1 --format='%h %cs')"
echo "logs: $work"

minutes() { printf '%d min %d s' $(($1 / 60)) $(($1 % 60)); }

status=0
# An interrupted run leaves no clone behind either.
trap 'for command in "${commands[@]}"; do rm -rf "${work:?}/$command"; done' EXIT
for command in "${commands[@]}"; do
  clone="$work/$command/avaprep"
  mkdir -p "$work/$command/tmp"
  git clone --quiet "$ROOT" "$clone"
  log="$work/$command.log"
  times="$work/$command.times"
  started=$(date +%s)
  rc=0
  (cd "$clone" && TMPDIR="$work/$command/tmp" /usr/bin/time -f '%U %S' -o "$times" "scripts/$command.sh") >"$log" 2>&1 || rc=$?
  seconds=$(($(date +%s) - started))
  read -r user system <"$times" || { user=0; system=0; }
  cpu=$(awk -v u="$user" -v s="$system" 'BEGIN { printf "%.0f", u + s }')
  line="$command: exit $rc, $(minutes "$seconds") wall ($seconds s), CPU $(minutes "$cpu")"
  if [ "$command" = demo ]; then
    line+=", $(grep -ao 'val mAP [0-9.]* with the best weights' "$log" | tail -1)"
  else
    line+=", $(grep -a '^test result' "$log" | awk '{passed += $4; failed += $6} END {print passed " passed, " failed " failed"}')"
  fi
  echo "$line"
  rm -rf "${work:?}/$command"
  [ "$rc" -eq 0 ] || status=1
done
exit "$status"
