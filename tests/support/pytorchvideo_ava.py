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

import torch
from pytorchvideo.data import make_clip_sampler
from pytorchvideo.data.ava import Ava, AvaLabeledVideoFramePaths

sys.path.insert(0, str(Path(__file__).parent))
from frame_code import frame_code, luma_of, nearest_frame_code  # noqa: E402


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
