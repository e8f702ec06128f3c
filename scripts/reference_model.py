#!/usr/bin/env python3
"""Reference outputs for avaprep's SlowFast tests, from pytorchvideo and torchvision.

    reference_model.py model --out DIR [--depth 50] [--height 64] [--width 96] [--seed 0]
        Builds pytorchvideo's create_slowfast_with_roi_head(model_num_class=80,
        dropout_rate=0.5), gives its BatchNorms non-trivial statistics, and writes
          DIR/weights.safetensors  the state dict under avaprep's names (convert_checkpoint.py)
          DIR/io.safetensors       slow, fast, boxes, and the head's logits (before the sigmoid)
                                   with RoIAlign aligned=True (logits_aligned) and False
                                   (logits_unaligned; pytorchvideo's own default)
        and prints the parameter count. With --save-checkpoints it also writes the same weights
        as checkpoints to test convert_checkpoint.py with:
          DIR/pytorchvideo.pyth    pytorchvideo's own state dict
          DIR/pyslowfast.pyth      {"model_state": ...} with PySlowFast keys, as saved from
                                   DistributedDataParallel ("module." prefix), plus an epoch

    reference_model.py exported --out DIR --io IO --weights W --pytorchvideo PV --torchscript TS
        Runs what scripts/export_checkpoint.py made of avaprep's weights W on IO's slow, fast and
        boxes: pytorchvideo's model (built from the network W records) with PV's state dict, and
        the TorchScript module TS as torch.jit.load gives it. Writes DIR/exported.safetensors
        with both outputs (probabilities), pytorchvideo and torchscript.

    reference_model.py roi-align --out DIR [--seed 0]
        Writes DIR/roi_align.safetensors: for each case N, caseN.{input, boxes, grad_output,
        output, grad_input, params}, where params = (spatial_scale, sampling_ratio, aligned,
        out_h, out_w) and grad_input is d(sum(output * grad_output)) / d(input) from
        torchvision.ops.roi_align.
"""

import argparse
import os
import sys

import torch
from safetensors.torch import save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from convert_checkpoint import convert_state_dict  # noqa: E402


def random_boxes(gen, count, height, width, batch):
    """Boxes in input pixels: mostly inside the frame, some partly outside, one tiny."""
    x1 = torch.rand(count, generator=gen) * width * 0.8 - width * 0.1
    y1 = torch.rand(count, generator=gen) * height * 0.8 - height * 0.1
    w = torch.rand(count, generator=gen) * width * 0.6 + 1.0
    h = torch.rand(count, generator=gen) * height * 0.6 + 1.0
    w[0], h[0] = 0.3, 0.6  # smaller than a feature-map pixel
    index = torch.arange(count) % batch
    return torch.stack([index.float(), x1, y1, x1 + w, y1 + h], dim=1)


def calibrate_batch_norm(model, slow, fast, boxes):
    """Random affine BN parameters, then running statistics measured on data: a forward in eval
    mode then exercises every BN with realistic, non-identity statistics (PySlowFast zero-inits
    the last BN of each block, which would hide the residual branches from the test)."""
    gen = torch.Generator().manual_seed(1)
    bns = [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm3d)]
    with torch.no_grad():
        for bn in bns:
            bn.weight.copy_(torch.rand(bn.weight.shape, generator=gen) + 0.5)
            bn.bias.copy_(torch.randn(bn.bias.shape, generator=gen) * 0.2)
            bn.reset_running_stats()
            bn.momentum = None  # cumulative average over the calibration batches
        model.train()
        for _ in range(2):
            model([slow, fast], boxes)
        for bn in bns:
            bn.momentum = 0.1
        model.detection_head.proj.weight.normal_(0.0, 0.05, generator=gen)
        model.detection_head.proj.bias.normal_(0.0, 0.05, generator=gen)
    model.eval()


def run_model(args):
    from pytorchvideo.models.slowfast import create_slowfast_with_roi_head

    torch.manual_seed(args.seed)
    model = create_slowfast_with_roi_head(
        model_num_class=80, dropout_rate=0.5, model_depth=args.depth
    )
    print(sum(p.numel() for p in model.parameters()))
    gen = torch.Generator().manual_seed(args.seed)
    batch = 2
    slow = torch.randn(batch, 3, 8, args.height, args.width, generator=gen)
    fast = torch.randn(batch, 3, 32, args.height, args.width, generator=gen)
    boxes = random_boxes(gen, 6, args.height, args.width, batch)
    calibrate_batch_norm(model, slow, fast, boxes)
    model.detection_head.activation = None  # logits, as avaprep's head returns

    outputs = {"slow": slow, "fast": fast, "boxes": boxes}
    with torch.no_grad():
        for aligned in (True, False):
            model.detection_head.roi_layer.aligned = aligned
            key = "logits_aligned" if aligned else "logits_unaligned"
            outputs[key] = model([slow, fast], boxes)
    os.makedirs(args.out, exist_ok=True)
    save_file(convert_state_dict(model.state_dict()), os.path.join(args.out, "weights.safetensors"))
    save_file({k: v.contiguous() for k, v in outputs.items()}, os.path.join(args.out, "io.safetensors"))
    if args.save_checkpoints:
        save_checkpoints(model.state_dict(), args.out)


