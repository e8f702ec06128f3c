#!/usr/bin/env python3
"""Export avaprep's SlowFast weights for PySlowFast, pytorchvideo or TorchScript.

The reverse of convert_checkpoint.py. The weights file avaprep writes (a run's best-s*.safetensors
or model-s*.safetensors) records its network in its header (`avaprep.model`, the trainer's
SlowFastConfig as JSON); weights without it (converted ones) take `--depth 18|50`, avaprep's
ava-r18 / ava-r50 networks.

    export_checkpoint.py WEIGHTS.safetensors OUT --to pyslowfast|pytorchvideo|torchscript [--depth N]

  pyslowfast    a checkpoint PySlowFast's load_checkpoint reads (TRAIN.CHECKPOINT_FILE_PATH or
                TEST.CHECKPOINT_FILE_PATH): {"model_state": ...} under PySlowFast's keys, which are
                avaprep's, with BatchNorm's num_batches_tracked. No epoch, so PySlowFast starts a
                fresh schedule from it.
  pytorchvideo  the state dict of pytorchvideo's create_slowfast_with_roi_head built with the
                arguments printed on stderr (model.load_state_dict(torch.load(OUT))).
  torchscript   that pytorchvideo model with the weights, traced in eval mode:
                torch.jit.load(OUT)([slow, fast], boxes) gives per-box action probabilities
                (sigmoid of avaprep's logits); slow is (B, 3, T/alpha, H, W), fast (B, 3, T, H, W),
                boxes (K, 5) rows of (clip index, x1, y1, x2, y2) in input pixels.
"""

import argparse
import json
import math
import os
import sys

import torch
from safetensors import safe_open

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from convert_checkpoint import _rename_pytorchvideo  # noqa: E402

METADATA_KEY = "avaprep.model"

# The networks `avaprep train` builds for the r50-8x8 and r18 models with its default clip (16
# frames), for weights that do not name their network; a test compares them with the trainer's.
_R50 = {
    "stage_depths": [3, 4, 6, 3],
    "width_per_group": 64,
    "alpha": 4,
    "beta_inv": 8,
    "fusion_kernel": 7,
    "fusion_conv_channel_ratio": 2,
    "num_frames": 16,
    "stem_temporal_kernel": [1, 5],
    "stage_temporal_kernels": [[1, 3], [1, 3], [3, 3], [3, 3]],
    "spatial_strides": [1, 2, 2, 1],
    "spatial_dilations": [1, 1, 1, 2],
    "num_classes": 80,
    "dropout": 0.5,
    "roi_output_size": 7,
    "roi_spatial_scale": 1.0 / 16.0,
    "roi_sampling_ratio": 0,
    "roi_aligned": True,
}
PRESETS = {50: _R50, 18: dict(_R50, stage_depths=[1, 1, 1, 1])}
_DEPTHS = {(1, 1, 1, 1): 18, (3, 4, 6, 3): 50, (3, 4, 23, 3): 101, (3, 8, 36, 3): 152}


class ExportError(Exception):
    pass


class UsageError(ExportError):
    """Arguments that cannot work whatever the weights hold (exit status 2, as argparse's)."""


def _one_line(error):
    # Library messages may span lines; the refusal is one line on stderr.
    return " ".join(str(error).split())


def read_weights(path, depth=None):
    """The tensors and the network config of an avaprep weights file."""
    try:
        with safe_open(path, framework="pt") as weights:
            metadata = weights.metadata() or {}
            tensors = {name: weights.get_tensor(name) for name in weights.keys()}
    except Exception as error:  # safetensors raises its own types for a bad header
        raise ExportError(f"{path}: not a safetensors weights file ({_one_line(error)})") from None
    if METADATA_KEY in metadata:
        config = recorded_network(path, metadata[METADATA_KEY])
    elif depth is None:
        raise ExportError(
            f"{path}: records no network (weights avaprep wrote before, or converted ones); "
            "name it with --depth 18 or --depth 50 (avaprep's ava-r18 / ava-r50)"
        )
    else:
        head = tensors.get("head.projection.weight")
        if head is None or head.dim() != 2:
            raise ExportError(
                f"{path}: no head.projection.weight matrix: not the weights of avaprep's detector"
            )
        config = dict(PRESETS[depth])
        config["num_classes"] = head.shape[0]
    check_network(path, tensors, config)
    return tensors, config


def recorded_network(path, text):
    """The SlowFastConfig a weights file records, each field of the form the trainer writes."""
    where = f"{path}: header {METADATA_KEY}"
    try:
        config = json.loads(text)
    except ValueError as error:
        raise ExportError(f"{where} is not JSON ({_one_line(error)})") from None
    if not isinstance(config, dict):
        raise ExportError(f"{where} is a JSON {type(config).__name__}, not the object of a SlowFastConfig")
    for name, like in _R50.items():
        if name not in config:
            raise ExportError(f"{where} lacks the field {name}")
        problem = _field_problem(name, config[name], like)
        if problem:
            raise ExportError(f"{where}: {problem}")
    return config


