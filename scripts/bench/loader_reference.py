#!/usr/bin/env python3
"""pytorchvideo's AVA loader on avaprep's extracted frames (reference for scripts/bench/loader.sh).

    loader_reference.py --data-dir DIR [--passes N] [--json]

Loads N epochs of the train keyframes (ava_train_v2.2.csv less the excluded timestamps, those with
a frame within half a frame period, as avaprep) through pytorchvideo.data.Ava and a DataLoader
(batch 8, 2 workers of one thread each) doing avaprep's training work per clip: 16 consecutive
5 fps frames around the keyframe, JPEG decode, short side to 1/U(1/320, 1/256), random 224 crop,
horizontal flip with p = 0.5 (boxes follow), /255, normalise by 0.45/0.225, boxes with a batch
index column and multi-hot labels. Prints clips/s; every batch is checked to be [B, 3, 16, 224, 224]
with boxes inside the crop. Dataset construction (parsing the CSVs) is not timed, as in avaprep;
the DataLoader's workers start once, inside the timing.

How the 5 fps frames become pytorchvideo clips. Ava's frame-list file (PySlowFast format) only
names each video's frame directory: FrameVideo lists that directory, sorts it naturally and takes
the i-th file (0-based) as the frame at i/30 s, so writing paths twice in the list cannot change
what is decoded. A keyframe's clip is [centre - d/2, centre + d/2) and get_clip decodes listing
positions ceil(30 t0) .. ceil(30 t1) - 1. With d = 15.75/30 s and centre = (s - 0.25)/30 + d/2 s
(t0 = 0 when s = 0) that is exactly positions s .. s + 15, each decoded once. s is the listing
position of avaprep's centre frame (the frame nearest the keyframe) minus 8, so the keyframe is
frame 8 of 16 as in avaprep, clamped to the video; clips whose 16 files differ from avaprep's
(avaprep repeats edge frames instead) are counted in a note on stderr. The labels file carries
these virtual centres as its seconds, so Ava's 900 s offset and 902..1798 range check are disabled.

Differences from avaprep:
  - The main one, and the point of the comparison: pytorchvideo converts the whole decoded clip
    to float32 and resizes every full frame (F.interpolate, bilinear, no antialiasing) before
    cropping; avaprep resamples only the crop's source rectangle on uint8 (fast_image_resize,
    bilinear convolution) and converts the 224x224 result. Each library's own way, left as is.
  - Decoders: OpenCV's libjpeg-turbo here, zune-jpeg (the `image` crate's decoder) in avaprep.
  - Boxes: ground truth only (Ava reads one labels file); avaprep also adds the detector's boxes,
    so its clips carry more boxes and may include keyframes with detector boxes alone. Ava merges
    boxes equal to 2 decimals, avaprep exact ones.
  - Workers are processes (batches cross by shared memory) here, threads in avaprep. They start
    once and serve every pass (persistent_workers); avaprep starts its pool for each pass.
  - Box conventions: pytorchvideo clips to W - 1 and flips to W - 1 - x (PySlowFast's), avaprep
    uses continuous coordinates; no effect on speed.
"""

import argparse
import bisect
import csv
import json
import math
import os
import re
import sys
import tempfile
import time

import cv2
import numpy as np
import torch
import torchvision.transforms._functional_tensor as _functional_tensor

# pytorchvideo 0.1.5 imports a module that torchvision renamed in 0.17.
sys.modules.setdefault("torchvision.transforms.functional_tensor", _functional_tensor)

from pytorchvideo.data import Ava, make_clip_sampler  # noqa: E402
from pytorchvideo.data.ava import AvaLabeledVideoFramePaths  # noqa: E402
from pytorchvideo.transforms import Normalize  # noqa: E402
from pytorchvideo.transforms import functional as F  # noqa: E402

FRAMES = 16
CROP = 224
SHORT = (256, 320)
BATCH = 8
WORKERS = 2
FPS = 30  # pytorchvideo's frame rate for frame directories
DURATION = (FRAMES - 0.25) / FPS
MEAN, STD = 0.45, 0.225


def natural_key(name):
    """FrameVideo.from_directory's sort."""
    return [int(c) if c.isdigit() else c for c in re.split(r"(\d+)", name)]


