"""EDSR's state-dict layout as BasicSR saves it (``basicsr/archs/edsr_arch.py``, ``EDSR``):
``conv_first``, ``body.0`` .. ``body.{B-1}`` (``ResidualBlockNoBN``: ``conv1``, ``conv2``),
``conv_after_body``, ``upsample.0`` and ``upsample.2`` (at x4 two stages of conv to 4 F channels
and ``PixelShuffle(2)``) and ``conv_last``. Not the layout of the EDSR authors' own code
(``head``/``body``/``tail``, spandrel's ``EDSR``).

Read from the keys and shapes: the features F (``conv_first.weight`` ``[F, C, 3, 3]``), the
blocks, the image channels C and the scale (the upsample stages; only x4). Not in the file:
``img_range`` (BasicSR's default 255 is taken), the RGB mean (BasicSR's default, the DIV2K mean)
and ``res_scale``, taken as BasicSR's options files set it: 0.1 for EDSR-L (256 features,
32 blocks), 1 otherwise. The Keras model is ``sr.models.edsr.net.build_edsr`` with
``norm=div2k_mean img_range=255``: BasicSR's function exactly.
"""

from __future__ import annotations

import keras
import numpy as np

from sr.models.registry import build_model
from sr.models.state_dicts import pairs
from sr.models.state_dicts.base import Found, State, StateDictError

arch = "edsr_baseline"
kind = "generator"

IMG_RANGE = 255.0  # BasicSR's default img_range (not in the file)
EDSR_L = (256, 32)  # features and blocks of BasicSR's EDSR-L options, whose res_scale is 0.1
KEYS = ("conv_first.weight", "body.0.conv1.weight", "conv_after_body.weight", "upsample.0.weight")
KEYS += ("conv_last.weight",)


def _scale(state: State, features: int) -> tuple[int, str]:
    """The scale of the upsample stages and what it is read from."""
    stages = []
    for n in range(0, 2 * 8, 2):
        key = f"upsample.{n}.weight"
        if key not in state:
            break
        stages.append(pairs.shape_of(state, key, arch, 4)[0] // features)
    evidence = f"upsample convs of {', '.join(f'{r} x {features}' for r in stages)} channels"
    if stages and all(r == 4 for r in stages):
        return 2 ** len(stages), evidence
    if stages == [9]:
        return 3, evidence
    raise StateDictError(f"{arch}: {evidence}: not the pixel-shuffle stages of BasicSR's EDSR")


def detect(state: State) -> Found | None:
    """BasicSR's EDSR of ``state``'s keys and shapes, or None if it is not such a state dict.

    Raises:
        StateDictError: for a scale other than 4, output channels other than the input's, or
            other than 3 channels (BasicSR's EDSR subtracts an RGB mean).
    """
    if not all(k in state for k in KEYS):
        return None
    features, channels = pairs.shape_of(state, "conv_first.weight", arch, 4)[:2]
    blocks = pairs.numbered(state, "body.", arch, first=0)
    scale, evidence = _scale(state, features)
    pairs.only_x4(scale, arch, evidence)
    out = pairs.shape_of(state, "conv_last.weight", arch, 4)[0]
    if channels != 3 or out != 3:
        raise StateDictError(
            f"a BasicSR EDSR of {channels} input and {out} output channels: BasicSR's EDSR "
            "subtracts and adds back an RGB mean, so only 3 channels in and out are supported"
        )
    res_scale = 0.1 if (features, blocks) == EDSR_L else 1.0
    notes = (
        "the input normalised as BasicSR: (x - DIV2K RGB mean) * 255, the output / 255 + mean",
        f"res_scale {res_scale:g} (not in the file: BasicSR's options use 0.1 for EDSR-L, 256 "
        "features and 32 blocks, 1 otherwise; set model.res_scale if the file's differs)",
    )
    model = {
        "arch": "edsr",  # the registered architecture (its layout is named edsr_baseline)
        "features": features,
        "blocks": blocks,
        "res_scale": res_scale,
        "direct_upsample": False,
        "bicubic_skip": False,
        "norm": "div2k_mean",
        "img_range": IMG_RANGE,
    }
    return Found(arch, kind, model, scale, channels, notes)


def build(found: Found) -> keras.Model:
    """``sr.models.edsr.net.build_edsr`` of ``found`` (input and output in [0, 1])."""
    return build_model(found.model, found.scale, found.channels)


def _slots(model: keras.Model, blocks: int) -> list[pairs.Slot]:
    """Every variable of ``model`` (BasicSR's EDSR of ``blocks`` blocks at x4) and its key."""
    names = ["conv_first"]
    names += [f"body.{b}.conv{i}" for b in range(blocks) for i in (1, 2)]
    names += ["conv_after_body", "upsample.0", "upsample.2", "conv_last"]
    return pairs.conv_slots(model, names, arch, {"upsample.0": 2, "upsample.2": 2})


def load(model: keras.Model, state: State, found: Found) -> None:
    """Set ``model`` (of :func:`build`) from ``state``.

    Raises:
        StateDictError: naming missing, extra and misshapen keys; nothing is set then.
    """
    pairs.load(state, _slots(model, int(found.model["blocks"])), arch)


def dump(model: keras.Model, found: Found) -> dict[str, np.ndarray]:
    """The state dict of ``model`` as BasicSR's ``EDSR`` saves it, loadable with
    ``strict=True``; BasicSR computes the same with ``img_range`` = ``model.img_range`` (its
    default 255) and its default ``rgb_mean``.

    Raises:
        StateDictError: for a model BasicSR's EDSR cannot compute: another normalisation than
            ``norm=div2k_mean``, a bicubic skip, the direct upsampler, a scale other than 4.
    """
    m, faults = found.model, []
    if m.get("norm", "centre") != "div2k_mean":
        faults.append(f"model.norm={m.get('norm', 'centre')} (BasicSR: div2k_mean, RGB)")
    for key in ("bicubic_skip", "direct_upsample"):
        if m.get(key):
            faults.append(f"model.{key}=true (not in BasicSR's EDSR)")
    pairs.refuse_unwritable(
        found,
        faults,
        "EDSR",
        "BasicSR's",
        "Train model=edsr_baseline with model.norm=div2k_mean model.img_range=255 and "
        "data.channels=3 to export to PyTorch",
    )
    return pairs.dump(_slots(model, int(m["blocks"])))
