"""DAT's state-dict layout, as the official code saves it (zhengchen1999/DAT
``basicsr/archs/dat_arch.py``) and spandrel reads it (``spandrel/architectures/DAT``):
``conv_first``, ``before_RG.1``, ``layers.<g>.blocks.<b>`` (``norm1``, ``attn.*``, ``norm2``,
``ffn.*``), ``layers.<g>.conv``, ``norm``, ``conv_after_body`` and the upsampler, plus buffers the
reference computes from its hyperparameters: each spatial branch's ``rpe_biases`` and
``relative_position_index``, each shifted block's ``attn_mask_0`` / ``attn_mask_1`` (for
``img_size``), each BatchNorm's ``num_batches_tracked``.

Read from the keys and shapes as spandrel does: embed dim and channels (``conv_first.weight``),
groups and depths (``layers.<g>.blocks.<b>``), heads (``blocks.1.attn.temperature``, else twice
``pos3.2``'s outputs), upsampler (``conv_last`` present: pixelshuffle), residual conv
(``conv_after_body.weight`` present: 1conv), qkv bias, expansion (``ffn.fc1`` over embed), window
(``rpe_biases``' last row + 1), ``img_size`` (a mask's windows times tokens) and the scale.
"""

from __future__ import annotations

import math

import keras
import numpy as np

from sr.models.dat import blocks
from sr.models.dat.net import rpe_biases
from sr.models.dat.slots import model_slots
from sr.models.registry import build_model
from sr.models.state_dicts import pairs
from sr.models.state_dicts.base import Found, State

arch = "dat"
kind = "generator"

B0 = "layers.0.blocks.0."
KEYS = (  # spandrel's detection keys
    "conv_first.weight", "before_RG.1.weight", "before_RG.1.bias", "norm.weight",
    B0 + "norm1.weight", B0 + "norm2.weight", B0 + "ffn.fc1.weight", B0 + "ffn.sg.norm.weight",
    B0 + "ffn.sg.conv.weight", B0 + "ffn.fc2.weight", B0 + "attn.qkv.weight",
    B0 + "attn.proj.weight", B0 + "attn.dwconv.0.weight", B0 + "attn.dwconv.1.running_mean",
    B0 + "attn.channel_interaction.1.weight", B0 + "attn.channel_interaction.2.running_mean",
    B0 + "attn.channel_interaction.4.weight", B0 + "attn.spatial_interaction.0.weight",
    B0 + "attn.spatial_interaction.1.running_mean", B0 + "attn.spatial_interaction.3.weight",
    B0 + "attn.attns.0.rpe_biases", B0 + "attn.attns.0.relative_position_index",
    B0 + "attn.attns.0.pos.pos_proj.weight", B0 + "attn.attns.0.pos.pos1.0.weight",
    B0 + "attn.attns.0.pos.pos3.0.weight",
)  # fmt: skip
SCALE = 4


def detect(state: State) -> Found | None:
    """The DAT of ``state``'s keys and shapes, or None if it is not a DAT state dict.

    Raises:
        StateDictError: for a DAT of a scale other than 4.
    """
    if not all(k in state for k in KEYS):
        return None
    if "conv_after_body.weight" not in state and "conv_after_body.4.weight" not in state:
        return None
    direct = "conv_last.weight" not in state
    if direct and "upsample.0.weight" not in state:
        return None
    dim, channels = pairs.shape_of(state, "conv_first.weight", arch, 4)[:2]
    groups = pairs.numbered(state, "layers.", arch, first=0)
    depths = [pairs.numbered(state, f"layers.{g}.blocks.", arch, first=0) for g in range(groups)]
    heads = [_heads(state, g, d) for g, d in enumerate(depths)]
    scale = _scale(state, direct, channels)
    convs = "upsample.0" if direct else "upsample.N"
    pairs.only_x4(scale, arch, f"the upsampler's convs ({convs})")
    split = [int(v) + 1 for v in np.asarray(state[B0 + "attn.attns.0.rpe_biases"])[-1]]
    model = {
        "arch": arch, "embed_dim": dim, "depths": depths, "heads": heads, "split": split,
        "expansion": pairs.shape_of(state, B0 + "ffn.fc1.weight", arch, 2)[0] / dim,
        "qkv_bias": B0 + "attn.qkv.bias" in state,
        "resi_connection": "1conv" if "conv_after_body.weight" in state else "3conv",
        "upsampler": "pixelshuffledirect" if direct else "pixelshuffle", "img_range": 1.0,
    }  # fmt: skip
    masks = [k for k in state if k.endswith("attn.attn_mask_0")]
    if masks:
        n_w, n = np.shape(state[masks[0]])[:2]
        model["img_size"] = int(round(math.sqrt(n_w * n)))
    notes = ("the input loses the DIV2K RGB mean, as the reference",) if channels == 3 else ()
    return Found(arch, kind, model, scale, channels, notes)


def _heads(state: State, group: int, depth: int) -> int:
    prefix = f"layers.{group}.blocks."
    if depth >= 2:
        return pairs.shape_of(state, f"{prefix}1.attn.temperature", arch, 3)[0]
    return 2 * pairs.shape_of(state, f"{prefix}0.attn.attns.0.pos.pos3.2.weight", arch, 2)[0]


def _scale(state: State, direct: bool, channels: int) -> int:
    if direct:
        out = pairs.shape_of(state, "upsample.0.weight", arch, 4)[0]
        return pairs.shuffle_scale(out, channels, "upsample.0.weight", arch)
    convs = [k for k in state if k.startswith("upsample.") and k.endswith(".weight")]
    out = pairs.shape_of(state, "upsample.0.weight", arch, 4)[0]
    feat = pairs.shape_of(state, "conv_last.weight", arch, 4)[1]
    return 3 if out == 9 * feat else 2 ** len(convs)


