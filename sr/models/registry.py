"""The registry of SR architectures: each is one package ``sr/models/<arch>/`` (as spandrel has one
folder per architecture) whose ``__init__.py`` declares, without importing TensorFlow, its name,
its schema (the only place its defaults are written) and its builder, and optionally its PyTorch
state-dict layout; its Keras network is in ``net.py``, imported on the first build.

    @dataclass
    class SPANConfig(ModelConfig):
        features: int = bounded(48, minimum=1, integer=True)  # channels of every block
        ...

    SPEC = register(ModelSpec("span", SPANConfig, build="sr.models.span.net:build_span",
                              layout="sr.models.span.layout"))

Every subpackage of ``sr.models`` with a ``SPEC`` is found by :func:`names` (no list to edit); a
package outside ``sr`` (a user's) is registered by importing it: ``python train.py
plugins=[my_package.tiny_net] model=tiny_net`` (``sr.config`` imports the ``plugins`` of a
command line or a saved run before composing). ``conf/model/<preset>.yaml`` files are presets
that only differ from a schema (``defaults: [base_<arch>]``); ``model=<arch>`` without a preset
gives the schema's defaults.

The model config names its architecture by ``model.arch``; a run saved before the registry names
its builder by ``model._target_`` (``sr.models.build_span``), read here as the spec whose
``legacy_targets`` hold it.
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import MISSING

from sr.core.errors import ConfigError
from sr.core.schema import check_node

__all__ = [
    "ModelConfig",
    "ModelSpec",
    "build_model",
    "builder",
    "check_model",
    "get",
    "import_plugins",
    "make_model",
    "model_keys",
    "names",
    "patch_too_small",
    "plugins_of",
    "register",
    "schema_nodes",
    "spec_of",
    "specs",
]


@dataclass
class ModelConfig:
    """Keys every option of the ``model`` group has: ``arch``, the registered name of its
    architecture (set by :func:`register` for the schema's ``base_<arch>`` node)."""

    arch: str = MISSING


@dataclass(frozen=True)
class ModelSpec:
    """One architecture, as its package declares it.

    Attributes:
        name: the registered name (``model.arch``, ``model=<name>``), lowercase.
        schema: a :class:`ModelConfig` dataclass whose fields (with ``sr.core.schema.bounded``
            bounds) are the builder's keys and their only defaults.
        build: ``build(cfg, scale, channels) -> keras.Model`` or its ``"module:function"``
            (imported on the first build, so that declaring it imports no TensorFlow): ``cfg``
            an instance of ``schema``; the model maps float32 ``[B, h, w, C]`` in [0, 1] to
            ``[B, scale h, scale w, C]``, C = ``channels`` (1: Y, 3: RGB).
        layout: the module of its PyTorch state-dict layout (``sr.models.state_dicts.base``'s
            contract), or None.
        kind: ``generator`` (an SR model) or ``discriminator``.
        local: False for a model whose attention or pooling reads the whole image (no finite
            receptive field: tiles overlap by the tiler's fallback and may differ slightly at
            their seams).
        frames: True for a multi-frame model (``[B, k, h, w, C]`` in, ``data=sequence``).
        rules: ``rules(keys, scale, channels) -> str | None``, why the keys (a dict of plain
            values) cannot be built at this scale with these image channels (a cross-key rule:
            a scale the upsampler lacks, an RGB mean on one channel), or None; checked when the
            config is (``sr.config.validate``) and before every build.
        legacy_targets: the ``model._target_`` of runs saved before the registry.
        min_size: the smallest LR side, in pixels, the network takes (an enhanced spatial
            attention's stride-2 3x3 conv, then 7x7 max pool, needs 15); a training patch of
            ``data.patch_size / scale`` below it is refused when the config is checked.
    """

    name: str
    schema: type
    build: str | Callable
    layout: str | None = None
    kind: str = "generator"
    local: bool = True
    frames: bool = False
    rules: Callable | None = None
    legacy_targets: tuple[str, ...] = ()
    min_size: int = 1


_SPECS: dict[str, ModelSpec] = {}
_SCANNED = False
FRAMEWORK = ("state_dicts",)
"""Subpackages of ``sr.models`` that hold no architecture (they import Keras)."""


def register(spec: ModelSpec) -> ModelSpec:
    """Add ``spec`` to the registry (idempotent for the same spec) and return it.

    Raises:
        ValueError: another spec has the name, or the schema is not a :class:`ModelConfig`
            dataclass.
    """
    if not (dataclasses.is_dataclass(spec.schema) and issubclass(spec.schema, ModelConfig)):
        raise ValueError(f"model {spec.name!r}: its schema must be a ModelConfig dataclass")
    known = _SPECS.get(spec.name)
    if known is not None and known.schema is not spec.schema:
        raise ValueError(
            f"two models are registered as {spec.name!r}: {known.schema.__module__} and "
            f"{spec.schema.__module__}; rename one"
        )
    _SPECS[spec.name] = spec
    return spec


def _scan() -> None:
    """Import every architecture package of ``sr.models`` once (their ``__init__`` registers)."""
    global _SCANNED
    if _SCANNED:
        return
    import sr.models

    for info in pkgutil.iter_modules(sr.models.__path__):
        if info.ispkg and info.name not in FRAMEWORK:
            importlib.import_module(f"sr.models.{info.name}")
    _SCANNED = True


def specs() -> list[ModelSpec]:
    """Every registered architecture (the package's and the imported plugins'), by name."""
    _scan()
    return [_SPECS[name] for name in sorted(_SPECS)]


def names(kind: str | None = "generator") -> list[str]:
    """The registered names of ``kind`` (None: every kind), sorted."""
    return [s.name for s in specs() if kind is None or s.kind == kind]


def get(name: str) -> ModelSpec:
    """The spec registered as ``name``.

    Raises:
        ConfigError: no such architecture (naming the registered ones and how to add one).
    """
    _scan()
    if name not in _SPECS:
        raise ConfigError(
            f"model.arch={name!r} is not a registered architecture; choose one of "
            f"{', '.join(names(None))}, or name the module that registers it in plugins=[...] "
            "(docs/architecture.md, 'Add a model')"
        )
    return _SPECS[name]


def spec_of(model: Mapping) -> ModelSpec:
    """The spec of a ``model`` config node: its ``arch``, or the legacy ``_target_`` of a run
    saved before the registry.

    Raises:
        ConfigError: neither names a registered architecture.
    """
    arch = model.get("arch")
    if arch:
        return get(str(arch))
    target = model.get("_target_")
    for spec in specs():
        if target and target in spec.legacy_targets:
            return spec
    raise ConfigError(
        f"the model config names no registered architecture (model.arch missing; _target_ "
        f"{target!r}); choose one of {', '.join(names(None))}"
    )


def model_keys(model: Mapping) -> dict[str, Any]:
    """The builder's keys of a ``model`` node: without ``arch`` and ``_target_``."""
    return {k: v for k, v in dict(model).items() if k not in ("arch", "_target_")}


def schema_instance(spec: ModelSpec, keys: Mapping, prefix: str = "model"):
    """``spec.schema`` of ``keys`` (plain values), every bound checked.

    Raises:
        ConfigError: a key the schema does not have (naming its keys) or a value out of bounds
            (``model.blocks must be an integer >= 1, got -1``).
    """
    fields = {f.name for f in dataclasses.fields(spec.schema)} - {"arch"}
    unknown = sorted(set(keys) - fields)
    if unknown:
        raise ConfigError(
            f"{prefix}.{unknown[0]} is not a key of model.arch={spec.name} (its keys: "
            f"{', '.join(sorted(fields))})"
        )
    check_node(dict(keys), spec.schema, prefix)
    return spec.schema(arch=spec.name, **keys)


def check_model(model: Mapping, scale: int, channels: int, patch: int | None = None) -> ModelSpec:
    """Check a ``model`` node (plain values) at ``scale`` with ``channels`` image channels
    without building it: its architecture, keys, bounds and cross-key rules, and, given the HR
    training patch ``patch`` (``data.patch_size``), that its LR side is one the model takes
    (:func:`patch_too_small`).

    Raises:
        ConfigError: naming the key or rule at fault.
    """
    spec = spec_of(model)
    cfg = schema_instance(spec, model_keys(model))
    keys = {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)}  # defaults filled
    why = spec.rules(keys, int(scale), int(channels)) if spec.rules else None
    if not why and isinstance(patch, int):
        why = patch_too_small(spec, patch, scale)
    if why:
        raise ConfigError(why)
    return spec