def _field_problem(name, value, like):
    """What is wrong with a recorded field, judged by the preset's value of it; None if nothing.

    The preset gives the type and the list lengths; a whole number may be 0 only where the
    preset's is (roi_sampling_ratio's 0 is "adaptive"; elsewhere 0 divides by zero or builds
    nothing), and both fractional fields (dropout, roi_spatial_scale) lie in [0, 1].
    """
    shown = json.dumps(value)
    if isinstance(like, list):
        if not isinstance(value, list):
            return f"{name} is {shown}, not a list of {len(like)}"
        if len(value) != len(like):
            return f"{name} has {len(value)} items, not {len(like)}"
        problems = (_field_problem(f"{name}[{i}]", v, w) for i, (v, w) in enumerate(zip(value, like)))
        return next(filter(None, problems), None)
    if isinstance(like, bool):
        fits, kind = isinstance(value, bool), "true or false"
    elif isinstance(like, int):
        least = min(like, 1)
        fits = isinstance(value, int) and not isinstance(value, bool) and value >= least
        kind = f"a whole number >= {least}"
    else:
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        fits, kind = number and math.isfinite(value) and 0 <= value <= 1, "a number from 0 to 1"
    return None if fits else f"{name} is {shown}, not {kind}"


def network_tensors(config):
    """The tensors every avaprep SlowFast with the config's stage depths holds, stems to head.

    The shortcut projections (branch1) are left out: whether a block has one depends on its
    widths, and the blocks' branch2 already tell one network from another.
    """
    names = []

    def conv_bn(conv, bn):
        names.append(f"{conv}.weight")
        names.extend(f"{bn}.{t}" for t in ("weight", "bias", "running_mean", "running_var"))

    for pathway in (0, 1):
        conv_bn(f"s1.pathway{pathway}_stem.conv", f"s1.pathway{pathway}_stem.bn")
    for fusion in range(1, 5):
        conv_bn(f"s{fusion}_fuse.conv_f2s", f"s{fusion}_fuse.bn")
    for stage, blocks in enumerate(config["stage_depths"], start=2):
        for pathway in (0, 1):
            for block in range(blocks):
                branch = f"s{stage}.pathway{pathway}_res{block}.branch2"
                for conv in "abc":
                    conv_bn(f"{branch}.{conv}", f"{branch}.{conv}_bn")
    return names + ["head.projection.weight", "head.projection.bias"]


def check_network(path, tensors, config):
    # Without it a file of any tensors would leave as a "PySlowFast checkpoint".
    names = network_tensors(config)
    missing = [name for name in names if name not in tensors]
    if missing:
        raise ExportError(
            f"{path}: no tensor {missing[0]} ({len(missing)} of {len(names)} missing): not the weights "
            f"of avaprep's SlowFast with {config['stage_depths']} blocks per stage"
        )


