#!/usr/bin/env bash
# Benchmark of frame extraction against the ffmpeg CLI doing the same job, same machine, same run.
#
#   scripts/bench/extract.sh [WORKDIR]        (env: JOBS=2 DUR=120 FPS=5 HEIGHT=480)
#
# Generates (once, cached in WORKDIR) 120 s test videos with the ffmpeg CLI: H.264 with B-frames
# at 360p, 480p and 720p and one VP9 at 480p; then, for a dense case (keyframes every second over
# most of the video, as AVA) and a sparse one (four keyframes), times
#   A      the ffmpeg CLI: -ss/-t per range, fps=5, scale to 480 (no upscaling), -q:v 2;
#   floor  the ffmpeg CLI decoding the same ranges to null;
#   ours   `avaprep extract` on a data directory holding the same videos and keyframes.
# All use JOBS processes/videos at once with one decoder thread each. Wall and CPU time (user +
# system, children included) are both reported: on a shared machine CPU time is the steadier one.
set -euo pipefail

WORK=${1:-/tmp/avaprep-bench-extract}
JOBS=${JOBS:-2}
DUR=${DUR:-120}
FPS=${FPS:-5}
HEIGHT=${HEIGHT:-480}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
(cd "$ROOT" && eval "$(scripts/setup.sh)" >/dev/null && cargo build --release --locked --quiet)
AVAPREP="$ROOT/target/release/avaprep"
mkdir -p "$WORK/videos"

# --- test videos: moving test pattern plus temporal noise (camera-like), 5 s GOPs --------------
gen() { # name size codec-args...
  local out="$WORK/videos/$1" size=$2; shift 2
  [[ -s "$out" ]] && return 0
  ffmpeg -nostdin -y -loglevel error -f lavfi \
    -i "testsrc2=size=$size:rate=30,noise=alls=6:allf=t,format=yuv420p" -t "$DUR" "$@" "$out.tmp.${out##*.}"
  mv "$out.tmp.${out##*.}" "$out"
}
X264=(-c:v libx264 -preset veryfast -crf 23 -bf 3 -g 150)
gen h264_720.mp4 1280x720 "${X264[@]}" &
gen h264_360.mp4 640x360 "${X264[@]}" &
wait
gen h264_480.mp4 854x480 "${X264[@]}" &
gen vp9_480.webm 854x480 -c:v libvpx-vp9 -deadline realtime -cpu-used 8 -crf 32 -b:v 0 -g 150 -row-mt 0 &
wait
# Largest first so the last video does not run alone.
VIDEOS=("$WORK/videos/h264_720.mp4" "$WORK/videos/h264_480.mp4" "$WORK/videos/vp9_480.webm" "$WORK/videos/h264_360.mp4")

DENSE=$(seq -s, 10 $((DUR - 10)))
SPARSE="15,45,75,105"

# One ffmpeg CLI job: mode video start length outdir.
cat >"$WORK/cli_task.sh" <<TASK
#!/usr/bin/env bash
set -eu
mode=\$1 v=\$2 start=\$3 len=\$4 dir=\$5
if [[ \$mode == jpeg ]]; then
  mkdir -p "\$dir"
  exec ffmpeg -nostdin -loglevel error -threads 1 -ss "\$start" -t "\$len" -i "\$v" \\
    -vf "fps=$FPS,scale=-2:'min($HEIGHT,ih)'" -q:v 2 "\$dir/%06d.jpg"
fi
exec ffmpeg -nostdin -loglevel error -threads 1 -ss "\$start" -t "\$len" -i "\$v" -f null -
TASK
chmod +x "$WORK/cli_task.sh"

timed() { # file command...: wall, user and system seconds of the command and its children
  local file=$1; shift
  /usr/bin/time -f "%e %U %S %M" -o "$file" "$@"
}
wall() { awk '{print $1}' "$1"; }
cpu() { awk '{print $2 + $3}' "$1"; }

run_cli() { # mode outdir ranges-file: one ffmpeg per (video, range), JOBS at a time
  local mode=$1 out=$2 ranges=$3
  for v in "${VIDEOS[@]}"; do
    local i=0
    while read -r start len; do
      i=$((i + 1))
      echo "$mode $v $start $len $out/$(basename "${v%.*}")_$i"
    done <"$ranges"
  done >"$out.tasks"
  timed "$out.time" xargs -P "$JOBS" -L1 -a "$out.tasks" "$WORK/cli_task.sh"
}

bytes_per_frame() { # dir
  find "$1" -name '*.jpg' -printf '%s\n' | awk '{s += $1; n++} END {printf "%.0f %d\n", (n ? s / n : 0), n}'
}

# The ranges avaprep extracts: [t - 2, t + 2] around each keyframe, merged, clipped to the video.
print_ranges() { # keyframes (comma-separated)
  python3 - "$1" "$DUR" <<'PY'
import sys
keys, end = [int(k) for k in sys.argv[1].split(",")], float(sys.argv[2])
ranges = []
for t in keys:
    start, stop = max(0.0, t - 2.0), min(end, t + 2.0)
    if ranges and start <= ranges[-1][1]:
        ranges[-1][1] = max(ranges[-1][1], stop)
    else:
        ranges.append([start, stop])
for start, stop in ranges:
    print(f"{start:g} {stop - start:g}")
PY
}

