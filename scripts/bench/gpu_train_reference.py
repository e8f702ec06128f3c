#!/usr/bin/env python3
"""The PyTorch eager side of scripts/bench/gpu-train.sh: pytorchvideo's SlowFast detector with the
weights avaprep exports, trained on batches avaprep's loader made, fed from memory.

    gpu_train_reference.py DUMP [--device cuda] [--precision bf16|fp32] [--steps 300]
                           [--warmup 20] [--json]

DUMP is the folder `avaprep-train bench train --dump DUMP` wrote: weights.safetensors (avaprep's
initial weights with their network, built here as `scripts/export_checkpoint.py --to
pytorchvideo` builds it), batches.safetensors (its first two batches, slowN, fastN, boxesN,
targetsN, and the first step's logits) and optimizer.json (avaprep's SGD settings). A step is
avaprep's: forward in train mode (CUDA autocast in bf16), mean BCE with logits over boxes x
classes, the loss read back, backward, gradient clipping where avaprep clips, SGD with Nesterov
momentum and no weight decay on BatchNorm. Reported for the check: the largest difference from
avaprep's first-step logits and the first two steps' losses (the second one after an update).
"""

import argparse
import json
import os
import sys
import time

import torch
from safetensors.torch import load_file

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from export_checkpoint import pytorchvideo_state_dict, read_weights  # noqa: E402


def detector(weights_path, device):
    tensors, config = read_weights(weights_path)
    state, model = pytorchvideo_state_dict(tensors, config)
    model.load_state_dict(state)
    # Logits out, as avaprep's loss takes them (pytorchvideo's head ends in an activation).
    model.detection_head.activation = None
    return model.to(device).train()


def optimizer(model, settings):
    norms = (torch.nn.BatchNorm3d, torch.nn.BatchNorm2d, torch.nn.BatchNorm1d)
    decayed, plain = [], []
    for module in model.modules():
        group = plain if isinstance(module, norms) else decayed
        group.extend(module.parameters(recurse=False))
    return torch.optim.SGD(
        [
            {"params": decayed, "weight_decay": settings["weight_decay"]},
            {"params": plain, "weight_decay": 0.0},
        ],
        lr=settings["lr"],
        momentum=settings["momentum"],
        nesterov=settings["nesterov"],
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dump")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--precision", choices=("bf16", "fp32"), default="bf16")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    device = torch.device(args.device)
    cuda = device.type == "cuda"
    model = detector(os.path.join(args.dump, "weights.safetensors"), device)
    with open(os.path.join(args.dump, "optimizer.json")) as file:
        settings = json.load(file)
    sgd = optimizer(model, settings)
    dumped = {k: v.to(device) for k, v in load_file(os.path.join(args.dump, "batches.safetensors")).items()}
    batches = [{key: dumped[f"{key}{n}"] for key in ("slow", "fast", "boxes", "targets")} for n in (0, 1)]
    loss_fn = torch.nn.BCEWithLogitsLoss()
    autocast = args.precision == "bf16"

    def forward(batch):
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast and cuda):
            return model([batch["slow"], batch["fast"]], batch["boxes"]).float()

    def step(batch):
        loss = loss_fn(forward(batch), batch["targets"])
        value = loss.item()
        loss.backward()
        if settings["grad_clip"] is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), settings["grad_clip"])
        sgd.step()
        sgd.zero_grad(set_to_none=False)
        return value

    with torch.no_grad():
        logits_difference = (forward(batches[0]) - dumped["logits"]).abs().max().item()
    first_losses = [step(batches[0]), step(batches[1])]
    for n in range(2, args.warmup):
        step(batches[n % 2])
    if cuda:
        torch.cuda.synchronize(device)
    started = time.perf_counter()
    for n in range(args.steps):
        step(batches[n % 2])
    if cuda:
        torch.cuda.synchronize(device)
    seconds = time.perf_counter() - started
    clips = batches[0]["fast"].shape[0]
    result = {
        "type": "reference_train",
        "device": str(device),
        "precision": args.precision,
        "batch": clips,
        "steps": args.steps,
        "seconds": seconds,
        "steps_per_second": args.steps / seconds,
        "clips_per_second": args.steps * clips / seconds,
        "first_losses": first_losses,
        "first_logits_max_difference": logits_difference,
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(
            f"pytorchvideo {args.precision} on {device}: {result['steps_per_second']:.2f} steps/s, "
            f"{result['clips_per_second']:.1f} clips/s; first losses {first_losses}"
        )


if __name__ == "__main__":
    main()