def pytorchvideo_arguments(config):
    """create_slowfast_with_roi_head's arguments for avaprep's SlowFastConfig."""
    depth = _DEPTHS.get(tuple(config["stage_depths"]))
    if depth is None:
        raise ExportError(f"pytorchvideo has no SlowFast with {config['stage_depths']} blocks per stage")
    alpha, frames = config["alpha"], config["num_frames"]
    width = config["width_per_group"]
    kernels = config["stage_temporal_kernels"]
    dilations = config["spatial_dilations"]
    pathway = lambda values: tuple(tuple(v) for v in values)  # noqa: E731
    return dict(
        model_depth=depth,
        model_num_class=config["num_classes"],
        dropout_rate=config["dropout"],
        slowfast_channel_reduction_ratio=(config["beta_inv"],),
        slowfast_conv_channel_fusion_ratio=config["fusion_conv_channel_ratio"],
        slowfast_fusion_conv_kernel_size=(config["fusion_kernel"], 1, 1),
        slowfast_fusion_conv_stride=(alpha, 1, 1),
        stem_dim_outs=(width, width // config["beta_inv"]),
        stem_conv_kernel_sizes=tuple((t, 7, 7) for t in config["stem_temporal_kernel"]),
        stage_conv_a_kernel_sizes=pathway([[(k[p], 1, 1) for k in kernels] for p in (0, 1)]),
        stage_conv_b_dilations=pathway([[(1, d, d) for d in dilations]] * 2),
        stage_spatial_strides=(tuple(config["spatial_strides"]),) * 2,
        head_pool_kernel_sizes=((frames // alpha, 1, 1), (frames, 1, 1)),
        head_spatial_resolution=(config["roi_output_size"],) * 2,
        head_spatial_scale=config["roi_spatial_scale"],
        head_sampling_ratio=config["roi_sampling_ratio"],
    )


def pytorchvideo_model(config):
    from pytorchvideo.models.slowfast import create_slowfast_with_roi_head

    model = create_slowfast_with_roi_head(**pytorchvideo_arguments(config))
    model.detection_head.roi_layer.aligned = config["roi_aligned"]
    return model


def pytorchvideo_state_dict(tensors, config):
    """avaprep's tensors under pytorchvideo's keys; every key of the model filled."""
    model = pytorchvideo_model(config)
    out, missing = {}, []
    for key, reference in model.state_dict().items():
        if key.endswith("num_batches_tracked"):
            out[key] = torch.zeros_like(reference)
            continue
        name = _rename_pytorchvideo(key)
        if name not in tensors:
            missing.append(name or key)
            continue
        if tensors[name].shape != reference.shape:
            raise ExportError(
                f"{name}: shape {list(tensors[name].shape)} in the weights, {list(reference.shape)} "
                "in the network they record"
            )
        out[key] = tensors[name]
    if missing:
        raise ExportError(f"the weights lack {len(missing)} tensors of the network, e.g. {missing[:3]}")
    return out, model


def pyslowfast_checkpoint(tensors):
    """PySlowFast's checkpoint layout: its keys are avaprep's, plus BatchNorm's step counters."""
    state = dict(tensors)
    for name in tensors:
        if name.endswith(".running_mean"):
            state[name[: -len("running_mean")] + "num_batches_tracked"] = torch.tensor(0)
    return {"model_state": state}


def traced_detector(tensors, config):
    state, model = pytorchvideo_state_dict(tensors, config)
    model.load_state_dict(state)
    model.eval()
    slow_frames = config["num_frames"] // config["alpha"]
    side = 64
    slow = torch.zeros(1, 3, slow_frames, side, side)
    fast = torch.zeros(1, 3, config["num_frames"], side, side)
    boxes = torch.tensor([[0.0, 4.0, 4.0, side - 4.0, side - 4.0]])
    with torch.no_grad():
        return torch.jit.trace(model, ([slow, fast], boxes), check_trace=False)


def check_out(weights_path, out_path):
    """Refuses an OUT that would destroy WEIGHTS (by any path to it) or that names a folder."""
    if os.path.isdir(out_path):
        raise UsageError(f"{out_path}: is a directory; OUT names the file to write")
    # The export is written to OUT.partial first, then renamed onto OUT: neither may be WEIGHTS.
    for path in (out_path, f"{out_path}.partial"):
        if os.path.exists(path) and os.path.exists(weights_path) and os.path.samefile(path, weights_path):
            raise UsageError(
                f"{path}: is WEIGHTS ({weights_path}) itself; writing it would destroy the weights"
            )


def exported(tensors, config, to):
    """What --to writes, and the function that saves it to a path."""
    if to == "pyslowfast":
        return pyslowfast_checkpoint(tensors), torch.save
    if to == "pytorchvideo":
        return pytorchvideo_state_dict(tensors, config)[0], torch.save
    return traced_detector(tensors, config), lambda module, path: module.save(path)


def write(out_path, value, save):
    """OUT whole or untouched: saved to OUT.partial, renamed onto OUT; no .partial outlives a failure."""
    partial = f"{out_path}.partial"
    try:
        save(value, partial)
        os.replace(partial, out_path)
    except (OSError, RuntimeError) as error:  # torch.save reports an unwritable path as RuntimeError
        raise ExportError(f"{out_path}: cannot write it ({_one_line(error)})") from None
    finally:
        # A folder there was not ours to remove (the save failed on it).
        if os.path.lexists(partial) and not os.path.isdir(partial):
            os.remove(partial)


def export(weights_path, out_path, to, depth=None):
    check_out(weights_path, out_path)
    tensors, config = read_weights(weights_path, depth)
    try:
        value, save = exported(tensors, config, to)
    except ExportError as error:
        # The network's checks name a tensor or a depth; the user needs the file too.
        raise ExportError(f"{weights_path}: {error}") from None
    write(out_path, value, save)
    return config


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("weights", help="avaprep weights (.safetensors)")
    parser.add_argument("out", help="file to write")
    parser.add_argument("--to", required=True, choices=["pyslowfast", "pytorchvideo", "torchscript"])
    parser.add_argument("--depth", type=int, choices=sorted(PRESETS), help="for weights that record no network")
    args = parser.parse_args(argv)
    try:
        config = export(args.weights, args.out, args.to, args.depth)
    except ExportError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2 if isinstance(error, UsageError) else 1
    if args.to != "pyslowfast":
        arguments = ", ".join(f"{k}={v!r}" for k, v in pytorchvideo_arguments(config).items())
        print(f"pytorchvideo network: create_slowfast_with_roi_head({arguments}); "
              f"detection_head.roi_layer.aligned={config['roi_aligned']}", file=sys.stderr)
    print(f"wrote {args.out} ({args.to})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
