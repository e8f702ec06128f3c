"""Times and scores frame extraction on film-like videos (natural_videos.py); see extract-natural.sh.

    extract_natural.py WORK AVAPREP SECONDS ROUNDS FPS HEIGHT
"""

import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import time

import av
import numpy as np
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
SAMPLED_FRAMES = 40
# libjpeg-turbo at these qualities on the same frames, to compare with libav's mjpeg at q 2.
LIBJPEG_QUALITIES = [86, 88, 90, 92, 94]


def timed(command):
    """Wall and CPU seconds (user + system, all threads) of one command."""
    start = time.monotonic()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.monotonic() - start
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"failed: {' '.join(command)}")
    return wall, usage.ru_utime + usage.ru_stime


def make_data_dir(directory, videos, seconds):
    """A data directory as `avaprep fetch` leaves it: the videos and a plan naming them."""
    shutil.rmtree(directory, ignore_errors=True)
    os.makedirs(os.path.join(directory, "videos", "trainval"))
    os.makedirs(os.path.join(directory, "work"))
    entries = []
    for video in videos:
        stem, ext = os.path.splitext(os.path.basename(video))
        video_id = stem.ljust(11, "x")[:11]
        os.link(video, os.path.join(directory, "videos", "trainval", video_id + ext))
        entries.append({"id": video_id, "file_name": video_id + ext, "folder": "trainval", "split": "train",
                        "keyframes": [int(seconds) // 2]})
    plan = {"segment": [0.0, float(seconds)], "keyframes": [1, int(seconds) - 1], "videos": entries}
    with open(os.path.join(directory, "work", "videos.json"), "w") as f:
        json.dump(plan, f)


def avaprep_extract(args, out, jobs):
    return [args["avaprep"], "-q", "--data-dir", out, "extract", "--fps", f"{args['fps']:g}",
            "--height", str(args["height"]), "--quality", "2", "--ranges", "segment", "--jobs", str(jobs)]


def ffmpeg_jpeg(args, video, out):
    scale = f"fps={args['fps']:g},scale=-2:'min({args['height']},ih)'"
    return ["ffmpeg", "-nostdin", "-loglevel", "error", "-threads", "1", "-filter_threads", "1",
            "-i", video, "-vf", scale, "-q:v", "2", os.path.join(out, "%06d.jpg")]


def together(tool, videos, out, args):
    """All videos, two at a time: avaprep's own workers, or the ffmpeg CLI under xargs -P 2."""
    if tool == "avaprep":
        make_data_dir(out, videos, args["seconds"])
        return avaprep_extract(args, out, 2)
    shutil.rmtree(out, ignore_errors=True)
    tasks = []
    for video in videos:
        folder = os.path.join(out, os.path.basename(video))
        os.makedirs(folder)
        tasks.append(shlex.join(ffmpeg_jpeg(args, video, folder)))
    with open(out + ".tasks", "w") as f:
        f.write("\n".join(tasks) + "\n")
    return ["xargs", "-P", "2", "-d", "\\n", "-n", "1", "-a", out + ".tasks", "sh", "-c"]


def commands(tool, video, out, args):
    if tool == "avaprep":
        make_data_dir(out, [video], args["seconds"])
        return avaprep_extract(args, out, 1)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    if tool == "ffmpeg":
        return ffmpeg_jpeg(args, video, out)
    if tool == "floor":
        return ["ffmpeg", "-nostdin", "-loglevel", "error", "-threads", "1", "-i", video, "-f", "null", "-"]
    if tool == "python":
        return [sys.executable, os.path.join(HERE, "pyav_extract.py"), video, out, f"{args['fps']:g}",
                str(args["height"])]
    raise ValueError(tool)


def jpegs(directory):
    found = []
    for root, _, files in os.walk(directory):
        found += [os.path.join(root, name) for name in files if name.endswith(".jpg")]
    return sorted(found)


def planes(frame):
    """The Y, Cb, Cr planes of a 4:2:0 frame as arrays, padding cut."""
    return [np.frombuffer(p, np.uint8).reshape(p.height, p.line_size)[:, : p.width].astype(np.float64)
            for p in frame.planes]


def decode_jpeg(path):
    with av.open(path) as container:
        return planes(next(container.decode(video=0)))


def nearest_frames(video, instants, size):
    """The source frame nearest each instant (ties to the later), scaled as the extractors scale:
    swscale bicubic to full-range 4:2:0."""
    chosen, previous = {}, None
    wanted = list(instants)
    with av.open(video) as container:
        stream = container.streams.video[0]
        start = stream.start_time * stream.time_base if stream.start_time is not None else 0
        for frame in container.decode(stream):
            t = float(frame.pts * stream.time_base - start)
            while wanted and t >= wanted[0]:
                target = wanted.pop(0)
                pick = previous if previous is not None and target - previous[0] < t - target else (t, frame)
                chosen[target] = pick[1].reformat(width=size[0], height=size[1], format="yuvj420p",
                                                  interpolation="BICUBIC")
            previous = (t, frame)
            if not wanted:
                break
    return [chosen[t] for t in instants if t in chosen]


def psnr(mse):
    return 10 * np.log10(255.0 ** 2 / mse) if mse > 0 else float("inf")


def score(references, decoded):
    """PSNR of luma and of all samples, over all frames."""
    y_err = all_err = y_n = all_n = 0.0
    for ref, got in zip(references, decoded):
        for i, (a, b) in enumerate(zip(ref, got)):
            err = float(((a - b) ** 2).sum())
            all_err += err
            all_n += a.size
            if i == 0:
                y_err += err
                y_n += a.size
    return psnr(y_err / y_n), psnr(all_err / all_n)


def libav_q2(references, size, out):
    """Today's encoder on the very frames: libav's mjpeg at -q:v 2, from the same planes."""
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    encoder = subprocess.Popen(
        ["ffmpeg", "-nostdin", "-loglevel", "error", "-f", "rawvideo", "-pix_fmt", "yuvj420p",
         "-s", f"{size[0]}x{size[1]}", "-i", "-", "-q:v", "2", os.path.join(out, "%06d.jpg")],
        stdin=subprocess.PIPE)
    for frame in references:
        for p in planes(frame):
            encoder.stdin.write(p.astype(np.uint8).tobytes())
    encoder.stdin.close()
    encoder.wait()
    return jpegs(out)


def libjpeg_turbo(references, quality_value, out):
    """libjpeg-turbo (Pillow's) at a quality, from the same planes: chroma repeated to full size,
    which its 4:2:0 averaging turns back into the very samples; no RGB on the way."""
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    files = []
    for n, frame in enumerate(references):
        y, cb, cr = (p.astype(np.uint8) for p in planes(frame))
        h, w = y.shape
        full = [np.repeat(np.repeat(c, 2, axis=0), 2, axis=1)[:h, :w] for c in (cb, cr)]
        image = Image.fromarray(np.dstack([y, *full]), mode="YCbCr")
        files.append(os.path.join(out, f"{n:06d}.jpg"))
        image.save(files[-1], quality=quality_value, subsampling=2)
    return files


def quality(video, outs, args):
    """PSNR and bytes per frame of avaprep, today's libav q2 and the Python extractor, on sampled
    frames, each against the source frame it shows."""
    ours = jpegs(outs["avaprep"] + "/frames")
    python = jpegs(outs["python"])
    step = max(1, len(ours) // SAMPLED_FRAMES)
    picks = list(range(0, min(len(ours), len(python)), step))[:SAMPLED_FRAMES]
    first = decode_jpeg(ours[0])[0]
    size = (first.shape[1], first.shape[0])
    references = nearest_frames(video, [k / args["fps"] for k in picks], size)
    rows = {}
    for name, files in [("avaprep", [ours[k] for k in picks]), ("python", [python[k] for k in picks]),
                        ("libav q2", libav_q2(references, size, outs["avaprep"] + ".q2"))] + [
                        (f"libjpeg-turbo Q{q}", libjpeg_turbo(references, q, outs["avaprep"] + f".tj{q}"))
                        for q in LIBJPEG_QUALITIES]:
        y, overall = score([planes(r) for r in references], [decode_jpeg(f) for f in files])
        rows[name] = (y, overall, statistics.mean(os.path.getsize(f) for f in files))
    return rows


def main():
    work, avaprep, seconds, rounds, fps, height = sys.argv[1:7]
    args = {"avaprep": avaprep, "seconds": float(seconds), "fps": float(fps), "height": int(height)}
    subprocess.run([sys.executable, os.path.join(HERE, "natural_videos.py"), os.path.join(work, "videos"), seconds],
                   check=True)
    videos = sorted(name for name in os.listdir(os.path.join(work, "videos")) if ".part" not in name)
    tools = ["avaprep", "ffmpeg", "floor", "python"]
    times = {(v, t): [] for v in videos for t in tools}
    paths = [os.path.join(work, "videos", v) for v in videos]
    both = {"avaprep": [], "ffmpeg": []}
    for round_index in range(int(rounds)):
        # Alternate: each round starts with another tool, so drift on the machine falls on all.
        order = tools[round_index % len(tools):] + tools[: round_index % len(tools)]
        for video in videos:
            for tool in order:
                out = os.path.join(work, "out", f"{video}.{tool}")
                times[(video, tool)].append(timed(commands(tool, os.path.join(work, "videos", video), out, args)))
        for tool in (["avaprep", "ffmpeg"] if round_index % 2 == 0 else ["ffmpeg", "avaprep"]):
            both[tool].append(timed(together(tool, paths, os.path.join(work, "out", f"all.{tool}"), args)))
    print(f"{len(videos)} videos of {args['seconds']:g} s, every frame of the segment at {fps} fps, "
          f"height {height}; medians of {rounds} alternating rounds, [min-max]; one process per tool, "
          f"one video at a time; ffmpeg with -threads 1")
    print(f"\nall {len(videos)} videos, two at a time (avaprep --jobs 2: one decoder thread a video,"
          " all cores for the last one; the ffmpeg CLI under xargs -P 2, -threads 1)")
    print(f"  {'':22} {'wall s':>16} {'CPU s':>16}")
    for tool, runs in both.items():
        walls, cpus = [w for w, _ in runs], [c for _, c in runs]
        print(f"  {tool:22} {statistics.median(walls):6.2f} [{min(walls):.2f}-{max(walls):.2f}]"
              f" {statistics.median(cpus):6.2f} [{min(cpus):.2f}-{max(cpus):.2f}]")
    ratio = [statistics.median([r[i] for r in both["avaprep"]]) / statistics.median([r[i] for r in both["ffmpeg"]])
             for i in (0, 1)]
    print(f"  {'avaprep / ffmpeg':22} {ratio[0]:16.3f} {ratio[1]:16.3f}")
    for video in videos:
        path = os.path.join(work, "videos", video)
        outs = {t: os.path.join(work, "out", f"{video}.{t}") for t in tools}
        with av.open(path) as container:
            stream = container.streams.video[0]
            desc = f"{stream.codec_context.name} {stream.width}x{stream.height}"
        print(f"\n{video} ({desc}, {os.path.getsize(path) * 8 / args['seconds'] / 1e6:.2f} Mbit/s)")
        print(f"  {'':22} {'wall s':>16} {'CPU s':>16}")
        med = {}
        for tool in tools:
            walls = [w for w, _ in times[(video, tool)]]
            cpus = [c for _, c in times[(video, tool)]]
            med[tool] = (statistics.median(walls), statistics.median(cpus))
            print(f"  {tool:22} {med[tool][0]:6.2f} [{min(walls):.2f}-{max(walls):.2f}]"
                  f" {med[tool][1]:6.2f} [{min(cpus):.2f}-{max(cpus):.2f}]")
        for base in ["ffmpeg", "floor", "python"]:
            print(f"  {'avaprep / ' + base:22} {med['avaprep'][0] / med[base][0]:16.3f}"
                  f" {med['avaprep'][1] / med[base][1]:16.3f}")
        print(f"  {'avaprep wall / CPU':22} {med['avaprep'][0] / med['avaprep'][1]:16.3f}")
        print(f"  {'bytes per frame':22} avaprep {statistics.mean(os.path.getsize(f) for f in jpegs(outs['avaprep'])):.0f},"
              f" ffmpeg CLI {statistics.mean(os.path.getsize(f) for f in jpegs(outs['ffmpeg'])):.0f}")
        for name, (y, overall, size) in quality(path, outs, args).items():
            print(f"  {'PSNR ' + name:22} Y {y:.2f} dB, all {overall:.2f} dB, {size:.0f} B/frame")


if __name__ == "__main__":
    main()
