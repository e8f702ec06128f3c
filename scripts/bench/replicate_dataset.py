#!/usr/bin/env python3
"""A data directory K times as large as SRC for the trainer's benchmarks, made where no FFmpeg is:
each train and val video of SRC again under K ids (`<id>-c1` ... `<id>-cK`), its frames links to
SRC's, its frame index and annotation rows copied under the new id.

    replicate_dataset.py SRC DST --copies K

The trainer reads a data directory through its plan (work/videos.json), its annotations/ and its
frame_index/ and frames/; those are what is written. The clips are SRC's repeated, so the loader
decodes and augments K times as many (AVA-sized work for scripts/bench/gpu-train.sh from the
demo's 168 train clips), while only SRC's frames take disk. Not a dataset to train a model on.
"""

import argparse
import csv
import json
import os
import shutil


def copy_id(video, copy):
    return f"{video}-c{copy}"


def replicate_rows(source, target, videos, copies):
    """Each row of a CSV whose first column is a replicated video, once per copy."""
    with open(source, newline="") as file:
        rows = list(csv.reader(file))
    with open(target, "w", newline="") as file:
        writer = csv.writer(file, lineterminator="\n")
        for row in rows:
            if row and row[0] in videos:
                for copy in range(1, copies + 1):
                    writer.writerow([copy_id(row[0], copy)] + row[1:])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("src")
    parser.add_argument("dst")
    parser.add_argument("--copies", type=int, required=True)
    args = parser.parse_args()
    if args.copies < 1:
        parser.error("--copies must be at least 1")
    src, dst = os.path.abspath(args.src), os.path.abspath(args.dst)

    with open(os.path.join(src, "work", "videos.json")) as file:
        plan = json.load(file)
    originals = [video for video in plan["videos"] if video["split"] in ("train", "val")]
    videos = {video["id"] for video in originals}
    plan["videos"] = [
        dict(video, id=copy_id(video["id"], copy))
        for video in originals
        for copy in range(1, args.copies + 1)
    ]
    os.makedirs(os.path.join(dst, "work"))
    with open(os.path.join(dst, "work", "videos.json"), "w") as file:
        json.dump(plan, file)

    annotations = os.path.join(src, "annotations")
    tables = {split["ground_truth"] for split in plan["files"]["splits"].values()}
    tables |= {split["excluded_timestamps"] for split in plan["files"]["splits"].values()}
    tables |= {split["detected_boxes"] for split in plan["files"]["splits"].values()}
    for folder, _, names in os.walk(annotations):
        for name in names:
            relative = os.path.relpath(os.path.join(folder, name), annotations)
            target = os.path.join(dst, "annotations", relative)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            if relative in tables:
                replicate_rows(os.path.join(folder, name), target, videos, args.copies)
            else:
                shutil.copyfile(os.path.join(folder, name), target)

    os.makedirs(os.path.join(dst, "frame_index"))
    for video in sorted(videos):
        frames = os.path.join(src, "frames", video)
        for copy in range(1, args.copies + 1):
            new = copy_id(video, copy)
            shutil.copyfile(
                os.path.join(src, "frame_index", f"{video}.csv"),
                os.path.join(dst, "frame_index", f"{new}.csv"),
            )
            folder = os.path.join(dst, "frames", new)
            os.makedirs(folder)
            for name in os.listdir(frames):
                os.symlink(os.path.join(frames, name), os.path.join(folder, new + name[len(video):]))
    print(f"{dst}: {len(videos)} train and val videos of {src}, {args.copies} copies each")


if __name__ == "__main__":
    main()
