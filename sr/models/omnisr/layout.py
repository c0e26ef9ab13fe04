"""OmniSR's state-dict layout, as the official code saves it (Francis0625/Omni-SR
``components/OmniSR.py``) and spandrel reads it (``spandrel/architectures/OmniSR``): ``input``,
``residual_layer.<g>.residual_layer.<b>.layer.<i>...`` (the OSA blocks; then the group's 1x1
conv at ``residual_layer.<g>.residual_layer.<blocks>``), ``residual_layer.<g>.esa.*``,
``output`` and ``up.0``. The position index of the attentions is not saved (a non-persistent
buffer); thop's ``total_ops`` / ``total_params`` counters, which some released files hold, are
ignored as spandrel ignores them.

Read from the keys and shapes as spandrel does: features and channels (``input.weight``),
biases (``input.bias`` present), the scale (``up.0.weight`` ``[C s^2, F, 3, 3]``; only x4),
groups and blocks (the numbered ``residual_layer`` modules), the window from the position bias
table (``(2 w - 1)^2`` rows; without it, ``pe`` false and the window spandrel's default 8).
"""

from __future__ import annotations

import math

import keras
import numpy as np

from sr.models.dat.slots import model_slots
from sr.models.registry import build_model
from sr.models.state_dicts import pairs
from sr.models.state_dicts.base import Found, State

arch = "omnisr"
kind = "generator"

KEYS = ("residual_layer.0.residual_layer.0.layer.0.fn.0.weight", "input.weight", "up.0.weight")
PE = "residual_layer.0.residual_layer.0.layer.2.fn.rel_pos_bias.weight"
JUNK = ("total_ops", "total_params")  # thop's counters
DEFAULT_WINDOW = 8  # spandrel's, for a file without a position bias
SCALE = 4


def detect(state: State) -> Found | None:
    """The OmniSR of ``state``'s keys and shapes, or None if it is not an OmniSR state dict.

    Raises:
        StateDictError: for an OmniSR of a scale other than 4 or whose output channels differ
            from its input.
    """
    if not all(k in state for k in KEYS):
        return None
    features, channels = pairs.shape_of(state, "input.weight", arch, 4)[:2]
    out = pairs.shape_of(state, "up.0.weight", arch, 4)[0]
    scale = pairs.shuffle_scale(out, channels, "up.0.weight", arch)
    pairs.only_x4(scale, arch, f"up.0.weight [{out}, ...]: {channels} channels x {scale}^2")
    groups = pairs.numbered(state, "residual_layer.", arch, first=0)
    blocks = pairs.numbered(state, "residual_layer.0.residual_layer.", arch, first=0) - 1
    window = DEFAULT_WINDOW
    if PE in state:
        rows = pairs.shape_of(state, PE, arch, 2)[0]
        window = int((math.sqrt(rows) + 1) / 2)
    model = {
        "arch": arch, "features": features, "groups": groups, "blocks": blocks,
        "window_size": window, "pe": PE in state, "bias": "input.bias" in state,
    }  # fmt: skip
    return Found(arch, kind, model, scale, channels)


def build(found: Found) -> keras.Model:
    """``sr.models.omnisr.net.build`` of ``found`` (input and output in [0, 1])."""
    return build_model(found.model, found.scale, found.channels)


def _slots(model: keras.Model, found: Found) -> list[pairs.Slot]:
    return model_slots(model, {"up.0": (found.channels, found.scale)})


def load(model: keras.Model, state: State, found: Found) -> None:
    """Set every variable of ``model`` (of :func:`build`) from ``state`` (thop's counters
    ignored).

    Raises:
        StateDictError: naming missing, extra and misshapen keys; nothing is set then.
    """
    junk = [k for k in state if k.endswith(JUNK)]
    pairs.load(state, _slots(model, found), arch, optional=junk)


def dump(model: keras.Model, found: Found) -> dict[str, np.ndarray]:
    """The reference state dict of ``model``, loadable by the official class and spandrel with
    ``strict=True``.

    Raises:
        StateDictError: for a scale other than 4.
    """
    pairs.refuse_unwritable(found, [], "OmniSR", "the official OmniSR", "Train at x4")
    return pairs.dump(_slots(model, found))


def expected_parameters(keys: dict, channels: int = 3, scale: int = SCALE) -> int:
    """Parameters of the reference OmniSR of ``keys`` (defaults: ``OmniSRConfig``), counted
    without building a Keras model."""
    from sr.models.omnisr import OmniSRConfig

    cfg = {**OmniSRConfig().__dict__, **keys}
    f, b, w = cfg["features"], int(cfg["bias"]), cfg["window_size"]
    se = int(f * 0.25)
    block = 2 * (f * f + f) + 10 * f + 2 * f * se  # MBConv
    attention = 2 * f + 4 * f * f + (4 * (2 * w - 1) ** 2 if cfg["pe"] else 0)
    feed_forward = 2 * f + 2 * f * f + 18 * f + f * f
    channel = 2 * f + 4 + 3 * f * f + 27 * f + f * f
    block += 2 * attention + 4 * feed_forward + 2 * channel
    e = max(f // 4, 16)
    esa = (f * e + e) + (e * e + e) + 2 * (9 * e * e + e) + (e * f + f)
    group = cfg["blocks"] * block + f * f + b * f + esa
    head = 9 * channels * f + b * f + 9 * f * f + b * f
    up = 9 * f * channels * scale * scale + b * channels * scale * scale
    return cfg["groups"] * group + head + up
