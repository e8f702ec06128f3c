#!/usr/bin/env python3
"""CPU SGD steps of pytorchvideo's SlowFast detector (reference for scripts/bench/train-step.sh).

    train_step_reference.py [--depth 18|50] [--frames 16] [--height 112] [--width 112] [--batch 2]
                            [--boxes-per-clip 2] [--steps 5] [--warmup 2] [--threads 2] [--json]

The model is scripts/reference_model.py's: create_slowfast_with_roi_head(model_num_class=80,
dropout_rate=0.5), RoIAlign with aligned=True, logits out (BCE with logits), except that the
head's temporal pool covers the whole clip at any --frames (pytorchvideo's default kernel is
for 8 + 32 frames). Slow pathway = every 4th frame (alpha 4). As avaprep's `bench train-step`:
uniform [-1, 1) clips, boxes inside the frame at least 8 pixels wide, 0/1 targets (p = 0.1),
SGD(lr 0.01, momentum 0.9, Nesterov, weight decay 1e-7), train mode; a timed step is zero_grad,
forward, loss, backward, update.
"""

import argparse
import json
import time

import torch
from pytorchvideo.models.slowfast import create_slowfast_with_roi_head

ALPHA = 4
CLASSES = 80


def random_boxes(gen, batch, per_clip, height, width):
    """(batch index, x1, y1, x2, y2) in input pixels."""
    rows = []
    for clip in range(batch):
        for _ in range(per_clip):
            x1, y1 = (torch.rand(2, generator=gen) * torch.tensor([width, height]) / 2).tolist()
            x2 = x1 + 8 + torch.rand(1, generator=gen).item() * (width - x1 - 8)
            y2 = y1 + 8 + torch.rand(1, generator=gen).item() * (height - y1 - 8)
            rows.append([clip, x1, y1, x2, y2])
    return torch.tensor(rows)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--depth", type=int, choices=(18, 50), default=50)
    parser.add_argument("--frames", type=int, default=16)
    parser.add_argument("--height", type=int, default=112)
    parser.add_argument("--width", type=int, default=112)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--boxes-per-clip", type=int, default=2)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    assert args.frames % ALPHA == 0, "--frames must be a multiple of 4"

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    slow_frames = args.frames // ALPHA
    model = create_slowfast_with_roi_head(
        model_num_class=CLASSES,
        dropout_rate=0.5,
        model_depth=args.depth,
        head_pool_kernel_sizes=((slow_frames, 1, 1), (args.frames, 1, 1)),
    )
    model.detection_head.roi_layer.aligned = True
    model.detection_head.activation = None
    model.train()
    optimizer = torch.optim.SGD(
        model.parameters(), lr=0.01, momentum=0.9, nesterov=True, weight_decay=1e-7
    )

    gen = torch.Generator().manual_seed(0)
    shape = (args.batch, 3, args.frames, args.height, args.width)
    fast = torch.rand(shape, generator=gen) * 2 - 1
    slow = fast[:, :, ::ALPHA].contiguous()
    boxes = random_boxes(gen, args.batch, args.boxes_per_clip, args.height, args.width)
    targets = (torch.rand(len(boxes), CLASSES, generator=gen) < 0.1).float()
    loss_fn = torch.nn.BCEWithLogitsLoss()

    times = []
    for step in range(args.warmup + args.steps):
        started = time.perf_counter()
        optimizer.zero_grad()
        loss = loss_fn(model([slow, fast], boxes), targets)
        loss.backward()
        optimizer.step()
        if step >= args.warmup:
            times.append(time.perf_counter() - started)

    result = {
        "depth": args.depth,
        "median_step_seconds": round(sorted(times)[len(times) // 2], 4),  # as avaprep's
        "steps": [round(t, 4) for t in times],
        "threads": args.threads,
        "frames": args.frames,
        "size": [args.height, args.width],
        "batch": args.batch,
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(f"pytorchvideo SlowFast R{args.depth} {args.height}x{args.width}x{args.frames} "
              f"batch {args.batch}: median step {result['median_step_seconds']} s over {times}")


if __name__ == "__main__":
    main()
