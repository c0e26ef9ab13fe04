"""The pairing of a Keras model's variables with a state dict's keys, shared by the layouts of
architectures of plain convolutions (``span``, ``edsr_baseline``, ...): each layout lists its
slots (a key, the variable it
sets, the conversions both ways; :func:`conv_slots` for a model's plain convs), and this
module checks a state dict against them before anything is set, loads and dumps, and refuses
to dump a model the reference network would compute other pixels with
(:func:`refuse_unwritable`).

The slots of a model come from its layers in the order the builder creates them
(``model.layers`` of a functional model), each one's shape checked, so that a model that is
not the layout's (another builder, other hyperparameters) is refused by name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import keras
import numpy as np

from sr.models.state_dicts.base import (
    Found,
    StateDictError,
    check_keys,
    conv_in,
    conv_out,
    shuffle_order,
)

SHOWN = 6  # keys named per kind of fault in a message


@dataclass(frozen=True)
class Slot:
    """One tensor of a state dict and the Keras variable it is.

    Attributes:
        key: the state-dict key, e.g. ``block_1.c1_r.weight``.
        variable: the Keras variable it sets.
        shape: the tensor's shape in PyTorch's layout (OIHW for a conv weight).
        to_keras: the PyTorch tensor as the variable's value.
        to_torch: the variable's value as the PyTorch tensor.
    """

    key: str
    variable: keras.Variable
    shape: tuple[int, ...]
    to_keras: Callable[[np.ndarray], np.ndarray]
    to_torch: Callable[[np.ndarray], np.ndarray]


def _same(a) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(a), dtype=np.float32)


def conv2d(prefix: str, layer) -> list[Slot]:
    """The slots of a ``keras.layers.Conv2D`` (with bias) as PyTorch's ``Conv2d`` at
    ``prefix``: ``prefix.weight`` ``[out, in, kh, kw]`` and ``prefix.bias`` ``[out]``."""
    return [kernel(f"{prefix}.weight", layer.kernel), bias(f"{prefix}.bias", layer.bias)]


def shuffled(slots: list[Slot], channels: int, factor: int) -> list[Slot]:
    """The slots of a conv (weight and bias) that feeds a pixel shuffle of ``factor`` on
    ``channels`` channels, its output channels reordered between the two layouts
    (``sr.models.state_dicts.base.shuffle_order``)."""
    order = shuffle_order(channels, factor)
    back = np.argsort(order)

    def wrap(s: Slot) -> Slot:
        return Slot(
            s.key,
            s.variable,
            s.shape,
            lambda w, f=s.to_keras: f(np.asarray(w)[order]),
            lambda v, f=s.to_torch: _same(f(v)[back]),
        )

    return [wrap(s) for s in slots]


def kernel(key: str, variable) -> Slot:
    """A Keras conv kernel ``[kh, kw, in, out]`` as PyTorch's ``Conv2d.weight``
    ``[out, in, kh, kw]``."""
    kh, kw, c_in, c_out = (int(d) for d in variable.shape)
    return Slot(key, variable, (c_out, c_in, kh, kw), conv_in, conv_out)


def pointwise(key: str, variable) -> Slot:
    """A Keras matrix ``[in, out]`` as PyTorch's 1x1 ``Conv2d.weight`` ``[out, in, 1, 1]``."""
    c_in, c_out = (int(d) for d in variable.shape)
    return Slot(
        key,
        variable,
        (c_out, c_in, 1, 1),
        lambda w: _same(np.asarray(w)[:, :, 0, 0].T),
        lambda k: _same(np.asarray(k).T[:, :, None, None]),
    )


def bias(key: str, variable) -> Slot:
    """A bias ``[C]``, the same in both."""
    return Slot(key, variable, (int(variable.shape[0]),), _same, _same)


def layers_of(model: keras.Model, types: tuple, arch: str, count: int) -> list:
    """The layers of ``model`` of ``types``, in the builder's order.

    Raises:
        StateDictError: if the model has another number of them than the layout's ``count``
            (it is not a model of this layout).
    """
    found = [la for la in model.layers if isinstance(la, types)]
    if len(found) != count:
        names = ", ".join(t.__name__ for t in types)
        raise StateDictError(
            f"the Keras model {model.name!r} has {len(found)} layers of {names}, the {arch} "
            f"layout {count}: build it with the layout's build() (or the run's config)"
        )
    return found


