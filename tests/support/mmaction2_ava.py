"""Reads avaprep's mmaction2 view with mmaction2 1.2.0's own `AVADataset`, built from the config
avaprep wrote (mmengine's `Config.fromfile`) with that config's own `SampleAVAFrames` and
`RawFrameDecode`, and checks by the frames' burned-in code that the frame at the centre of the
clip it returns for every keyframe shows the extracted frame nearest the keyframe's time.

In test mode (val) the centre index is the keyframe's. In training `SampleAVAFrames` jitters each
index by its own random offset (`randint(-interval // 2, (interval + 1) // 2)`): there the drawn
offset must lie in that range and the centre must show the instant of the index drawn. It also
checks the proposals the dataset loaded from the pickle against the split's person-detector box
list: the same boxes and scores, one row per distinct box.

usage: mmaction2_ava.py DATA_DIR SPLIT   (SPLIT: train or val)
prints one JSON object: {"clips": N, "frames_per_clip": [...], "exact_centres": E,
"proposal_keys": P, "mismatches": [...]}; exit 1 on a mismatch.
"""

import contextlib
import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
from mmengine.config import Config
from mmengine.registry import init_default_scope

import mmaction.datasets  # noqa: F401  registers AVADataset and its transforms
from mmaction.registry import DATASETS

sys.path.insert(0, str(Path(__file__).parent))
from frame_code import frame_code, luma_of, nearest_frame_code  # noqa: E402


def detector_boxes(path):
    """img_key -> {box: score} from a box list (a train list repeats a box once per label)."""
    boxes = defaultdict(dict)
    for line in path.read_text().splitlines():
        fields = line.split(",")
        key = f"{fields[0]},{int(fields[1]):04d}"
        box = tuple(float(value) for value in fields[2:6])
        boxes[key][box] = max(boxes[key].get(box, 0.0), float(fields[7]))
    return boxes


def proposal_mismatches(dataset, boxes_csv):
    expected = detector_boxes(boxes_csv)
    found = dataset.proposals
    mismatches = []
    if set(found) != set(expected):
        mismatches.append({"proposal_keys": sorted(set(found) ^ set(expected))[:5]})
    for key, array in found.items():
        if array.dtype != np.float64 or array.ndim != 2 or array.shape[1] != 5:
            mismatches.append({"key": key, "array": str(array.dtype) + str(array.shape)})
            continue
        rows = {tuple(row[:4]): row[4] for row in array.tolist()}
        if len(rows) != len(array) or rows != expected.get(key):
            mismatches.append({"key": key, "proposals": array.tolist()})
    return len(found), mismatches


def main():
    data, split = Path(sys.argv[1]), sys.argv[2]
    # mmengine's logger writes to stdout; the report is stdout's only line.
    with contextlib.redirect_stdout(sys.stderr):
        report = check(data, split)
    print(json.dumps(report))
    sys.exit(1 if report["mismatches"] else 0)


def check(data, split):
    cfg = Config.fromfile(str(data / "mmaction2" / "ava.py"))
    dataset_cfg = cfg[f"{split}_dataloader"]["dataset"].copy()
    sample, decode = dataset_cfg["pipeline"][:2]
    assert sample["type"] == "SampleAVAFrames" and decode["type"] == "RawFrameDecode", dataset_cfg
    # The rest of the pipeline rescales and crops; the loading half is what the view must serve.
    dataset_cfg["pipeline"] = [sample, decode]
    init_default_scope("mmaction")
    dataset = DATASETS.build(dataset_cfg)
    fps, start = dataset_cfg["fps"], dataset_cfg["timestamp_start"]
    interval, centre = sample["frame_interval"], sample["clip_len"] // 2
    jitters = {0} if sample.get("test_mode") else set(range(-interval // 2, (interval + 1) // 2))
    np.random.seed(0)
    clips, exact, lengths, mismatches = 0, 0, set(), []
    for i in range(len(dataset)):
        results = dataset[i]
        video, second = results["video_id"], results["timestamp"]
        lengths.add(len(results["imgs"]))
        drawn = int(results["frame_inds"][centre])
        offset = drawn - fps * (second - start)
        middle = np.asarray(results["imgs"][centre], dtype=np.float64)
        got = frame_code(luma_of(middle))
        expected = nearest_frame_code(data, video, start + drawn / fps)
        clips += 1
        exact += offset == 0
        if offset not in jitters or got is None or got != expected:
            mismatches.append(
                {"video": video, "second": second, "offset": offset, "code": got, "expected": expected}
            )
    boxes = Path(dataset_cfg["proposal_file"]).name
    plan = json.loads((data / "work" / "videos.json").read_text())
    box_list = Path(plan["files"]["splits"][split]["detected_boxes"]).name
    proposal_keys, wrong = proposal_mismatches(dataset, data / "slowfast" / "annotations" / box_list)
    mismatches += wrong
    return {
        "clips": clips,
        "frames_per_clip": sorted(lengths),
        "exact_centres": exact,
        "proposal_file": boxes,
        "proposal_keys": proposal_keys,
        "mismatches": mismatches,
    }


if __name__ == "__main__":
    main()
