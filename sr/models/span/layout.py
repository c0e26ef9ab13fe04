"""SPAN's state-dict layout, as the official code saves it (hongyuanyu/SPAN,
``basicsr/archs/span_arch.py``) and spandrel reads it (``spandrel/architectures/SPAN``):
``conv_1``, ``block_1`` .. ``block_6`` (``c1_r``, ``c2_r``, ``c3_r``), ``conv_cat``, ``conv_2`` and
``upsampler.0``; every ``Conv3XC`` holds its training branches (``conv.0`` 1x1, ``conv.1`` 3x3,
``conv.2`` 1x1, ``sk`` 1x1) and their fused 3x3 ``eval_conv``, which the reference's eval
forward recomputes from the branches at every call.

Read from the keys and shapes: the features (``conv_1.sk.weight`` ``[F, C, 1, 1]``), the image
channels C, the scale (``upsampler.0.weight`` ``[C s^2, F, 3, 3]``; only x4) and the
normalisation: ``(x - DIV2K RGB mean) * 255`` as the reference, or none where spandrel's
``no_norm`` buffer is present. The Keras model is ``sr.models.span.net.build_span`` with
``norm=div2k_mean`` (or ``none``): the reference's function exactly.
"""

from __future__ import annotations

import logging

import keras
import numpy as np

from sr.models.registry import build_model
from sr.models.span.net import Conv3XC
from sr.models.state_dicts import pairs
from sr.models.state_dicts.base import (
    Found,
    State,
    StateDictError,
    conv_out,
)

log = logging.getLogger(__name__)

arch = "span"
kind = "generator"

BLOCKS = 6  # the reference's SPAN has six blocks, hard-coded in its forward
IMG_RANGE = 255.0  # the reference's default, which spandrel always uses (not in the file)
KEYS = (  # spandrel's detection keys
    "conv_1.sk.weight",
    "block_1.c1_r.sk.weight",
    "block_1.c1_r.eval_conv.weight",
    "block_1.c3_r.eval_conv.weight",
    "conv_cat.weight",
    "conv_2.sk.weight",
    "conv_2.eval_conv.weight",
    "upsampler.0.weight",
)
SCALE = 4  # the only scale supported
NO_NORM = "no_norm"  # spandrel's buffer of a SPAN without normalisation


def detect(state: State) -> Found | None:
    """The SPAN of ``state``'s keys and shapes, or None if it is not a SPAN state dict.

    Raises:
        StateDictError: for a SPAN of a scale other than 4, of other than 6 blocks, whose output
            channels differ from its input, or that normalises other than 3 channels.
    """
    if not all(k in state for k in KEYS):
        return None
    features, channels = pairs.shape_of(state, "conv_1.sk.weight", arch, 4)[:2]
    blocks = pairs.numbered(state, "block_", arch)
    if blocks != BLOCKS:
        raise StateDictError(
            f"a SPAN of {blocks} blocks (block_1 .. block_{blocks}): the reference SPAN has "
            f"{BLOCKS}, and only its layout is supported"
        )
    out = pairs.shape_of(state, "upsampler.0.weight", arch, 4)[0]
    scale = pairs.shuffle_scale(out, channels, "upsampler.0.weight", arch)
    pairs.only_x4(scale, arch, f"upsampler.0.weight [{out}, ...]: {channels} channels x {scale}^2")
    norm = "none" if NO_NORM in state else "div2k_mean"
    if norm == "div2k_mean" and channels != 3:
        raise StateDictError(
            f"a SPAN of {channels} input channels that subtracts the RGB mean: the reference "
            "code normalises 3 channels only (without a no_norm buffer it cannot run)"
        )
    notes = (
        "the input normalised as the reference: (x - DIV2K RGB mean) * 255"
        if norm == "div2k_mean"
        else "no normalisation (spandrel's no_norm buffer)",
        "each Conv3XC's eval_conv is recomputed from its branches, as the reference's eval "
        "forward does",
    )
    model = {
        "arch": arch,
        "features": features,
        "blocks": blocks,
        "bicubic_skip": False,
        "img_range": IMG_RANGE if norm == "div2k_mean" else 1.0,
        "norm": norm,
        "fuse_silu": True,
    }
    return Found(arch, kind, model, scale, channels, notes)


def build(found: Found) -> keras.Model:
    """``sr.models.span.net.build_span`` of ``found`` (input and output in [0, 1])."""
    return build_model(found.model, found.scale, found.channels)


def _conv3xc(prefix: str, layer: Conv3XC) -> list[pairs.Slot]:
    return [
        pairs.pointwise(f"{prefix}.sk.weight", layer.w_skip),
        pairs.bias(f"{prefix}.sk.bias", layer.b_skip),
        pairs.pointwise(f"{prefix}.conv.0.weight", layer.w1),
        pairs.bias(f"{prefix}.conv.0.bias", layer.b1),
        pairs.kernel(f"{prefix}.conv.1.weight", layer.w2),
        pairs.bias(f"{prefix}.conv.1.bias", layer.b2),
        pairs.pointwise(f"{prefix}.conv.2.weight", layer.w3),
        pairs.bias(f"{prefix}.conv.2.bias", layer.b3),
    ]