def build(found: Found) -> keras.Model:
    """``sr.models.dat.net.build`` of ``found`` (input and output in [0, 1])."""
    return build_model(found.model, found.scale, found.channels)


def _shuffles(found: Found) -> dict:
    if found.model.get("upsampler", "pixelshuffle") == "pixelshuffledirect":
        return {"upsample.0": (found.channels, found.scale)}
    return {f"upsample.{2 * i}": (64, 2) for i in range(int(math.log2(found.scale)))}


def buffers(model: keras.Model, found: Found) -> dict[str, np.ndarray]:
    """The reference's buffers for ``model``: ``rpe_biases`` and ``relative_position_index``
    of each spatial branch, the masks of each shifted block (for ``img_size``), each
    BatchNorm's ``num_batches_tracked`` (0)."""
    size = int(found.model.get("img_size", 64))
    out = {}
    for layer in model.layers:
        if not hasattr(layer, "parts"):
            continue
        for key, part in layer.parts.items():
            if isinstance(part, keras.layers.BatchNormalization):
                out[f"{layer.name}.{key}.num_batches_tracked"] = np.zeros((), np.int64)
        if not layer.spatial:
            continue
        s0, s1 = layer.split
        for i, (wh, ww) in enumerate(((s0, s1), (s1, s0))):
            out[f"{layer.name}.attn.attns.{i}.rpe_biases"] = rpe_biases(wh, ww)
            index = blocks.relative_index(wh, ww).astype(np.int64)
            out[f"{layer.name}.attn.attns.{i}.relative_position_index"] = index
        if layer.shift:
            for i, (wh, ww) in enumerate(((s0, s1), (s1, s0))):
                mask = blocks.shift_mask(size, size, wh, ww, wh // 2, ww // 2)
                out[f"{layer.name}.attn.attn_mask_{i}"] = np.asarray(mask, np.float32)
    return out


def load(model: keras.Model, state: State, found: Found) -> None:
    """Set ``model`` (of :func:`build`) from ``state``: every parameter and BatchNorm
    statistic; the buffers the reference computes (position tables, masks, batch counts) are
    checked by name and shape and recomputed here.

    Raises:
        StateDictError: naming missing, extra and misshapen keys; nothing is set then.
    """
    slots = model_slots(model, _shuffles(found))
    derived = {k: np.shape(v) for k, v in buffers(model, found).items()}
    for k in derived:  # a scalar batch count saved through np.ascontiguousarray is [1]
        if k.endswith("num_batches_tracked") and np.size(state.get(k, ())) == 1:
            derived[k] = np.shape(state[k])
    pairs.load(state, slots, arch, derived)


def dump(model: keras.Model, found: Found) -> dict[str, np.ndarray]:
    """The reference state dict of ``model`` (with its buffers), loadable by the official class
    and spandrel with ``strict=True``.

    Raises:
        StateDictError: for a model the reference cannot compute: ``img_range`` other than 1
            (spandrel always builds 1), a scale other than 4.
    """
    faults = []
    if float(found.model.get("img_range", 1.0)) != 1.0:
        faults.append(f"model.img_range={found.model['img_range']} (spandrel reads 1)")
    pairs.refuse_unwritable(found, faults, "DAT", "the official DAT", "Train with img_range 1")
    state = pairs.dump(model_slots(model, _shuffles(found))) | buffers(model, found)
    return {k: np.ascontiguousarray(v) for k, v in state.items()}


def expected_parameters(keys: dict, channels: int = 3, scale: int = SCALE) -> int:
    """Parameters of the reference DAT of ``keys`` (defaults: ``sr.models.dat.DATConfig``),
    counted from its module shapes without building a Keras model."""
    from sr.models.dat import DATConfig

    return _count({**DATConfig().__dict__, **keys}, channels, scale)


def _count(cfg: dict, channels: int, scale: int) -> int:
    dim = cfg["embed_dim"]
    hidden = int(dim * cfg["expansion"])
    conv = lambda i, o, k: i * o * k * k + o  # noqa: E731
    common = (dim * 3 * dim + (3 * dim if cfg["qkv_bias"] else 0)) + dim * dim + dim
    common += 9 * dim + dim + 2 * dim  # dwconv and its BatchNorm's weight and bias
    common += conv(dim, dim // 8, 1) + 2 * (dim // 8) + conv(dim // 8, dim, 1)
    common += conv(dim, dim // 16, 1) + 2 * (dim // 16) + conv(dim // 16, 1, 1)
    common += 4 * dim  # norm1, norm2
    common += dim * hidden + hidden + 2 * (hidden // 2) + 10 * (hidden // 2)
    common += (hidden // 2) * dim + dim
    pos = (dim // 2 // 4) // 4
    total = 0
    for g, depth in enumerate(cfg["depths"]):
        heads = cfg["heads"][g]
        branch = 3 * pos + 3 * 2 * pos + 2 * (pos * pos + pos) + pos * (heads // 2) + heads // 2
        for b in range(depth):
            total += common + (2 * branch if b % 2 == 0 else heads)
        total += _resi(dim, cfg["resi_connection"])
    total += conv(channels, dim, 3) + 2 * dim + 2 * dim + _resi(dim, cfg["resi_connection"])
    if cfg["upsampler"] == "pixelshuffledirect":
        return total + conv(dim, channels * scale * scale, 3)
    total += conv(dim, 64, 3) + conv(64, channels, 3)
    return total + int(math.log2(scale)) * conv(64, 256, 3)


def _resi(dim: int, kind: str) -> int:
    if kind == "1conv":
        return dim * dim * 9 + dim
    q = dim // 4
    return dim * q * 9 + q + q * q + q + q * dim * 9 + dim
