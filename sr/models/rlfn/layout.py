"""RLFN's state-dict layout, as the official code saves it (bytedance/RLFN, ``model/rlfn.py``,
``model/rlfn_s.py``, ``model/rlfn_ntire.py`` with ``model/block.py``): ``conv_1``, ``block_1`` ..
``block_N`` (``RLFB``: ``c1_r``, ``c2_r``, ``c3_r``, ``c5`` and ``esa``: ``conv1``, ``conv_f``,
``conv2``, ``conv3``, ``conv4``), ``conv_2`` and ``upsampler.0``.

Read from the keys and shapes: the features F (``conv_1.weight`` ``[F, C, 3, 3]``), the
channels inside the blocks (``block_1.c1_r.weight``), the blocks, ESA's channels
(``block_1.esa.conv1.weight``), the image channels C and the scale (``upsampler.0.weight``
``[C s^2, F, 3, 3]``; only x4). The network has no normalisation, and the official release
takes [0, 255] (``test_demo.py``: ``img_L * 255.``, the output over 255), which is not in the
file: the Keras model is ``sr.models.rlfn.net.build_rlfn`` with ``norm=none img_range=255``, that
computation exactly on [0, 1] (a file trained on [0, 1] needs ``model.img_range=1``).
"""

from __future__ import annotations

import keras
import numpy as np

from sr.models.registry import build_model
from sr.models.state_dicts import pairs
from sr.models.state_dicts.base import Found, State, StateDictError

arch = "rlfn"
kind = "generator"

IMG_RANGE = 255.0  # the official test_demo.py's range (not in the file)
SCALE = 4  # the only scale supported
KEYS = (
    "conv_1.weight",
    "block_1.c1_r.weight",
    "block_1.c5.weight",
    "block_1.esa.conv1.weight",
    "block_1.esa.conv_f.weight",
    "conv_2.weight",
    "upsampler.0.weight",
)
BLOCK = ("c1_r", "c2_r", "c3_r", "c5", "esa.conv1", "esa.conv2", "esa.conv3", "esa.conv_f")
BLOCK += ("esa.conv4",)  # in the order sr.models.rlfn.rlfb creates its convs


def detect(state: State) -> Found | None:
    """The RLFN of ``state``'s keys and shapes, or None if it is not an RLFN state dict.

    Raises:
        StateDictError: for a scale other than 4, output channels other than the input's, or
            blocks whose 1x1 ``c5`` changes the channels (the builder keeps them).
    """
    if not all(k in state for k in KEYS):
        return None
    features, channels = pairs.shape_of(state, "conv_1.weight", arch, 4)[:2]
    mid = pairs.shape_of(state, "block_1.c1_r.weight", arch, 4)[0]
    esa = pairs.shape_of(state, "block_1.esa.conv1.weight", arch, 4)[0]
    blocks = pairs.numbered(state, "block_", arch)
    c5 = pairs.shape_of(state, "block_1.c5.weight", arch, 4)[0]
    if c5 != features:
        raise StateDictError(
            f"an RLFN whose blocks write {c5} channels (block_1.c5.weight) from {features}: "
            "only blocks that keep the features (the official models) are supported"
        )
    out = pairs.shape_of(state, "upsampler.0.weight", arch, 4)[0]
    scale = pairs.shuffle_scale(out, channels, "upsampler.0.weight", arch)
    pairs.only_x4(scale, arch, f"upsampler.0.weight [{out}, ...]: {channels} channels x {scale}^2")
    notes = (
        "input and output scaled by 255 as the official test_demo.py runs the model "
        "(model.img_range=255; a model trained on [0, 1] needs model.img_range=1)",
    )
    model = {
        "arch": arch,
        "features": features,
        "mid_features": None if mid == features else mid,
        "blocks": blocks,
        "esa_channels": esa,
        "bicubic_skip": False,
        "norm": "none",
        "img_range": IMG_RANGE,
    }
    return Found(arch, kind, model, scale, channels, notes)


def build(found: Found) -> keras.Model:
    """``sr.models.rlfn.net.build_rlfn`` of ``found`` (input and output in [0, 1])."""
    return build_model(found.model, found.scale, found.channels)


def _slots(model: keras.Model, blocks: int) -> list[pairs.Slot]:
    """Every variable of ``model`` (an RLFN of ``blocks`` blocks at x4) and its key."""
    names = ["conv_1"]
    names += [f"block_{b}.{conv}" for b in range(1, blocks + 1) for conv in BLOCK]
    names += ["conv_2", "upsampler.0"]
    return pairs.conv_slots(model, names, arch, {"upsampler.0": SCALE})


def load(model: keras.Model, state: State, found: Found) -> None:
    """Set ``model`` (of :func:`build`) from ``state``.

    Raises:
        StateDictError: naming missing, extra and misshapen keys; nothing is set then.
    """
    pairs.load(state, _slots(model, int(found.model["blocks"])), arch)


def dump(model: keras.Model, found: Found) -> dict[str, np.ndarray]:
    """The state dict of ``model`` as the official RLFN saves it, loadable with ``strict=True``;
    the official network computes the same on inputs times ``model.img_range`` (outputs over
    it).

    Raises:
        StateDictError: for a model the official network cannot compute: a normalisation
            (``norm`` other than ``none``), a bicubic skip, a scale other than 4.
    """
    m, faults = found.model, []
    if m.get("norm", "centre") != "none":
        faults.append(f"model.norm={m.get('norm', 'centre')} (the official RLFN: none)")
    if m.get("bicubic_skip"):
        faults.append("model.bicubic_skip=true (not in the official RLFN)")
    pairs.refuse_unwritable(
        found,
        faults,
        "RLFN",
        "the official one",
        "Train with model.norm=none (and model.img_range=255 for the official [0, 255] "
        "convention) to export to PyTorch",
    )
    return pairs.dump(_slots(model, int(m["blocks"])))
