#!/usr/bin/env bash
# Benchmark: avaprep fetch against curl on the loopback mirror (avaprep serve), same run, same files.
#   1. large files: avaprep (one transfer at a time) vs sequential curl; target >= 0.90x curl, for the
#      fetch-videos stage (bytes / seconds: transfer, sha256, libav probe) and for the whole command
#      (process start-up, manifest, plan and state included).
#   2. many files from a server that limits each connection (as CDNs and object stores do; here the
#      mirror's throttle, 4 MiB/s per connection): avaprep --jobs 8 vs sequential curl; target a
#      large factor
#   3. a transfer dropped at 50%: bytes the server sent for that file / its size; target 1.00
# Prints every measurement and ratio. Needs ~2.5 GB of free space under $TMPDIR.
set -euo pipefail
cd "$(dirname "$0")/../.."
eval "$(scripts/setup.sh)" >/dev/null
cargo build --release --locked -q --bin avaprep
# The download tests' fault server (throttling, dropped transfers), built only for tests and benchmarks.
cargo build --release --locked -q -p avaprep-cli --features fault-injection --bin avaprep-fault-server
avaprep=$PWD/target/release/avaprep
fault_server=$PWD/target/release/avaprep-fault-server
work=$(mktemp -d "${TMPDIR:-/tmp}/avaprep-bench-fetch.XXXXXX")
cleanup() { [ -f "$work/pids" ] && xargs -r kill <"$work/pids" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
mirror=$work/mirror
mkdir -p "$mirror/ava-dataset/annotations" "$mirror/ava-dataset/trainval"

echo "== making the mirror (real videos, made with the ffmpeg CLI)" >&2
# A high-bitrate clip (noise defeats compression) concatenated into two large files, and 32 small ones.
ffmpeg -loglevel error -f lavfi -i "testsrc2=size=1280x720:rate=30:duration=5" \
  -vf "noise=alls=60:allf=t" -c:v libx264 -preset ultrafast -crf 8 "$work/clip.mkv"
printf "file '%s'\n" $(for _ in $(seq 4); do echo "$work/clip.mkv"; done) >"$work/concat.txt"
big=(Big00000000 Big00000001)
for id in "${big[@]}"; do
  ffmpeg -loglevel error -f concat -safe 0 -i "$work/concat.txt" -c copy "$mirror/ava-dataset/trainval/$id.mkv"
done
ffmpeg -loglevel error -f lavfi -i "testsrc2=size=640x360:rate=30:duration=4" \
  -vf "noise=alls=40:allf=t" -c:v libx264 -preset ultrafast -crf 18 "$work/small.mkv"
small=()
for n in $(seq -w 0 31); do
  id="Small0000${n}"
  small+=("$id")
  cp "$work/small.mkv" "$mirror/ava-dataset/trainval/$id.mkv"
done

python3 - "$mirror" "${big[@]}" "${small[@]}" <<'PY'
import hashlib, os, sys, zipfile
mirror, ids = sys.argv[1], sys.argv[2:]
ann = os.path.join(mirror, "ava-dataset", "annotations")
files = {
    "ava_train_v2.2.csv": "".join(f"{i},0002,0.100,0.100,0.500,0.900,1,0\n" for i in ids),
    "ava_train_excluded_timestamps_v2.2.csv": "",
    "ava_action_list_v2.2.pbtxt": 'label {\n  name: "move"\n  label_id: 1\n  label_type: PERSON_MOVEMENT\n}\n',
    "ava_action_list_v2.2_for_activitynet_2019.pbtxt": 'item {\n  name: "move"\n  id: 1\n}\n',
    "ava_included_timestamps_v2.2.txt": "".join(f"{s:04d}\n" for s in range(1, 4)),
}
with zipfile.ZipFile(os.path.join(ann, "ava_v2.2.zip"), "w") as z:
    for name, text in files.items():
        z.writestr(name, text)
with open(os.path.join(ann, "ava_file_names_trainval_v2.1.txt"), "w") as f:
    f.write("".join(f"{i}.mkv\n" for i in ids))
manifest = """[dataset]
name = "fetch benchmark"
version = "1"
segment = [0.0, 4.0]
keyframes = [1, 3]
[sources.ava]
url = "http://127.0.0.1:1/ava-dataset/"
mirror_path = "ava-dataset/"
[annotations]
source = "ava"
path = "annotations/ava_v2.2.zip"
[name_lists.trainval]
source = "ava"
path = "annotations/ava_file_names_trainval_v2.1.txt"
[videos.trainval]
source = "ava"
path = "trainval/"
name_list = "trainval"
[labels]
full = "ava_action_list_v2.2.pbtxt"
scored = "ava_action_list_v2.2_for_activitynet_2019.pbtxt"
included_timestamps = "ava_included_timestamps_v2.2.txt"
[splits.train]
videos = "trainval"
ground_truth = "ava_train_v2.2.csv"
excluded_timestamps = "ava_train_excluded_timestamps_v2.2.csv"
"""
open(os.path.join(mirror, "manifest.toml"), "w").write(manifest)
PY
printf "%s\n" "${big[@]}" >"$work/big.txt"
printf "%s\n" "${small[@]}" >"$work/small.txt"
big_bytes=$(cat "$mirror"/ava-dataset/trainval/Big*.mkv | wc -c)
small_bytes=$(cat "$mirror"/ava-dataset/trainval/Small*.mkv | wc -c)

# Starts `avaprep serve`, or the fault server with a fault plan, and prints its URL.
serve() {
  local plan=$1 log
  log=$(mktemp -p "$work")
  if [ -n "$plan" ]; then
    echo "$plan" >"$log.plan"
    "$fault_server" "$mirror" "$log.plan" >"$log" 2>/dev/null &
  else
    "$avaprep" --json serve "$mirror" --port 0 --stats >"$log" 2>/dev/null &
  fi
  echo $! >>"$work/pids"
  for _ in $(seq 100); do
    url=$(sed -n 's/.*"url":"\([^"]*\)".*/\1/p' "$log")
    [ -n "$url" ] && { echo "$url"; return; }
    sleep 0.05
  done
  echo "server did not start" >&2
  exit 1
}

seconds() { python3 -c 'import sys,time; print(f"{time.time():.3f}")'; }
elapsed() { python3 -c "print(f'{$2 - $1:.2f}')"; }

fetch_avaprep() { # data-dir base-url list jobs; prints the fetch-videos stage's seconds
  "$avaprep" --json --data-dir "$1" fetch --dataset "$mirror/manifest.toml" --base-url "$2" \
    --split train --video-list "$3" --jobs "$4" |
    python3 -c 'import json,sys; print([r for r in map(json.loads, sys.stdin) if r.get("stage") == "fetch-videos"][0]["seconds"])'
}
fetch_curl() { # out-dir base-url list
  mkdir -p "$1"
  while read -r id; do
    curl -sf -o "$1/$id.mkv" "${2}ava-dataset/trainval/$id.mkv"
  done <"$3"
}

plain=$(serve "")
echo "== 1. large files: $(python3 -c "print(f'{$big_bytes/2**20:.0f}')") MiB in ${#big[@]} files, 3 rounds" >&2
# Annotations first, so the timed avaprep run is the videos alone.
"$avaprep" -q --data-dir "$work/a1" fetch --dataset "$mirror/manifest.toml" --base-url "$plain" --split train --annotations-only >/dev/null
export -f fetch_avaprep
export avaprep mirror work
timed() { # out-file command...: runs the command, appends "wall cpu" (cpu = user + system)
  local out=$1; shift
  sync
  /usr/bin/time -f "%e %U %S" -o "$work/time" "$@"
  awk '{ printf "%s %.2f\n", $1, $2 + $3 }' "$work/time" >>"$out"
}
for _ in 1 2 3; do
  mkdir -p "$work/c1"
  timed "$work/curl.times" bash -c 'while read -r id; do curl -sf -o "$1/$id.mkv" "${2}ava-dataset/trainval/$id.mkv"; done <"$3"' _ "$work/c1" "$plain" "$work/big.txt"
  rm -rf "$work/c1"; mkdir -p "$work/c1"
  # The same work as avaprep's (transfer, write, sha256) with the usual tools.
  timed "$work/curlsha.times" bash -c 'while read -r id; do curl -sf "${2}ava-dataset/trainval/$id.mkv" | tee "$1/$id.mkv" | sha256sum >/dev/null; done <"$3"' _ "$work/c1" "$plain" "$work/big.txt"
  rm -rf "$work/c1" "$work/a1/videos" "$work/a1/.avaprep/downloads/videos" "$work/a1/.avaprep/state/fetch-videos.json"
  timed "$work/avaprep.times" bash -c 'fetch_avaprep "$@" >>"$work/stage.times"' _ "$work/a1" "$plain" "$work/big.txt" 1
done
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
curl_large=$(cut -d' ' -f1 "$work/curl.times" | median)
curl_large_cpu=$(cut -d' ' -f2 "$work/curl.times" | median)
curlsha_large=$(cut -d' ' -f1 "$work/curlsha.times" | median)
stage_large=$(median <"$work/stage.times")
avaprep_large=$(cut -d' ' -f1 "$work/avaprep.times" | median)
avaprep_large_cpu=$(cut -d' ' -f2 "$work/avaprep.times" | median)

echo "== 2. many files: ${#small[@]} files, 4 MiB/s per connection" >&2
throttled=$(serve '{"rules":[{"path":"/ava-dataset/trainval/*","fault":{"slow":4194304}}]}')
"$avaprep" -q --data-dir "$work/a2" fetch --dataset "$mirror/manifest.toml" --base-url "$throttled" --split train --annotations-only >/dev/null
t0=$(seconds); fetch_curl "$work/c2" "$throttled" "$work/small.txt"; t1=$(seconds)
curl_many=$(elapsed "$t0" "$t1")
t0=$(seconds); fetch_avaprep "$work/a2" "$throttled" "$work/small.txt" 8 >/dev/null; t1=$(seconds)
avaprep_many=$(elapsed "$t0" "$t1")

echo "== 3. a transfer dropped at 50%" >&2
first=${big[0]}
size=$(stat -c %s "$mirror/ava-dataset/trainval/$first.mkv")
dropping=$(serve "{\"rules\":[{\"path\":\"/ava-dataset/trainval/$first.mkv\",\"fault\":{\"drop_after_bytes\":$((size / 2))},\"first\":1}]}")
echo "$first" >"$work/first.txt"
"$avaprep" -q --data-dir "$work/a3" fetch --dataset "$mirror/manifest.toml" --base-url "$dropping" --split train --video-list "$work/first.txt" >/dev/null 2>&1
sent=$(curl -s "${dropping}__avaprep/stats" | python3 -c "import json,sys; print(json.load(sys.stdin)['paths']['/ava-dataset/trainval/$first.mkv']['body_bytes'])")
cmp "$work/a3/videos/trainval/$first.mkv" "$mirror/ava-dataset/trainval/$first.mkv"

python3 - <<PY
mib = 2**20
print("fetch benchmark on $(nproc) cores, loopback mirror served by avaprep serve")
print(f"large files ({$big_bytes/mib:.0f} MiB, medians of 3 rounds): curl {$curl_large} s ({$big_bytes/mib/$curl_large:.0f} MiB/s, {$curl_large_cpu} s CPU); avaprep fetch-videos {$stage_large:.2f} s ({$big_bytes/mib/$stage_large:.0f} MiB/s), whole command {$avaprep_large} s ({$avaprep_large_cpu} s CPU, sha256 included)")
print(f"  ratio avaprep/curl throughput: {$curl_large/$stage_large:.2f}  (target >= 0.90); whole command: {$curl_large/$avaprep_large:.2f}  (target >= 0.90)")
print(f"  curl | tee | sha256sum, the same work as avaprep's: {$curlsha_large} s ({$big_bytes/mib/$curlsha_large:.0f} MiB/s); ratio avaprep/that: {$curlsha_large/$stage_large:.2f}")
print(f"many files ({${#small[@]}} x {$small_bytes/${#small[@]}/mib:.1f} MiB, 4 MiB/s per connection): sequential curl {$curl_many} s, avaprep --jobs 8 {$avaprep_many} s")
print(f"  speed-up of avaprep over sequential curl: {$curl_many/$avaprep_many:.1f}x")
print(f"resume after a drop at 50%: the server sent {$sent} bytes for a {$size}-byte file")
print(f"  ratio sent/size: {$sent/$size:.3f}  (target 1.000: only the missing half is sent again)")
PY