def patch_too_small(spec: ModelSpec, patch: int, scale: int) -> str | None:
    """Why an HR training patch of ``patch`` pixels (``data.patch_size``) is too small for
    ``spec`` at ``scale`` (its LR side below ``spec.min_size``: an enhanced spatial attention's
    pool needs 15 x 15), naming the key and the fix; None when it fits."""
    lr = patch // max(1, int(scale))
    if lr >= spec.min_size:
        return None
    return (
        f"data.patch_size={patch} gives {lr} x {lr} LR patches at x{scale}, smaller than "
        f"model {spec.name} takes ({spec.min_size} x {spec.min_size} LR pixels): "
        f"use data.patch_size >= {spec.min_size * scale}"
    )


def _callable(target: str | Callable) -> Callable:
    """A ``"module:function"`` imported, or the callable itself."""
    if callable(target):
        return target
    module, _, attr = str(target).partition(":")
    return getattr(importlib.import_module(module), attr)


def builder(spec: ModelSpec) -> Callable:
    """``spec``'s builder, ``build(cfg, scale, channels) -> keras.Model``, imported."""
    return _callable(spec.build)


def build_model(model: Mapping, scale: int, channels: int):
    """The Keras model of a ``model`` config node (``arch`` and its keys; a mapping of plain
    values or an OmegaConf node, interpolations resolved).

    Args:
        model: ``{"arch": "span", "features": 52, ...}`` (keys left out take the schema's
            defaults); a legacy node with ``_target_`` (:func:`spec_of`).
        scale: the upscaling factor (``data.scale``).
        channels: image channels in and out: 1 (Y) or 3 (RGB).

    Returns:
        The architecture's Keras model.

    Raises:
        ConfigError: an unregistered architecture, an unknown key or a value out of bounds.
    """
    if hasattr(model, "items") and not isinstance(model, dict):  # an OmegaConf node
        from omegaconf import OmegaConf

        model = OmegaConf.to_container(model, resolve=True)
    spec = check_model(model, scale, channels)
    cfg = schema_instance(spec, model_keys(model))
    return builder(spec)(cfg, int(scale), int(channels))


