"""The state-dict layout of Real-ESRGAN's ``SRVGGNetCompact`` (``realesr-general-x4v3``,
``realesr-animevideov3``; ``model=compact``, :func:`sr.models.compact.net.build_compact`), as the
reference class saves it (github.com/xinntao/Real-ESRGAN ``realesrgan/archs/srvgg_arch.py``;
BasicSR's ``basicsr/archs/srvgg_arch.py`` and spandrel's ``Compact`` hold the same keys):

- ``body.0.weight`` ``[F, C, 3, 3]``, ``body.0.bias`` ``[F]``: the first conv;
- ``body.{2k+1}.weight`` ``[F]``: the PReLU after conv k (``nn.PReLU(num_parameters=F)``), for
  k = 0 .. N, to Keras's ``PReLU.alpha`` ``[1, 1, F]`` (shared over height and width);
- ``body.{2k}.weight`` ``[F, F, 3, 3]``, ``body.{2k}.bias`` ``[F]``: the body convs, k = 1 .. N;
- ``body.{2N+2}.weight`` ``[C s^2, F, 3, 3]``, ``body.{2N+2}.bias``: the last conv.

The hyperparameters come from the keys and shapes alone, as spandrel's ``CompactArch`` reads them:
F and C from ``body.0.weight``, N from the highest ``body`` index (2N + 2), s from the last conv's
``C s^2`` output channels (out and in channels are one C: the network adds its nearest-upscaled
input). Only x4 is accepted. ``act_type='relu'`` and ``'leakyrelu'`` have no weights, so a file
of them cannot say which it is (spandrel does not detect them either): it is refused, naming both.

The pixel shuffle: PyTorch's ``nn.PixelShuffle(s)`` takes channel ``c s^2 + i s + j`` of the last
conv to sub-pixel ``(i, j)`` of image channel c; ``tf.nn.depth_to_space`` (our
``sr.models.layers.PixelShuffle``) takes channel ``(i s + j) C + c`` there. The orders agree for
C = 1 only, so the last conv's output channels are permuted both ways (``base.shuffle_order``):
the silent error of ONNX-to-TF converters on this model (onnx2tf #91).
"""

from __future__ import annotations

import math
import re

import keras
import numpy as np

from sr.models.registry import build_model
from sr.models.state_dicts.base import (
    Found,
    State,
    StateDictError,
    check_keys,
    conv_in,
    conv_out,
    shuffle_order,
)

ARCH = "compact"
SCALES = (4,)  # the scales this project reads (issue 34: x4 models only)
CHANNELS = (1, 3)  # Y or RGB (data.channels)
_BODY = re.compile(r"body\.(\d+)\.(weight|bias)$")
SUPPORTED = "SRVGGNetCompact x4 with PReLU (act_type='prelu'), 1 or 3 channels"


def _first_keys(state: State, count: int = 4) -> str:
    return ", ".join(list(state)[:count]) + (", ..." if len(state) > count else "")


def _refuse(state: State, what: str) -> StateDictError:
    return StateDictError(
        f"an SRVGGNetCompact state dict ({what}; first keys {_first_keys(state)}) that this "
        f"project cannot build: it reads {SUPPORTED}"
    )


def reference_layout(features: int, convs: int, channels: int, scale: int = 4) -> dict:
    """The reference's state dict as ``{key: shape}``, in its order (``state_dict()``'s), for
    ``SRVGGNetCompact(num_in_ch=C, num_out_ch=C, num_feat=F, num_conv=N, upscale=s,
    act_type='prelu')``; shapes are PyTorch's (OIHW)."""
    shapes: dict[str, tuple[int, ...]] = {}
    c_in = channels
    for k in range(convs + 1):
        shapes[f"body.{2 * k}.weight"] = (features, c_in, 3, 3)
        shapes[f"body.{2 * k}.bias"] = (features,)
        shapes[f"body.{2 * k + 1}.weight"] = (features,)
        c_in = features
    last = 2 * convs + 2
    shapes[f"body.{last}.weight"] = (channels * scale * scale, features, 3, 3)
    shapes[f"body.{last}.bias"] = (channels * scale * scale,)
    return shapes


