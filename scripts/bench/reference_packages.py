#!/usr/bin/env python3
"""The Python packages the PyTorch side of scripts/bench/gpu-train.sh needs on a machine that has
only torch and torchvision (a GPU machine without internet), from this interpreter's site-packages.

    reference_packages.py bundle OUT       copies into OUT what importing the PyTorch side loads
                                           beyond torch, torchvision and their requirements
                                           (pytorchvideo, fvcore, safetensors, tqdm, ...): OUT on
                                           PYTHONPATH completes such a machine's Python
    reference_packages.py torch-only OUT   links in OUT to torch, torchvision and their
                                           requirements only: `python -S` with OUT on PYTHONPATH
                                           is such a machine's Python (the test suite's stand-in)
"""

import importlib.metadata as metadata
import os
import re
import shutil
import sys
import sysconfig

HERE = os.path.dirname(os.path.abspath(__file__))


def torch_only_entries():
    """The site-packages entries of torch, torchvision and what they require (extras left out)."""
    needed, pending = {}, ["torch", "torchvision"]
    while pending:
        name = re.sub(r"[-_.]+", "-", pending.pop()).lower()
        if name in needed:
            continue
        try:
            needed[name] = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue  # a requirement for another platform
        for requirement in needed[name].requires or []:
            if "extra ==" not in requirement:
                pending.append(re.split(r"[\s;<>=!~\[(]", requirement, maxsplit=1)[0])
    return {
        path.parts[0]
        for distribution in needed.values()
        for path in distribution.files or []
        if path.parts[0] != ".."  # scripts installed outside site-packages
    }


def site_packages():
    return os.path.realpath(sysconfig.get_paths()["purelib"])


def link_torch_only(out):
    site = site_packages()
    os.makedirs(out)
    for entry in sorted(torch_only_entries()):
        if os.path.exists(os.path.join(site, entry)):
            os.symlink(os.path.join(site, entry), os.path.join(out, entry))


def copy_bundle(out):
    sys.path[:0] = [os.path.dirname(HERE), HERE]
    import gpu_train_reference  # noqa: F401
    from pytorchvideo.models.slowfast import create_slowfast_with_roi_head  # noqa: F401  (imported lazily there)

    site, present = site_packages(), torch_only_entries()
    entries = set()
    for module in list(sys.modules.values()):
        origin = os.path.realpath(getattr(module, "__file__", None) or "/")
        if origin.startswith(site + os.sep):
            entries.add(os.path.relpath(origin, site).split(os.sep)[0])
    os.makedirs(out)
    for entry in sorted(entries - present):
        source = os.path.join(site, entry)
        if os.path.isdir(source):
            shutil.copytree(source, os.path.join(out, entry), ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, out)
        print(f"reference_packages: {entry}")


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("bundle", "torch-only"):
        sys.exit(__doc__)
    (copy_bundle if sys.argv[1] == "bundle" else link_torch_only)(sys.argv[2])


if __name__ == "__main__":
    main()
