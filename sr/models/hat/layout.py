"""HAT's state-dict layout, as the official code saves it (XPixelGroup/HAT
``hat/archs/hat_arch.py``) and spandrel reads it (``spandrel/architectures/HAT``): the buffers
``relative_position_index_SA`` ``[w^2, w^2]`` and ``relative_position_index_OCA`` ``[w^2, o^2]``,
``conv_first``, ``patch_embed.norm``, ``layers.<i>.residual_group.blocks.<b>`` (``norm1``,
``attn.relative_position_bias_table``, ``attn.qkv``, ``attn.proj``, ``conv_block.cab.0``,
``cab.2``, ``cab.3.attention.1``, ``cab.3.attention.3``, ``norm2``, ``mlp.fc1``, ``mlp.fc2``),
``layers.<i>.residual_group.overlap_attn`` (its table, ``norm1``, ``qkv``, ``proj``, ``norm2``,
``mlp``), ``layers.<i>.conv``, ``norm``, ``conv_after_body``, ``conv_before_upsample.0``,
``upsample.<2k>`` and ``conv_last``.

Read from the keys and shapes, as spandrel's loader: embed dim and channels (``conv_first``),
``num_feat`` (``conv_last.weight``'s input), the window (``relative_position_index_SA``), the
overlap ratio (``relative_position_index_OCA``'s columns; spandrel's "nice" ratios first), depths
and heads per group, ``resi_connection`` (``conv_after_body``: 1conv, else identity), compress
ratio and squeeze factor (the conv block's channels), ``qkv_bias``, ``patch_norm``, the MLP
ratio and the scale (only x4). ``conv_scale`` (0.01) and ``img_range`` (1) are not in the file:
spandrel's defaults, the released models' values.
"""

from __future__ import annotations

import keras
import numpy as np

from sr.models.hat.net import overlap_index, overlap_size
from sr.models.registry import build_model
from sr.models.state_dicts import pairs
from sr.models.state_dicts.base import Found, State, StateDictError
from sr.models.swinir import blocks
from sr.models.swinir import layout as swin

arch = "hat"
kind = "generator"

BLOCK = "layers.0.residual_group.blocks.0"
OCA = "layers.0.residual_group.overlap_attn"
KEYS = (
    "relative_position_index_SA", "conv_first.weight", f"{BLOCK}.norm1.weight",
    f"{BLOCK}.conv_block.cab.0.weight", f"{BLOCK}.conv_block.cab.3.attention.1.weight",
    f"{BLOCK}.mlp.fc1.bias", f"{OCA}.relative_position_bias_table", f"{OCA}.qkv.weight",
    "conv_last.weight",
)  # fmt: skip
NICE = (0, 1, 0.5, 0.25, 0.75, 0.1, 0.2, 0.3, 0.4, 0.6, 0.7, 0.8, 0.9)  # spandrel's
SCALE = 4
parameters = swin.parameters  # PyTorch's count of a shapes_of (buffers aside)


def _ratio(window: int, size: int) -> float:
    """spandrel's ``_get_overlap_ratio``: a ratio r with ``int(window + window r) == size``."""
    for r in NICE:
        if int(window + window * r) == size:
            return float(r)
    return (size - window) / window + 0.01


def _divisor(dim: int, out: int, key: str) -> int:
    """The integer d with ``dim // d == out`` (the reference's compress ratio, squeeze)."""
    for d in (round(dim / out), *range(1, dim + 1)):
        if d >= 1 and dim // d == out:
            return int(d)
    raise StateDictError(f"{arch}: {key} has {out} channels, not embed_dim {dim} // an integer")