# A data directory as `avaprep fetch` leaves it: the videos and the plan naming their keyframes.
make_data_dir() { # dir keyframes
  local dir=$1 keys=$2
  mkdir -p "$dir/videos/trainval" "$dir/work"
  local entries=()
  for v in "${VIDEOS[@]}"; do
    local base; base=$(basename "$v")
    # An 11-character id, as AVA's: h264_720.mp4 -> h264_720xxx
    local id; id=$(printf '%-11s' "${base%.*}" | tr ' ' x)
    ln -f "$v" "$dir/videos/trainval/$id.${base##*.}"
    entries+=("{\"id\":\"$id\",\"file_name\":\"$id.${base##*.}\",\"folder\":\"trainval\",\"split\":\"train\",\"keyframes\":[$keys]}")
  done
  local joined; joined=$(IFS=,; echo "${entries[*]}")
  echo "{\"segment\":[0.0,$DUR.0],\"keyframes\":[1,$((DUR - 1))],\"videos\":[$joined]}" >"$dir/work/videos.json"
}

bench_case() { # name keyframes
  local name=$1 keys=$2 dir="$WORK/$1"
  rm -rf "$dir"; mkdir -p "$dir"
  print_ranges "$keys" >"$dir/ranges.txt"
  local covered; covered=$(awk '{s += $2} END {print s}' "$dir/ranges.txt")
  echo "== $name: $(wc -l <"$dir/ranges.txt") ranges, ${covered} s of ${DUR} s per video, ${#VIDEOS[@]} videos, $JOBS at a time"

  run_cli null "$dir/floor" "$dir/ranges.txt"
  run_cli jpeg "$dir/cli" "$dir/ranges.txt"
  make_data_dir "$dir/data" "$keys"
  timed "$dir/ours.time" "$AVAPREP" -q --json --data-dir "$dir/data" extract --fps "$FPS" \
    --height "$HEIGHT" --quality 2 --jobs "$JOBS" >"$dir/ours.jsonl"
  local floor cli ours floor_cpu cli_cpu ours_cpu
  floor=$(wall "$dir/floor.time"); floor_cpu=$(cpu "$dir/floor.time")
  cli=$(wall "$dir/cli.time"); cli_cpu=$(cpu "$dir/cli.time")
  ours=$(wall "$dir/ours.time"); ours_cpu=$(cpu "$dir/ours.time")
  local rss_kb; rss_kb=$(awk '{print $4}' "$dir/ours.time")
  read -r ours_bpf ours_n < <(bytes_per_frame "$dir/data/frames")
  read -r cli_bpf cli_n < <(bytes_per_frame "$dir/cli")
  local decoded segment_frames
  decoded=$(grep -o '"source_frames_decoded":[0-9]*' "$dir/ours.jsonl" | awk -F: '{s += $2} END {print s}')
  segment_frames=$(grep -o '"segment_source_frames":[0-9]*' "$dir/ours.jsonl" | awk -F: '{s += $2} END {print s}')
  printf '  %-22s %8s %8s\n' "" "wall s" "CPU s"
  printf '  %-22s %8.2f %8.2f\n' "floor (decode only)" "$floor" "$floor_cpu"
  printf '  %-22s %8.2f %8.2f   %d JPEGs, %d B/frame\n' "A (ffmpeg CLI)" "$cli" "$cli_cpu" "$cli_n" "$cli_bpf"
  printf '  %-22s %8.2f %8.2f   %d JPEGs, %d B/frame; decoded %d of %d segment frames\n' \
    "ours" "$ours" "$ours_cpu" "$ours_n" "$ours_bpf" "$decoded" "$segment_frames"
  awk -v o="$ours" -v a="$cli" -v f="$floor" -v oc="$ours_cpu" -v ac="$cli_cpu" \
      -v fc="$floor_cpu" -v ob="$ours_bpf" -v ab="$cli_bpf" \
      -v rss="$rss_kb" -v jobs="$JOBS" 'BEGIN {
    printf "  %-22s %8.3f %8.3f   (target <= 0.6)\n", "ours / A", o / a, oc / ac
    printf "  %-22s %8.3f %8.3f   (target <= 1.15)\n", "ours / floor", o / f, oc / fc
    printf "  %-22s %8.3f            (target within 10%%)\n", "bytes/frame ours / A", ob / ab
    printf "  peak RSS %.1f MB for %d concurrent videos (%.1f MB each; target < 300)\n",
      rss / 1024, jobs, rss / 1024 / jobs
  }'
}

echo "machine: $(nproc) cores; ffmpeg $(ffmpeg -version | head -1 | awk '{print $3}')"
bench_case dense "$DENSE"
bench_case sparse "$SPARSE"

# Peak memory of one 720p video alone.
alone="$WORK/alone"
rm -rf "$alone"
VIDEOS=("$WORK/videos/h264_720.mp4")
make_data_dir "$alone" "$DENSE"
timed "$WORK/alone.time" "$AVAPREP" -q --data-dir "$alone" extract --fps "$FPS" --height "$HEIGHT" --jobs 1
awk '{printf "one 720p video alone (dense): %.2f s, peak RSS %.1f MB\n", $1, $4 / 1024}' "$WORK/alone.time"
