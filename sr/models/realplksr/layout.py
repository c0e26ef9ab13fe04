"""RealPLKSR's state-dict layout, as the community's code saves it (traiNNer-redux / neosr
``realplksr_arch.py``) and spandrel reads it (``spandrel/architectures/PLKSR``, its RealPLKSR
branch): ``feats.0`` (the first conv), ``feats.<i>.{layer_norm, channel_mixer.0,
channel_mixer.2, lk.conv, attn.f.0, refine, norm}`` for the blocks i = 1 .. n, ``feats.<n+2>``
(the last conv; ``feats.<n+1>`` is the dropout, without weights).

Read from the keys and shapes as spandrel does: dim (``feats.0.weight``), blocks (the numbered
``feats`` less 3), kernel size and split ratio (``lk.conv.weight``), ``use_ea``
(``attn.f.0.weight`` present), ``layer_norm`` (``layer_norm.bias`` present), the scale (the last
conv's ``C s^2`` outputs; only x4). ``norm_groups`` cannot be read (spandrel assumes 4; so here).
The DySample upsampler (``to_img.init_pos``) is refused: not built here. PLKSR (the paper's
network, ``channe_mixer``) is another layout, not read here.
"""

from __future__ import annotations

import keras
import numpy as np

from sr.models.dat.slots import layer_slots, plain
from sr.models.registry import build_model
from sr.models.state_dicts import pairs
from sr.models.state_dicts.base import Found, State, StateDictError

arch = "realplksr"
kind = "generator"

KEYS = ("feats.0.weight", "feats.1.lk.conv.weight", "feats.1.refine.weight",
        "feats.1.channel_mixer.0.weight")  # fmt: skip
SCALE = 4


def _layers(state: State) -> int:
    """How many ``feats`` modules the file has: 0 .. n and n + 2 hold keys (n + 1: the dropout).

    Raises:
        StateDictError: for another numbering.
    """
    seen = {int(k.split(".")[1]) for k in state if k.startswith("feats.") and k.split(".")[1]
            .isdigit()}  # fmt: skip
    top = max(seen)
    if seen != set(range(top - 1)) | {top}:
        raise StateDictError(f"realplksr: the modules feats.N are numbered {sorted(seen)[:8]}..., "
                             "expected 0 to n and n + 2 (n + 1 is the dropout)")  # fmt: skip
    return top + 1


def detect(state: State) -> Found | None:
    """The RealPLKSR of ``state``'s keys and shapes, or None if it is not one.

    Raises:
        StateDictError: for a scale other than 4, or the DySample upsampler.
    """
    if not all(k in state for k in KEYS):
        return None
    if "to_img.init_pos" in state:
        raise StateDictError("realplksr: to_img.init_pos, the DySample upsampler, is not built "
                             "here; use a RealPLKSR with the pixel shuffle")  # fmt: skip
    dim, channels = pairs.shape_of(state, "feats.0.weight", arch, 4)[:2]
    layers = _layers(state)
    last = f"feats.{layers - 1}.weight"
    out = pairs.shape_of(state, last, arch, 4)[0]
    scale = pairs.shuffle_scale(out, channels, last, arch)
    pairs.only_x4(scale, arch, f"{last} [{out}, ...]: {channels} channels x {scale}^2")
    pdim, _, kernel = pairs.shape_of(state, "feats.1.lk.conv.weight", arch, 4)[:3]
    model = {
        "arch": arch, "dim": dim, "blocks": layers - 3, "kernel_size": kernel,
        "split_ratio": pdim / dim, "use_ea": "feats.1.attn.f.0.weight" in state,
        "norm_groups": 4, "layer_norm": "feats.1.layer_norm.bias" in state,
    }  # fmt: skip
    return Found(arch, kind, model, scale, channels)


def build(found: Found) -> keras.Model:
    """``sr.models.realplksr.net.build`` of ``found`` (input and output in [0, 1])."""
    return build_model(found.model, found.scale, found.channels)


def _slots(model: keras.Model, found: Found) -> list[pairs.Slot]:
    last = f"feats.{found.model['blocks'] + 2}"
    slots = []
    for layer in model.layers:
        if isinstance(layer, keras.layers.GroupNormalization):
            slots += [plain(f"{layer.name}.weight", layer.gamma),
                      plain(f"{layer.name}.bias", layer.beta)]  # fmt: skip
        elif layer.weights:
            own = layer_slots(layer.name, layer)
            if layer.name == last:
                own = pairs.shuffled(own, found.channels, found.scale)
            slots += own
    return slots


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
    pairs.refuse_unwritable(found, [], "RealPLKSR", "the official RealPLKSR", "Train at x4")
    return pairs.dump(_slots(model, found))


def expected_parameters(keys: dict, channels: int = 3, scale: int = SCALE) -> int:
    """Parameters of the reference RealPLKSR of ``keys`` (defaults: ``RealPLKSRConfig``),
    counted without building a Keras model."""
    from sr.models.realplksr import RealPLKSRConfig

    cfg = {**RealPLKSRConfig().__dict__, **keys}
    d, k = cfg["dim"], cfg["kernel_size"]
    p = int(d * cfg["split_ratio"])
    block = (9 * d * 2 * d + 2 * d) + (9 * 2 * d * d + d) + (k * k * p * p + p) + (d * d + d)
    block += (9 * d * d + d if cfg["use_ea"] else 0) + 2 * d
    ends = (9 * channels * d + d) + (9 * d * channels * scale**2 + channels * scale**2)
    return cfg["blocks"] * block + ends