def detect(state: State) -> Found | None:
    """The hyperparameters of an SRVGGNetCompact state dict, or None if ``state`` is not one
    (no 4-D ``body.0.weight`` and ``body.0.bias``, or other ``body.0`` keys).

    Raises:
        StateDictError: for an SRVGGNetCompact this project cannot build: no PReLU weights
            (relu or leakyrelu, which the keys cannot tell apart), a scale other than 4, image
            channels other than 1 or 3, or a last conv whose channels are not ``C s^2``.
    """
    first = state.get("body.0.weight")
    if first is None or np.ndim(first) != 4 or "body.0.bias" not in state:
        return None
    if any(k.startswith("body.0.") and k not in ("body.0.weight", "body.0.bias") for k in state):
        return None  # a block list of another architecture (body.0.conv1.weight, ...)
    features, channels = int(first.shape[0]), int(first.shape[1])
    indices = [int(m.group(1)) for k in state if (m := _BODY.match(k))]
    last = max(indices)
    if last < 2 or last % 2 or f"body.{last}.weight" not in state:
        raise _refuse(state, f"its highest body index, {last}, is not a last conv's (2 N + 2)")
    if "body.1.weight" not in state:
        raise _refuse(
            state,
            "no PReLU weights (body.1.weight): act_type relu or leakyrelu, which its keys "
            "cannot tell apart",
        )
    out = int(np.shape(state[f"body.{last}.weight"])[0])
    scale = math.isqrt(out // channels) if out % channels == 0 else 0
    if channels * scale * scale != out:
        raise _refuse(
            state,
            f"its last conv body.{last} has {out} output channels, not C s^2 for its "
            f"C = {channels} input channels",
        )
    if scale not in SCALES:
        raise _refuse(state, f"scale {scale}: {out} = {channels} x {scale}^2 output channels")
    if channels not in CHANNELS:
        raise _refuse(state, f"{channels} image channels")
    model = {"arch": ARCH, "features": features, "convs": (last - 2) // 2}
    model["activation"] = "prelu"
    return Found(ARCH, "generator", model, scale, channels)


def build(found: Found) -> keras.Model:
    """The Keras model of ``found`` (:func:`sr.models.compact.net.build_compact`)."""
    return build_model(found.model, found.scale, found.channels)


def _parts(found: Found) -> tuple[int, int, int, int]:
    m = found.model
    return int(m["features"]), int(m["convs"]), found.channels, found.scale


def load(model: keras.Model, state: State, found: Found) -> None:
    """Set every variable of ``model`` (built by :func:`build` from ``found``) from ``state``.

    Raises:
        StateDictError: naming the missing, extra and misshapen keys, or a ``model`` whose layers
            are not ``found``'s; nothing is set then.
    """
    features, convs, channels, scale = _parts(found)
    check_keys(
        state,
        reference_layout(features, convs, channels, scale),
        "SRVGGNetCompact as detected",
        "Is it a complete file of one model?",
    )
    last = 2 * convs + 2
    values = []  # (layer, weights), all checked before any is set
    for index in range(last + 1):
        w = np.asarray(state[f"body.{index}.weight"], np.float32)
        if index % 2:  # a PReLU: [F] -> alpha [1, 1, F]
            weights = [w.reshape(1, 1, -1)]
        else:
            b = np.asarray(state[f"body.{index}.bias"], np.float32)
            if index == last:
                order = shuffle_order(channels, scale)
                w, b = w[order], b[order]
            weights = [conv_in(w), b]
        values.append((_layer(model, index), weights))
    for layer, weights in values:
        have = [tuple(v.shape) for v in layer.get_weights()]
        if have != [tuple(w.shape) for w in weights]:
            raise StateDictError(
                f"layer {layer.name} of {model.name} holds shapes {have}, not the state dict's "
                f"{[tuple(w.shape) for w in weights]}: build the model from the detected "
                "hyperparameters; nothing was loaded"
            )
    for layer, weights in values:
        layer.set_weights(weights)


def _layer(model: keras.Model, index: int) -> keras.layers.Layer:
    try:
        return model.get_layer(f"body_{index}")
    except ValueError as e:
        raise StateDictError(
            f"{model.name} has no layer body_{index}: it is not an SRVGGNetCompact of "
            "sr.models.compact.net.build_compact with these hyperparameters; nothing was loaded"
        ) from e


def dump(model: keras.Model, found: Found) -> dict[str, np.ndarray]:
    """The reference state dict of ``model`` (``found``'s SRVGGNetCompact), in the reference's
    key order: C-contiguous float32 arrays that ``SRVGGNetCompact(..., act_type='prelu')``
    loads with ``strict=True``.

    Raises:
        StateDictError: for a ``model`` without the layers of ``found``, or of other shapes.
    """
    features, convs, channels, scale = _parts(found)
    last = 2 * convs + 2
    state = {}
    for index in range(last + 1):
        weights = _layer(model, index).get_weights()
        if index % 2:
            state[f"body.{index}.weight"] = np.ascontiguousarray(
                np.reshape(weights[0], -1), np.float32
            )
            continue
        w, b = conv_out(weights[0]), np.asarray(weights[1], np.float32)
        if index == last:
            inverse = np.argsort(shuffle_order(channels, scale))
            w, b = w[inverse], b[inverse]
        state[f"body.{index}.weight"] = np.ascontiguousarray(w, np.float32)
        state[f"body.{index}.bias"] = np.ascontiguousarray(b, np.float32)
    want = reference_layout(features, convs, channels, scale)
    wrong = [f"{k} {v.shape} (expected {want[k]})" for k, v in state.items() if v.shape != want[k]]
    if wrong:
        raise StateDictError(
            f"{model.name} is not the SRVGGNetCompact of {found.model} at x{scale} on "
            f"{channels} channels: {', '.join(wrong[:6])}; nothing was written"
        )
    return state


class CompactLayout:
    """:class:`sr.models.state_dicts.base.Layout` of SRVGGNetCompact (this module's functions)."""

    arch = ARCH
    kind = "generator"
    detect = staticmethod(detect)
    build = staticmethod(build)
    load = staticmethod(load)
    dump = staticmethod(dump)


LAYOUT = CompactLayout()