def make_model(arch: str, scale: int = 4, channels: int = 1, **keys):
    """:func:`build_model` of ``arch`` with ``keys`` (the schema's defaults for the rest): the
    shortcut of tests, studies and layouts, e.g. ``make_model("edsr", 4, 3, blocks=2)``."""
    return build_model({"arch": arch, **keys}, scale, channels)


def schema_nodes(presets) -> dict:
    """The ``model`` group's schema nodes, one per registered generator (the package's and the
    imported plugins'): ``base_<arch>``, which its presets extend, and ``<arch>`` itself where no
    preset of ``presets`` (the folder ``conf/model``) has the name (``model=<arch>``: the
    schema's defaults). Values: schema instances, as Hydra's ConfigStore takes them."""
    names = {p.stem for p in Path(presets).glob("*.yaml")}
    nodes = {}
    for spec in specs():
        if spec.kind == "generator":
            nodes[f"base_{spec.name}"] = spec.schema(arch=spec.name)
            if spec.name not in names:
                nodes[spec.name] = spec.schema(arch=spec.name)
    return nodes


def plugins_of(overrides) -> list[str]:
    """The modules of a ``plugins=[a.b,c]`` command-line override (``+plugins=`` too)."""
    for override in overrides:
        key, _, value = str(override).lstrip("+").partition("=")
        if key.strip() == "plugins":
            return [v.strip(" '\"") for v in value.strip().strip("[]").split(",") if v.strip()]
    return []


def import_plugins(modules) -> None:
    """Import the modules of ``plugins=[...]`` (a user's packages, each registering its specs).

    Raises:
        ConfigError: a module that cannot be imported (naming it and the import error).
    """
    for name in modules or ():
        try:
            importlib.import_module(str(name))
        except ImportError as e:
            raise ConfigError(
                f"plugins: cannot import {name!r} ({e}); install the package that holds it, or "
                "run from the folder it is in"
            ) from None
