"""Checks avaprep's `slowfast/train.yaml` with PySlowFast itself (the `slowfast` package): its
config takes the file (pyslowfast_ava.pyslowfast_config: an unknown key fails, its assertions
run), and the SlowFast it builds from it is avaprep's R50 network: the weights of avaprep's
network (random, under avaprep's names, which export_checkpoint.py writes for PySlowFast) load
into it with no key missing, extra or of another shape, and give the same per-box probabilities
as pytorchvideo's model of avaprep's network (which gives avaprep's, tested elsewhere).

The 2019 package imports detectron2's ROIAlign, a wrapper of torchvision's roi_align with the
same arguments; torchvision's RoIAlign stands in for it (detectron2 has no wheel).

usage: pyslowfast_train.py DATA_DIR
prints one JSON object: {"config": {...}, "tensors": N, "max_relative_error": E}; exit 1 when the
networks differ.
"""

import json
import sys
import types
from pathlib import Path

import torch
import torchvision

detectron2 = types.ModuleType("detectron2")
detectron2.layers = types.ModuleType("detectron2.layers")
detectron2.layers.ROIAlign = torchvision.ops.RoIAlign
sys.modules["detectron2"] = detectron2
sys.modules["detectron2.layers"] = detectron2.layers

from slowfast.models.model_builder import _MODEL_TYPES  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[2] / "scripts"))
from convert_checkpoint import _rename_pytorchvideo  # noqa: E402
from export_checkpoint import PRESETS, pyslowfast_checkpoint, pytorchvideo_model  # noqa: E402
from pyslowfast_ava import pyslowfast_config  # noqa: E402


def avaprep_network(num_classes):
    """pytorchvideo's model of avaprep's ava-r50 network with random weights and BatchNorm
    statistics, and the same tensors under avaprep's names."""
    torch.manual_seed(0)
    model = pytorchvideo_model(dict(PRESETS[50], num_classes=num_classes))
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.BatchNorm3d):
                module.running_mean.uniform_(-0.1, 0.1)
                module.running_var.uniform_(0.5, 1.5)
                module.weight.uniform_(0.5, 1.5)
                module.bias.uniform_(-0.1, 0.1)
    tensors = {
        _rename_pytorchvideo(key): value
        for key, value in model.state_dict().items()
        if not key.endswith("num_batches_tracked")
    }
    return model.eval(), tensors


def main():
    data = Path(sys.argv[1])
    cfg = pyslowfast_config(data / "slowfast" / "train.yaml")
    reference, tensors = avaprep_network(cfg.MODEL.NUM_CLASSES)
    # build_model's own lookup, without its move to a GPU.
    network = _MODEL_TYPES[cfg.MODEL.ARCH](cfg)
    # strict: every key of PySlowFast's network filled, none left over, every shape equal.
    network.load_state_dict(pyslowfast_checkpoint(tensors)["model_state"], strict=True)
    network.eval()
    frames, alpha, side = cfg.DATA.NUM_FRAMES, cfg.SLOWFAST.ALPHA, cfg.DATA.TEST_CROP_SIZE
    torch.manual_seed(1)
    fast = torch.randn(2, 3, frames, side, side)
    slow = fast[:, :, ::alpha].contiguous()
    boxes = torch.tensor([[0, 10.0, 20.0, 150.0, 200.0], [1, 50.0, 5.0, 220.0, 120.0]])
    with torch.no_grad():
        ours = network([slow, fast], boxes)
        theirs = reference([slow, fast], boxes)
    error = ((ours - theirs).abs().max() / theirs.abs().max()).item()
    report = {
        "config": {
            "NUM_FRAMES": frames,
            "SAMPLING_RATE": cfg.DATA.SAMPLING_RATE,
            "BATCH_SIZE": cfg.TRAIN.BATCH_SIZE,
            "BASE_LR": cfg.SOLVER.BASE_LR,
            "WARMUP_START_LR": cfg.SOLVER.WARMUP_START_LR,
            "WEIGHT_DECAY": cfg.SOLVER.WEIGHT_DECAY,
            "STEPS": list(cfg.SOLVER.STEPS),
            "LRS": list(cfg.SOLVER.LRS),
            "MAX_EPOCH": cfg.SOLVER.MAX_EPOCH,
            "HEAD_ACT": cfg.MODEL.HEAD_ACT,
            "NUM_GPUS": cfg.NUM_GPUS,
        },
        "tensors": len(tensors),
        "max_relative_error": error,
    }
    print(json.dumps(report))
    sys.exit(0 if error < 1e-5 else 1)


if __name__ == "__main__":
    main()
