"""Reads avaprep's frame lists and annotations with PySlowFast's own config and `Ava` dataset (the
`slowfast==1.0` package: FAIR's PySlowFast) and checks that the clip it takes for every keyframe
is centred on the extracted frame nearest that keyframe's time, by the frames' burned-in code.

The config is PySlowFast's defaults merged with avaprep's `slowfast/ava.yaml` by
`merge_from_file`, so a key it does not know, or a value of the wrong type, fails here.
PySlowFast hard-codes AVA's clock (row p shows 900 + p/30 s, keyframes 902..1798); the synthetic
miniature's segment starts elsewhere, so its annotation seconds are moved by the same offset into
a copy of the annotation folder. The loader's code runs unchanged.

usage: pyslowfast_ava.py DATA_DIR SPLIT [CONFIG]   (SPLIT: train or val; CONFIG: a file in
DATA_DIR/slowfast/, ava.yaml unless named)
prints one JSON object: {"clips": N, "frames_per_clip": [...], "mismatches": [...]}; exit 1 on a
mismatch.
"""

import json
import sys
import tempfile
from pathlib import Path

import numpy as np
from PIL import Image

import slowfast.datasets.utils as sf_utils
from slowfast.config.defaults import _assert_and_infer_cfg, get_cfg
from slowfast.datasets.ava_dataset import Ava

sys.path.insert(0, str(Path(__file__).parent))
from frame_code import frame_code, luma_of, nearest_frame_code  # noqa: E402

AVA_START = 900


def shifted_annotations(source, target, offset):
    """A copy of the annotation folder with every CSV's second moved by `offset`."""
    for path in source.iterdir():
        text = path.read_text()
        if path.suffix == ".csv":
            lines = []
            for line in text.splitlines():
                fields = line.split(",")
                fields[1] = str(int(fields[1]) + offset)
                lines.append(",".join(fields))
            text = "\n".join(lines) + "\n"
        (target / path.name).write_text(text)


def pyslowfast_config(path):
    """PySlowFast's defaults merged with `path` (an unknown key or a value of the wrong type
    fails), then its config assertions. The `slowfast` package on PyPI is PySlowFast as of 2019;
    its GitHub main, which a multi-GPU user runs, has since added MODEL.MODEL_NAME and
    MODEL.HEAD_ACT (defaults "SlowFast" and "softmax") and made SOLVER.WARMUP_EPOCHS a float
    (0.0). A training config for main meets those three: only they are brought up to main."""
    cfg = get_cfg()
    cfg.MODEL.MODEL_NAME = "SlowFast"
    cfg.MODEL.HEAD_ACT = "softmax"
    cfg.SOLVER.WARMUP_EPOCHS = 0.0
    cfg.merge_from_file(str(path))
    return _assert_and_infer_cfg(cfg)


def main():
    data, split = Path(sys.argv[1]), sys.argv[2]
    config = sys.argv[3] if len(sys.argv) > 3 else "ava.yaml"
    timing = json.loads((data / "slowfast" / "lists.json").read_text())
    offset = AVA_START - int(timing["segment_start"])
    cfg = pyslowfast_config(data / "slowfast" / config)
    cfg.MODEL.NUM_CLASSES = 80
    # The synthetic detector's scores are low; keep every box (a PySlowFast key).
    cfg.AVA.DETECTION_SCORE_THRESH = 0.0
    loaded = []
    original_load = sf_utils.retry_load_images

    def recording_load(image_paths, *args, **kwargs):
        loaded.append(list(image_paths))
        return original_load(image_paths, *args, **kwargs)

    sf_utils.retry_load_images = recording_load
    with tempfile.TemporaryDirectory() as annotations:
        shifted_annotations(Path(cfg.AVA.ANNOTATION_DIR), Path(annotations), offset)
        cfg.AVA.ANNOTATION_DIR = annotations
        dataset = Ava(cfg, split)
        clips, lengths, mismatches = 0, set(), []
        for i in range(len(dataset)):
            loaded.clear()
            frames, _labels, _index, extra = dataset[i]
            paths = loaded[0]
            lengths.add(len(paths))
            video_idx, _sec_idx, second, _centre = dataset._keyframe_indices[i]
            video = dataset._video_idx_to_name[video_idx]
            seconds = second - offset
            middle = np.asarray(Image.open(paths[len(paths) // 2]).convert("RGB"), dtype=np.float64)
            got = frame_code(luma_of(middle))
            expected = nearest_frame_code(data, video, seconds)
            clips += 1
            if got is None or got != expected:
                mismatches.append({"video": video, "second": seconds, "code": got, "expected": expected})
            # SlowFast's two pathways: the fast one holds every frame of the clip.
            assert frames[-1].shape[1] == cfg.DATA.NUM_FRAMES and len(extra["boxes"]) > 0
    print(json.dumps({"clips": clips, "frames_per_clip": sorted(lengths), "mismatches": mismatches}))
    sys.exit(1 if mismatches else 0)


if __name__ == "__main__":
    main()
