"""Mirrors of AVA at full length, with AVA-format annotations (a keyframe every second over
902..1798, person boxes with actions, a detector's boxes), the official label maps, and a
manifest with every size and sha256.

    rehearsal_mirror.py CACHE_DIR MIRROR_DIR
        scripts/bench/ava-rehearsal.sh's: six videos as long as AVA's (1,802 s), film-like (slow
        pans and zooms over scikit-image's photographs, a cut every 4 s, film grain, as
        scripts/bench/natural_videos.py makes them), in the sizes and containers AVA holds; the
        videos are made once into CACHE_DIR.
    rehearsal_mirror.py --shape-of-ava SOURCE MIRROR_DIR
        scripts/bench/ava-fullsize.sh's: AVA's 299 trainval videos (235 train, 64 val), each a
        hard link to SOURCE, a video at least 1,802 s long.
"""

import hashlib
import io
import os
import random
import shutil
import subprocess
import sys
import tarfile
import zipfile

import cv2
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from natural_videos import images, scene_transform  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SECONDS = 1802
SCENE_SECONDS = 4
SEGMENT = (900.0, 1801.0)
KEYFRAMES = (902, 1798)
X264 = ["-c:v", "libx264", "-preset", "veryfast", "-profile:v", "high", "-tune", "film", "-bf", "3", "-g", "250"]

# id, split, width, height, fps, file extension, encoder arguments, extra output arguments
VIDEOS = [
    ("rehearsal01", "train", 1280, 720, 30, "mkv", X264 + ["-b:v", "3M", "-maxrate", "4.5M", "-bufsize", "6M"], []),
    ("rehearsal02", "train", 1280, 720, 30, "mp4", X264 + ["-b:v", "3M", "-maxrate", "4.5M", "-bufsize", "6M"],
     # A container that starts later than 0, as some of AVA's files do.
     ["-output_ts_offset", "1.5"]),
    ("rehearsal03", "train", 640, 360, 30, "mkv", X264 + ["-b:v", "0.9M", "-maxrate", "1.35M", "-bufsize", "1.8M"], []),
    ("rehearsal04", "train", 640, 360, 25, "mp4", X264 + ["-b:v", "0.9M", "-maxrate", "1.35M", "-bufsize", "1.8M"], []),
    ("rehearsal05", "val", 640, 360, 30, "webm",
     ["-c:v", "libvpx-vp9", "-b:v", "0.8M", "-deadline", "realtime", "-cpu-used", "8", "-row-mt", "1", "-g", "250"], []),
    ("rehearsal06", "val", 1280, 720, 30, "mp4", X264 + ["-b:v", "3M", "-maxrate", "4.5M", "-bufsize", "6M"], []),
]