def _fused(model: keras.Model) -> dict[str, Conv3XC]:
    """The Conv3XC layers of ``model`` by their reference prefix."""
    prefixes = ["conv_1"]
    prefixes += [f"block_{b}.c{i}_r" for b in range(1, BLOCKS + 1) for i in (1, 2, 3)]
    prefixes += ["conv_2"]
    layers = pairs.layers_of(model, (Conv3XC,), arch, len(prefixes))
    return dict(zip(prefixes, layers))


def _slots(model: keras.Model) -> tuple[list[pairs.Slot], dict[str, tuple[int, ...]]]:
    """The slots of ``model`` and the ``eval_conv`` keys (derived) with their shapes."""
    slots, derived = [], {}
    for prefix, layer in _fused(model).items():
        slots += _conv3xc(prefix, layer)
        c_out, c_in = layer.filters, int(layer.w1.shape[0])
        derived[f"{prefix}.eval_conv.weight"] = (c_out, c_in, 3, 3)
        derived[f"{prefix}.eval_conv.bias"] = (c_out,)
    slots += pairs.conv_slots(model, ["conv_cat", "upsampler.0"], arch, {"upsampler.0": SCALE})
    return slots, derived


def load(model: keras.Model, state: State, found: Found) -> None:
    """Set ``model`` (of :func:`build`) from ``state``: the branches of every Conv3XC, the
    fusion and the upsampler; each ``eval_conv`` is checked by name and shape, and a warning
    is logged where it is not the fused branches (the branches are used, as the reference's eval
    forward uses them).

    Raises:
        StateDictError: naming missing, extra and misshapen keys; nothing is set then.
    """
    slots, derived = _slots(model)
    pairs.load(state, slots, arch, derived, optional=(NO_NORM,))
    stale = []
    for prefix, layer in _fused(model).items():
        kernel, bias = (keras.ops.convert_to_numpy(t) for t in layer.fused())
        for got, want in (
            (state[f"{prefix}.eval_conv.weight"], conv_out(kernel)),
            (state[f"{prefix}.eval_conv.bias"], bias),
        ):
            if not np.allclose(np.asarray(got, np.float32), want, rtol=1e-3, atol=1e-4):
                stale.append(prefix)
                break
    if stale:
        log.warning(
            "SPAN: the eval_conv of %d Conv3XC (%s) is not the fusion of its branches (a file "
            "saved before an eval forward); the branches were used, as the reference's eval "
            "forward does",
            len(stale),
            ", ".join(stale[:3]),
        )


def dump(model: keras.Model, found: Found) -> dict[str, np.ndarray]:
    """The reference state dict of ``model``: the branches and the fused ``eval_conv`` of every
    Conv3XC (and ``no_norm`` for a model without normalisation), loadable by the reference
    class and spandrel with ``strict=True``.

    Raises:
        StateDictError: for a model the reference cannot compute: another normalisation than
            the reference's (``norm=centre``, an ``img_range`` other than 255), a bicubic skip,
            other than 6 blocks, a scale other than 4.
    """
    _representable(found)
    slots, _ = _slots(model)
    state = pairs.dump(slots)
    for prefix, layer in _fused(model).items():
        kernel, bias = (keras.ops.convert_to_numpy(t) for t in layer.fused())
        state[f"{prefix}.eval_conv.weight"] = conv_out(kernel)
        state[f"{prefix}.eval_conv.bias"] = np.ascontiguousarray(bias, dtype=np.float32)
    if found.model.get("norm") == "none":
        state[NO_NORM] = np.zeros(1, np.float32)
    return {k: state[k] for k in _reference_order() if k in state}


def _reference_order() -> list[str]:
    """The keys in the order of the reference's ``state_dict()``: ``no_norm`` (spandrel's), then
    the modules as it registers them (``conv_cat`` before ``conv_2``), in a Conv3XC ``sk``,
    ``conv.0`` .. ``conv.2``, ``eval_conv``."""
    convs = ["conv_1"] + [f"block_{b}.c{i}_r" for b in range(1, BLOCKS + 1) for i in (1, 2, 3)]
    parts = ("sk", "conv.0", "conv.1", "conv.2", "eval_conv")
    keys = [NO_NORM] + [f"{c}.{p}.{t}" for c in convs for p in parts for t in ("weight", "bias")]
    keys += ["conv_cat.weight", "conv_cat.bias"]
    keys += [f"conv_2.{p}.{t}" for p in parts for t in ("weight", "bias")]
    return keys + ["upsampler.0.weight", "upsampler.0.bias"]


def _representable(found: Found) -> None:
    m = found.model
    want = {"div2k_mean": IMG_RANGE, "none": 1.0}
    norm, img_range = m.get("norm", "centre"), float(m.get("img_range", IMG_RANGE))
    faults = []
    if want.get(norm) != img_range:
        faults.append(
            f"model.norm={norm} model.img_range={img_range:g} (the reference: div2k_mean and "
            "255, or none and 1 with spandrel's no_norm)"
        )
    if not m.get("fuse_silu"):
        faults.append("model.fuse_silu=false (the reference fuses the SiLU of that conv)")
    if m.get("bicubic_skip"):
        faults.append("model.bicubic_skip=true (the reference has none)")
    if int(m.get("blocks", BLOCKS)) != BLOCKS:
        faults.append(f"model.blocks={m.get('blocks')} (the reference has {BLOCKS})")
    pairs.refuse_unwritable(
        found,
        faults,
        "SPAN",
        "the reference's",
        "Train with model.norm=div2k_mean model.fuse_silu=true (RGB) to export to PyTorch",
    )
