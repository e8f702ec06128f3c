#!/usr/bin/env python3
"""Reference AVA frame-mAP from mmaction2's copy of the ActivityNet evaluator.

Used by the Rust tests to check `avaprep`'s evaluator. It loads only
`mmaction/evaluation/functional/ava_utils.py` and its `ava_evaluation`
package (the rest of mmaction needs mmengine/mmcv, which are not installed),
then runs the steps of mmaction2's `ava_eval` with `ignore_empty_frames=False`
(detections on keyframes without ground truth are false positives, as in the
official evaluator), without its process pool, and prints per-class AP as
JSON on stdout:

    {"mean_ap": 0.31, "classes": [{"id": 1, "name": "...", "ap": 0.5}, ...]}

`ap` is null for a class without ground truth. Known differences from the
official evaluator, kept on purpose so this stays mmaction2's computation:
- with --exclusions, ground truth on excluded keyframes still counts in each
  class's total (give it pre-filtered files instead);
- no cap of 50 detections per keyframe;
- a class with ground truth but no detections is missing from the output
  (the official evaluator gives it AP 0);
- boxes and scores are float32, so an IoU within ~1e-7 of 0.5 may fall on
  the other side of the threshold than in float64.

Usage: reference_ava_eval.py LABELMAP GROUNDTRUTH DETECTIONS [EXCLUSIONS]
"""

import importlib.util
import json
import math
import sys
import types
from collections import defaultdict

import numpy as np

# metrics.py returns `np.NAN` for classes without ground truth; NumPy 2
# removed that alias.
if not hasattr(np, "NAN"):
    np.NAN = np.nan

PACKAGE = "_mmaction_ava_reference"


def load_ava_utils():
    """Imports ava_utils.py as a submodule of a stub package, so its relative
    imports of `ava_evaluation` resolve without running mmaction/__init__.py."""
    spec = importlib.util.find_spec("mmaction")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("mmaction2 is not installed in this Python environment")
    root = list(spec.submodule_search_locations)[0]
    functional = f"{root}/evaluation/functional"
    package = types.ModuleType(PACKAGE)
    package.__path__ = [functional]
    sys.modules[PACKAGE] = package
    return importlib.import_module(f"{PACKAGE}.ava_utils")


def evaluate(ava, labelmap_path, gt_path, det_path, exclusions_path):
    with open(labelmap_path) as f:
        categories, class_whitelist = ava.read_labelmap(f)
    with open(gt_path) as f:
        gt_boxes, gt_labels, _ = ava.read_csv(f, class_whitelist)
    with open(det_path) as f:
        boxes, labels, scores = ava.read_csv(f, class_whitelist)
    excluded = set()
    if exclusions_path:
        with open(exclusions_path) as f:
            excluded = ava.read_exclusions(f)

    all_gt_labels = np.concatenate([np.asarray(v) for v in gt_labels.values()])
    gt_count = {k: np.sum(all_gt_labels == k) for k in class_whitelist}

    empty = np.zeros((0, 4), dtype=np.float32)
    per_class_scores, per_class_tpfp = defaultdict(list), defaultdict(list)
    for key in boxes:
        if key in excluded:
            continue
        frame = (gt_boxes.get(key, empty), gt_labels.get(key, []), boxes[key],
                 labels[key], scores[key])
        frame_scores, frame_tpfp = ava.tpfp_single(frame)
        for k in frame_scores:
            per_class_scores[k].append(frame_scores[k])
            per_class_tpfp[k].append(frame_tpfp[k])

    names = {c["id"]: c["name"] for c in categories}
    classes = []
    for k in per_class_scores:
        precision, recall = ava.metrics.compute_precision_recall(
            np.concatenate(per_class_scores[k]),
            np.concatenate(per_class_tpfp[k]), gt_count[k])
        ap = ava.metrics.compute_average_precision(precision, recall)
        classes.append({"id": int(k), "name": names[k], "ap": finite(ap)})
    mean = np.nanmean([c["ap"] if c["ap"] is not None else np.nan
                       for c in classes]) if classes else np.nan
    return {"mean_ap": finite(mean), "classes": sorted(classes, key=lambda c: c["id"])}


def finite(x):
    x = float(x)
    return None if math.isnan(x) else x


def main(argv):
    if len(argv) not in (4, 5):
        sys.exit(__doc__)
    exclusions = argv[4] if len(argv) == 5 else None
    result = evaluate(load_ava_utils(), argv[1], argv[2], argv[3], exclusions)
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(sys.argv)