class FrameIndex:
    """frame_index/<id>.csv with avaprep's nearest-frame rule (the earlier on a tie)."""

    def __init__(self, path):
        with open(path) as f:
            rows = list(csv.DictReader(f))
        self.frames = [int(r["frame"]) for r in rows]
        self.times = [float(r["target_seconds"]) for r in rows]
        self.period = (self.times[-1] - self.times[0]) / (self.frames[-1] - self.frames[0])

    def nearest(self, t):
        i = bisect.bisect_left(self.times, t)
        if i == 0:
            return 0
        if i == len(self.times) or t - self.times[i - 1] <= self.times[i] - t:
            return i - 1
        return i

    def covers(self, t):
        return abs(self.times[self.nearest(t)] - t) <= self.period * 0.5 + 1e-6

    def clip(self, t):
        """avaprep's 16 frame numbers for a keyframe at t."""
        steps = range(-(FRAMES // 2), FRAMES - FRAMES // 2)
        return [self.frames[self.nearest(t + i * self.period)] for i in steps]


def read_excluded(path):
    if not os.path.exists(path):
        return set()
    with open(path) as f:
        return {(row[0], int(float(row[1]))) for row in csv.reader(f) if row}


def class_ids(label_map):
    return sorted(AvaLabeledVideoFramePaths.read_label_map(label_map)[1])


def write_inputs(data_dir, out):
    """The frame-list and labels files for Ava; returns (frame list, labels, clips, clamped)."""
    ann = os.path.join(data_dir, "annotations")
    excluded = read_excluded(os.path.join(ann, "ava_train_excluded_timestamps_v2.2.csv"))
    frames_dir = os.path.join(data_dir, "frames")
    indexes, listings = {}, {}
    rows, centres, clamped = [], {}, 0
    with open(os.path.join(ann, "ava_train_v2.2.csv")) as f:
        for row in csv.reader(f):
            video, second = row[0], int(float(row[1]))
            if (video, second) in excluded:
                continue
            if video not in indexes:
                index_path = os.path.join(data_dir, "frame_index", f"{video}.csv")
                indexes[video] = FrameIndex(index_path) if os.path.exists(index_path) else None
                if indexes[video] is not None:
                    names = sorted(os.listdir(os.path.join(frames_dir, video)), key=natural_key)
                    listings[video] = {name: i for i, name in enumerate(names)}
            index = indexes[video]
            if index is None or not index.covers(second):
                continue
            key = (video, second)
            if key not in centres:
                wanted = index.clip(second)
                names = listings[video]
                centre = names[f"{video}_{wanted[FRAMES // 2]:06d}.jpg"]
                start = min(max(centre - FRAMES // 2, 0), len(names) - FRAMES)
                window = [names[f"{video}_{k:06d}.jpg"] for k in wanted]
                clamped += window != list(range(start, start + FRAMES))
                t0 = 0.0 if start == 0 else (start - 0.25) / FPS
                centres[key] = f"{t0 + DURATION / 2:.9f}"
            rows.append([video, centres[key], *row[2:]])
    frame_list = os.path.join(out, "frame_list.txt")
    with open(frame_list, "w") as f:
        f.write("original_vido_id video_id frame_id path labels\n")
        for n, (video, names) in enumerate(sorted(listings.items())):
            for name, i in sorted(names.items(), key=lambda item: item[1]):
                f.write(f'{video} {n} {i} {video}/{name} ""\n')
    labels = os.path.join(out, "train_labels.csv")
    with open(labels, "w") as f:
        csv.writer(f, lineterminator="\n").writerows(rows)
    return frame_list, labels, len(centres), clamped


class ClipTransform:
    """avaprep's training augmentation with pytorchvideo's functional transforms."""

    def __init__(self, classes):
        self.column = {c: i for i, c in enumerate(classes)}
        self.normalize = Normalize((MEAN,) * 3, (STD,) * 3)

    def __call__(self, sample):
        video = sample["video"]  # [3, T, H, W] float32 in [0, 255], T = images decoded
        _, _, h, w = video.shape
        boxes = np.asarray(sample["boxes"], dtype=np.float32) * np.float32([w, h, w, h])
        short = round(1.0 / np.random.uniform(1.0 / SHORT[1], 1.0 / SHORT[0]))
        video, boxes = F.short_side_scale_with_boxes(video, boxes, short)
        video, boxes = F.random_crop_with_boxes(video, CROP, boxes)
        video, boxes = F.horizontal_flip_with_boxes(0.5, video, boxes)
        video = self.normalize(F.div_255(video))
        targets = torch.zeros(len(boxes), len(self.column))
        for i, labels in enumerate(sample["labels"]):
            for label in labels:
                targets[i, self.column[label]] = 1.0
        return {"video": video, "boxes": torch.from_numpy(boxes), "targets": targets}


def collate(samples):
    """Clips stacked; boxes as (batch index, x1, y1, x2, y2) in input pixels, as avaprep's."""
    boxes = [
        torch.cat([torch.full((len(s["boxes"]), 1), float(i)), s["boxes"]], dim=1)
        for i, s in enumerate(samples)
    ]
    return {
        "video": torch.stack([s["video"] for s in samples]),
        "boxes": torch.cat(boxes),
        "targets": torch.cat([s["targets"] for s in samples]),
    }


def worker_init(_):
    torch.set_num_threads(1)
    cv2.setNumThreads(1)


def check(batch):
    video, boxes = batch["video"], batch["boxes"]
    assert video.shape[1:] == (3, FRAMES, CROP, CROP) and video.dtype == torch.float32, video.shape
    assert len(boxes) >= video.shape[0] and boxes.shape[1] == 5, boxes.shape
    assert boxes[:, 0].unique().numel() == video.shape[0], "a clip without boxes"
    assert boxes[:, 1:].min() >= 0 and boxes[:, 1:].max() <= CROP, "a box outside the crop"
    assert batch["targets"].shape[0] == len(boxes)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--passes", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    # The virtual centres are small numbers of seconds, not AVA's 902..1798.
    AvaLabeledVideoFramePaths.AVA_VIDEO_START_SEC = 0
    AvaLabeledVideoFramePaths.AVA_VALID_FRAMES = [0.0, math.inf]
    torch.manual_seed(0)
    np.random.seed(0)
    ann = os.path.join(args.data_dir, "annotations")
    label_map = os.path.join(ann, "ava_action_list_v2.2.pbtxt")
    with tempfile.TemporaryDirectory(prefix="loader-reference.") as tmp:
        frame_list, labels, keyframes, clamped = write_inputs(args.data_dir, tmp)
        dataset = Ava(
            frame_paths_file=frame_list,
            frame_labels_file=labels,
            video_path_prefix=os.path.join(args.data_dir, "frames"),
            label_map_file=label_map,
            clip_sampler=make_clip_sampler("random", DURATION),
            transform=ClipTransform(class_ids(label_map)),
        )
        if clamped:
            print(f"note: {clamped} of {keyframes} clips are not avaprep's frames: past the ends "
                  "of (or across gaps in) the extracted frames avaprep repeats the nearest frame, "
                  "pytorchvideo takes 16 consecutive files", file=sys.stderr)
        started = time.perf_counter()
        loader = torch.utils.data.DataLoader(
            dataset,
            batch_size=BATCH,
            num_workers=WORKERS,
            collate_fn=collate,
            worker_init_fn=worker_init,
            persistent_workers=True,
        )
        clips = 0
        for _ in range(args.passes):
            for batch in loader:
                check(batch)
                clips += batch["video"].shape[0]
        seconds = time.perf_counter() - started
    # Ava skips a clip it cannot load rather than failing.
    assert clips == keyframes * args.passes, (clips, keyframes, args.passes)
    result = {
        "clips": clips,
        "seconds": round(seconds, 4),
        "clips_per_second": round(clips / seconds, 3),
        "frames_per_clip": FRAMES,
        "crop": CROP,
        "workers": WORKERS,
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(f"pytorchvideo Ava loader: {clips} clips in {seconds:.2f} s, "
              f"{clips / seconds:.1f} clips/s ({keyframes} keyframes x {args.passes} passes)")


if __name__ == "__main__":
    main()
