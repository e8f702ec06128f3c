"""Reads avaprep's pytorchvideo view with pytorchvideo's own `Ava` dataset (pytorchvideo==0.1.5)
and checks that the clip it returns for every keyframe is centred on the extracted frame nearest
that keyframe's time. The synthetic frames carry a burned-in code of their source frame, so the
check compares content, not file names.

usage: pytorchvideo_ava.py DATA_DIR SPLIT CLIP_FRAMES
prints one JSON object: {"clips": N, "frames_per_clip": [...], "mismatches": [...]}; exit 1 on a
mismatch.
"""

import json
import sys
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from pytorchvideo.data import make_clip_sampler
from pytorchvideo.data.ava import Ava, AvaLabeledVideoFramePaths

BLOCKS, DATA_BITS = 20, 17


def frame_code(luma):
    """The synthetic frame code (see crates/avaprep/src/synth/code.rs): 20 blocks along the top edge, a white
    and a black marker, 17 bits MSB first, an even-parity bit; None if it does not read."""
    height, width = luma.shape
    bw = width // BLOCKS
    bh = max(bw // 2, 8)
    x_in, y_in = bw // 4, bh // 4
    bits = []
    for b in range(BLOCKS):
        block = luma[y_in : bh - y_in, b * bw + x_in : (b + 1) * bw - x_in]
        bits.append(block.mean() > 128)
    index = 0
    for bit in bits[2 : 2 + DATA_BITS]:
        index = (index << 1) | int(bit)
    parity = sum(bits[2 : 2 + DATA_BITS]) % 2 == 1
    if not (bits[0] and not bits[1] and bits[-1] == parity):
        return None
    return index


def luma_of(rgb):
    """rgb: H x W x 3 in 0..255."""
    return 0.299 * rgb[..., 0] + 0.587 * rgb[..., 1] + 0.114 * rgb[..., 2]


def nearest_frame(index_csv, seconds):
    """The frame whose target time is nearest `seconds`, the earlier on a tie (avaprep's rule)."""
    best = None
    for line in index_csv.read_text().splitlines()[1:]:
        fields = line.split(",")
        frame, target = int(fields[0]), float(fields[1])
        distance = abs(target - seconds)
        if best is None or distance < best[0] - 1e-9:
            best = (distance, frame)
    return best[1]


def nearest_frame_code(data, video, seconds):
    """The code of the extracted frame nearest `seconds`, read from its JPEG with PIL."""
    frame = nearest_frame(data / "frame_index" / f"{video}.csv", seconds)
    jpeg = data / "frames" / video / f"{video}_{frame:06d}.jpg"
    return frame_code(luma_of(np.asarray(Image.open(jpeg).convert("RGB"), dtype=np.float64)))


def main():
    data, split, clip_frames = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    timing = json.loads((data / "slowfast" / "lists.json").read_text())
    start = timing["segment_start"]
    first, last = timing["keyframes"]
    # pytorchvideo hard-codes AVA's clock: time 0 of a frame folder is second 900 and keyframes
    # are 902..1798. The synthetic miniature has its own segment; the loader's code is unchanged.
    AvaLabeledVideoFramePaths.AVA_VIDEO_START_SEC = start
    AvaLabeledVideoFramePaths.AVA_VALID_FRAMES = list(range(first, last + 1))
    dataset = Ava(
        frame_paths_file=str(data / "pytorchvideo" / "frame_lists" / f"{split}.csv"),
        frame_labels_file=str(data / "slowfast" / "annotations" / f"ava_{split}_v2.2.csv"),
        video_path_prefix=str(data / "pytorchvideo" / "frames"),
        clip_sampler=make_clip_sampler("uniform", clip_frames / 30.0),
        video_sampler=torch.utils.data.SequentialSampler,
    )
    clips, lengths, mismatches = 0, set(), []
    for sample in dataset:
        video = sample["video_name"]
        second = start + float(sample["clip_index"])
        frames = sample["video"]  # C x T x H x W, float 0..255
        length = frames.shape[1]
        lengths.add(length)
        middle = frames[:, length // 2].permute(1, 2, 0).numpy()
        got = frame_code(luma_of(middle))
        expected = nearest_frame_code(data, video, second)
        clips += 1
        if got is None or got != expected:
            mismatches.append({"video": video, "second": second, "code": got, "expected": expected})
    print(json.dumps({"clips": clips, "frames_per_clip": sorted(lengths), "mismatches": mismatches}))
    sys.exit(1 if mismatches else 0)


if __name__ == "__main__":
    main()
