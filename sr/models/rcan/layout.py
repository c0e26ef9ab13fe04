"""RCAN's state-dict layout, as the official code saves it (yulunzhang/RCAN
``RCAN_TrainCode/code/model/rcan.py``, the released RCAN_BIX4.pt) and spandrel reads it
(``spandrel/architectures/RCAN``): ``sub_mean`` / ``add_mean`` (frozen 1x1 convs, absent
without ``norm``), ``head.0``, ``body.<g>.body.<b>.body.{0,2,3.conv_du.0,3.conv_du.2}`` (RCABs),
``body.<g>.body.<blocks>`` (the group's conv), ``body.<groups>``, ``tail.0.<2i>`` (upsampler
convs) and ``tail.1``.

Read from the keys and shapes as spandrel does: features and scale (the upsampler convs:
``[4 F, F, 3, 3]`` per x2 stage), groups and blocks (the numbered ``body`` modules, less the
last conv), channels (``tail.1.weight``), kernel size (``head.0.weight``), reduction (``F`` over
``conv_du.0``'s outputs), ``norm`` (``sub_mean.weight`` present). ``rgb_range`` (255), the
activation (ReLU) and ``res_scale`` (unused) cannot be read; spandrel assumes the same. Only x4;
the pixel-unshuffle head (``head.1``, the x1 / x2 variant) is refused as another scale.
"""

from __future__ import annotations

import keras
import numpy as np

from sr.models.dat.slots import model_slots
from sr.models.registry import build_model
from sr.models.state_dicts import pairs
from sr.models.state_dicts.base import Found, State, StateDictError

arch = "rcan"
kind = "generator"

KEYS = ("tail.1.weight", "body.0.body.0.body.0.weight", "body.0.body.0.body.3.conv_du.0.weight")
SCALE = 4


def _scale(state: State, features: int) -> int:
    """The upsampler's scale from ``tail.0.<2i>.weight`` (``[r^2 F, F, 3, 3]`` each)."""
    scale, i = 1, 0
    while f"tail.0.{i}.weight" in state:
        out = pairs.shape_of(state, f"tail.0.{i}.weight", arch, 4)[0]
        scale *= pairs.shuffle_scale(out, features, f"tail.0.{i}.weight", arch)
        i += 2
    return scale


def detect(state: State) -> Found | None:
    """The RCAN of ``state``'s keys and shapes, or None if it is not an RCAN state dict.

    Raises:
        StateDictError: for an RCAN of a scale other than 4 (the unshuffle head included).
    """
    if not all(k in state for k in KEYS) or not ("head.0.weight" in state or "head.1.weight"
                                                 in state):  # fmt: skip
        return None
    if "head.1.weight" in state:
        shape = pairs.shape_of(state, "head.1.weight", arch, 4)
        pairs.only_x4(0, arch, f"head.1.weight {list(shape)}: the pixel-unshuffle head of the "
                      "x1 / x2 RCAN")  # fmt: skip
    features, channels, kernel = (pairs.shape_of(state, "head.0.weight", arch, 4)[i]
                                  for i in (0, 1, 2))  # fmt: skip
    scale = _scale(state, features)
    pairs.only_x4(scale, arch, f"tail.0: {scale // 2 or 1} stage(s) of [4 x {features}, ...]")
    squeeze = pairs.shape_of(state, KEYS[2], arch, 4)[0]
    model = {
        "arch": arch, "features": features,
        "groups": pairs.numbered(state, "body.", arch, first=0) - 1,
        "blocks": pairs.numbered(state, "body.0.body.", arch, first=0) - 1,
        "reduction": features // squeeze, "kernel_size": kernel,
        "norm": "sub_mean.weight" in state, "rgb_range": 255.0,
    }  # fmt: skip
    if model["norm"] and channels != 3:
        raise StateDictError(f"rcan: sub_mean with {channels} image channels (head.0.weight)")
    return Found(arch, kind, model, scale, channels)


def build(found: Found) -> keras.Model:
    """``sr.models.rcan.net.build`` of ``found`` (input and output in [0, 1])."""
    return build_model(found.model, found.scale, found.channels)


def _slots(model: keras.Model, found: Found) -> list[pairs.Slot]:
    f = found.model["features"]
    return model_slots(model, {"tail.0.0": (f, 2), "tail.0.2": (f, 2)})


def load(model: keras.Model, state: State, found: Found) -> None:
    """Set every variable of ``model`` (of :func:`build`) from ``state``.

    Raises:
        StateDictError: naming missing, extra and misshapen keys; nothing is set then.
    """
    pairs.load(state, _slots(model, found), arch)


def dump(model: keras.Model, found: Found) -> dict[str, np.ndarray]:
    """The reference state dict of ``model``, loadable by the official class and spandrel with
    ``strict=True``.

    Raises:
        StateDictError: for a scale other than 4.
    """
    norm = found.model.get("norm", True)
    faults = []
    if norm and found.model.get("rgb_range", 255.0) != 255.0:
        faults.append(f"model.rgb_range={found.model['rgb_range']} (the reference: 255)")
    if norm and found.channels != 3:
        faults.append("model.norm=true on Y (the reference's MeanShift is RGB only)")
    pairs.refuse_unwritable(found, faults, "RCAN", "the official RCAN", "Train at x4")
    return pairs.dump(_slots(model, found))


def expected_parameters(keys: dict, channels: int = 3, scale: int = SCALE) -> int:
    """Parameters of the reference RCAN of ``keys`` (defaults: ``RCANConfig``), counted
    without building a Keras model (x4: two x2 stages)."""
    from sr.models.rcan import RCANConfig

    cfg = {**RCANConfig().__dict__, **keys}
    f, k, r = cfg["features"], cfg["kernel_size"], cfg["features"] // cfg["reduction"]
    conv = k * k * f * f + f
    block = 2 * conv + (f * r + r) + (r * f + f)
    body = cfg["groups"] * (cfg["blocks"] * block + conv) + conv
    head = k * k * channels * f + f
    stages = 2 * (9 * f * 4 * f + 4 * f) if scale == 4 else 0
    tail = stages + k * k * f * channels + channels
    return body + head + tail + (24 if cfg["norm"] else 0)