def conv_slots(
    model: keras.Model, names: list[str], arch: str, shuffles: Mapping[str, int] | None = None
) -> list[Slot]:
    """The slots of every ``keras.layers.Conv2D`` of ``model``, in the builder's order, as
    PyTorch's ``Conv2d`` at the prefixes ``names`` (:func:`conv2d`); a conv whose prefix is in
    ``shuffles`` feeds a pixel shuffle of that factor, its output channels reordered
    (:func:`shuffled`, on its output channels over the factor squared).

    Raises:
        StateDictError: if the model has another number of Conv2D layers than ``names``
            (:func:`layers_of`).
    """
    shuffles = shuffles or {}
    slots = []
    for name, layer in zip(names, layers_of(model, (keras.layers.Conv2D,), arch, len(names))):
        conv = conv2d(name, layer)
        if name in shuffles:
            factor = shuffles[name]
            conv = shuffled(conv, int(layer.kernel.shape[-1]) // factor**2, factor)
        slots += conv
    return slots


def load(
    state: Mapping[str, np.ndarray],
    slots: list[Slot],
    arch: str,
    derived: Mapping[str, tuple[int, ...]] | None = None,
    optional=(),
) -> None:
    """Set every slot's variable from ``state`` (cast to float32), once ``state`` is checked:
    it must hold exactly the slots' keys and the ``derived`` ones (tensors the reference
    computes from others, such as SPAN's ``eval_conv``), each of its shape, plus any of
    ``optional``, every tensor finite; nothing is set otherwise.

    Raises:
        StateDictError: naming the missing, extra and misshapen keys (the first few of each)
            and, for a misshapen key, both shapes; if the model's own variables do not have
            the slots' shapes; or for a tensor that is not finite.
    """
    for s in slots:
        if tuple(s.to_torch(np.zeros(s.variable.shape, np.float32)).shape) != s.shape:
            raise StateDictError(f"{arch}: the Keras variable of {s.key} is not {s.shape}")
    want = {s.key: s.shape for s in slots} | dict(derived or {})
    check_keys(
        state, want, f"the {arch} model", "Use the file the model came from, or one saved by the "
        "reference code of the same architecture and size", ignore=optional,
    )  # fmt: skip
    values = []
    for s in slots:
        value = np.asarray(state[s.key], dtype=np.float32)
        if not np.isfinite(value).all():
            raise StateDictError(f"{arch}: {s.key} holds NaN or infinite values")
        values.append(s.to_keras(value))
    for s, value in zip(slots, values):
        s.variable.assign(value)


def dump(slots: list[Slot]) -> dict[str, np.ndarray]:
    """The state dict of the slots: key -> C-contiguous float32 array in PyTorch's layout."""
    return {s.key: _same(s.to_torch(keras.ops.convert_to_numpy(s.variable))) for s in slots}


def shape_of(state: Mapping[str, np.ndarray], key: str, arch: str, rank: int) -> tuple[int, ...]:
    """The shape of ``state[key]``.

    Raises:
        StateDictError: if the key is absent or its tensor is not of ``rank``.
    """
    if key not in state:
        raise StateDictError(f"{arch} state dict without {key}: the file is incomplete")
    shape = tuple(int(d) for d in np.shape(state[key]))
    if len(shape) != rank:
        raise StateDictError(f"{arch}: {key} has shape {shape}, expected {rank} dimensions")
    return shape


def numbered(state: Mapping[str, np.ndarray], prefix: str, arch: str, first: int = 1) -> int:
    """How many numbered modules ``prefix<N>.`` the keys hold (``block_1.``, ``body.0.``),
    numbered from ``first`` without a gap.

    Raises:
        StateDictError: for none, or a gap in the numbering.
    """
    seen = set()
    for key in state:
        head = key[len(prefix) :].split(".", 1)[0] if key.startswith(prefix) else ""
        if head.isdigit():
            seen.add(int(head))
    count = len(seen)
    if not count or seen != set(range(first, first + count)):
        raise StateDictError(
            f"{arch}: the modules {prefix}N are numbered {sorted(seen)[:SHOWN]}, expected "
            f"{first} to {first + max(count, 1) - 1} without a gap"
        )
    return count


def shuffle_scale(out_channels: int, channels: int, key: str, arch: str) -> int:
    """The scale s of a pixel shuffle whose conv ``key`` writes ``out_channels`` = ``channels``
    s^2.

    Raises:
        StateDictError: if ``out_channels`` is not ``channels`` times a square.
    """
    s = int(round((out_channels / channels) ** 0.5)) if out_channels % channels == 0 else 0
    if s < 1 or channels * s * s != out_channels:
        raise StateDictError(
            f"{arch}: {key} has {out_channels} output channels, not {channels} image channels "
            "times a square (the pixel shuffle's scale^2): the output and input channels differ, "
            "which the project's builder does not support"
        )
    return s


def only_x4(scale: int, arch: str, evidence: str) -> None:
    """Refuse a scale other than 4 (only x4 models are supported).

    Raises:
        StateDictError: naming the scale found and ``evidence`` (the key and shape it is read
            from).
    """
    if scale != 4:
        raise StateDictError(
            f"a {arch} model of scale {scale} ({evidence}): only x4 models are supported"
        )


def refuse_unwritable(
    found: Found, faults: list[str], model: str, reference: str, fix: str
) -> None:
    """Refuse to write ``found``'s model as the reference state dict when the reference network
    would compute other pixels with it (the one refusal of the layouts' ``dump``): a scale
    other than 4 is a fault here, after ``faults``.

    Args:
        found: the model as configured (``found.scale``).
        faults: what the reference cannot compute, each a config key and the reference's value
            (``model.norm=centre (BasicSR: div2k_mean, RGB)``); empty if none.
        model: the architecture as the message names it (``EDSR``).
        reference: the reference code (``BasicSR's``, ``the official one``).
        fix: the config to train with instead, a sentence.

    Raises:
        StateDictError: ``this <model> cannot be written as <reference>, which would compute
            other pixels: <faults>. <fix>``, if there is a fault.
    """
    if found.scale != 4:
        faults = [*faults, f"scale {found.scale} (only x4 is supported)"]
    if faults:
        raise StateDictError(
            f"this {model} cannot be written as {reference}, which would compute other pixels: "
            f"{'; '.join(faults)}. {fix}"
        )
