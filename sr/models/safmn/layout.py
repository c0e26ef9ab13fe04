"""SAFMN's state-dict layout, as the official code saves it (sunny2109/SAFMN
``basicsr/archs/safmn_arch.py``) and spandrel reads it (``spandrel/architectures/SAFMN``):
``to_feat``, ``feats.<i>.norm1`` / ``norm2``, ``feats.<i>.safm.mfr.<0-3>`` (depthwise 3x3),
``feats.<i>.safm.aggr``, ``feats.<i>.ccm.ccm.0`` / ``.2`` and ``to_img.0``.

Read from the keys and shapes as spandrel does: dim (``to_feat.weight``), blocks (the numbered
``feats``), ffn_scale (``ccm.ccm.0``'s outputs over dim), the scale (``to_img.0.weight`` ``[C
s^2, dim, 3, 3]``; only x4). The official class is RGB only; a Y file (1 input channel) is read
and built here, but not loadable by the official class.
"""

from __future__ import annotations

import keras
import numpy as np

from sr.models.dat.slots import model_slots
from sr.models.registry import build_model
from sr.models.state_dicts import pairs
from sr.models.state_dicts.base import Found, State

arch = "safmn"
kind = "generator"

KEYS = (
    "to_feat.weight", "feats.0.norm1.weight", "feats.0.norm2.weight", "feats.0.safm.mfr.0.weight",
    "feats.0.safm.mfr.3.weight", "feats.0.safm.aggr.weight", "feats.0.ccm.ccm.0.weight",
    "feats.0.ccm.ccm.2.weight", "to_img.0.weight",
)  # fmt: skip
SCALE = 4


def detect(state: State) -> Found | None:
    """The SAFMN of ``state``'s keys and shapes, or None if it is not a SAFMN state dict.

    Raises:
        StateDictError: for a SAFMN of a scale other than 4.
    """
    if not all(k in state for k in KEYS):
        return None
    dim, channels = pairs.shape_of(state, "to_feat.weight", arch, 4)[:2]
    out = pairs.shape_of(state, "to_img.0.weight", arch, 4)[0]
    scale = pairs.shuffle_scale(out, channels, "to_img.0.weight", arch)
    pairs.only_x4(scale, arch, f"to_img.0.weight [{out}, ...]: {channels} channels x {scale}^2")
    hidden = pairs.shape_of(state, "feats.0.ccm.ccm.0.weight", arch, 4)[0]
    model = {"arch": arch, "dim": dim, "blocks": pairs.numbered(state, "feats.", arch, first=0),
             "ffn_scale": hidden / dim}  # fmt: skip
    return Found(arch, kind, model, scale, channels)


def build(found: Found) -> keras.Model:
    """``sr.models.safmn.net.build`` of ``found`` (input and output in [0, 1])."""
    return build_model(found.model, found.scale, found.channels)


def _slots(model: keras.Model, found: Found) -> list[pairs.Slot]:
    return model_slots(model, {"to_img.0": (found.channels, found.scale)})


def load(model: keras.Model, state: State, found: Found) -> None:
    """Set every variable of ``model`` (of :func:`build`) from ``state``.

    Raises:
        StateDictError: naming missing, extra and misshapen keys; nothing is set then.
    """
    pairs.load(state, _slots(model, found), arch)


def dump(model: keras.Model, found: Found) -> dict[str, np.ndarray]:
    """The reference state dict of ``model``, loadable by the official class and spandrel with
    ``strict=True`` (RGB).

    Raises:
        StateDictError: for a scale other than 4.
    """
    pairs.refuse_unwritable(found, [], "SAFMN", "the official SAFMN", "Train at x4")
    return pairs.dump(_slots(model, found))


def expected_parameters(keys: dict, channels: int = 3, scale: int = SCALE) -> int:
    """Parameters of the reference SAFMN of ``keys`` (defaults: ``SAFMNConfig``), counted
    without building a Keras model."""
    from sr.models.safmn import SAFMNConfig

    cfg = {**SAFMNConfig().__dict__, **keys}
    d, h = cfg["dim"], int(cfg["dim"] * cfg["ffn_scale"])
    block = 4 * d + 4 * (9 * (d // 4) + d // 4) + (d * d + d) + (9 * d * h + h) + (h * d + d)
    ends = (9 * channels * d + d) + (9 * d * channels * scale**2 + channels * scale**2)
    return cfg["blocks"] * block + ends
