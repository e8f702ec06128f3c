#!/usr/bin/env python3
"""The Python packages the PyTorch side of scripts/bench/gpu-train.sh needs on a machine that has
only torch and torchvision (a GPU machine without internet), from this interpreter's site-packages.

    reference_packages.py bundle OUT       copies into OUT the distributions whose modules
                                           importing the PyTorch side loads, less torch,
                                           torchvision and their requirements (pytorchvideo,
                                           fvcore, safetensors, tqdm, ...): OUT on PYTHONPATH
                                           completes such a machine's Python
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
ROOT = os.path.dirname(os.path.dirname(HERE))


def key(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def torch_only_distributions():
    """torch, torchvision and what they require, extras left out, by key."""
    needed, pending = {}, ["torch", "torchvision"]
    while pending:
        name = key(pending.pop())
        if name in needed:
            continue
        try:
            needed[name] = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue  # a requirement for another platform
        for requirement in needed[name].requires or []:
            if not re.search(r"\bextra\s*==", requirement):
                pending.append(re.split(r"[\s;<>=!~\[(@]", requirement, maxsplit=1)[0])
    return needed


def link_torch_only(out):
    entries = {
        path.parts[0]
        for distribution in torch_only_distributions().values()
        for path in distribution.files or []
        if path.parts[0] != ".."  # scripts installed outside site-packages
    }
    site = sysconfig.get_paths()["purelib"]
    os.makedirs(out)
    for entry in sorted(entries):
        if os.path.exists(os.path.join(site, entry)):
            os.symlink(os.path.join(site, entry), os.path.join(out, entry))


def imported_distributions():
    """The distributions of every module loaded by importing the PyTorch side, by key. A module
    that is neither the standard library's, the repository's nor an installed distribution's
    could not be copied: an error."""
    sys.path[:0] = [os.path.dirname(HERE), HERE]
    import gpu_train_reference  # noqa: F401
    from pytorchvideo.models.slowfast import create_slowfast_with_roi_head  # noqa: F401

    owners = metadata.packages_distributions()
    standard = [os.path.realpath(sysconfig.get_paths()[p]) for p in ("stdlib", "platstdlib")]
    found, strays = set(), []
    for name, module in list(sys.modules.items()):
        top = name.split(".")[0]
        if top in owners:
            found.update(key(owner) for owner in owners[top])
            continue
        origin = getattr(module, "__file__", None)  # None: built into the interpreter
        if origin and not any(
            os.path.realpath(origin).startswith(folder + os.sep) for folder in standard + [ROOT]
        ):
            strays.append(f"{name} ({origin})")
    if strays:
        sys.exit(f"reference_packages: modules of no installed distribution: {', '.join(strays)}")
    return found


def copy_distribution(distribution, out):
    """Every file the distribution installed in site-packages, its metadata and bundled shared
    libraries included. A compiled extension must be abi3: the GPU machine's Python may be
    another version than this one."""
    for path in distribution.files or []:
        if path.parts[0] == ".." or "__pycache__" in path.parts:
            continue
        if path.name.endswith(".so") and ".abi3." not in path.name:
            sys.exit(f"reference_packages: {path} is built for this Python version only")
        target = os.path.join(out, *path.parts)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copy2(distribution.locate_file(path), target)


def copy_bundle(out):
    needed = imported_distributions() - set(torch_only_distributions())
    os.makedirs(out)
    for name in sorted(needed):
        copy_distribution(metadata.distribution(name), out)
        print(f"reference_packages: {name}")


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("bundle", "torch-only"):
        sys.exit(__doc__)
    (copy_bundle if sys.argv[1] == "bundle" else link_torch_only)(sys.argv[2])


if __name__ == "__main__":
    main()
