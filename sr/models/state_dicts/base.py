"""The contract of a PyTorch state-dict layout: one module per architecture in this package, as
spandrel has one loader per architecture, so that a new architecture is one new file.

A layout reads the keys and shapes of a state dict as the reference code saves it (names such
as ``conv_first.weight``, tensors NCHW / OIHW, float32 NumPy arrays), finds the architecture's
hyperparameters in them (never in a file name), builds the project's Keras model with them, and
moves tensors both ways:

- :meth:`Layout.detect`: keys and shapes to a :class:`Found`, or None if the dict is not this
  architecture;
- :meth:`Layout.build`: the Keras model of a :class:`Found` (the project's builder);
- :meth:`Layout.load`: the state dict's tensors into that model, every key used, every variable
  set (else :class:`StateDictError` listing the missing, extra and misshapen keys);
- :meth:`Layout.dump`: the model's variables as the reference state dict, C-contiguous float32
  arrays, loadable by the reference class with ``strict=True``.

Convolutions: PyTorch ``Conv2d.weight`` is ``[out, in, kh, kw]``, Keras ``Conv2D.kernel`` is
``[kh, kw, in, out]`` (``np.transpose(w, (2, 3, 1, 0))``); ``PReLU.weight`` ``[C]`` is Keras's
``alpha`` ``[1, 1, C]``. ``nn.PixelShuffle(r)`` takes channel ``c r^2 + i r + j`` to sub-pixel
``(i, j)`` of image channel ``c``; ``tf.nn.depth_to_space`` (``sr.models.layers.PixelShuffle``)
takes channel ``(i r + j) C + c`` there. The two agree for C = 1 only: the output channels of
the conv before a pixel shuffle are permuted both ways (:func:`shuffle_order`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

import keras
import numpy as np

State = Mapping[str, np.ndarray]
"""A state dict: key -> float32 NumPy array in PyTorch's layout (NCHW, OIHW)."""


class StateDictError(ValueError):
    """A state dict that is not of a supported architecture, or does not fit the model: the
    message names the file where one is known, what was found and what to do."""


@dataclass(frozen=True)
class Found:
    """What :meth:`Layout.detect` read from a state dict's keys and shapes.

    Attributes:
        arch: the layout's name (the ``model`` group option it builds: ``span``,
            ``edsr_baseline``, ...; ``unet_sn``, ``vgg19``).
        kind: ``generator`` (an SR model), ``discriminator`` or ``features`` (VGG).
        model: the ``model`` group's keys that rebuild it, ``arch`` (its registered name,
            ``sr.models.registry``) included, e.g. ``{"arch": "span", "features": 52, ...}``
            (a discriminator's: the ``discriminator`` group's, with ``_target_``).
        scale: the upscaling factor (1 for a discriminator or VGG).
        channels: image channels in and out (3 for RGB, 1 for Y).
        notes: what the reader should be told (a layout variant, a conversion).
    """

    arch: str
    kind: str
    model: dict
    scale: int
    channels: int
    notes: tuple[str, ...] = field(default=())


class Layout(Protocol):
    """One architecture's state-dict layout (a module of ``sr.models.state_dicts``)."""

    arch: str
    kind: str

    def detect(self, state: State) -> Found | None:
        """The hyperparameters the keys and shapes imply, or None if ``state`` is not this
        architecture. Raises :class:`StateDictError` if it is this architecture but cannot be
        built (a scale other than 4, an inconsistent shape)."""
        ...

    def build(self, found: Found) -> keras.Model:
        """The project's Keras model of ``found``."""
        ...

    def load(self, model: keras.Model, state: State, found: Found) -> None:
        """Set every variable of ``model`` from ``state``. Raises :class:`StateDictError` naming
        missing, extra and misshapen keys; nothing is set then."""
        ...

    def dump(self, model: keras.Model, found: Found) -> dict[str, np.ndarray]:
        """The reference state dict of ``model``: C-contiguous float32 arrays."""
        ...


def conv_in(w: np.ndarray) -> np.ndarray:
    """PyTorch ``Conv2d.weight`` ``[out, in, kh, kw]`` to a Keras ``Conv2D.kernel``
    ``[kh, kw, in, out]``."""
    return np.ascontiguousarray(np.transpose(w, (2, 3, 1, 0)), dtype=np.float32)