def write_video(path, width, height, fps, encoder_args, extra, pictures):
    """Frames drawn at 640x360 and scaled by ffmpeg (bicubic) with grain added there: the same
    look as natural_videos.py at a fraction of the drawing cost, which at full length matters."""
    rng = np.random.default_rng(11)
    draw_w, draw_h = 640, 360
    tmp = path + ".part." + path.rsplit(".", 1)[1]
    scale = [] if (width, height) == (draw_w, draw_h) else [f"scale={width}:{height}:flags=bicubic"]
    filters = ",".join(scale + ["noise=alls=6:allf=t", "format=yuv420p"])
    encoder = subprocess.Popen(
        ["ffmpeg", "-nostdin", "-y", "-loglevel", "error", "-f", "rawvideo", "-pix_fmt", "rgb24",
         "-s", f"{draw_w}x{draw_h}", "-r", str(fps), "-i", "-", "-vf", filters, *encoder_args, *extra, tmp],
        stdin=subprocess.PIPE,
    )
    frames_per_scene = fps * SCENE_SECONDS
    scene = None
    for n in range(SECONDS * fps):
        if n % frames_per_scene == 0:
            image = pictures[(n // frames_per_scene) % len(pictures)]
            scene = (image, (rng.uniform(1.0, 1.3), rng.uniform(1.3, 1.8), rng.uniform(0, 1, 2), rng.uniform(0, 1, 2)))
        image, motion = scene
        progress = (n % frames_per_scene) / frames_per_scene
        matrix = scene_transform(image, draw_w, draw_h, progress, motion)
        frame = cv2.warpAffine(image, matrix, (draw_w, draw_h), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REFLECT)
        encoder.stdin.write(frame.tobytes())
    encoder.stdin.close()
    if encoder.wait() != 0:
        sys.exit(f"ffmpeg failed on {path}")
    os.replace(tmp, path)


def annotations(videos, rng):
    """Ground truth and a detector's boxes of `videos` (id, split), in AVA's formats."""
    tables = {"train": [], "val": []}
    detections = {"train": [], "val": []}
    first, last = KEYFRAMES
    for video, split in videos:
        person = 0
        for second in range(first, last + 1):
            for _ in range(rng.randint(1, 3)):
                x1, y1 = rng.uniform(0.0, 0.6), rng.uniform(0.0, 0.5)
                x2, y2 = x1 + rng.uniform(0.15, 0.4), y1 + rng.uniform(0.3, 0.5)
                box = f"{x1:.3f},{y1:.3f},{min(x2, 1.0):.3f},{min(y2, 1.0):.3f}"
                for action in rng.sample([1, 3, 4, 5, 8, 9, 11, 12, 13, 14, 15, 17, 20, 22, 27, 29, 30, 32], rng.randint(1, 2)):
                    tables[split].append(f"{video},{second:04d},{box},{action},{person}")
                detections[split].append(f"{video},{second:04d},{box},,{rng.uniform(0.8, 1.0):.6f}")
                person += 1
    return tables, detections


def sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return os.path.getsize(path), digest.hexdigest()


def main():
    if sys.argv[1] == "--shape-of-ava":
        source, mirror = sys.argv[2], sys.argv[3]
        ext = source.rsplit(".", 1)[1]
        videos = [(f"fullsize{n:03d}", "train" if n < 235 else "val", ext) for n in range(299)]
        write_mirror(mirror, videos, lambda video, ext: source)
        return
    cache, mirror = sys.argv[1], sys.argv[2]
    os.makedirs(cache, exist_ok=True)
    pictures = None
    for video, _, width, height, fps, ext, encoder, extra in VIDEOS:
        path = os.path.join(cache, f"{video}.{ext}")
        if not os.path.exists(path):
            pictures = pictures or images()
            print(f"rehearsal: making {path} ({SECONDS} s, {width}x{height}, {fps} fps)", file=sys.stderr, flush=True)
            write_video(path, width, height, fps, encoder, extra, pictures)
    videos = [(video, split, ext) for video, split, _, _, _, ext, _, _ in VIDEOS]
    write_mirror(mirror, videos, lambda video, ext: os.path.join(cache, f"{video}.{ext}"))


def write_mirror(mirror, videos, source_of):
    """The mirror of `videos` (id, split, extension), each file a hard link to `source_of`."""
    rng = random.Random(5)
    tables, detections = annotations([(video, split) for video, split, _ in videos], rng)
    ava = os.path.join(mirror, "ava-dataset")
    trainval = os.path.join(ava, "trainval")
    os.makedirs(trainval, exist_ok=True)
    os.makedirs(os.path.join(ava, "test"), exist_ok=True)
    names = []
    for video, _, ext in videos:
        name = f"{video}.{ext}"
        target = os.path.join(trainval, name)
        if not os.path.exists(target):
            os.link(source_of(video, ext), target)
        names.append(name)
    first_train = next(video for video, split, _ in videos if split == "train")
    first_val = next(video for video, split, _ in videos if split == "val")
    official = os.path.join(REPO, "tests", "data", "ava")
    files = {
        "ava_train_v2.2.csv": "\n".join(tables["train"]) + "\n",
        "ava_val_v2.2.csv": "\n".join(tables["val"]) + "\n",
        # As in AVA, a few keyframes excluded from scoring.
        "ava_train_excluded_timestamps_v2.2.csv": f"{first_train},0950\n",
        "ava_val_excluded_timestamps_v2.2.csv": f"{first_val},1200\n",
        "ava_test_excluded_timestamps_v2.2.csv": "testvideo99,0950\n",
        "ava_test_v2.2.txt": "testvideo99\n",
    }
    for name in ["ava_action_list_v2.2.pbtxt", "ava_action_list_v2.2_for_activitynet_2019.pbtxt", "ava_included_timestamps_v2.2.txt"]:
        files[name] = open(os.path.join(official, name)).read()
    annotation_dir = os.path.join(ava, "annotations")
    os.makedirs(annotation_dir, exist_ok=True)
    zip_path = os.path.join(annotation_dir, "ava_v2.2.zip")
    with zipfile.ZipFile(zip_path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, text in sorted(files.items()):
            info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, text)
    with open(os.path.join(annotation_dir, "ava_file_names_trainval_v2.1.txt"), "w") as f:
        f.write("\n".join(names) + "\n")
    with open(os.path.join(annotation_dir, "ava_file_names_test_v2.1.txt"), "w") as f:
        f.write("")
    tar_dir = os.path.join(mirror, "pyslowfast", "annotation", "ava")
    os.makedirs(tar_dir, exist_ok=True)
    tar_path = os.path.join(tar_dir, "ava_annotations.tar")
    with tarfile.open(tar_path, "w") as archive:
        for folder in ["ava_annotations/", "ava_annotations/person_box_67091280_iou90/"]:
            info = tarfile.TarInfo(folder.rstrip("/"))
            info.type = tarfile.DIRTYPE
            info.mode = 0o755
            archive.addfile(info)
        for split, name in [("train", "ava_detection_train_boxes_and_labels_include_negative_v2.2.csv"),
                            ("val", "ava_detection_val_boxes_and_labels.csv")]:
            data = ("\n".join(detections[split]) + "\n").encode()
            info = tarfile.TarInfo(f"ava_annotations/person_box_67091280_iou90/{name}")
            info.size = len(data)
            info.mode = 0o644
            archive.addfile(info, io.BytesIO(data))
    write_manifest(mirror, files, zip_path, tar_path)


def write_manifest(mirror, files, zip_path, tar_path):
    def entry(path):
        size, digest = sha256(path)
        return f"size = {size}\nsha256 = \"{digest}\"\n"

    lines = [
        "[dataset]", 'name = "avaprep full-length rehearsal"', 'version = "rehearsal-1"',
        f"segment = [{SEGMENT[0]}, {SEGMENT[1]}]", f"keyframes = [{KEYFRAMES[0]}, {KEYFRAMES[1]}]", "",
        "[sources.ava]", 'url = "http://127.0.0.1:8000/ava-dataset/"', 'mirror_path = "ava-dataset/"', "",
        "[sources.pyslowfast]", 'url = "http://127.0.0.1:8000/pyslowfast/"', 'mirror_path = "pyslowfast/"', "",
        "[annotations]", 'source = "ava"', 'path = "annotations/ava_v2.2.zip"', entry(zip_path),
    ]
    for name, text in sorted(files.items()):
        digest = hashlib.sha256(text.encode()).hexdigest()
        lines += ["[[annotations.contents]]", f'name = "{name}"', f"size = {len(text.encode())}", f'sha256 = "{digest}"', ""]
    ava = os.path.join(mirror, "ava-dataset", "annotations")
    for split in ["test", "trainval"]:
        path = os.path.join(ava, f"ava_file_names_{split}_v2.1.txt")
        lines += [f"[name_lists.{split}]", 'source = "ava"', f'path = "annotations/ava_file_names_{split}_v2.1.txt"', entry(path)]
    lines += ["[boxes]", 'source = "pyslowfast"', 'path = "annotation/ava/ava_annotations.tar"', entry(tar_path).rstrip(),
              'strip_prefix = "ava_annotations/"', ""]
    lines += ["[videos.test]", 'source = "ava"', 'path = "test/"', 'name_list = "test"', "",
              "[videos.trainval]", 'source = "ava"', 'path = "trainval/"', 'name_list = "trainval"', "",
              "[labels]", 'full = "ava_action_list_v2.2.pbtxt"', 'scored = "ava_action_list_v2.2_for_activitynet_2019.pbtxt"',
              'included_timestamps = "ava_included_timestamps_v2.2.txt"', "",
              "[splits.test]", 'videos = "test"', 'video_ids = "ava_test_v2.2.txt"',
              'excluded_timestamps = "ava_test_excluded_timestamps_v2.2.csv"', "",
              "[splits.train]", 'videos = "trainval"', 'ground_truth = "ava_train_v2.2.csv"',
              'excluded_timestamps = "ava_train_excluded_timestamps_v2.2.csv"',
              'detected_boxes = "person_box_67091280_iou90/ava_detection_train_boxes_and_labels_include_negative_v2.2.csv"', "",
              "[splits.val]", 'videos = "trainval"', 'ground_truth = "ava_val_v2.2.csv"',
              'excluded_timestamps = "ava_val_excluded_timestamps_v2.2.csv"',
              'detected_boxes = "person_box_67091280_iou90/ava_detection_val_boxes_and_labels.csv"', ""]
    with open(os.path.join(mirror, "manifest.toml"), "w") as f:
        f.write("\n".join(lines))


if __name__ == "__main__":
    main()