def _block(m: dict, heads: int) -> dict:
    dim, c = m["embed_dim"], "conv_block.cab"
    shapes = swin.block_shapes({**m, "window": m["window"]}, heads)
    del shapes["attn.relative_position_index"]
    conv = {}
    for key, out, c_in, k in (
        (f"{c}.0", dim // m["compress_ratio"], dim, 3),
        (f"{c}.2", dim, dim // m["compress_ratio"], 3),
        (f"{c}.3.attention.1", dim // m["squeeze_factor"], dim, 1),
        (f"{c}.3.attention.3", dim, dim // m["squeeze_factor"], 1),
    ):
        conv |= {f"{key}.weight": (out, c_in, k, k), f"{key}.bias": (out,)}  # fmt: skip
    items = list(shapes.items())
    at = [k for k, _ in items].index("norm2.weight")
    return dict(items[:at] + list(conv.items()) + items[at:])


def _ocab(m: dict, heads: int) -> dict:
    dim, w, hidden = m["embed_dim"], m["window"], int(m["embed_dim"] * m["mlp_ratio"])
    o = overlap_size(w, m["overlap_ratio"])
    shapes = {"relative_position_bias_table": ((w + o - 1) ** 2, heads)}
    shapes |= {"norm1.weight": (dim,), "norm1.bias": (dim,), "qkv.weight": (3 * dim, dim)}
    if m.get("qkv_bias", True):
        shapes["qkv.bias"] = (3 * dim,)
    shapes |= {"proj.weight": (dim, dim), "proj.bias": (dim,)}
    shapes |= {"norm2.weight": (dim,), "norm2.bias": (dim,)}
    shapes |= {"mlp.fc1.weight": (hidden, dim), "mlp.fc1.bias": (hidden,)}
    return shapes | {"mlp.fc2.weight": (dim, hidden), "mlp.fc2.bias": (dim,)}


def shapes_of(m: dict, channels: int, scale: int = SCALE) -> dict[str, tuple[int, ...]]:
    """Every tensor of the reference's state dict for the keys ``m`` (``model`` keys of
    ``sr.models.hat.HATConfig``), in its order: key -> shape (buffers included)."""
    dim, w = m["embed_dim"], m["window"]
    o = overlap_size(w, m["overlap_ratio"])
    shapes = {"relative_position_index_SA": (w * w, w * w),
              "relative_position_index_OCA": (w * w, o * o)}  # fmt: skip
    shapes |= {"conv_first.weight": (dim, channels, 3, 3), "conv_first.bias": (dim,)}
    if m.get("patch_norm", True):
        shapes |= {"patch_embed.norm.weight": (dim,), "patch_embed.norm.bias": (dim,)}
    for i, depth in enumerate(m["depths"]):
        group = f"layers.{i}.residual_group"
        for b in range(depth):
            shapes |= {f"{group}.blocks.{b}.{k}": v for k, v in _block(m, m["heads"][i]).items()}
        shapes |= {f"{group}.overlap_attn.{k}": v for k, v in _ocab(m, m["heads"][i]).items()}
        swin.resi_shapes(shapes, f"layers.{i}.conv", dim, m["resi_connection"])
    shapes |= {"norm.weight": (dim,), "norm.bias": (dim,)}
    swin.resi_shapes(shapes, "conv_after_body", dim, m["resi_connection"])
    swin.upsampler_shapes(shapes, {**m, "upsampler": "pixelshuffle"}, channels, scale,
                          m["num_feat"])  # fmt: skip
    return shapes


def detect(state: State) -> Found | None:
    """The HAT of ``state``'s keys and shapes, or None if it is not a HAT state dict.

    Raises:
        StateDictError: for a HAT of a scale other than 4, or with an absolute position
            embedding (``ape``; not supported).
    """
    if not all(k in state for k in KEYS):
        return None
    if "absolute_pos_embed" in state:
        raise StateDictError(f"{arch}: an absolute position embedding (ape=True): not supported")
    dim, channels = pairs.shape_of(state, "conv_first.weight", arch, 4)[:2]
    feat = pairs.shape_of(state, "conv_last.weight", arch, 4)[1]
    scale = swin.read_scale(state, "pixelshuffle", channels, feat)
    pairs.only_x4(scale, arch, f"the upsample convs of {feat} channels")
    w = int(round(pairs.shape_of(state, "relative_position_index_SA", arch, 2)[0] ** 0.5))
    size = int(round(pairs.shape_of(state, "relative_position_index_OCA", arch, 2)[1] ** 0.5))
    groups = pairs.numbered(state, "layers.", arch, first=0)
    depths = [pairs.numbered(state, f"layers.{i}.residual_group.blocks.", arch, first=0)
              for i in range(groups)]  # fmt: skip
    table = "residual_group.overlap_attn.relative_position_bias_table"
    heads = [pairs.shape_of(state, f"layers.{i}.{table}", arch, 2)[1] for i in range(groups)]
    cab = f"{BLOCK}.conv_block.cab"
    model = {
        "arch": arch, "embed_dim": dim, "depths": depths, "heads": heads, "window": w,
        "compress_ratio": _divisor(dim, np.shape(state[f"{cab}.0.weight"])[0], f"{cab}.0"),
        "squeeze_factor": _divisor(dim, np.shape(state[f"{cab}.3.attention.1.weight"])[0],
                                   f"{cab}.3.attention.1"),
        "conv_scale": 0.01, "overlap_ratio": _ratio(w, size),
        "mlp_ratio": float(np.shape(state[f"{BLOCK}.mlp.fc1.bias"])[0] / dim),
        "qkv_bias": f"{BLOCK}.attn.qkv.bias" in state,
        "patch_norm": "patch_embed.norm.weight" in state,
        "resi_connection": "1conv" if "conv_after_body.weight" in state else "identity",
        "num_feat": feat, "img_range": 1.0, "img_size": 64,
    }  # fmt: skip
    notes = (f"window {w}, overlap window {size}, depths {depths}; conv_scale 0.01 and "
             "img_range 1 (not in the file: the released models')",)  # fmt: skip
    return Found(arch, kind, model, scale, channels, notes)


def build(found: Found) -> keras.Model:
    """``sr.models.hat.net.build`` of ``found`` (input and output in [0, 1])."""
    return build_model(found.model, found.scale, found.channels)


def load(model: keras.Model, state: State, found: Found) -> None:
    """Set ``model`` (of :func:`build`) from ``state``; the index buffers checked by shape.

    Raises:
        StateDictError: naming missing, extra and misshapen keys; nothing is set then.
    """
    shapes = shapes_of(found.model, found.channels, found.scale)
    swin.load_with(model, state, found, shapes, arch)


def dump(model: keras.Model, found: Found) -> dict[str, np.ndarray]:
    """The reference state dict of ``model`` (index buffers recomputed), loadable by the
    official class with ``strict=True``.

    Raises:
        StateDictError: for a scale other than 4, or a ``conv_scale`` or ``img_range`` other
            than the released models' (spandrel would build the file with those).
    """
    m = found.model
    fixed = (("conv_scale", 0.01), ("img_range", 1.0))
    faults = [f"model.{k}={m.get(k)} (spandrel reads {v})" for k, v in fixed if m.get(k, v) != v]
    pairs.refuse_unwritable(found, faults, "HAT", "the official one",
                            "Train with model.conv_scale=0.01 model.img_range=1")  # fmt: skip
    shapes = shapes_of(m, found.channels, found.scale)
    w = m["window"]
    buffers = {
        "relative_position_index_SA": blocks.relative_index(w).astype(np.float32),
        "relative_position_index_OCA": overlap_index(w, m["overlap_ratio"]).astype(np.float32),
    }
    return swin.dump_with(model, found, shapes, buffers)
