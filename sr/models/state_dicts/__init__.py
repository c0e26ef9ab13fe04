"""PyTorch state dicts in and out: the registry of the layouts (one module per architecture in
this package, each a :class:`~sr.models.state_dicts.base.Layout`), the detection of a file's
architecture from its keys and shapes, and loading a weight file into the project's Keras model
or writing a model as the reference's state dict.

The architecture is read from the tensors, never from the file name, as spandrel does
(``libs/spandrel/spandrel/architectures/*/__init__.py``): each layout's ``detect`` looks for the
keys of its architecture and reads the hyperparameters from the shapes. Only x4 SR models are in
scope; a file of any other architecture or scale is refused in one message that says what was
found (the layout's reason, or the first keys and shapes) and what is supported, before any
model is built or anything written.

A layout module that is not in the package (an architecture not written yet) is skipped; one
that is there but fails to import is an error, not a silent omission.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path

import keras
import numpy as np

from sr.core.weightfiles import WeightFile, read_weights, write_safetensors
from sr.models import registry
from sr.models.state_dicts.base import Found, Layout, State, StateDictError, check_layers

__all__ = [
    "NETWORKS",
    "Found",
    "Layout",
    "Loaded",
    "StateDictError",
    "describe",
    "detect",
    "found_from_config",
    "layouts",
    "load_file",
    "save_file",
]


NETWORKS = ("unet_sn", "vgg19")
"""The layout modules of this package: the networks of GAN training that are not SR models
(the discriminator, the perceptual loss's VGG19); an SR architecture's layout is its package's
(``ModelSpec.layout``, ``sr.models.registry``)."""

DOC = "docs/pytorch.md"


def layouts() -> list[Layout]:
    """The layouts of every registered architecture that has one, then :data:`NETWORKS`, in
    the order their ``detect`` is tried. A module is its own layout (module-level ``arch``,
    ``kind``, ``detect``, ``build``, ``load``, ``dump``) or exposes one as ``LAYOUT``; one
    that fails to import raises."""
    names = [spec.layout for spec in registry.specs() if spec.layout]
    names += [f"{__name__}.{name}" for name in NETWORKS]
    return [getattr(m, "LAYOUT", m) for m in map(importlib.import_module, names)]


def supported() -> str:
    """The architectures read here, for messages: ``span (generator), ...``."""
    return ", ".join(f"{m.arch} ({m.kind})" for m in layouts())


def first_keys(state: State, n: int = 6) -> str:
    """The first ``n`` keys of ``state`` with their shapes: ``conv.weight [64, 3, 3, 3], ...``."""
    shown = [f"{k} {list(np.shape(v))}" for k, v in list(state.items())[:n]]
    more = f", ... ({len(state)} tensors)" if len(state) > n else ""
    return ", ".join(shown) + more


def detect(state: State, path=None, kind: str | None = None) -> tuple[Layout, Found]:
    """The layout and hyperparameters of ``state``, read from its keys and shapes.

    Args:
        state: key -> float32 array in PyTorch's layout.
        path: the file it came from (named in errors).
        kind: ``generator``, ``discriminator`` or ``features`` to require one; None for any.

    Returns:
        ``(layout, Found)``.

    Raises:
        StateDictError: a layer's weight and bias of different output channels
            (:func:`sr.models.state_dicts.base.check_layers`, naming both); no layout
            recognises the keys (naming the file, its first keys and
            shapes, and the supported architectures); a layout recognises them but refuses
            them (a scale other than x4, an inconsistent shape: its reason); or the file is of
            another kind than ``kind`` (a discriminator given as an SR model).
    """
    where = f"{path}: " if path is not None else ""
    try:
        check_layers(state)
    except StateDictError as e:
        raise StateDictError(f"{where}{e}") from None
    for layout in layouts():
        try:
            found = layout.detect(state)
        except StateDictError as e:
            raise StateDictError(f"{where}{e}; only x4 models are read (see {DOC})") from None
        if found is None:
            continue
        if kind is not None and found.kind != kind:
            raise StateDictError(
                f"{where}this is a {found.arch} {found.kind}, not a {kind}; give a {kind} file "
                f"(read here: {supported()})"
            )
        return layout, found
    raise StateDictError(
        f"{where}not an architecture read here (scale unknown; first keys: {first_keys(state)})"
        f"; supported: {supported()}, x4 only, as the reference code saves them (see {DOC})"
    )


@dataclass(frozen=True)
class Loaded:
    """A weight file loaded into the project's Keras model (:func:`load_file`).

    Attributes:
        model: the Keras model, every variable set from the file.
        found: the architecture and hyperparameters read from the file.
        file: the file as read (path, metadata, the wrapper taken).
    """

    model: keras.Model
    found: Found
    file: WeightFile

    @property
    def notes(self) -> tuple[str, ...]:
        """What the reader should be told: the file's (wrapper, casts) and the layout's."""
        return (*self.file.notes, *self.found.notes)

    def describe(self) -> str:
        """One line: architecture, kind, scale, channels, hyperparameters, parameters."""
        return describe(self.found, self.model)


def describe(found: Found, model: keras.Model | None = None) -> str:
    """``span generator x4 RGB: features=52 blocks=6 ...; 498,... parameters``."""
    colour = {3: "RGB", 1: "1 channel"}.get(found.channels, f"{found.channels} channels")
    hyper = " ".join(f"{k}={v}" for k, v in registry.model_keys(found.model).items())
    scale = f" x{found.scale}" if found.kind == "generator" else ""
    count = f"; {model.count_params():,} parameters" if model is not None else ""
    return f"{found.arch} {found.kind}{scale} {colour}: {hyper}{count}"


def load_file(path, kind: str | None = "generator") -> Loaded:
    """Read a ``.pth`` / ``.safetensors`` file, detect its architecture, build the project's
    Keras model and set its weights.

    Args:
        path: the weight file.
        kind: the kind required (``generator`` for an SR model), or None.

    Returns:
        :class:`Loaded`.

    Raises:
        WeightFileError: the file cannot be read (``sr.core.weightfiles.read_weights``).
        StateDictError: not a supported architecture or scale, not of ``kind``, or missing,
            extra or misshapen keys (naming the file and the keys).
    """
    file = read_weights(path)
    layout, found = detect(file.state, file.path, kind)
    model = layout.build(found)
    try:
        layout.load(model, file.state, found)
    except StateDictError as e:
        raise StateDictError(f"{file.path}: {e}") from None
    return Loaded(model, found, file)


def found_from_config(model_cfg: dict, scale: int, channels: int) -> tuple[Layout, Found]:
    """The layout and :class:`Found` of a run's model (``cfg.model`` as a plain dict, its
    ``data.scale`` and image channels), for writing it as a state dict: the layout its
    architecture declares (``ModelSpec.layout``).

    Raises:
        StateDictError: the architecture has no PyTorch layout, or the scale is not 4.
    """
    spec = registry.spec_of(model_cfg)
    if spec.layout is None:
        written = ", ".join(s.name for s in registry.specs() if s.layout)
        raise StateDictError(
            f"no PyTorch layout for the model {spec.name}; written here: {written or 'none'}"
        )
    layout = importlib.import_module(spec.layout)
    layout = getattr(layout, "LAYOUT", layout)
    if scale != 4:
        raise StateDictError(
            f"a x{scale} {layout.arch} model is not written as a PyTorch state dict: "
            "only x4 models are (the reference layouts of other scales differ)"
        )
    model = {"arch": spec.name, **registry.model_keys(model_cfg)}
    return layout, Found(layout.arch, layout.kind, model, scale, channels)


def save_file(path, model: keras.Model, layout: Layout, found: Found, metadata: dict) -> Path:
    """Write ``model`` as the reference state dict of ``layout`` into a ``.safetensors`` file
    (atomically), after checking that the state dict is detected back as ``found``.

    Raises:
        StateDictError: the written state dict would not be read back as ``found`` (a layout
            that cannot express the model); nothing is written then.
    """
    state = layout.dump(model, found)
    _, back = detect(state, path)
    same = all(found.model.get(k) == v for k, v in back.model.items())
    if not same or (back.arch, back.scale, back.channels) != (
        found.arch, found.scale, found.channels,
    ):  # fmt: skip
        raise StateDictError(
            f"{path}: the {found.arch} state dict of this model would read back as "
            f"{describe(back)}, not {describe(found)}; it is not written"
        )
    return write_safetensors(path, state, {str(k): str(v) for k, v in metadata.items()})
