"""Reads a run folder's TensorBoard event files with TensorBoard's own reader and compares every
scalar with metrics.jsonl: the same tags, steps and values (as 32-bit floats, which is what
TensorBoard stores). Then starts a stock TensorBoard server on the folder (its default loader, the
Rust data server) and checks it serves the same. Prints a JSON summary; exits 1 naming the first
difference.

Usage: tensorboard_events.py RUN_DIR
"""

import json
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import numpy as np
from tensorboard.backend.event_processing import event_accumulator


def expected_scalars(run_dir: Path) -> dict:
    """tag -> [(step, value)] as the trainer's records say, in the order they were logged."""
    scalars: dict = {}

    def add(tag, step, value):
        scalars.setdefault(tag, []).append((step, value))

    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        record = json.loads(line)
        step = record["step"]
        if record["type"] == "batch":
            add("train/loss", step, record["loss"])
            add("train/lr", step, record["lr"])
            add("train/clips_per_s", step, record["clips_per_s"])
        elif record["type"] == "epoch":
            add("epoch/loss", step, record["loss"])
            add("epoch/clips_per_s", step, record["clips_per_s"])
        elif record["type"] == "eval":
            if record["map"] is not None:
                add("val/mAP", step, record["map"])
            for class_id, ap in record["ap"].items():
                if ap is not None:
                    add(f"val/AP/{class_id}", step, ap)
    return scalars


def fail(message: str) -> None:
    print(message, file=sys.stderr)
    sys.exit(1)


def compare(source: str, tag: str, got: list, points: list) -> int:
    """One tag's (step, value) pairs from `source` against metrics.jsonl's; how many matched."""
    if [step for step, _ in got] != [step for step, _ in points]:
        fail(f"{source} {tag}: steps {[s for s, _ in got]}, metrics.jsonl {[s for s, _ in points]}")
    for (step, value), (_, want) in zip(got, points):
        if np.float32(value) != np.float32(want):
            fail(f"{source} {tag} at step {step}: {value}, metrics.jsonl {want}")
    return len(got)


def check_served(run_dir: Path, expected: dict) -> int:
    """Serves the run folder as `tensorboard --logdir RUN_DIR` would and compares every tag."""
    from tensorboard import program

    server = program.TensorBoard()
    server.configure(argv=[None, "--logdir", str(run_dir), "--port", "0", "--host", "127.0.0.1"])
    url = server.launch()
    run = "."
    deadline = time.time() + 90
    while True:
        with urllib.request.urlopen(url + "data/plugin/scalars/tags") as response:
            tags = json.load(response).get(run, {})
        if sorted(tags) == sorted(expected):
            break
        if time.time() > deadline:
            fail(f"the server lists {sorted(tags)} for {run}, metrics.jsonl has {sorted(expected)}")
        time.sleep(1)
    served = 0
    for tag, points in expected.items():
        query = urllib.parse.urlencode({"run": run, "tag": tag})
        with urllib.request.urlopen(url + "data/plugin/scalars/scalars?" + query) as response:
            got = [(step, value) for _, step, value in json.load(response)]
        served += compare("served", tag, got, points)
    return served


def main() -> None:
    run_dir = Path(sys.argv[1])
    files = sorted(run_dir.glob("events.out.tfevents.*"))
    if not files:
        fail(f"{run_dir}: no event file")
    accumulator = event_accumulator.EventAccumulator(
        str(run_dir),
        size_guidance={event_accumulator.SCALARS: 0, event_accumulator.TENSORS: 0},
    )
    accumulator.Reload()
    tags = accumulator.Tags()
    expected = expected_scalars(run_dir)
    if sorted(tags["scalars"]) != sorted(expected):
        fail(f"scalar tags {sorted(tags['scalars'])}, metrics.jsonl has {sorted(expected)}")
    compared = 0
    for tag, points in expected.items():
        got = [(event.step, event.value) for event in accumulator.Scalars(tag)]
        compared += compare("read", tag, got, points)
    if "config" not in tags["tensors"]:
        fail(f"no config text; tensor tags {tags['tensors']}")
    config_event = accumulator.Tensors("config")[0]
    config_text = config_event.tensor_proto.string_val[0].decode()
    if accumulator.SummaryMetadata("config").plugin_data.plugin_name != "text":
        fail("the config is not a text summary")
    served = check_served(run_dir, expected)
    print(
        json.dumps(
            {
                "files": [path.name for path in files],
                "tags": len(expected),
                "scalars": compared,
                "served": served,
                "config": config_text,
            }
        )
    )


if __name__ == "__main__":
    main()