def save_checkpoints(state_dict, out):
    """The two checkpoint layouts convert_checkpoint.py reads."""
    torch.save(state_dict, os.path.join(out, "pytorchvideo.pyth"))
    pyslowfast = {
        f"module.{k}": v for k, v in convert_state_dict(state_dict).items()
    }
    pyslowfast["module.s1.pathway0_stem.bn.num_batches_tracked"] = torch.tensor(3)
    torch.save({"model_state": pyslowfast, "epoch": 1}, os.path.join(out, "pyslowfast.pyth"))


def run_exported(args):
    import torchvision  # noqa: F401  (registers the roi_align op the TorchScript module calls)
    from export_checkpoint import pytorchvideo_model, read_weights
    from safetensors.torch import load_file

    io = load_file(args.io)
    _, config = read_weights(args.weights)
    model = pytorchvideo_model(config)
    model.load_state_dict(torch.load(args.pytorchvideo, map_location="cpu"))
    model.eval()
    scripted = torch.jit.load(args.torchscript, map_location="cpu")
    # A fresh list for each call: pytorchvideo's multipathway blocks replace its items.
    with torch.no_grad():
        outputs = {
            name: run([io["slow"], io["fast"]], io["boxes"])
            for name, run in (("pytorchvideo", model), ("torchscript", scripted))
        }
    os.makedirs(args.out, exist_ok=True)
    save_file({k: v.contiguous() for k, v in outputs.items()}, os.path.join(args.out, "exported.safetensors"))


def roi_align_cases(gen):
    """(input, boxes, spatial_scale, sampling_ratio, aligned): both alignments, adaptive and fixed
    grids, boxes partly outside the map and smaller than a pixel, several images per batch."""
    cases = []
    for aligned in (True, False):
        for sampling_ratio in (0, 2):
            feature = torch.randn(3, 5, 11, 14, generator=gen, dtype=torch.float64)
            boxes = random_boxes(gen, 12, 11 * 16, 14 * 16, 3).double()
            boxes[1, 1:] = torch.tensor([-40.0, -30.0, 50.0, 60.0])  # corner outside
            boxes[2, 1:] = torch.tensor([200.0, 150.0, 260.0, 200.0])  # past the far edges
            boxes[3, 1:] = torch.tensor([-80.0, -80.0, -20.0, -20.0])  # wholly outside
            boxes[4, 1:] = torch.tensor([0.0, 0.0, 224.0, 176.0])  # the whole map
            cases.append((feature, boxes, 1.0 / 16.0, sampling_ratio, aligned))
    # A finer map, so the adaptive grid ranges over 1..5 samples per bin within one call.
    for aligned in (True, False):
        feature = torch.randn(2, 3, 40, 50, generator=gen, dtype=torch.float64)
        boxes = random_boxes(gen, 10, 160, 200, 2).double()
        cases.append((feature, boxes, 0.25, 0, aligned))
    # A res5-like map in float32, the dtype training uses.
    feature = torch.randn(2, 64, 14, 14, generator=gen)
    boxes = random_boxes(gen, 16, 224, 224, 2)
    cases.append((feature, boxes, 1.0 / 16.0, 0, True))
    return cases


def run_roi_align(args):
    from torchvision.ops import roi_align

    gen = torch.Generator().manual_seed(args.seed)
    tensors = {}
    for n, (feature, boxes, scale, sampling_ratio, aligned) in enumerate(roi_align_cases(gen)):
        feature = feature.clone().requires_grad_(True)
        output = roi_align(feature, boxes, (7, 7), scale, sampling_ratio, aligned)
        grad_output = torch.randn(output.shape, generator=gen, dtype=output.dtype)
        (grad_input,) = torch.autograd.grad(output, feature, grad_output)
        params = torch.tensor([scale, sampling_ratio, float(aligned), 7.0, 7.0], dtype=torch.float64)
        for name, value in [
            ("input", feature),
            ("boxes", boxes),
            ("grad_output", grad_output),
            ("output", output),
            ("grad_input", grad_input),
            ("params", params),
        ]:
            tensors[f"case{n}.{name}"] = value.detach().contiguous()
    os.makedirs(args.out, exist_ok=True)
    save_file(tensors, os.path.join(args.out, "roi_align.safetensors"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    model = sub.add_parser("model")
    model.add_argument("--out", required=True)
    model.add_argument("--depth", type=int, default=50)
    model.add_argument("--height", type=int, default=64)
    model.add_argument("--width", type=int, default=96)
    model.add_argument("--seed", type=int, default=0)
    model.add_argument("--save-checkpoints", action="store_true")
    exported = sub.add_parser("exported")
    exported.add_argument("--out", required=True)
    for name in ("io", "weights", "pytorchvideo", "torchscript"):
        exported.add_argument(f"--{name}", required=True)
    roi = sub.add_parser("roi-align")
    roi.add_argument("--out", required=True)
    roi.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    # The tests run it on one core, beside a training on the other.
    torch.set_num_threads(1)
    {"model": run_model, "exported": run_exported, "roi-align": run_roi_align}[args.command](args)


if __name__ == "__main__":
    main()
