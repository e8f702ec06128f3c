#!/usr/bin/env python3
"""Convert a PySlowFast or pytorchvideo SlowFast checkpoint to safetensors with avaprep's names.

avaprep's variable names are PySlowFast's state-dict keys (see crates/avaprep-train/src/train/model/mod.rs), so a
PySlowFast checkpoint only loses its `num_batches_tracked` buffers. pytorchvideo keys are renamed:

    [model.]blocks.0.multipathway_blocks.P.{conv,norm}        -> s1.pathwayP_stem.{conv,bn}
    [model.]blocks.I.multipathway_fusion.conv_fast_to_slow    -> s{I+1}_fuse.conv_f2s
    [model.]blocks.I.multipathway_fusion.norm                 -> s{I+1}_fuse.bn
    [model.]blocks.I.multipathway_blocks.P.res_blocks.J.branch1_conv     -> s{I+1}.pathwayP_resJ.branch1
    [model.]blocks.I.multipathway_blocks.P.res_blocks.J.branch1_norm     -> s{I+1}.pathwayP_resJ.branch1_bn
    [model.]blocks.I.multipathway_blocks.P.res_blocks.J.branch2.conv_X   -> s{I+1}.pathwayP_resJ.branch2.X
    [model.]blocks.I.multipathway_blocks.P.res_blocks.J.branch2.norm_X   -> s{I+1}.pathwayP_resJ.branch2.X_bn
    detection_head.proj                                        -> head.projection
    blocks.6.proj (Kinetics classification head)               -> head.projection

Usage: convert_checkpoint.py INPUT.pyth OUTPUT.safetensors [--drop-head]

--drop-head leaves out head.projection, to initialise the AVA detector from a Kinetics
classifier (its head has 400 outputs and no RoI branch).

The input is a torch pickle: load only checkpoints from sources you trust.
"""

import argparse
import re
import sys

import torch
from safetensors.torch import save_file

_PTV_RULES = [
    (r"blocks\.0\.multipathway_blocks\.(\d)\.conv\.(.+)", r"s1.pathway\1_stem.conv.\2"),
    (r"blocks\.0\.multipathway_blocks\.(\d)\.norm\.(.+)", r"s1.pathway\1_stem.bn.\2"),
    (r"blocks\.(\d)\.multipathway_fusion\.conv_fast_to_slow\.(.+)", "FUSE_CONV"),
    (r"blocks\.(\d)\.multipathway_fusion\.norm\.(.+)", "FUSE_BN"),
    (r"blocks\.(\d)\.multipathway_blocks\.(\d)\.res_blocks\.(\d+)\.(.+)", "RES"),
    (r"detection_head\.proj\.(.+)", r"head.projection.\1"),
    (r"blocks\.6\.proj\.(.+)", r"head.projection.\1"),
]

_RES_PARTS = {
    "branch1_conv": "branch1",
    "branch1_norm": "branch1_bn",
    "branch2.conv_a": "branch2.a",
    "branch2.conv_b": "branch2.b",
    "branch2.conv_c": "branch2.c",
    "branch2.norm_a": "branch2.a_bn",
    "branch2.norm_b": "branch2.b_bn",
    "branch2.norm_c": "branch2.c_bn",
}


def _rename_pytorchvideo(key):
    """avaprep's name for a pytorchvideo key, or None for a key with no counterpart."""
    key = re.sub(r"^model\.", "", key)
    for pattern, target in _PTV_RULES:
        m = re.fullmatch(pattern, key)
        if not m:
            continue
        if target == "FUSE_CONV":
            return f"s{int(m.group(1)) + 1}_fuse.conv_f2s.{m.group(2)}"
        if target == "FUSE_BN":
            return f"s{int(m.group(1)) + 1}_fuse.bn.{m.group(2)}"
        if target == "RES":
            stage, pathway, block, rest = m.groups()
            part, _, tensor = rest.rpartition(".")
            if part not in _RES_PARTS:
                return None
            return f"s{int(stage) + 1}.pathway{pathway}_res{block}.{_RES_PARTS[part]}.{tensor}"
        return m.expand(target)
    return None


def state_dict_of(checkpoint):
    """The model's state dict inside a PySlowFast (`model_state`) or pytorchvideo checkpoint."""
    if isinstance(checkpoint, dict) and "model_state" in checkpoint:
        checkpoint = checkpoint["model_state"]
    # Checkpoints saved from DistributedDataParallel prefix every key with "module.".
    return {re.sub(r"^module\.", "", k): v for k, v in checkpoint.items()}


def convert_state_dict(state_dict, drop_head=False):
    """Rename a SlowFast state dict to avaprep's names; raises on keys it does not know."""
    is_pytorchvideo = any("multipathway" in k for k in state_dict)
    out, unknown = {}, []
    for key, value in state_dict.items():
        if key.endswith("num_batches_tracked"):
            continue
        name = _rename_pytorchvideo(key) if is_pytorchvideo else key
        if name is None:
            unknown.append(key)
            continue
        if drop_head and name.startswith("head."):
            continue
        out[name] = value.detach().to(torch.float32).contiguous()
    if unknown:
        raise ValueError(f"keys with no avaprep counterpart: {unknown[:10]} ({len(unknown)} in all)")
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("input", help="PySlowFast or pytorchvideo checkpoint (.pyth / .pt)")
    parser.add_argument("output", help="safetensors file to write")
    parser.add_argument("--drop-head", action="store_true", help="leave out head.projection")
    args = parser.parse_args(argv)
    # PySlowFast checkpoints hold a yacs config next to the weights, which weights_only rejects.
    checkpoint = torch.load(args.input, map_location="cpu", weights_only=False)
    tensors = convert_state_dict(state_dict_of(checkpoint), drop_head=args.drop_head)
    save_file(tensors, args.output)
    print(f"wrote {len(tensors)} tensors to {args.output}", file=sys.stderr)


if __name__ == "__main__":
    main()