def conv_out(k: np.ndarray) -> np.ndarray:
    """A Keras ``Conv2D.kernel`` ``[kh, kw, in, out]`` to PyTorch's ``[out, in, kh, kw]``."""
    return np.ascontiguousarray(np.transpose(np.asarray(k), (3, 2, 0, 1)), dtype=np.float32)


def shuffle_order(channels: int, scale: int) -> np.ndarray:
    """Index array ``order`` with ``keras_channel[k] = pytorch_channel[order[k]]`` for the conv
    before a pixel shuffle of ``scale`` into ``channels`` image channels (int ``[C s^2]``): Keras
    channel ``(i s + j) C + c`` is PyTorch channel ``c s^2 + i s + j``. Its inverse is
    ``np.argsort(order)``."""
    return np.arange(channels * scale * scale).reshape(channels, scale * scale).T.reshape(-1)


SHOWN = 5  # keys named per kind of fault in a refusal


def check_layers(state: State) -> None:
    """Refuse a state dict whose layers disagree within themselves: a ``<layer>.weight``
    (``<layer>.weight_orig`` under spectral norm) whose output channels (its first dimension:
    ``Conv2d`` ``[out, in, kh, kw]``, ``Linear`` ``[out, in]``, a norm's ``[C]``) are not its
    ``<layer>.bias``'s length. Run before any layout reads a hyperparameter from a shape, so an
    edited or damaged tensor is named as such, not read as another model (issue 46: a
    ``conv_last.weight`` of 4 output channels beside its bias of 3 was named as a model of
    another channel count, "with 3 input and 4 output channels"). A tensor that disagrees with
    the layers around it (a conv's input channels) is named with both shapes by
    :func:`check_keys` once the model is known.

    Raises:
        StateDictError: naming each such layer's two tensors and their shapes (the first
            :data:`SHOWN`).
    """
    wrong = []
    for key, bias in state.items():
        if not key.endswith(".bias") or np.ndim(bias) != 1:
            continue
        layer = key[: -len(".bias")]
        name = next((f"{layer}.{w}" for w in ("weight", "weight_orig") if f"{layer}.{w}" in state),
                    None)  # fmt: skip
        weight = state.get(name) if name else None
        if weight is not None and np.ndim(weight) >= 1 and np.shape(weight)[0] != len(bias):
            out = np.shape(weight)[0]
            wrong.append(f"{name} {list(np.shape(weight))} has {out} output channels, but "
                         f"{key} {list(np.shape(bias))} has {len(bias)}")  # fmt: skip
    if wrong:
        listed = "; ".join(wrong[:SHOWN]) + (
            f"; and {len(wrong) - SHOWN} more" if len(wrong) > SHOWN else ""
        )
        raise StateDictError(
            f"tensors of one layer disagree: {listed}; the file is damaged or was edited: "
            "download it again, or check it against the checksum its release lists"
        )


def check_keys(
    state: State, want: Mapping[str, tuple[int, ...]], what: str, fix: str, ignore: Iterable = ()
) -> None:
    """Refuse ``state`` unless it holds exactly the keys of ``want``, each of its shape (keys
    in ``ignore`` aside): the one check of every layout, before any variable is set.

    Args:
        state: the state dict read from the file.
        want: key -> shape (PyTorch's) of the model as detected.
        what: the model, as the message names it (``the SPAN model as detected``).
        fix: what to do, appended to the message.
        ignore: keys a file may hold that the model does not read (a classifier, buffers).

    Raises:
        StateDictError: naming the missing, extra and misshapen keys (the first :data:`SHOWN`
            of each and their count; a misshapen key with both shapes).
    """
    ignore = set(ignore)
    missing = [k for k in want if k not in state]
    extra = [k for k in state if k not in want and k not in ignore]
    wrong = [
        f"{k} {tuple(np.shape(state[k]))} (expected {tuple(want[k])})"
        for k in want
        if k in state and tuple(np.shape(state[k])) != tuple(want[k])
    ]
    faults = [
        f"{len(keys)} {kind}: {', '.join(keys[:SHOWN])}{', ...' if len(keys) > SHOWN else ''}"
        for kind, keys in (("missing", missing), ("extra", extra), ("misshapen", wrong))
        if keys
    ]
    if faults:
        raise StateDictError(
            f"the state dict does not fit {what} ({'; '.join(faults)}); nothing was loaded. {fix}"
        )
